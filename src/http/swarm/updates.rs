//! `/swarm-updates/*` (admin): DECNET's remote-updates routes (reference §1.4). `GET /hosts` asks
//! every host with an updater for its release slots; `POST /push` ships this master's own svc
//! binary (`SVC_SWARM_BUNDLE_BIN`, else the running one) and its units to the chosen hosts in
//! parallel, `POST /push-self` to their updaters, `POST /rollback` puts a host's previous release
//! back. Every call to an updater is pinned by the host's stored updater fingerprint; a host
//! without one is never dialled. Per-host failures are results, not errors; their causes are in
//! the log.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::db::{DbError, SwarmHost};
use crate::http::deadline::RouteDeadline;
use crate::http::extract::{FieldError, ValidJson, Validate};
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotJson};
use crate::http::{ApiError, AppState, Result};
use crate::swarm::caller::AgentCaller;
use crate::swarm::updater::releases::SlotView;
use crate::swarm::updates::{self, HostResult, Release};

pub const EXACTLY_ONE_TARGET: &str = "Specify exactly one of host_uuids or all=true.";
pub const NO_TARGETS: &str = "No targets: no enrolled hosts have an updater bundle.";
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

/// One host's releases as its updater reports them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HostReleases {
    pub host_uuid: Uuid,
    pub host_name: String,
    pub address: String,
    pub reachable: bool,
    pub agent_status: Option<String>,
    pub current_sha: Option<String>,
    pub previous_sha: Option<String>,
    pub releases: Vec<SlotView>,
    pub detail: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HostReleasesList {
    pub hosts: Vec<HostReleases>,
}

fn caller(state: &AppState) -> Result<AgentCaller> {
    AgentCaller::load(&state.config.swarm).map_err(|err| ApiError::Internal(err.into()))
}

