//! The two calls the dashboard's routes make to a host's agent, `POST /teardown` and `POST
//! /self-destruct`, through the swarm's pinned client (`swarm::agent_client`), each bounded by its
//! deadlines (`SVC_AGENT_CONNECT_TIMEOUT_S`, `SVC_AGENT_READ_TIMEOUT_S`).

use serde_json::json;

use crate::db::SwarmHost;
use crate::http::AppState;
use crate::swarm::agent_client::{self, AgentCallError};

/// Asks the host's agent to tear down `decky` (or every decky).
pub async fn teardown(state: &AppState, host: &SwarmHost, decky: Option<&str>) -> Result<(), AgentCallError> {
    agent_client::post(&state.config.swarm, host, "/teardown", &json!({ "decky_id": decky })).await
}

/// Asks the host's agent to tear everything down and remove svc.
pub async fn self_destruct(state: &AppState, host: &SwarmHost) -> Result<(), AgentCallError> {
    agent_client::post(&state.config.swarm, host, "/self-destruct", &json!({})).await
}
