//! `/swarm-updates/*` (admin): DECNET's remote-updates routes (reference §1.4); the work is
//! `swarm::updates`'s. `GET /hosts` asks every host with an updater for its release slots; `POST
//! /push` ships this master's own svc binary (`SVC_SWARM_BUNDLE_BIN`, else the running one) and its
//! units to the chosen hosts in parallel, `POST /push-self` to their updaters, `POST /rollback`
//! puts a host's previous release back. Every call to an updater is pinned by the host's stored
//! updater fingerprint; a host without one is never dialled. Per-host failures are results, not
//! errors; their causes are in the log.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::http::deadline::RouteDeadline;
use crate::http::extract::{FieldError, ValidJson, Validate};
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotJson};
use crate::http::{ApiError, AppState, Result};
use crate::swarm::updates::{self, HostReleases, HostResult, PushRequest, Pushed, RolledBack, UpdateError};

const MAX_HOSTS: usize = 1000;
const MAX_EXCLUDES: usize = 64;
const MAX_GLOB_CHARS: usize = 256;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_host_releases))
        .routes(routes!(push_update))
        .routes(routes!(push_update_self))
        .routes(routes!(rollback_host))
        // A push waits for each host's restart and probes: two updater calls (`/update`, then
        // `/update-self`) at the updater's timeouts.
        .layer(RouteDeadline(|config| (config.swarm.connect_timeout + config.swarm.updater.read_timeout) * 2))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HostReleasesList {
    pub hosts: Vec<HostReleases>,
}

fn update_error(err: UpdateError) -> ApiError {
    match err {
        UpdateError::NotExactlyOneTarget | UpdateError::NoUpdater(_) => ApiError::bad_request(err.to_string()),
        UpdateError::NoTargets
        | UpdateError::UnknownTargets(_)
        | UpdateError::UnknownHost(_)
        | UpdateError::NoPreviousRelease(_) => ApiError::not_found(err.to_string()),
        UpdateError::Store(err) => err.into(),
        UpdateError::Certificates(err) => ApiError::Internal(err.into()),
        UpdateError::Release(err) => ApiError::Internal(err),
    }
}

/// Every host with an updater, each asked for its release slots in parallel; one that does not
/// answer is `reachable: false`.
#[utoipa::path(
    get, path = "/swarm-updates/hosts", tag = "swarm", security(("bearer" = [])),
    responses((status = 200, description = "Each host's release slots", body = HostReleasesList), AdminOnly)
)]
pub async fn list_host_releases(State(state): State<AppState>, Admin(_admin): Admin) -> Result<Json<HostReleasesList>> {
    let hosts = updates::host_releases(&state.db, &state.swarm).await.map_err(update_error)?;
    Ok(Json(HostReleasesList { hosts }))
}

impl Validate for PushRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if self.host_uuids.as_ref().is_some_and(|hosts| hosts.len() > MAX_HOSTS) {
            errors.push(FieldError::new("too_long", &["body", "host_uuids"], "List should have at most 1000 items"));
        }
        if self.exclude.len() > MAX_EXCLUDES || self.exclude.iter().any(|glob| glob.chars().count() > MAX_GLOB_CHARS) {
            errors.push(FieldError::new(
                "too_long",
                &["body", "exclude"],
                "At most 64 globs of at most 256 characters each",
            ));
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PushResponse {
    /// The release's provenance: `<version>+<sha-256 prefix of the binary>`.
    pub sha: String,
    pub tarball_bytes: usize,
    pub results: Vec<HostResult>,
}

/// Pushes this master's svc to the hosts, in parallel: each host's updater stages it, restarts the
/// agent on it and probes it (`updated`), or puts the previous release back (`rolled-back`);
/// `include_self` then updates the updater (`self-updated`, `self-failed`). 200 whatever each host
/// did.
#[utoipa::path(
    post, path = "/swarm-updates/push", tag = "swarm", security(("bearer" = [])),
    request_body = PushRequest,
    responses(
        (status = 200, description = "Each host's result", body = PushResponse),
        (status = 400, description = "Specify exactly one of host_uuids or all=true."),
        (status = 404, description = "A named host is unknown or has no updater, or no host has one"),
        (status = 422, description = "Too many hosts or globs"),
        AdminOnly, NotJson,
    )
)]
pub async fn push_update(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<PushRequest>,
) -> Result<Json<PushResponse>> {
    push(state, admin.user.username, body, false).await
}

/// Pushes this master's svc to the hosts' updaters themselves (`/update-self`); an updater that
/// drops the connection while it re-executes is `self-updated`.
#[utoipa::path(
    post, path = "/swarm-updates/push-self", tag = "swarm", security(("bearer" = [])),
    request_body = PushRequest,
    responses(
        (status = 200, description = "Each host's result", body = PushResponse),
        (status = 400, description = "Specify exactly one of host_uuids or all=true."),
        (status = 404, description = "A named host is unknown or has no updater, or no host has one"),
        (status = 422, description = "Too many hosts or globs"),
        AdminOnly, NotJson,
    )
)]
pub async fn push_update_self(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<PushRequest>,
) -> Result<Json<PushResponse>> {
    push(state, admin.user.username, body, true).await
}

async fn push(state: AppState, by: String, body: PushRequest, only_self: bool) -> Result<Json<PushResponse>> {
    let request = updates::PushRequest {
        host_uuids: body.host_uuids,
        all: body.all,
        include_self: body.include_self,
        exclude: body.exclude,
    };
    let binary = state.config.api.bundle_binary.as_deref();
    let Pushed { release, results } =
        updates::push_release(&state.db, &state.swarm, binary, request, only_self, &by).await.map_err(update_error)?;
    Ok(Json(PushResponse { sha: release.sha, tarball_bytes: release.tgz.len(), results }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RollbackRequest {
    pub host_uuid: Uuid,
}

impl Validate for RollbackRequest {}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RollbackResponse {
    pub host_uuid: Uuid,
    pub host_name: String,
    /// `rolled-back` or `failed`.
    pub status: String,
    pub http_status: Option<u16>,
    pub detail: Option<String>,
}

/// Puts a host's previous release back and restarts its agent on it.
#[utoipa::path(
    post, path = "/swarm-updates/rollback", tag = "swarm", security(("bearer" = [])),
    request_body = RollbackRequest,
    responses(
        (status = 200, description = "rolled-back, or failed (the updater's answer or none)", body = RollbackResponse),
        (status = 400, description = "Host '<name>' has no updater bundle — nothing to roll back."),
        (status = 404, description = "Unknown host, or no previous release on it"),
        (status = 422, description = "host_uuid is not a uuid"),
        AdminOnly, NotJson,
    )
)]
pub async fn rollback_host(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<RollbackRequest>,
) -> Result<Json<RollbackResponse>> {
    let rolled_back = updates::rollback_host(&state.db, &state.swarm, body.host_uuid, &admin.user.username)
        .await
        .map_err(update_error)?;
    Ok(Json(rolled_back.into()))
}

impl From<RolledBack> for RollbackResponse {
    fn from(rolled_back: RolledBack) -> Self {
        RollbackResponse {
            host_uuid: rolled_back.host.uuid,
            host_name: rolled_back.host.name,
            status: rolled_back.status.to_string(),
            http_status: rolled_back.http_status,
            detail: rolled_back.detail,
        }
    }
}
