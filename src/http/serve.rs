//! The API's connection loop, on the one every server of svc uses (`crate::accept`): plain
//! HTTP/1.1, each connection's requests carrying the peer address, every request head within
//! [`HEADER_READ_TIMEOUT`] (slowloris), and at shutdown a drain of [`DRAIN_TIMEOUT`] before the
//! rest are cut.

use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::accept::HEADER_READ_TIMEOUT;
use crate::accept::{Drain, accept_until, serve_http1};

/// In-flight requests get this long to finish once shutdown starts (each times out after 30 s).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(35);

/// Serves `app` on an already bound listener until `shutdown` is cancelled, then stops accepting
/// and drains. Handlers see the peer address as `ConnectInfo<SocketAddr>`.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    accept_until(listener, &shutdown, Drain::Within(DRAIN_TIMEOUT), |stream, peer| {
        serve_http1(stream, peer, app.clone(), ConnectInfo(peer), shutdown.clone())
    })
    .await;
    Ok(())
}
