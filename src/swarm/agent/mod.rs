//! `svc agent`: a worker host's control plane. A mutual-TLS API (`routes`) through which the master
//! deploys, mutates and tears down this host's deckies with the same fleet code the master uses on
//! its own engine (the host's own store and engine), and the heartbeats that report them back
//! (`heartbeat`), and applies and tears down the topologies the master targets at this host with
//! the master's topology code (`topology`), healing them as the master heals its own. Self-destruct
//! (`decommission`) removes the deckies and the agent's installed files.

mod decommission;
mod heartbeat;
mod routes;
mod topology;

pub(crate) use routes::require_master;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::config::AgentConfig;
use super::tls::{Identity, TlsSetupError};
use super::wire::{AgentStatus, DeckyRuntime, LifecycleDelta};
use crate::db::{Db, LifecycleStatus};
use crate::fleet::{Fleet, FleetError};
use crate::topology::Topologies;

/// Deltas kept for the master while it cannot be reached; the oldest go first beyond this.
const MAX_PENDING_DELTAS: usize = 1000;
/// How long a deploy or mutation is followed for its heartbeat before it is left to the next one.
const FOLLOW_LIMIT: Duration = Duration::from_secs(900);
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// The agent's state, shared by its routes and its heartbeat; cheap to clone.
#[derive(Clone)]
pub struct Agent {
    fleet: Fleet,
    db: Db,
    /// The topologies the master applied here, over the same store and engine.
    topologies: Topologies,
    settings: Arc<AgentConfig>,
    /// Where the agent's decoy lines go (the `decky_mutated` line of a mutation).
    ingest: Option<PathBuf>,
    /// Results not yet delivered to the master.
    pending: Arc<Mutex<Vec<LifecycleDelta>>>,
    /// Wakes the heartbeat at once (a deploy or mutation ended).
    beat_now: Arc<Notify>,
    shutdown: CancellationToken,
}

/// The files an agent needs: its identity and the swarm CA, PEM.
#[derive(Clone, Debug)]
pub struct AgentTls {
    pub identity: Identity,
    pub ca_pem: String,
}

impl AgentTls {
    pub fn read(settings: &AgentConfig) -> anyhow::Result<AgentTls> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|err| anyhow::anyhow!("reading {}: {err}", path.display()))
        };
        let identity = Identity::from_pem(&read(&settings.cert)?, &read(&settings.key)?)
            .map_err(|err: TlsSetupError| anyhow::anyhow!("the agent's certificate or key: {err}"))?;
        Ok(AgentTls { identity, ca_pem: read(&settings.ca)? })
    }
}

impl Agent {
    pub fn new(
        fleet: Fleet,
        db: Db,
        settings: AgentConfig,
        ingest: Option<PathBuf>,
        shutdown: CancellationToken,
    ) -> Agent {
        Agent {
            topologies: Topologies::new(db.clone(), crate::bus::Bus::absent(), fleet.clone()),
            fleet,
            db,
            settings: Arc::new(settings),
            ingest,
            pending: Arc::default(),
            beat_now: Arc::default(),
            shutdown,
        }
    }

    /// Serves the API on `listener` and sends heartbeats until shutdown (SIGTERM, or a
    /// self-destruct).
    pub async fn run(self, listener: TcpListener, tls: AgentTls) -> anyhow::Result<()> {
        let server = super::tls::server_config(&tls.identity, &tls.ca_pem)?;
        let beats = tokio::spawn(heartbeat::run(self.clone(), tls));
        let reconciler = tokio::spawn(self.clone().reconcile_until_shutdown());
        tracing::info!(address = %listener.local_addr()?, "Agent API listening (mutual TLS)");
        super::serve::serve(listener, server, routes::router(self.clone()), self.shutdown.clone()).await;
        self.shutdown.cancel();
        let _ = beats.await;
        let _ = reconciler.await;
        Ok(())
    }

    /// Keeps this host's containers matching its store, as the master's API does on its own host.
    async fn reconcile_until_shutdown(self) {
        let mut every = tokio::time::interval(self.fleet.settings().reconcile);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                _ = every.tick() => {
                    if let Err(err) = self.fleet.reconcile().await {
                        tracing::debug!(error = %err, "Fleet reconcile skipped");
                    }
                    if let Err(err) = self.topologies.reconcile().await {
                        tracing::debug!(error = %err, "Topology heal skipped");
                    }
                }
            }
        }
    }

    /// The host's deckies as stored, with each container's state.
    async fn status(&self) -> Result<AgentStatus, FleetError> {
        let statuses = self.fleet.statuses().await?;
        let mut status = AgentStatus { deployed: !statuses.is_empty(), ..AgentStatus::default() };
        if status.deployed {
            status.mode = Some("swarm".into());
        }
        for decky in statuses {
            // One container runs every service of a decky: each service's state is the container's.
            let services: BTreeMap<String, String> =
                decky.config.services.iter().map(|s| (s.clone(), decky.state.clone())).collect();
            status
                .runtime
                .insert(decky.config.name.clone(), DeckyRuntime { running: decky.state == "running", services });
            status.deckies.push(decky.config);
        }
        Ok(status)
    }

    /// Follows lifecycle records until each ends, then hands their outcome to the next heartbeat
    /// and wakes it.
    fn follow(&self, ids: Vec<Uuid>, operation: &'static str) {
        let agent = self.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + FOLLOW_LIMIT;
            loop {
                let records = match agent.db.lifecycles(&ids).await {
                    Ok(records) => records,
                    Err(err) => {
                        tracing::error!(error = %err, "Cannot read lifecycle records");
                        Vec::new()
                    }
                };
                let done =
                    records.iter().all(|r| matches!(r.status, LifecycleStatus::Succeeded | LifecycleStatus::Failed));
                if (done && !records.is_empty()) || tokio::time::Instant::now() > deadline {
                    let deltas = records.into_iter().map(|r| LifecycleDelta {
                        decky_name: r.decky_name,
                        operation: operation.to_string(),
                        status: r.status.as_str().to_string(),
                        error: r.error,
                        completed_at: r.completed_at,
                    });
                    agent.queue(deltas);
                    agent.beat_now.notify_one();
                    return;
                }
                tokio::select! {
                    () = agent.shutdown.cancelled() => return,
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                }
            }
        });
    }

    fn queue(&self, deltas: impl IntoIterator<Item = LifecycleDelta>) {
        let mut pending = self.pending.lock().expect("pending deltas");
        pending.extend(deltas);
        let excess = pending.len().saturating_sub(MAX_PENDING_DELTAS);
        pending.drain(..excess);
    }

    fn take_pending(&self) -> Vec<LifecycleDelta> {
        std::mem::take(&mut *self.pending.lock().expect("pending deltas"))
    }
}
