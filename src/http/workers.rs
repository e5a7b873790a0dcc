//! `GET /workers` and `POST /workers/{name}/stop`: the worker registry's rows with each worker's
//! `installed` flag, and stop intents published on the worker's control topic.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

use super::guard::{Admin, Viewer};
use super::{ApiError, AppState, Result};
use crate::bus::{self, BusError, ControlRequest, WorkerRow};

pub fn router() -> Router<AppState> {
    Router::new().route("/workers", get(list_workers)).route("/workers/{name}/stop", post(stop_worker))
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
    path = "/api/v1/workers",
    tag = "workers",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One row per worker", body = WorkersResponse),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
    )
)]
pub async fn list_workers(State(state): State<AppState>, _viewer: Viewer) -> Json<WorkersResponse> {
    let now = bus::epoch_seconds();
    let bus_connected = state.bus.is_connected();
    let installed = state.units.installed().await;
    let workers = state
        .workers
        .rows(bus_connected, now)
        .into_iter()
        .map(|row: WorkerRow| WorkerStatus { installed: installed.contains(&row.name), row })
        .collect();
    Json(WorkersResponse { workers, generated_at: now, bus_connected })
}

/// Asks a worker to stop: it finishes its current batch and exits.
#[utoipa::path(
    post,
    path = "/api/v1/workers/{name}/stop",
    tag = "workers",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Worker name")),
    responses(
        (status = 202, description = "The stop intent was published", body = ControlAccepted),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "No such worker"),
        (status = 503, description = "The bus is unavailable"),
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
