//! What a verified heartbeat writes to the master's store: the host `active` and heard from now,
//! one shard per decky it reports (`running` when its container runs, else `degraded`), the host's
//! shards of deckies it no longer reports gone (a heartbeat read before a teardown may bring one
//! back; the next removes it) but for `pending` ones, dispatched and not yet taken by its agent, and each outcome of a deploy or mutation onto the newest open
//! lifecycle record of that decky, operation and host. Outcomes of an unknown status, or with no
//! open record, are logged and dropped.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::listener::HeartbeatStore;
use super::wire::Heartbeat;
use crate::db::{Db, DbError, DbResult, DeckyShard, LifecycleStatus, ShardFilter, ShardState};

/// The master's store as the heartbeat listener sees it.
pub struct StoredHeartbeats(pub Db);

#[async_trait]
impl HeartbeatStore for StoredHeartbeats {
    async fn agent_fingerprint(&self, host: Uuid) -> DbResult<Option<Option<String>>> {
        match self.0.swarm_host(host).await {
            Ok(host) => Ok(Some(host.client_cert_fingerprint)),
            Err(DbError::NotFound) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn record_heartbeat(&self, heartbeat: &Heartbeat, at: DateTime<Utc>) -> DbResult<()> {
        let db = &self.0;
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
        Ok(())
    }
}
