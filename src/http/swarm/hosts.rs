//! `GET /swarm/hosts`, `DELETE /swarm/hosts/{uuid}` (decommission, 20 per minute per client
//! address) and `POST /swarm/hosts/{uuid}/teardown`. Teardown marks the host's deckies
//! `tearing_down` at once and answers 202; the agent is asked in the background, and its answer
//! deletes the records or marks them `teardown_failed` with a generic reason (the agent's own words
//! go to the log). Decommission asks the agent to wipe itself, best effort, then forgets the host.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::HOST_NOT_FOUND;
use crate::db::{HostStatus, SwarmHost};
use crate::fleet::decky_name::DeckyName;
use crate::http::error::OrNotFound;
use crate::http::extract::{FieldError, ValidJson, ValidPath, ValidQuery, Validate, check_max_chars, given};
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotAUuid, NotJson};
use crate::http::{AppState, Result};
use crate::swarm::remote;
use crate::swarm::wire::SELF_DESTRUCT_PATH;
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_hosts)).routes(routes!(decommission_host)).routes(routes!(teardown_host))
}

/// A host as the dashboard reads it (DECNET's `SwarmHostView`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SwarmHostView {
    pub uuid: Uuid,
    pub name: String,
    /// Where the master dials its agent; empty until the enrollment bundle is fetched.
    pub address: String,
    pub agent_port: u16,
    pub status: HostStatus,
    pub last_heartbeat: Option<String>,
    /// SHA-256 of the agent certificate; empty until the bundle is fetched (it is issued then,
    /// for the address that fetched it).
    pub client_cert_fingerprint: String,
    pub updater_cert_fingerprint: Option<String>,
    pub enrolled_at: String,
    pub notes: Option<String>,
    pub use_ipvlan: bool,
}

impl From<SwarmHost> for SwarmHostView {
    fn from(host: SwarmHost) -> Self {
        SwarmHostView {
            uuid: host.uuid,
            name: host.name,
            address: host.address,
            agent_port: host.agent_port,
            status: host.status,
            last_heartbeat: host.last_heartbeat.map(format_utc),
            client_cert_fingerprint: host.client_cert_fingerprint.unwrap_or_default(),
            updater_cert_fingerprint: host.updater_cert_fingerprint,
            enrolled_at: format_utc(host.enrolled_at),
            notes: host.notes,
            use_ipvlan: host.use_ipvlan,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HostsQuery {
    /// Only hosts of this status (`enrolled`, `active`, `unreachable`); any other value matches none.
    pub host_status: Option<String>,
}

impl Validate for HostsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_max_chars("host_status", self.host_status.as_deref(), 32, errors);
    }
}

/// Every enrolled host, by name, with the status its heartbeats and silence gave it.
#[utoipa::path(
    get, path = "/swarm/hosts", tag = "swarm", security(("bearer" = [])),
    params(HostsQuery),
    responses(
        (status = 200, description = "The hosts, by name", body = [SwarmHostView]),
        (status = 422, description = "A status filter over 32 characters"),
        AdminOnly,
    )
)]
pub async fn list_hosts(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ValidQuery(query): ValidQuery<HostsQuery>,
) -> Result<Json<Vec<SwarmHostView>>> {
    let status = match given(&query.host_status) {
        None => None,
        Some(text) => match text.parse::<HostStatus>() {
            Ok(status) => Some(status),
            // DECNET matches the text exactly: a status no host has lists none.
            Err(_) => return Ok(Json(Vec::new())),
        },
    };
    Ok(Json(state.db.swarm_hosts(status).await?.into_iter().map(SwarmHostView::from).collect()))
}

/// Decommissions a host: its agent is asked to tear its deckies down and remove svc (best effort,
/// bounded; a failure is logged), then the host and its decky records are forgotten.
#[utoipa::path(
    delete, path = "/swarm/hosts/{uuid}", tag = "swarm", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The host")),
    responses(
        (status = 204, description = "Decommissioned"),
        (status = 404, description = "host not found"),
        (status = 429, description = "Over 20 host deletions a minute from this address; see Retry-After"),
        AdminOnly, NotAUuid,
    )
)]
pub async fn decommission_host(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<StatusCode> {
    state.limits.host_delete(peer.ip()).await?;
    let host = state.db.swarm_host(uuid).await.or_not_found(HOST_NOT_FOUND)?;
    let asked = remote::call(&state.swarm, &host, SELF_DESTRUCT_PATH, &serde_json::json!({})).await;
    if let Err(err) = asked {
        tracing::warn!(host = %host.name, %uuid, error = %err, "Agent self-destruct failed; forgetting the host anyway");
    }
    state.db.delete_swarm_host(uuid).await.or_not_found(HOST_NOT_FOUND)?;
    tracing::info!(host = %host.name, %uuid, by = %admin.user.username, "Swarm host decommissioned");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TeardownRequest {
    /// One decky of the host; absent or null: every decky of the host.
    #[serde(default)]
    pub decky_id: Option<DeckyName>,
}

impl Validate for TeardownRequest {}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TeardownAccepted {
    pub host_uuid: Uuid,
    pub host_name: String,
    pub decky_id: Option<String>,
    pub accepted: bool,
    pub detail: String,
}

/// Tears down one decky of a host, or all of them: their records turn `tearing_down` now; the
/// agent's answer, in the background, removes them or marks them `teardown_failed`.
#[utoipa::path(
    post, path = "/swarm/hosts/{uuid}/teardown", tag = "swarm", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The host")),
    request_body = TeardownRequest,
    responses(
        (status = 202, description = "Teardown queued", body = TeardownAccepted),
        (status = 400, description = "No body, or a body of the wrong shape"),
        (status = 404, description = "host not found"),
        (status = 422, description = "Not a uuid, or not a decky name"),
        AdminOnly, NotJson,
    )
)]
pub async fn teardown_host(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidJson(body): ValidJson<TeardownRequest>,
) -> Result<(StatusCode, Json<TeardownAccepted>)> {
    let host = state.db.swarm_host(uuid).await.or_not_found(HOST_NOT_FOUND)?;
    let decky_id = body.decky_id.map(|name| name.0);
    let filter = remote::start_teardown(&state.db, &host, decky_id.as_deref()).await?;
    tracing::info!(host = %host.name, %uuid, decky = ?decky_id, by = %admin.user.username, "Swarm teardown queued");
    let answer = TeardownAccepted {
        host_uuid: uuid,
        host_name: host.name.clone(),
        decky_id,
        accepted: true,
        detail: "teardown queued".into(),
    };
    // In the request's trace (when traces are on), which the call carries on to the agent.
    let teardown = async move {
        // The outcome is on the records (and in the log).
        let _ = remote::finish_teardown(&state.db, &state.swarm, &host, filter).await;
    };
    tokio::spawn(tracing::Instrument::instrument(teardown, tracing::Span::current()));
    Ok((StatusCode::ACCEPTED, Json(answer)))
}
