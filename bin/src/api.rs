//! `svc api`: binds the configured address and runs the API's lifespan until SIGTERM or SIGINT.

use anyhow::Context;
use svc::config::Config;
use svc::startup::Lifespan;
use tokio::net::TcpListener;

pub async fn run(config: Config) -> anyhow::Result<()> {
    let shutdown = svc::signals::stop_on_signal()?;
    let stopping = shutdown.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        svc::systemd::notify::stopping();
    });

    let addr = (config.api_host.clone(), config.api_port);
    // Ingestion always runs in the API (spec, startup step 8); the others join here, each gated by
    // its SVC_EMBED_* flag, as they land.
    let mut workers = vec![svc_workers::ingest::body()];
    if config.embed_profiler {
        workers.push(svc_workers::profiler::body());
    }
    let lifespan = Lifespan::start(config, workers).await?;
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
