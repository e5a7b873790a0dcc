//! The connection loop. axum's own `serve` sets no header-read timeout, so a client that trickles
//! its headers (slowloris) would hold a socket forever; here every connection must finish its
//! headers within [`HEADER_READ_TIMEOUT`], and shutdown drains within [`DRAIN_TIMEOUT`].

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A request's headers must arrive within this.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// In-flight requests get this long to finish once shutdown starts (requests time out sooner).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(35);

/// Serves `app` on an already bound listener until `shutdown` is cancelled, then stops accepting
/// and drains. Handlers see the peer address as `ConnectInfo<SocketAddr>`.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();

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
        let _ = stream.set_nodelay(true);
        let service = app.clone().map_request(move |request: hyper::Request<Incoming>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        });
        let connection =
            builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
        let connection = graceful.watch(connection.into_owned());
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%peer, error = %err, "Connection ended with an error");
            }
        });
    }

    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("Connections still open after {}s; closing them", DRAIN_TIMEOUT.as_secs());
    }
    Ok(())
}