/// Every host with an updater, each asked for its release slots in parallel; one that does not
/// answer is `reachable: false`.
#[utoipa::path(
    get, path = "/swarm-updates/hosts", tag = "swarm", security(("bearer" = [])),
    responses((status = 200, description = "Each host's release slots", body = HostReleasesList), AdminOnly)
)]
pub async fn list_host_releases(State(state): State<AppState>, Admin(_admin): Admin) -> Result<Json<HostReleasesList>> {
    let hosts: Vec<SwarmHost> =
        state.db.swarm_hosts(None).await?.into_iter().filter(|h| h.updater_cert_fingerprint.is_some()).collect();
    let caller = caller(&state)?;
    let probes = hosts.iter().map(|host| updates::health(&caller, host));
    let answers = futures::future::join_all(probes).await;
    let hosts = hosts
        .into_iter()
        .zip(answers)
        .map(|(host, answer)| {
            let mut view = HostReleases {
                host_uuid: host.uuid,
                host_name: host.name,
                address: host.address,
                reachable: false,
                agent_status: None,
                current_sha: None,
                previous_sha: None,
                releases: Vec::new(),
                detail: None,
            };
            match answer {
                Ok(health) => {
                    let releases: Vec<SlotView> =
                        serde_json::from_value(health["releases"].clone()).unwrap_or_default();
                    let sha_of = |slot: &str| releases.iter().find(|r| r.slot == slot).and_then(|r| r.sha.clone());
                    view.current_sha = sha_of("active");
                    view.previous_sha = sha_of("prev");
                    view.agent_status = health["agent_status"].as_str().or(health["status"].as_str()).map(String::from);
                    view.reachable = true;
                    view.releases = releases;
                }
                Err(detail) => view.detail = Some(detail),
            }
            view
        })
        .collect();
    Ok(Json(HostReleasesList { hosts }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PushRequest {
    /// The hosts to update; or `all`.
    #[serde(default)]
    pub host_uuids: Option<Vec<Uuid>>,
    /// Every host with an updater.
    #[serde(default)]
    pub all: bool,
    /// After a host's agent is updated, update its updater too.
    #[serde(default)]
    pub include_self: bool,
    /// Globs (`*`, `?`) of release paths (`svc`, `units/<name>`) to leave out.
    #[serde(default)]
    pub exclude: Vec<String>,
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

/// The hosts a push names: 400 unless exactly one of `host_uuids` (non-empty) and `all`; 404 when
/// a named host is unknown or has no updater, or when `all` finds none.
async fn targets(state: &AppState, body: &PushRequest) -> Result<Vec<SwarmHost>> {
    let named = body.host_uuids.as_ref().filter(|hosts| !hosts.is_empty());
    match (named, body.all) {
        (None, true) => {
            let hosts: Vec<SwarmHost> = state
                .db
                .swarm_hosts(None)
                .await?
                .into_iter()
                .filter(|h| h.updater_cert_fingerprint.is_some())
                .collect();
            if hosts.is_empty() {
                return Err(ApiError::not_found(NO_TARGETS));
            }
            Ok(hosts)
        }
        (Some(uuids), false) => {
            let (mut hosts, mut missing) = (Vec::new(), Vec::new());
            for uuid in uuids {
                match state.db.swarm_host(*uuid).await {
                    Ok(host) if host.updater_cert_fingerprint.is_some() => hosts.push(host),
                    Ok(_) | Err(DbError::NotFound) => missing.push(uuid.to_string()),
                    Err(err) => return Err(err.into()),
                }
            }
            if !missing.is_empty() {
                missing.sort();
                missing.dedup();
                let listed = missing.iter().map(|uuid| format!("'{uuid}'")).collect::<Vec<_>>().join(", ");
                return Err(ApiError::not_found(format!("Unknown or updater-less host(s): [{listed}]")));
            }
            hosts.dedup_by_key(|host| host.uuid);
            Ok(hosts)
        }
        _ => Err(ApiError::bad_request(EXACTLY_ONE_TARGET)),
    }
}

/// This master's release, built off the request loop.
async fn release(state: &AppState, exclude: Vec<String>) -> Result<Release> {
    let binary = super::shipped_binary(state)?;
    let built = tokio::task::spawn_blocking(move || updates::build_release(&binary, &exclude))
        .await
        .map_err(|err| anyhow::anyhow!("release build task: {err}"))?;
    Ok(built.map_err(|err| anyhow::anyhow!("building the release: {err}"))?)
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
    let hosts = targets(&state, &body).await?;
    let release = release(&state, body.exclude.clone()).await?;
    let caller = caller(&state)?;
    tracing::info!(hosts = hosts.len(), sha = %release.sha, bytes = release.tgz.len(), only_self, %by, "Pushing a release");
    let pushes = hosts.iter().map(|host| {
        let (caller, release) = (&caller, &release);
        async move {
            if only_self {
                updates::push_self(caller, host, release).await
            } else {
                updates::push(caller, host, release, body.include_self).await
            }
        }
    });
    let results = futures::future::join_all(pushes).await;
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
    let uuid = body.host_uuid;
    let host = state.db.swarm_host(uuid).await.map_err(|err| match err {
        DbError::NotFound => ApiError::not_found(format!("Unknown host: {uuid}")),
        other => other.into(),
    })?;
    if host.updater_cert_fingerprint.is_none() {
        return Err(ApiError::bad_request(format!(
            "Host '{}' has no updater bundle — nothing to roll back.",
            host.name
        )));
    }
    tracing::info!(host = %host.name, %uuid, by = %admin.user.username, "Rolling a host back");
    let answer = match updates::rollback(&caller(&state)?, &host).await {
        Ok(answer) => answer,
        Err(result) => return Ok(Json(rollback_response(&host, "failed", None, result.detail))),
    };
    let detail = match &answer.json()["detail"] {
        Value::String(text) => Some(text.clone()),
        Value::Object(fields) => fields.get("error").and_then(Value::as_str).map(String::from),
        _ => None,
    };
    match answer.status {
        StatusCode::OK => Ok(Json(rollback_response(&host, "rolled-back", Some(200), None))),
        StatusCode::NOT_FOUND => Err(ApiError::not_found(detail.unwrap_or_else(|| "no previous release".into()))),
        other => {
            tracing::warn!(host = %host.name, status = other.as_u16(), detail = ?detail, "Rollback refused by the updater");
            Ok(Json(rollback_response(&host, "failed", Some(other.as_u16()), detail)))
        }
    }
}

fn rollback_response(
    host: &SwarmHost,
    status: &str,
    http_status: Option<u16>,
    detail: Option<String>,
) -> RollbackResponse {
    RollbackResponse {
        host_uuid: host.uuid,
        host_name: host.name.clone(),
        status: status.to_string(),
        http_status,
        detail,
    }
}
