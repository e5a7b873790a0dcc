//! `svc api`: binds the configured address and runs the API's lifespan until SIGTERM or SIGINT.

use anyhow::Context;
use svc::config::Reading;
use svc::startup::Lifespan;
use tokio::net::TcpListener;

/// Runs the API on what `svc` read from the environment; the lifespan refuses it, with every problem
/// reading found, if it breaks a rule.
pub async fn run(reading: Reading) -> anyhow::Result<()> {
    let shutdown = svc::signals::stop_on_signal()?;
    let stopping = shutdown.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        svc::systemd::notify::stopping();
    });

    let addr = (reading.config.api.host.clone(), reading.config.api.port);
    // Ingestion and the tarpit watcher always run in the API (spec, startup step 8); the others
    // join as the roster and the settings that switch them on (SVC_EMBED_*, the swarm) say.
    let workers = svc::worker::embedded_in_api(&reading.config).into_iter().filter_map(svc_workers::body).collect();
    let lifespan = Lifespan::start(reading, workers).await?;
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
