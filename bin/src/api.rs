//! `svc api`: binds the configured address and runs the API's lifespan until SIGTERM or SIGINT.

use anyhow::Context;
use svc::config::Config;
use svc::startup::Lifespan;
use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

pub async fn run(config: Config) -> anyhow::Result<()> {
    // Registered before anything else: a signal during startup must stop us cleanly, not kill us.
    let term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(term, int, shutdown.clone()));

    let addr = (config.api_host.clone(), config.api_port);
    // No worker has landed yet; each will be added here, gated by its SVC_EMBED_* flag.
    let lifespan = Lifespan::start(config, Vec::new()).await?;
    let listener = match TcpListener::bind(&addr).await {
        Ok(listener) => listener,
        Err(err) => {
            lifespan.shutdown().await;
            return Err(err).with_context(|| format!("cannot listen on {}:{}", addr.0, addr.1));
        }
    };
    svc::systemd::notify::ready();
    lifespan.serve(listener, shutdown).await
}

async fn cancel_on_signal(mut term: Signal, mut int: Signal, shutdown: CancellationToken) {
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
    svc::systemd::notify::stopping();
    shutdown.cancel();
}
