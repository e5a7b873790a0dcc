//! `svc agent`: a worker host's mutual-TLS API on SVC_AGENT_HOST:SVC_AGENT_PORT (default
//! 0.0.0.0:8765), deploying the master's deckies on this host's engine and reporting them with
//! heartbeats, until SIGTERM, SIGINT or a self-destruct.

use anyhow::{Context, bail};
use svc::config::{Config, Mode};
use svc::fleet::Fleet;
use svc::swarm::agent::{Agent, AgentTls};
use tokio::net::TcpListener;

pub async fn run(config: Config) -> anyhow::Result<()> {
    let stop = svc::signals::stop_on_signal()?;
    if config.mode != Mode::Agent {
        bail!("svc agent runs on a worker host: set SVC_MODE=agent");
    }
    let settings = config.swarm.agent.clone();
    let tls = AgentTls::read(&settings)?;
    let db = crate::user::open(&config).await?;
    let fleet = Fleet::new(db.clone(), svc::bus::Bus::absent(), config.fleet.clone());
    let listener = TcpListener::bind((settings.host.as_str(), settings.port))
        .await
        .with_context(|| format!("binding {}:{}", settings.host, settings.port))?;
    let agent = Agent::new(fleet, db.clone(), settings, config.ingest.log_file.clone(), stop);
    let result = agent.run(listener, tls).await;
    db.close().await;
    result
}
