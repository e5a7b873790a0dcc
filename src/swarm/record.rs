//! What a verified heartbeat writes to the master's store: the host `active` and heard from now,
//! one shard per decky it reports (`running` when its container runs, else `degraded`), the host's
//! shards of deckies it no longer reports gone (a heartbeat read before a teardown may bring one
//! back; the next removes it) but for `pending` ones, dispatched and not yet taken by its agent,
//! and each outcome of a deploy or mutation onto the newest open lifecycle record of that decky,
//! operation and host. Outcomes of an unknown status, or with no open record, are logged and
//! dropped. The topologies the master sent the host follow its report ([`TopologyReport`]): a live
//! one takes the status the host's heal left it in, with its deckies' states, and one the host no
//! longer keeps (or no longer runs) becomes `degraded`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::listener::HeartbeatStore;
use super::wire::{Heartbeat, TopologyReport};
use crate::db::{DbError, DbResult, DeckyShard, LifecycleStatus, ShardFilter, ShardState, Topology, TopologyStatus};
use crate::topology::Topologies;

/// The master's store as the heartbeat listener sees it (topologies move through their own code,
/// which announces each move).
pub struct StoredHeartbeats(pub Topologies);

#[async_trait]
impl HeartbeatStore for StoredHeartbeats {
    async fn agent_fingerprint(&self, host: Uuid) -> DbResult<Option<Option<String>>> {
        match self.0.db().swarm_host(host).await {
            Ok(host) => Ok(Some(host.client_cert_fingerprint)),
            Err(DbError::NotFound) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn record_heartbeat(&self, heartbeat: &Heartbeat, at: DateTime<Utc>) -> DbResult<()> {
        let db = self.0.db();
        let host = heartbeat.host_uuid;
        db.record_swarm_heartbeat(host, at).await?;
        let reported: std::collections::BTreeSet<&str> =
            heartbeat.status.deckies.iter().map(|d| d.name.as_str()).collect();
        let recorded = db.decky_shards(&ShardFilter { host_uuid: Some(host), ..ShardFilter::default() }).await?;
        let gone =
            |shard: &&DeckyShard| shard.state != ShardState::Pending && !reported.contains(shard.decky_name.as_str());
        for gone in recorded.iter().filter(gone) {
            let filter = ShardFilter { host_uuid: Some(host), decky_name: Some(gone.decky_name.clone()), state: None };
            db.delete_decky_shards(&filter).await?;
        }
        if heartbeat.status.deployed {
            let shards: Vec<DeckyShard> = heartbeat
                .status
                .deckies
                .iter()
                .map(|decky| {
                    let running = heartbeat.status.runtime.get(&decky.name).is_some_and(|r| r.running);
                    DeckyShard {
                        decky_name: decky.name.clone(),
                        host_uuid: host,
                        services: decky.services.clone(),
                        decky_config: Some(decky.clone()),
                        decky_ip: Some(decky.ip.clone()).filter(|ip| !ip.is_empty()),
                        state: if running { ShardState::Running } else { ShardState::Degraded },
                        last_error: None,
                        compose_hash: None,
                        last_seen: Some(at),
                        updated_at: at,
                    }
                })
                .collect();
            db.upsert_decky_shards(&shards).await?;
        }
        for delta in heartbeat.lifecycle.iter().flatten() {
            let Ok(status) = delta.status.parse::<LifecycleStatus>() else {
                tracing::warn!(%host, decky = %delta.decky_name, status = %delta.status, "Lifecycle outcome of an unknown status dropped");
                continue;
            };
            let open = db.open_lifecycle(&delta.decky_name, &delta.operation, &host.to_string()).await?;
            let Some(id) = open else {
                tracing::info!(%host, decky = %delta.decky_name, operation = %delta.operation, "Lifecycle outcome with no open record dropped");
                continue;
            };
            db.set_lifecycle_status(id, status, delta.error.as_deref(), delta.completed_at.unwrap_or(at)).await?;
        }
        if let Some(state) = &heartbeat.topology {
            match <Vec<TopologyReport> as serde::Deserialize>::deserialize(state) {
                Ok(reports) => self.record_topologies(host, &reports).await?,
                Err(err) => {
                    tracing::debug!(%host, error = %err, "A heartbeat's topology state of another shape left unread")
                }
            }
        }
        Ok(())
    }
}

const LIVE: [TopologyStatus; 2] = [TopologyStatus::Active, TopologyStatus::Degraded];

impl StoredHeartbeats {
    /// Each live topology the master sent `host` takes what the host reports of it. A deploy or
    /// teardown at work is not live here, so the host's answer to it is what records it.
    async fn record_topologies(&self, host: Uuid, reports: &[TopologyReport]) -> DbResult<()> {
        for topology in self.0.db().live_topologies_on_host(host).await? {
            match self.follow(&topology, reports.iter().find(|r| r.id == topology.id)).await {
                // Deleted, or moved on meanwhile (a teardown began): what did it stands.
                Ok(()) | Err(DbError::NotFound | DbError::Conflict) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    async fn follow(&self, topology: &Topology, report: Option<&TopologyReport>) -> DbResult<()> {
        let (to, reason) = match report {
            Some(report) if LIVE.contains(&report.status) => {
                self.record_decky_states(topology.id, report).await?;
                (report.status, report.reason.clone())
            }
            Some(report) => {
                (TopologyStatus::Degraded, Some(format!("its swarm host has it {}", report.status.as_str())))
            }
            None => (TopologyStatus::Degraded, Some("its swarm host no longer has it".to_string())),
        };
        if to == topology.status {
            return Ok(());
        }
        tracing::info!(topology = %topology.id, from = topology.status.as_str(), to = to.as_str(), reason = ?reason, "Topology on a swarm host moved by its heartbeat");
        self.0.move_status(topology.id, Some(&LIVE), to, reason.as_deref()).await.map(drop)
    }

    /// The reported state of each decky that differs from the master's record.
    async fn record_decky_states(&self, id: Uuid, report: &TopologyReport) -> DbResult<()> {
        let db = self.0.db();
        let detail = db.topology_detail(id).await?;
        for decky in &report.deckies {
            let known = detail.deckies.iter().find(|d| d.uuid == decky.uuid);
            if known.is_some_and(|d| d.state != decky.state || d.last_error != decky.last_error) {
                db.set_topology_decky_state(decky.uuid, &decky.state, decky.last_error.as_deref(), Utc::now()).await?;
            }
        }
        Ok(())
    }
}
