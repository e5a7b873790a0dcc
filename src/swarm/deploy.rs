//! A deploy in swarm mode: when usable hosts exist, `POST /deckies/deploy` checks the INI as the
//! fleet would, spreads its deckies (`dispatch`), stores one lifecycle record per decky carrying
//! its host, answers at once, and in the background calls each host's agent (`POST /deploy`,
//! pinned by the stored fingerprint). Each decky is on one host: one that another host runs is
//! torn down there first, and each gets a `pending` shard on its new host before the agent is
//! called, so `/swarm/deckies`, `/deckies` and the decky routes know where it is before the first
//! heartbeat. Records end with the agent's heartbeat; a host that cannot be reached, or refuses,
//! fails its records (and shards) at once with a generic reason. A deploy that replaces the fleet
//! first has every host that runs deckies, or gets some, tear all of its own down.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::caller::{AgentCallError, AgentCaller};
use super::dispatch::{self, Slice};
use super::master::SwarmMaster;
use super::remote;
use super::wire::{DEPLOY_PATH, DeployRequest};
use crate::db::{
    Db, DbError, DeckyConfig, DeckyLifecycle, DeckyShard, LifecycleStatus, ShardFilter, ShardState, SwarmHost,
};
use crate::fleet::ini::Ini;
use crate::fleet::{Accepted, FleetError, plan};

/// The reason a record fails with when its host refused the deploy (its words go to the log).
const AGENT_REFUSED: &str = "the agent refused the deploy";

/// The reason a host's records fail with when a decky it was to take could not be removed from
/// the host that runs it (nothing is then sent: one decky, one host).
const NOT_MOVED: &str = "a decky could not be removed from the host that runs it";

/// Deploys `ini_text` over the usable swarm hosts; `None` when there is none (the deploy is then
/// the local fleet's). With `replace`, each usable host, and each host a decky is recorded on,
/// tears down every decky it runs before it gets its share (if any): the INI is the whole swarm.
pub async fn deploy(
    db: &Db,
    master: &SwarmMaster,
    ini_text: &str,
    replace: bool,
    deployment_limit: usize,
) -> Result<Option<Accepted>, FleetError> {
    let hosts: Vec<SwarmHost> = db.swarm_hosts(None).await?.into_iter().filter(SwarmHost::is_usable).collect();
    if hosts.is_empty() {
        return Ok(None);
    }
    let ini = Ini::parse(ini_text).map_err(|e| FleetError::Refused(e.to_string()))?;
    let split = dispatch::split(&ini, &hosts).map_err(|e| FleetError::Refused(e.to_string()))?;
    // The INI must be one the fleet could deploy (each agent plans its own addresses).
    let unpinned = Ini::parse(&split.unpinned).map_err(|e| FleetError::Refused(e.to_string()))?;
    let network = plan::network(&unpinned, None).map_err(|e| FleetError::Refused(e.0))?;
    let deckies = plan::deckies(&unpinned, &network, &BTreeSet::new()).map_err(|e| FleetError::Refused(e.0))?;
    if deckies.len() > deployment_limit {
        return Err(FleetError::Refused(format!(
            "Deployment would result in {} deckies, exceeding the configured limit of {deployment_limit}",
            deckies.len()
        )));
    }
    let mut planned: BTreeMap<String, DeckyConfig> = deckies.into_iter().map(|d| (d.name.clone(), d)).collect();
    let client = master.caller().await.map_err(|err| FleetError::Refused(err.to_string()))?;
    let mut clear: BTreeSet<Uuid> = BTreeSet::new();
    if replace {
        clear.extend(hosts.iter().map(|h| h.uuid));
        clear.extend(db.decky_shards(&ShardFilter::default()).await?.into_iter().map(|s| s.host_uuid));
    }
    let now = Utc::now();
    let mut ids = Vec::new();
    let mut work = Vec::new();
    for slice in split.slices {
        let host = hosts.iter().find(|h| h.uuid == slice.host).expect("a slice's host is usable").clone();
        let mut records = Vec::new();
        let mut shards = Vec::new();
        for name in &slice.deckies {
            shards.push(pending_shard(&host, planned.remove(name), name, now));
            let record = DeckyLifecycle {
                id: Uuid::new_v4(),
                decky_name: name.clone(),
                host_uuid: Some(host.uuid.to_string()),
                operation: "deploy".into(),
                status: LifecycleStatus::Pending,
                error: None,
                started_at: now,
                updated_at: now,
                completed_at: None,
            };
            db.add_lifecycle(&record).await?;
            ids.push(record.id);
            records.push(record.id);
        }
        let cleared = clear.remove(&host.uuid);
        work.push((host, cleared, Some((slice, records, shards))));
    }
    // Hosts the new deploy gives nothing keep nothing either.
    for uuid in clear {
        match db.swarm_host(uuid).await {
            Ok(host) => work.push((host, true, None)),
            Err(err) => tracing::warn!(host = %uuid, error = %err, "A replaced host's deckies not torn down"),
        }
    }
    tracing::info!(deckies = ids.len(), hosts = work.len(), replace, "Swarm deploy accepted");
    for (host, cleared, share) in work {
        let (db, client, master) = (db.clone(), client.clone(), master.clone());
        let dispatch = async move {
            // Its outcome is on the host's shards (and in the log); the deploy goes on regardless,
            // and the agent refuses what would collide with a decky left behind.
            if cleared && let Ok(filter) = remote::start_teardown(&db, &host, None).await {
                let _ = remote::finish_teardown(&db, &master, &host, filter).await;
            }
            if let Some((slice, records, shards)) = share {
                send(&db, &master, &client, &host, slice, &records, &shards).await;
            }
        };
        // In the deploy request's trace (traces on), carried on to the agent.
        tokio::spawn(tracing::Instrument::instrument(dispatch, tracing::Span::current()));
    }
    Ok(Some(Accepted { deckies: ids.len(), lifecycle_ids: ids }))
}

