//! How the swarm's servers (the agent, the updater, the master's heartbeat listener) serve, on the
//! connection loop every server of svc uses (`crate::accept`): TLS (client certificate required,
//! `tls::server_config`) in front of an axum router. A handshake that fails (no certificate,
//! another CA, plaintext, an old protocol) is logged with the peer's address as `Swarm TLS
//! handshake refused` and the connection dropped before any route runs; one that succeeds hands
//! each request the peer's certificate as [`Peer`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::tls::peer_common_name;
use crate::accept::{Drain, accept_until, client_certificate, serve_http1, tls_handshake};

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

/// Serves `app` over TLS on `listener` until `shutdown` is cancelled; the connections open then
/// are cut (a caller that loses its answer sees a transport failure).
pub async fn serve(listener: TcpListener, tls: Arc<ServerConfig>, app: Router, shutdown: CancellationToken) {
    let acceptor = TlsAcceptor::from(tls);
    accept_until(listener, &shutdown, Drain::Cut, |stream, addr| {
        let (acceptor, app, shutdown) = (acceptor.clone(), app.clone(), shutdown.clone());
        async move {
            let Some(tls) = tls_handshake(&acceptor, stream, addr, "Swarm").await else { return };
            let cert_der = client_certificate(&tls);
            let peer = Peer {
                addr,
                common_name: cert_der.as_deref().and_then(peer_common_name),
                cert_der: cert_der.map(Arc::new),
            };
            serve_http1(tls, addr, app, peer, shutdown).await;
        }
    })
    .await;
}
