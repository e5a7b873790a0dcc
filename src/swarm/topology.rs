//! Topologies targeted at a swarm host, from the master's side: the host is checked at create and
//! deploy (known and usable, else 400), the whole topology is sent to its agent's
//! `/topology/apply` and torn down through `/topology/teardown`, and the agent's answer (where the
//! topology was left, each decky's state) becomes the master's record. A host that cannot be
//! reached leaves the topology `failed` (deploy) or `degraded` (teardown) with a generic reason,
//! within the connect timeout; the cause is in the log.

use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::caller::AgentCallError;
use super::master::SwarmMaster;
use super::wire::{TOPOLOGY_APPLY_PATH, TOPOLOGY_TEARDOWN_PATH, TopologyApplied};
use crate::db::{Db, DbError, SwarmHost, Topology, TopologyStatus};
use crate::topology::deploy::Outcome;
use crate::topology::{Topologies, TopologyError};

/// How long the agent may take to build and start a topology (or remove it) before answering.
const ENGINE_WORK_TIMEOUT: Duration = Duration::from_secs(600);

/// The swarm host `target` names when a topology may be sent there: 400 for anything that is not
/// a known host whose agent is `active` with an address.
pub async fn usable_target(db: &Db, target: &str) -> Result<SwarmHost, TopologyError> {
    let unknown = || TopologyError::BadRequest(format!("swarm host {target:?} not found"));
    let uuid = Uuid::parse_str(target).map_err(|_| unknown())?;
    let host = match db.swarm_host(uuid).await {
        Ok(host) => host,
        Err(DbError::NotFound) => return Err(unknown()),
        Err(err) => return Err(err.into()),
    };
    if !host.is_usable() {
        return Err(TopologyError::BadRequest(format!(
            "swarm host '{uuid}' is '{}'; expected 'active' with an address",
            host.status.as_str()
        )));
    }
    Ok(host)
}

/// `pending` → `deploying`, then the whole topology is applied by `host`'s agent in the background.
pub async fn start_deploy(
    topologies: &Topologies,
    master: &SwarmMaster,
    host: SwarmHost,
    id: Uuid,
) -> Result<Topology, TopologyError> {
    let topology = topologies.begin_deploy(id).await?;
    let (topologies, master) = (topologies.clone(), master.clone());
    tokio::spawn(async move {
        let outcome = match topologies.detail(id).await {
            Ok(detail) => {
                let body = serde_json::to_value(&detail).expect("a topology serialises");
                ask(&topologies, &master, &host, TOPOLOGY_APPLY_PATH, &body, TopologyStatus::Failed).await
            }
            Err(err) => {
                tracing::error!(topology = %id, error = %err, "Cannot read the topology to send");
                Outcome { status: TopologyStatus::Failed, reason: Some("the topology could not be read".into()) }
            }
        };
        record(&topologies, id, TopologyStatus::Deploying, outcome).await;
    });
    Ok(topology)
}

/// `tearing_down`, then `host`'s agent removes the topology in the background. A host the master
/// no longer knows (`None`) has nothing left to ask: the topology is `torn_down` here.
pub async fn start_teardown(
    topologies: &Topologies,
    master: &SwarmMaster,
    host: Option<SwarmHost>,
    id: Uuid,
) -> Result<Topology, TopologyError> {
    let topology = topologies.begin_teardown(id).await?;
    let (topologies, master) = (topologies.clone(), master.clone());
    tokio::spawn(async move {
        let outcome = match host {
            Some(host) => {
                let body = json!({ "topology_id": id });
                ask(&topologies, &master, &host, TOPOLOGY_TEARDOWN_PATH, &body, TopologyStatus::Degraded).await
            }
            None => {
                tracing::warn!(topology = %id, "The topology's swarm host is gone; recorded as torn down");
                Outcome { status: TopologyStatus::TornDown, reason: Some("its swarm host is gone".into()) }
            }
        };
        record(&topologies, id, TopologyStatus::TearingDown, outcome).await;
    });
    Ok(topology)
}

/// Posts `body` to `host`'s agent and records each decky's state from its answer; what went wrong
/// leaves the topology `otherwise` with a generic reason.
async fn ask(
    topologies: &Topologies,
    master: &SwarmMaster,
    host: &SwarmHost,
    path: &str,
    body: &serde_json::Value,
    otherwise: TopologyStatus,
) -> Outcome {
    let answered = match master.caller().await {
        Ok(caller) => caller.post_within(host, path, body, ENGINE_WORK_TIMEOUT).await,
        Err(_) => Err(AgentCallError::Certificates),
    };
    let failed =
        |reason: &str| Outcome { status: otherwise, reason: Some(format!("swarm host '{}': {reason}", host.name)) };
    let answer = match answered {
        Ok(answer) => answer,
        Err(err) => {
            tracing::warn!(host = %host.name, %path, error = %err, "Topology call to the agent failed");
            return failed(err.reason());
        }
    };
    let applied: TopologyApplied = match serde_json::from_slice(&answer.body) {
        Ok(applied) => applied,
        Err(err) => {
            tracing::warn!(host = %host.name, %path, error = %err, "Unreadable topology answer from the agent");
            return failed("unreadable answer");
        }
    };
    let db = topologies.db();
    for decky in &applied.deckies {
        if let Err(err) =
            db.set_topology_decky_state(decky.uuid, &decky.state, decky.last_error.as_deref(), Utc::now()).await
        {
            tracing::warn!(decky = %decky.uuid, error = %err, "Could not record a decky's state on its host");
        }
    }
    Outcome { status: applied.status, reason: applied.reason }
}

async fn record(topologies: &Topologies, id: Uuid, from: TopologyStatus, outcome: Outcome) {
    let moved = topologies.move_status(id, Some(&[from]), outcome.status, outcome.reason.as_deref()).await;
    if let Err(err) = moved {
        tracing::warn!(topology = %id, error = %err, "Could not record the swarm host's outcome");
    }
    tracing::info!(topology = %id, status = outcome.status.as_str(), "Topology on a swarm host: outcome recorded");
}