/// The shard a dispatched decky has on `host` until the host's heartbeat reports it: its planned
/// config, with no address yet (the agent plans its own).
fn pending_shard(host: &SwarmHost, planned: Option<DeckyConfig>, name: &str, now: DateTime<Utc>) -> DeckyShard {
    let config = planned.map(|mut config| {
        config.ip.clear();
        config.host_uuid = Some(host.uuid.to_string());
        config
    });
    DeckyShard {
        decky_name: name.to_string(),
        host_uuid: host.uuid,
        services: config.as_ref().map(|c| c.services.clone()).unwrap_or_default(),
        decky_config: config,
        decky_ip: None,
        state: ShardState::Pending,
        last_error: None,
        compose_hash: None,
        last_seen: None,
        updated_at: now,
    }
}

/// Why a dispatched decky could not be taken off the host that runs it (each is logged where it
/// happens; the host's records then fail with [`NOT_MOVED`]).
#[derive(Debug, thiserror::Error)]
enum NotMoved {
    #[error("cannot read which host runs `{decky}`: {source}")]
    Unknown { decky: String, source: DbError },
    #[error("`{decky}` not torn down on its old host: {source}")]
    NotTornDown { decky: String, source: FleetError },
}

/// Tears down, on the host that runs it, each of `deckies` that another host than `host` runs.
async fn move_away(db: &Db, master: &SwarmMaster, host: &SwarmHost, deckies: &[String]) -> Result<(), NotMoved> {
    for name in deckies {
        let current = remote::host_of(db, name).await.map_err(|err| {
            tracing::error!(decky = %name, error = %err, "Cannot read which host runs a dispatched decky");
            NotMoved::Unknown { decky: name.clone(), source: err }
        })?;
        let Some((_, old)) = current.filter(|(_, old)| old.uuid != host.uuid) else { continue };
        match remote::teardown(db, master, &old, name).await {
            Ok(()) => tracing::info!(decky = %name, from = %old.name, to = %host.name, "Decky moved off its old host"),
            Err(err) => {
                tracing::warn!(decky = %name, from = %old.name, to = %host.name, error = %err, "Decky not moved: its old host did not tear it down");
                return Err(NotMoved::NotTornDown { decky: name.clone(), source: err });
            }
        }
    }
    Ok(())
}

async fn send(
    db: &Db,
    master: &SwarmMaster,
    client: &AgentCaller,
    host: &SwarmHost,
    slice: Slice,
    records: &[Uuid],
    shards: &[DeckyShard],
) {
    let mark = |status: LifecycleStatus, error: Option<&'static str>| async move {
        for id in records {
            if let Err(err) = db.set_lifecycle_status(*id, status, error, Utc::now()).await {
                tracing::error!(lifecycle = %id, error = %err, "Could not update a lifecycle record");
            }
        }
    };
    if move_away(db, master, host, &slice.deckies).await.is_err() {
        mark(LifecycleStatus::Failed, Some(NOT_MOVED)).await;
        return;
    }
    if let Err(err) = db.upsert_decky_shards(shards).await {
        tracing::error!(host = %host.name, error = %err, "Could not record the dispatched deckies");
    }
    mark(LifecycleStatus::Running, None).await;
    let body = DeployRequest { config: slice.ini, dry_run: false, no_cache: false };
    let body = serde_json::to_value(&body).expect("a deploy request serialises");
    match client.post(host, DEPLOY_PATH, &body).await {
        Ok(_) => tracing::info!(host = %host.name, deckies = slice.deckies.len(), "Agent accepted its deckies"),
        Err(err) => {
            tracing::warn!(host = %host.name, error = %err, "Deploy not delivered to the agent");
            let reason = match err {
                AgentCallError::Refused(_) => AGENT_REFUSED,
                other => other.reason(),
            };
            mark(LifecycleStatus::Failed, Some(reason)).await;
            let pending =
                ShardFilter { host_uuid: Some(host.uuid), decky_name: None, state: Some(ShardState::Pending) };
            if let Err(err) = db.set_decky_shard_state(&pending, ShardState::Failed, Some(reason), Utc::now()).await {
                tracing::error!(host = %host.name, error = %err, "Could not record the failed dispatch");
            }
        }
    }
}
