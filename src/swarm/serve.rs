//! The swarm's connection loop: TLS (client certificate required, `tls::server_config`) in front of
//! an axum router. A handshake that fails (no certificate, another CA, plaintext, an old protocol)
//! is logged with the peer's address and the connection dropped before any route runs; one that
//! succeeds hands each request the peer's certificate as [`Peer`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::tls::peer_common_name;

/// A handshake must complete within this, or the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A request head must arrive within this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is on the other end of a request: the address and the certificate it presented.
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The DER of the client's leaf; `None` cannot happen once the handshake demanded one, but
    /// handlers check rather than assume.
    pub cert_der: Option<Arc<Vec<u8>>>,
    /// Its subject's CN; `None` when absent or unparseable.
    pub common_name: Option<String>,
}

/// Serves `app` over TLS on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, tls: Arc<ServerConfig>, app: Router, shutdown: CancellationToken) {
    let acceptor = TlsAcceptor::from(tls);
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let builder = Arc::new(builder);
    let mut connections = JoinSet::new();
    loop {
        let (stream, addr) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "Cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let (acceptor, app, builder, shutdown) = (acceptor.clone(), app.clone(), builder.clone(), shutdown.clone());
        connections.spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(err)) => {
                    tracing::warn!(peer = %addr, error = %err, "Swarm TLS handshake refused");
                    return;
                }
                Err(_) => {
                    tracing::warn!(peer = %addr, "Swarm TLS handshake timed out");
                    return;
                }
            };
            let cert_der = tls.get_ref().1.peer_certificates().and_then(|chain| chain.first()).map(|c| c.to_vec());
            let peer = Peer {
                addr,
                common_name: cert_der.as_deref().and_then(peer_common_name),
                cert_der: cert_der.map(Arc::new),
            };
            let service = app.map_request(move |request: hyper::Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(peer.clone());
                request
            });
            let connection = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(service));
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(peer = %addr, error = %err, "Swarm connection ended with an error");
                    }
                }
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(HEADER_READ_TIMEOUT, connection).await;
                }
            }
        });
    }
    connections.shutdown().await;
}
