//! The master acting on deckies that live on worker hosts. Which host runs a decky is its shard
//! (the record heartbeats keep, one per decky name). A mutation there is a lifecycle record
//! carrying the host, sent to the agent's `/mutate` and ended by its heartbeat; a teardown marks
//! the shards `tearing_down`, asks the agent's `/teardown`, then deletes them or marks them
//! `teardown_failed`. `POST /deckies/{name}/mutate`, `DELETE /deckies/{name}`, the swarm's teardown
//! route and a deploy that replaces the fleet all go through here. Clients and records get generic
//! reasons; the agent's own words go to the log.

use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::caller::AgentCallError;
use super::client::CallError;
use super::master::SwarmMaster;
use super::wire::{MUTATE_PATH, MutateRequest, TEARDOWN_PATH};
use crate::db::{
    Db, DbError, DbResult, DeckyLifecycle, DeckyShard, LifecycleStatus, ShardFilter, ShardState, SwarmHost,
};
use crate::fleet::FleetError;

/// What a teardown that failed at the agent leaves on its records; the cause is in the log.
pub const TEARDOWN_FAILED: &str = "agent teardown failed";

impl AgentCallError {
    /// The reason a record or a client is given: the same few texts whatever the agent said.
    pub fn reason(&self) -> &'static str {
        match self {
            AgentCallError::NoAddress => "host has no address yet",
            AgentCallError::Certificates => "the swarm's certificates are unavailable",
            AgentCallError::Call(CallError::Unreachable) => "host unreachable",
            AgentCallError::Call(CallError::Handshake) => "TLS handshake refused",
            AgentCallError::Call(CallError::Timeout) => "no answer in time",
            AgentCallError::Call(CallError::Transport) => "transport failure",
            AgentCallError::Refused(_) => "the agent refused",
        }
    }
}

/// `POST path` to `host`'s agent with the master's identity.
pub async fn call(
    master: &SwarmMaster,
    host: &SwarmHost,
    path: &str,
    body: &serde_json::Value,
) -> Result<super::client::Answer, AgentCallError> {
    let caller = master.caller().await.map_err(|_| AgentCallError::Certificates)?;
    caller.post(host, path, body).await
}

/// The swarm host that runs `decky`, with its shard; `None` when no host reported it.
pub async fn host_of(db: &Db, decky: &str) -> DbResult<Option<(DeckyShard, SwarmHost)>> {
    let filter = ShardFilter { decky_name: Some(decky.to_string()), ..ShardFilter::default() };
    let Some(shard) = db.decky_shards(&filter).await?.into_iter().next() else { return Ok(None) };
    match db.swarm_host(shard.host_uuid).await {
        Ok(host) => Ok(Some((shard, host))),
        // Forgetting a host forgets its shards; one read between the two is no decky.
        Err(DbError::NotFound) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Mutates `decky` on `host`: a `mutate` record carrying the host, `running` while the agent
/// works, ended by its heartbeat. The agent's 404 is the fleet's 404, any other failure a 409 with
/// a generic reason; the record then fails with that reason.
pub async fn mutate(db: &Db, master: &SwarmMaster, host: &SwarmHost, decky: &str) -> Result<Uuid, FleetError> {
    let now = Utc::now();
    let record = DeckyLifecycle {
        id: Uuid::new_v4(),
        decky_name: decky.to_string(),
        host_uuid: Some(host.uuid.to_string()),
        operation: "mutate".into(),
        status: LifecycleStatus::Running,
        error: None,
        started_at: now,
        updated_at: now,
        completed_at: None,
    };
    db.add_lifecycle(&record).await?;
    let body = MutateRequest { decky_id: decky.to_string(), services: Vec::new(), dry_run: false };
    let body = serde_json::to_value(&body).expect("a mutate request serialises");
    let Err(err) = call(master, host, MUTATE_PATH, &body).await else {
        tracing::info!(host = %host.name, decky, "Mutation sent to the agent");
        return Ok(record.id);
    };
    tracing::warn!(host = %host.name, decky, error = %err, "Mutation not taken by the agent");
    db.set_lifecycle_status(record.id, LifecycleStatus::Failed, Some(err.reason()), Utc::now()).await?;
    Err(match err {
        AgentCallError::Refused(404) => {
            FleetError::NotFound(format!("Decky '{decky}' not found on swarm host '{}'", host.name))
        }
        other => {
            FleetError::Refused(format!("Swarm host '{}' did not mutate '{decky}': {}", host.name, other.reason()))
        }
    })
}

/// Marks `host`'s shards of `decky` (every decky when `None`) `tearing_down`; the filter that
/// names them is what [`finish_teardown`] takes.
pub async fn start_teardown(db: &Db, host: &SwarmHost, decky: Option<&str>) -> DbResult<ShardFilter> {
    let filter = ShardFilter { host_uuid: Some(host.uuid), decky_name: decky.map(str::to_string), state: None };
    db.set_decky_shard_state(&filter, ShardState::TearingDown, None, Utc::now()).await?;
    Ok(filter)
}

/// Asks the agent to tear down what `filter` names and records its answer on the shards
/// [`start_teardown`] marked: deleted on success (a decky the agent does not have is torn down
/// too), `teardown_failed` otherwise.
pub async fn finish_teardown(
    db: &Db,
    master: &SwarmMaster,
    host: &SwarmHost,
    filter: ShardFilter,
) -> Result<(), AgentCallError> {
    let decky = filter.decky_name.clone();
    let outcome = match call(master, host, TEARDOWN_PATH, &json!({ "decky_id": decky })).await {
        Err(AgentCallError::Refused(404)) if decky.is_some() => Ok(()),
        other => other.map(drop),
    };
    let marked = ShardFilter { state: Some(ShardState::TearingDown), ..filter };
    let recorded = match &outcome {
        Ok(()) => db.delete_decky_shards(&marked).await.map(drop),
        Err(err) => {
            tracing::warn!(host = %host.name, uuid = %host.uuid, decky = ?decky, error = %err, "Agent teardown failed");
            db.set_decky_shard_state(&marked, ShardState::TeardownFailed, Some(TEARDOWN_FAILED), Utc::now())
                .await
                .map(drop)
        }
    };
    if let Err(err) = recorded {
        tracing::warn!(host = %host.name, error = %err, "Teardown outcome not recorded");
    }
    outcome
}

/// Tears `decky` down on `host` now: [`start_teardown`] then [`finish_teardown`].
pub async fn teardown(db: &Db, master: &SwarmMaster, host: &SwarmHost, decky: &str) -> Result<(), FleetError> {
    let filter = start_teardown(db, host, Some(decky)).await?;
    finish_teardown(db, master, host, filter).await.map_err(|err| {
        FleetError::Refused(format!("{TEARDOWN_FAILED} on swarm host '{}': {}", host.name, err.reason()))
    })
}
