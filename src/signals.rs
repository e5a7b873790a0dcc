//! How every long-running command stops: SIGTERM (service managers, the supervisor) or SIGINT
//! (Ctrl-C) cancels one token, and the command winds down from there.

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A token cancelled by the first SIGTERM or SIGINT. The handlers are installed before this
/// returns, so call it first: a signal during startup then stops the process cleanly, not abruptly.
pub fn stop_on_signal() -> anyhow::Result<CancellationToken> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received; stopping"),
            _ = int.recv() => tracing::info!("SIGINT received; stopping"),
        }
        on_signal.cancel();
    });
    Ok(stop)
}
