//! `svc updater`: a worker host's self-updater on SVC_UPDATER_HOST:SVC_UPDATER_PORT (default
//! 0.0.0.0:8766), mutual TLS with its `updater@<host>` certificate. It keeps the release slots
//! under SVC_UPDATER_DIR, runs the agent on the current one (or restarts the bundle's units under
//! systemd), and serves the master's pushes until SIGTERM or SIGINT.

use anyhow::{Context, bail};
use svc::config::{Config, Mode};
use svc::swarm::tls::Identity;
use svc::swarm::updater::Updater;
use tokio::net::TcpListener;

pub async fn run(config: Config) -> anyhow::Result<()> {
    let stop = svc::signals::stop_on_signal()?;
    if config.mode != Mode::Agent {
        bail!("svc updater runs on a worker host: set SVC_MODE=agent");
    }
    let settings = config.swarm.updater.clone();
    let read =
        |path: &std::path::Path| std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()));
    let identity = Identity::from_pem(&read(&settings.cert)?, &read(&settings.key)?)
        .map_err(|err| anyhow::anyhow!("the updater's certificate or key: {err}"))?;
    let ca_pem = read(&settings.ca)?;
    let agent = &config.swarm.agent;
    let updater = Updater::new(&settings, &identity, &ca_pem, &agent.host, agent.port, stop)?;
    updater.reexec_own_release()?;
    let listener = TcpListener::bind((settings.host.as_str(), settings.port))
        .await
        .with_context(|| format!("binding {}:{}", settings.host, settings.port))?;
    updater.prepare().await?;
    updater.run(listener, &identity, &ca_pem).await
}
