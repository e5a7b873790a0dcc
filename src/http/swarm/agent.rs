//! The two calls the dashboard's routes make to a host's agent, `POST /teardown` and `POST
//! /self-destruct`, through the master's pinned caller (`swarm::caller`), bounded by its deadlines
//! (`SVC_AGENT_CONNECT_TIMEOUT_S`, `SVC_AGENT_READ_TIMEOUT_S`). Failures are generic; the TLS or
//! agent detail is logged here or where it happened.

use serde_json::{Value, json};

use crate::db::SwarmHost;
use crate::http::AppState;
use crate::swarm::caller::AgentCaller;
use crate::swarm::client::CallError;

/// Why a call to an agent did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum AgentCallError {
    #[error("host has no address yet")]
    NoAddress,
    #[error("the swarm's certificates are unavailable")]
    Certificates,
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("agent answered {0}")]
    Refused(u16),
}

/// Asks the host's agent to tear down `decky` (or every decky).
pub async fn teardown(state: &AppState, host: &SwarmHost, decky: Option<&str>) -> Result<(), AgentCallError> {
    post(state, host, "/teardown", &json!({ "decky_id": decky })).await
}

/// Asks the host's agent to tear everything down and remove svc.
pub async fn self_destruct(state: &AppState, host: &SwarmHost) -> Result<(), AgentCallError> {
    post(state, host, "/self-destruct", &json!({})).await
}

/// `POST path` with `body` to `host`'s agent; a 2xx answer is success.
async fn post(state: &AppState, host: &SwarmHost, path: &str, body: &Value) -> Result<(), AgentCallError> {
    if host.address.is_empty() {
        return Err(AgentCallError::NoAddress);
    }
    let caller = AgentCaller::load(&state.config.swarm).map_err(|_| AgentCallError::Certificates)?;
    let endpoint = caller.endpoint(host).ok_or(AgentCallError::Certificates)?;
    let answer = endpoint.post(path, body).await?;
    if answer.status.is_success() {
        return Ok(());
    }
    tracing::warn!(
        host = %host.name,
        %path,
        status = answer.status.as_u16(),
        body = %crate::text::prefix_chars(&String::from_utf8_lossy(&answer.body), 300),
        "Agent refused the call"
    );
    Err(AgentCallError::Refused(answer.status.as_u16()))
}
