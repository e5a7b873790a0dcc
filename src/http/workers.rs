//! `GET /workers`, `POST /workers/{name}/stop` and the starts: the worker registry's rows with
//! each worker's `installed` flag; stop intents published on the worker's control topic; units
//! started by `svc supervise` when it runs them (asked on the bus) or else through systemd where it
//! runs the host (`POST /workers/{name}/start`, and `POST /workers/start-all` in order), answered
//! in DECNET's shapes. Each swarm host's agent has a row too (`agent@<host>`), from the store.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::guard::{Admin, Viewer};
use super::responses::{AdminOnly, ViewerOnly};
use super::{ApiError, AppState, Result};
use crate::bus::{self, BusError, ControlRequest, Tier, WorkerRow};
use crate::db::HostStatus;
use crate::roster::{API, KNOWN_WORKERS};
use crate::systemd::StartError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_workers))
        .routes(routes!(stop_worker))
        .routes(routes!(start_worker))
        .routes(routes!(start_all_workers))
}

/// A registry row and whether the host's service manager has a unit for the worker.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerStatus {
    #[serde(flatten)]
    pub row: WorkerRow,
    /// A unit for the worker exists in the host's service manager.
    pub installed: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WorkersResponse {
    pub workers: Vec<WorkerStatus>,
    /// Epoch seconds.
    pub generated_at: f64,
    /// False explains why every row is `unknown`.
    pub bus_connected: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ControlAccepted {
    pub accepted: bool,
    pub worker: String,
    pub action: String,
}

/// Every known worker and every worker heard from on the bus.
#[utoipa::path(
    get,
    path = "/workers",
    tag = "workers",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One row per worker", body = WorkersResponse),
        ViewerOnly,
    )
)]
pub async fn list_workers(State(state): State<AppState>, _viewer: Viewer) -> Json<WorkersResponse> {
    let now = bus::epoch_seconds();
    let bus_connected = state.bus.is_connected();
    let installed = state.units.installed().await;
    let mut workers: Vec<WorkerStatus> = state
        .workers
        .rows(bus_connected, now)
        .into_iter()
        .map(|row: WorkerRow| WorkerStatus { installed: installed.contains(&row.name), row })
        .collect();
    workers.extend(agent_rows(&state, now).await.into_iter().map(|row| WorkerStatus { row, installed: true }));
    Json(WorkersResponse { workers, generated_at: now, bus_connected })
}

/// One row per swarm host's agent, `agent@<host>`, as the store has it (its heartbeats reach the
/// master over TLS, not the bus): `ok` while active, `stale` once unreachable, `unknown` before
/// the first heartbeat. None when the store cannot tell (health's database component says so).
async fn agent_rows(state: &AppState, now: f64) -> Vec<WorkerRow> {
    let hosts = match state.db.swarm_hosts(None).await {
        Ok(hosts) => hosts,
        Err(err) => {
            tracing::debug!(error = %err, "Swarm agents left out of /workers");
            return Vec::new();
        }
    };
    hosts
        .into_iter()
        .map(|host| {
            let status = match host.status {
                HostStatus::Active => Tier::Ok,
                HostStatus::Unreachable => Tier::Stale,
                HostStatus::Enrolled => Tier::Unknown,
            };
            let last = host.last_heartbeat.map(|at| at.timestamp_millis() as f64 / 1000.0);
            let mut extra = serde_json::Map::new();
            extra.insert("host_uuid".into(), host.uuid.to_string().into());
            extra.insert("address".into(), host.address.into());
            extra.insert("host_status".into(), host.status.as_str().into());
            WorkerRow {
                name: format!("agent@{}", host.name),
                status,
                last_heartbeat_ts: last,
                seconds_since: last.map(|at| (now - at).max(0.0)),
                extra,
            }
        })
        .collect()
}

