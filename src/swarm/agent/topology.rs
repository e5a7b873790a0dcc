//! The agent's topology routes (master only): `POST /topology/apply` takes a whole topology as the
//! master stores it, keeps a copy in this host's store (as this host's own: no target host) and
//! deploys it with the master's topology code on this host's engine; `POST /topology/teardown`
//! removes it. Both answer once the engine work is done, with where the topology was left and each
//! decky's state, which the master records as its own; each heartbeat then carries the same of
//! every topology this host keeps ([`reports`]), so the master sees this host's heal.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use uuid::Uuid;

use super::Agent;
use super::routes::body;
use crate::db::{TopologyDetail, TopologyStatus};
use crate::swarm::refusal::Refusal;
use crate::swarm::wire::{TopologyApplied, TopologyDeckyState, TopologyReport, TopologyTeardownRequest};
use crate::topology::TopologyError;
use crate::topology::deploy::Outcome;

/// Each decky's state as this host's store has it now.
async fn decky_states(agent: &Agent, id: Uuid) -> Result<Vec<TopologyDeckyState>, TopologyError> {
    let stored = agent.topologies.detail(id).await?;
    Ok(stored
        .deckies
        .into_iter()
        .map(|d| TopologyDeckyState { uuid: d.uuid, state: d.state, last_error: d.last_error })
        .collect())
}

/// The outcome with each decky's state as this host's store has it now.
async fn applied(agent: &Agent, id: Uuid, outcome: Outcome) -> Result<Json<TopologyApplied>, Refusal> {
    let deckies = decky_states(agent, id).await?;
    Ok(Json(TopologyApplied { status: outcome.status, reason: outcome.reason, deckies }))
}

/// Where each topology this host keeps stands, for the heartbeat; one that cannot be read is left
/// out (the master then hears of it next time).
pub(super) async fn reports(agent: &Agent) -> Result<Vec<TopologyReport>, crate::db::DbError> {
    let mut reports = Vec::new();
    let db = agent.topologies.db();
    for topology in db.topologies(None, 500, 0).await?.rows {
        let Ok(deckies) = decky_states(agent, topology.id).await else { continue };
        // Why it came to its status: its last move's reason.
        let reason = db.status_events(topology.id, 1).await?.pop().and_then(|event| event.reason);
        reports.push(TopologyReport { id: topology.id, status: topology.status, reason, deckies });
    }
    Ok(reports)
}

pub(super) async fn apply(State(agent): State<Agent>, bytes: Bytes) -> Result<Json<TopologyApplied>, Refusal> {
    let mut sent: TopologyDetail = body(&bytes)?;
    let id = sent.topology.id;
    // Here it runs on this host's own engine, from the start.
    sent.topology.status = TopologyStatus::Pending;
    sent.topology.mode = "unihost".into();
    sent.topology.target_host_uuid = None;
    // A copy an earlier apply left (failed, torn down) is replaced; a live one is refused (409).
    match agent.topologies.delete(id).await {
        Ok(()) | Err(TopologyError::NotFound(_)) => {}
        Err(err) => return Err(err.into()),
    }
    agent.topologies.store_new(sent).await?;
    agent.topologies.begin_deploy(id).await?;
    let outcome = agent.topologies.deploy(id).await;
    tracing::info!(topology = %id, status = outcome.status.as_str(), "Topology applied for the master");
    applied(&agent, id, outcome).await
}

pub(super) async fn teardown(State(agent): State<Agent>, bytes: Bytes) -> Result<Json<TopologyApplied>, Refusal> {
    let request: TopologyTeardownRequest = body(&bytes)?;
    let id = request.topology_id;
    agent.topologies.begin_teardown(id).await?;
    let outcome = agent.topologies.teardown(id).await;
    tracing::info!(topology = %id, status = outcome.status.as_str(), "Topology torn down for the master");
    applied(&agent, id, outcome).await
}
