//! Accepting connections, once for every server svc runs on a bound listener (the API, the swarm's
//! agent, updater and heartbeat listener, the log listener): the loop that accepts until shutdown,
//! backs off when accepting fails instead of spinning, runs each connection as a task and, once
//! shutdown starts, stops accepting and lets the open connections end as the server's [`Drain`]
//! says. Beside it, what those servers do with a new connection alike: the TLS handshake under a
//! deadline ([`tls_handshake`]), and HTTP/1.1 with a deadline on each request head that closes
//! gracefully at shutdown ([`serve_http1`]).
//!
//! The deadlines are why this is not axum's own `serve`: it sets no header-read timeout, so a
//! client that trickles its headers, or sends nothing at all (slowloris), would hold a socket
//! forever. HTTP/1.1 only: every client of these servers speaks it, and HTTP/2 detection would read
//! the first bytes with no timeout at all.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A request head must arrive within this, counted from when the connection waits for one.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS handshake must complete within this, or the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause after a failed accept (out of file descriptors, typically), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// What becomes of the open connections once shutdown starts (new ones are refused at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drain {
    /// They get this long to finish what they are doing (each was asked to close), then the rest are
    /// cut.
    Within(Duration),
    /// Each ends by itself, watching the same cancellation; they are waited for however long that
    /// takes.
    UntilEnded,
    /// They are cut at once.
    Cut,
}

/// Accepts connections on `listener` until `shutdown` is cancelled, running `connection(stream,
/// peer)` as a task for each, then stops accepting and ends the open ones as `drain` says.
pub async fn accept_until<F, C>(listener: TcpListener, shutdown: &CancellationToken, drain: Drain, mut connection: F)
where
    F: FnMut(TcpStream, SocketAddr) -> C,
    C: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "Cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        connections.spawn(connection(stream, peer));
    }
    drop(listener);
    match drain {
        Drain::Within(limit) => {
            let ended = async { while connections.join_next().await.is_some() {} };
            if tokio::time::timeout(limit, ended).await.is_err() {
                tracing::warn!(
                    open = connections.len(),
                    "Connections still open after {}s; closing them",
                    limit.as_secs()
                );
                connections.shutdown().await;
            }
        }
        Drain::UntilEnded => while connections.join_next().await.is_some() {},
        Drain::Cut => connections.shutdown().await,
    }
}

/// The server side of a TLS handshake on `stream`, within [`HANDSHAKE_TIMEOUT`]; `None` when it
/// failed or timed out (no certificate, another CA, plaintext, an old protocol), which is logged
/// with the peer's address as `<server> TLS handshake refused` or `… timed out`.
pub async fn tls_handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    server: &str,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(err)) => {
            tracing::warn!(peer = %peer, error = %err, "{server} TLS handshake refused");
            None
        }
        Err(_) => {
            tracing::warn!(peer = %peer, "{server} TLS handshake timed out");
            None
        }
    }
}

/// The DER of the leaf certificate the client presented in the handshake, if any.
pub fn client_certificate(tls: &TlsStream<TcpStream>) -> Option<Vec<u8>> {
    tls.get_ref().1.peer_certificates().and_then(|chain| chain.first()).map(|cert| cert.to_vec())
}

/// Serves `app` on one connection over HTTP/1.1, each request head within
/// [`HEADER_READ_TIMEOUT`] and each request carrying `extension` (who the peer is) for the
/// handlers. Once `shutdown` is cancelled, the request in flight finishes and the connection
/// closes; an idle one closes at once.
pub async fn serve_http1<I, E>(io: I, peer: SocketAddr, app: Router, extension: E, shutdown: CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    E: Clone + Send + Sync + 'static,
{
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let service = app.map_request(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(extension.clone());
        request
    });
    let connection = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = ended {
        tracing::debug!(%peer, error = %err, "Connection ended with an error");
    }
}