/// Asks a worker to stop: it finishes its current batch and exits.
#[utoipa::path(
    post,
    path = "/workers/{name}/stop",
    tag = "workers",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Worker name")),
    responses(
        (status = 202, description = "The stop intent was published", body = ControlAccepted),
        (status = 404, description = "No such worker"),
        (status = 503, description = "The bus is unavailable"),
        AdminOnly,
    )
)]
pub async fn stop_worker(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<ControlAccepted>)> {
    let unknown = || ApiError::not_found(format!("Unknown worker: '{name}'"));
    if !state.workers.is_known(&name) {
        return Err(unknown());
    }
    let request = ControlRequest::stop(admin.user.username.as_str());
    match bus::control::send(&state.bus, &name, &request).await {
        Ok(()) => {
            tracing::info!(worker = %name, by = %admin.user.username, "Stop intent published");
            Ok((StatusCode::ACCEPTED, Json(ControlAccepted { accepted: true, worker: name, action: "stop".into() })))
        }
        Err(BusError::BadSubject(_)) => Err(unknown()),
        Err(err) => {
            tracing::warn!(worker = %name, error = %err, "Stop intent not published");
            Err(ApiError::BusUnavailable)
        }
    }
}

/// A worker `start-all` could not start, and why (generic words; systemctl's go to the log).
#[derive(Debug, Serialize, ToSchema)]
pub struct StartFailure {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StartAllResponse {
    pub started: Vec<String>,
    pub already_running: Vec<String>,
    pub failed: Vec<StartFailure>,
}

/// Starts `worker`: by the supervisor that runs it, if one answers; else through systemd.
async fn start(state: &AppState, worker: &str) -> Result<(), StartError> {
    match bus::control::ask_to_start(&state.bus, worker).await {
        Ok(Some(answer)) if answer.started => {
            tracing::info!(worker, detail = %answer.detail, "svc supervise started the worker");
            return Ok(());
        }
        Ok(_) | Err(_) => {}
    }
    state.units.start(worker).await
}

/// Logs systemctl's own words and gives the client the generic ones.
fn start_failure(worker: &str, err: &StartError) -> String {
    if let StartError::Failed { unit, reason } = err {
        tracing::warn!(worker, %unit, reason = %crate::text::prefix_chars(reason, 200), "systemctl start failed");
    }
    err.to_string()
}

/// Starts a worker's unit through systemd.
#[utoipa::path(
    post,
    path = "/workers/{name}/start",
    tag = "workers",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Worker name")),
    responses(
        (status = 202, description = "The worker was started (or already ran)", body = ControlAccepted),
        (status = 404, description = "No such worker"),
        (status = 502, description = "systemctl failed to start the unit"),
        (status = 503, description = "The unit is not installed, or no service manager runs the host"),
        AdminOnly,
    )
)]
pub async fn start_worker(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<ControlAccepted>)> {
    if !state.workers.is_known(&name) {
        return Err(ApiError::not_found(format!("Unknown worker: '{name}'")));
    }
    match start(&state, &name).await {
        Ok(()) => {
            tracing::info!(worker = %name, by = %admin.user.username, "Worker unit started");
            Ok((StatusCode::ACCEPTED, Json(ControlAccepted { accepted: true, worker: name, action: "start".into() })))
        }
        Err(err @ StartError::Failed { .. }) => Err(ApiError::BadGateway(start_failure(&name, &err).into())),
        Err(err) => Err(ApiError::Unavailable(err.to_string().into())),
    }
}

/// Starts every known worker that is not running, one after the other (the API first: it is
/// running, as it answers).
#[utoipa::path(
    post,
    path = "/workers/start-all",
    tag = "workers",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "What was started, what already ran, what failed", body = StartAllResponse),
        AdminOnly,
    )
)]
pub async fn start_all_workers(State(state): State<AppState>, Admin(admin): Admin) -> Json<StartAllResponse> {
    let (bus_connected, now) = (state.bus.is_connected(), bus::epoch_seconds());
    let mut response = StartAllResponse { started: vec![], already_running: vec![], failed: vec![] };
    for name in KNOWN_WORKERS {
        if name == API || state.workers.is_up(name, bus_connected, now) {
            response.already_running.push(name.to_string());
            continue;
        }
        match start(&state, name).await {
            Ok(()) => response.started.push(name.to_string()),
            Err(err) => {
                response.failed.push(StartFailure { name: name.to_string(), reason: start_failure(name, &err) })
            }
        }
    }
    tracing::info!(by = %admin.user.username, started = ?response.started, "Start-all done");
    Json(response)
}
