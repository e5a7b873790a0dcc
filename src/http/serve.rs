//! The connection loop. axum's own `serve` sets no header-read timeout, so a client that trickles
//! its headers, or sends nothing at all (slowloris), would hold a socket forever. Here every
//! connection, new or idle between requests, must deliver a request head within
//! [`HEADER_READ_TIMEOUT`], and shutdown drains within [`DRAIN_TIMEOUT`] before cutting the rest.
//!
//! HTTP/1.1 only: the dashboard and every client speak it over plain HTTP, and HTTP/2 detection
//! would read the first bytes with no timeout at all.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A request head must arrive within this, counted from when the connection waits for one.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// In-flight requests get this long to finish once shutdown starts (each times out after 30 s).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(35);

/// Serves `app` on an already bound listener until `shutdown` is cancelled, then stops accepting
/// and drains. Handlers see the peer address as `ConnectInfo<SocketAddr>`.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();

    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, typically: back off instead of spinning.
                    tracing::warn!(error = %err, "Cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let service = app.clone().map_request(move |request: hyper::Request<Incoming>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        });
        let connection =
            graceful.watch(builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)));
        connections.spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%peer, error = %err, "Connection ended with an error");
            }
        });
    }

    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!(
            open = connections.len(),
            "Connections still open after {}s; closing them",
            DRAIN_TIMEOUT.as_secs()
        );
        connections.shutdown().await;
    }
    Ok(())
}
