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
    // join here, each gated by its SVC_EMBED_* flag.
    let mut workers = vec![svc_workers::ingest::body(), svc_workers::tarpit::body()];
    if reading.config.api.embed_profiler {
        workers.push(svc_workers::profiler::body());
    }
    if reading.config.api.embed_collector {
        if reading.config.ingest.log_file.is_some() {
            workers.push(svc_workers::collector::body());
        } else {
            tracing::warn!("SVC_EMBED_COLLECTOR is on but SVC_INGEST_LOG_FILE is empty: the collector is not started");
        }
    }
    if reading.config.api.embed_webhook {
        workers.push(svc_workers::webhook::body());
    }
    // A sniffer that cannot capture keeps retrying and reports its fault; the API goes on.
    if reading.config.sniffer.embed {
        workers.push(svc_workers::sniffer::body());
    }
    // The swarm's log listener, like ingestion: every host's lines come in through it.
    if reading.config.swarm.enabled && reading.config.swarm.syslog_port != 0 {
        workers.push(svc_workers::listener::body());
    }
    if reading.config.prober.embed {
        workers.push(svc_workers::prober::body());
    }
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
