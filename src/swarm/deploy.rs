//! A deploy in swarm mode: when usable hosts exist, `POST /deckies/deploy` checks the INI as the
//! fleet would, spreads its deckies (`dispatch`), stores one lifecycle record per decky carrying
//! its host, answers at once, and in the background calls each host's agent (`POST /deploy`,
//! pinned by the stored fingerprint). Records end with the agent's heartbeat; a host that cannot
//! be reached, or refuses, fails its records at once with a generic reason. A deploy that replaces
//! the fleet first has every host that runs deckies, or gets some, tear all of its own down.

use std::collections::BTreeSet;

use chrono::Utc;
use uuid::Uuid;

use super::caller::{AgentCallError, AgentCaller};
use super::config::SwarmConfig;
use super::dispatch::{self, Slice};
use super::remote;
use super::wire::DeployRequest;
use crate::db::{Db, DeckyLifecycle, LifecycleStatus, ShardFilter, SwarmHost};
use crate::fleet::ini::Ini;
use crate::fleet::{Accepted, FleetError, plan};

/// The reason a record fails with when its host refused the deploy (its words go to the log).
const AGENT_REFUSED: &str = "the agent refused the deploy";

/// Deploys `ini_text` over the usable swarm hosts; `None` when there is none (the deploy is then
/// the local fleet's). With `replace`, each usable host, and each host a decky is recorded on,
/// tears down every decky it runs before it gets its share (if any): the INI is the whole swarm.
pub async fn deploy(
    db: &Db,
    config: &SwarmConfig,
    ini_text: &str,
    replace: bool,
    deployment_limit: usize,
) -> Result<Option<Accepted>, FleetError> {
    let hosts: Vec<SwarmHost> = db.swarm_hosts(None).await?.into_iter().filter(SwarmHost::is_usable).collect();
    if hosts.is_empty() {
        return Ok(None);
    }
    let ini = Ini::parse(ini_text).map_err(|e| FleetError::Refused(e.to_string()))?;
    let split = dispatch::split(&ini, &hosts).map_err(FleetError::Refused)?;
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
    let client = AgentCaller::load(config).map_err(|err| FleetError::Refused(err.to_string()))?;
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
        for name in &slice.deckies {
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
        work.push((host, cleared, Some((slice, records))));
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
        let (db, client, config) = (db.clone(), client.clone(), config.clone());
        let dispatch = async move {
            // Its outcome is on the host's shards (and in the log); the deploy goes on regardless,
            // and the agent refuses what would collide with a decky left behind.
            if cleared && let Ok(filter) = remote::start_teardown(&db, &host, None).await {
                let _ = remote::finish_teardown(&db, &config, &host, filter).await;
            }
            if let Some((slice, records)) = share {
                send(&db, &client, &host, slice, &records).await;
            }
        };
        // In the deploy request's trace (traces on), carried on to the agent.
        tokio::spawn(tracing::Instrument::instrument(dispatch, tracing::Span::current()));
    }
    Ok(Some(Accepted { deckies: ids.len(), lifecycle_ids: ids }))
}

async fn send(db: &Db, client: &AgentCaller, host: &SwarmHost, slice: Slice, records: &[Uuid]) {
    let mark = |status: LifecycleStatus, error: Option<&'static str>| async move {
        for id in records {
            if let Err(err) = db.set_lifecycle_status(*id, status, error, Utc::now()).await {
                tracing::error!(lifecycle = %id, error = %err, "Could not update a lifecycle record");
            }
        }
    };
    mark(LifecycleStatus::Running, None).await;
    let body = DeployRequest { config: slice.ini, dry_run: false, no_cache: false };
    let body = serde_json::to_value(&body).expect("a deploy request serialises");
    match client.post(host, "/deploy", &body).await {
        Ok(_) => tracing::info!(host = %host.name, deckies = slice.deckies.len(), "Agent accepted its deckies"),
        Err(err) => {
            tracing::warn!(host = %host.name, error = %err, "Deploy not delivered to the agent");
            let reason = match err {
                AgentCallError::Refused(_) => AGENT_REFUSED,
                other => other.reason(),
            };
            mark(LifecycleStatus::Failed, Some(reason)).await;
        }
    }
}
