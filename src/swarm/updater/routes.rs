//! The updater's API, DECNET's routes (reference §1.11): `GET /health` (slots, agent state) for any
//! certificate the swarm CA signed; `POST /update`, `/update-self`, `/rollback` and `GET /releases`
//! for the master's certificate alone (403 otherwise, logged). Uploads are multipart: `tarball`,
//! `sha256` (required: 400 without it), `sha` (provenance) and for `/update-self` `confirm_self`.
//! Refusals answer `{"detail": {"error", "stderr", "rolled_back"}}` with generic texts; the cause
//! is in the log.

use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::releases::{BINARY, RollbackError, Slots};
use super::{Updater, sha256_hex};
use crate::swarm::agent::require_master;
use crate::swarm::refusal::detail;
use crate::swarm::wire::{HEALTH_PATH, RELEASES_PATH, ROLLBACK_PATH, UPDATE_PATH, UPDATE_SELF_PATH};

/// 400 of an upload without its digest (the spec's wording, DECNET's text).
pub const DIGEST_REQUIRED: &str = "sha256 of the tarball is required";
pub const CONFIRM_SELF_REQUIRED: &str = "self-update requires confirm_self=true (no auto-rollback)";
const MAX_SHA_CHARS: usize = 128;

pub fn router(updater: Updater) -> Router {
    // The body may carry a tarball up to the cap; multipart framing needs a little more.
    let limit = usize::try_from(updater.inner.max_bytes).unwrap_or(usize::MAX).saturating_add(64 * 1024);
    let master_only = Router::new()
        .route(UPDATE_PATH, post(update))
        .route(UPDATE_SELF_PATH, post(update_self))
        .route(ROLLBACK_PATH, post(rollback))
        .route(RELEASES_PATH, get(releases))
        .route_layer(middleware::from_fn(require_master));
    Router::new()
        .route(HEALTH_PATH, get(health))
        .merge(master_only)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(updater)
}

/// DECNET's refusal body: what failed, the probes' lines, whether the previous release is back.
fn failure(status: StatusCode, error: &str, stderr: &str, rolled_back: bool) -> Response {
    detail(status, json!({ "error": error, "stderr": stderr, "rolled_back": rolled_back }))
}

async fn health(State(updater): State<Updater>) -> Json<Value> {
    let agent_status = match updater.inner.agent.probe_once().await {
        Ok(()) => "ok",
        Err(_) => "unreachable",
    };
    Json(json!({
        "status": "ok",
        "role": "updater",
        "agent_status": agent_status,
        "releases": updater.inner.slots.views(),
        "updater_releases": updater.inner.own.views(),
        // The release this updater process runs (null before its first self-update).
        "updater_running": super::releases::running_release().map(|info| info.sha),
    }))
}

async fn releases(State(updater): State<Updater>) -> Json<Value> {
    Json(json!({ "releases": updater.inner.slots.views() }))
}

/// A parsed upload.
#[derive(Default)]
struct Upload {
    tarball: Option<axum::body::Bytes>,
    sha: String,
    sha256: String,
    confirm_self: bool,
}

async fn read_upload(mut multipart: Multipart) -> Result<Upload, Response> {
    let bad = |err: axum::extract::multipart::MultipartError| {
        tracing::info!(error = %err, "Malformed update upload");
        detail(err.status(), "invalid request body")
    };
    let mut upload = Upload::default();
    while let Some(field) = multipart.next_field().await.map_err(bad)? {
        match field.name().unwrap_or_default() {
            "tarball" => upload.tarball = Some(field.bytes().await.map_err(bad)?),
            "sha" => upload.sha = field.text().await.map_err(bad)?.trim().to_string(),
            "sha256" => upload.sha256 = field.text().await.map_err(bad)?.trim().to_ascii_lowercase(),
            "confirm_self" => {
                upload.confirm_self = field.text().await.map_err(bad)?.trim().eq_ignore_ascii_case("true")
            }
            _ => {}
        }
    }
    if upload.sha256.is_empty() {
        return Err(detail(StatusCode::BAD_REQUEST, DIGEST_REQUIRED));
    }
    if upload.sha.chars().count() > MAX_SHA_CHARS || upload.sha.chars().any(char::is_control) {
        return Err(detail(StatusCode::UNPROCESSABLE_ENTITY, "sha must be at most 128 printable characters"));
    }
    Ok(upload)
}

/// Checks the digest, then unpacks into a staging directory of `slots` and installs it. Nothing is
/// written before the digest matched. With `must_start` (the updater's own release, which has no
/// rollback once re-executed) the staged binary must first answer `--version`, or nothing is
/// installed.
// The refusal is the answer itself, built once and returned at once: boxing it buys nothing.
#[allow(clippy::result_large_err)]
async fn verify_and_install(
    updater: &Updater,
    slots: &Slots,
    upload: Upload,
    must_start: bool,
) -> Result<super::releases::ReleaseInfo, Response> {
    let Some(tarball) = upload.tarball else {
        return Err(detail(StatusCode::UNPROCESSABLE_ENTITY, "tarball is required"));
    };
    let well_formed = upload.sha256.len() == 64 && upload.sha256.bytes().all(|b| b.is_ascii_hexdigit());
    if !well_formed || sha256_hex(&tarball) != upload.sha256 {
        tracing::warn!(bytes = tarball.len(), "Release refused: its sha256 does not match the tarball");
        return Err(failure(StatusCode::BAD_REQUEST, "sha256 mismatch: refused before extraction", "", false));
    }
    let sha = if upload.sha.is_empty() { upload.sha256[..12].to_string() } else { upload.sha };
    let (slots, max_bytes) = (slots.clone(), updater.inner.max_bytes);
    let installed = tokio::task::spawn_blocking(move || -> Result<_, Response> {
        let io = |err: std::io::Error| {
            tracing::error!(error = %err, "Cannot stage the release");
            failure(StatusCode::INTERNAL_SERVER_ERROR, "cannot write the release", "", false)
        };
        let staging = slots.stage().map_err(io)?;
        super::extract::extract(&tarball, &staging.dir, max_bytes)
            .map_err(|refused| failure(StatusCode::BAD_REQUEST, &refused.to_string(), "", false))?;
        let binary = staging.dir.join(BINARY);
        if !std::fs::symlink_metadata(&binary).is_ok_and(|meta| meta.is_file()) {
            return Err(failure(StatusCode::BAD_REQUEST, "tarball holds no svc binary", "", false));
        }
        std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(io)?;
        if must_start && let Err(reason) = super::releases::answers_version(&binary) {
            tracing::warn!(%reason, "Updater release refused: its binary does not start");
            return Err(failure(StatusCode::INTERNAL_SERVER_ERROR, "the new release does not start", &reason, false));
        }
        slots.install(staging, &sha).map_err(io)
    })
    .await;
    installed.unwrap_or_else(|err| {
        tracing::error!(error = %err, "Release staging task failed");
        Err(failure(StatusCode::INTERNAL_SERVER_ERROR, "cannot write the release", "", false))
    })
}

/// Runs `work` to its end even if the master hangs up meanwhile: an update or a rollback stopped
/// half-way would leave the agent stopped.
async fn detached(work: impl std::future::Future<Output = Response> + Send + 'static) -> Response {
    tokio::spawn(work).await.unwrap_or_else(|err| {
        tracing::error!(error = %err, "Update task failed");
        failure(StatusCode::INTERNAL_SERVER_ERROR, "update failed", "", false)
    })
}

async fn update(State(updater): State<Updater>, multipart: Multipart) -> Response {
    let upload = match read_upload(multipart).await {
        Ok(upload) => upload,
        Err(refusal) => return refusal,
    };
    detached(apply_update(updater, upload)).await
}

/// Verify, install, restart, probe; roll back and probe again when the agent is unhealthy.
async fn apply_update(updater: Updater, upload: Upload) -> Response {
    let _busy = updater.inner.busy.lock().await;
    let info = match verify_and_install(&updater, &updater.inner.slots, upload, false).await {
        Ok(info) => info,
        Err(refusal) => return refusal,
    };
    tracing::info!(sha = %info.sha, "Release installed; restarting the agent on it");
    let agent = &updater.inner.agent;
    let forward_error = match agent.restart_and_probe().await {
        Ok(probe) => {
            tracing::info!(sha = %info.sha, "The agent is healthy on the new release");
            return Json(json!({ "status": "updated", "release": active(&info), "probe": probe })).into_response();
        }
        Err(err) => err,
    };
    tracing::warn!(sha = %info.sha, reason = %forward_error, "The agent is unhealthy on the new release; rolling back");
    let stderr = |back: &str| format!("forward-probe: {forward_error}\nrollback-probe: {back}");
    if let Err(err) = updater.inner.slots.rollback() {
        tracing::error!(error = %err, "Rollback failed");
        return failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the new release is unhealthy and rollback failed",
            &stderr("not attempted"),
            false,
        );
    }
    match agent.restart_and_probe().await {
        Ok(_) => {
            tracing::info!("The agent is healthy again on the previous release");
            failure(StatusCode::CONFLICT, "the new release was unhealthy; rolled back", &stderr("ok"), true)
        }
        Err(err) => {
            tracing::error!(reason = %err, "The agent is unhealthy on the previous release too");
            failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the agent is unhealthy on both releases",
                &stderr(&err.to_string()),
                true,
            )
        }
    }
}

fn active(info: &super::releases::ReleaseInfo) -> Value {
    json!({ "slot": "active", "sha": info.sha, "installed_at": info.installed_at })
}

async fn update_self(State(updater): State<Updater>, multipart: Multipart) -> Response {
    let upload = match read_upload(multipart).await {
        Ok(upload) => upload,
        Err(refusal) => return refusal,
    };
    if !upload.confirm_self {
        return detail(StatusCode::BAD_REQUEST, CONFIRM_SELF_REQUIRED);
    }
    let busy = updater.inner.busy.lock().await;
    let info = match verify_and_install(&updater, &updater.inner.own, upload, true).await {
        Ok(info) => info,
        Err(refusal) => return refusal,
    };
    tracing::warn!(sha = %info.sha, "Updater release installed; re-executing it");
    drop(busy);
    let next = updater.clone();
    tokio::spawn(async move {
        // The answer goes out first.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        next.inner.agent.stop().await;
        let (binary, args) = next.reexec_target();
        let err = std::os::unix::process::CommandExt::exec(std::process::Command::new(&binary).args(args));
        tracing::error!(error = %err, binary = %binary.display(), "Cannot re-execute the new updater; stopping");
        next.inner.shutdown.cancel();
    });
    Json(json!({ "status": "self_update_queued", "via": "re-exec", "release": active(&info) })).into_response()
}

async fn rollback(State(updater): State<Updater>) -> Response {
    detached(apply_rollback(updater)).await
}

async fn apply_rollback(updater: Updater) -> Response {
    let _busy = updater.inner.busy.lock().await;
    match updater.inner.slots.rollback() {
        Ok(()) => {}
        Err(RollbackError::NoPrevious) => return detail(StatusCode::NOT_FOUND, RollbackError::NoPrevious.to_string()),
        Err(err) => {
            tracing::error!(error = %err, "Rollback failed");
            return failure(StatusCode::INTERNAL_SERVER_ERROR, "rollback failed", "", false);
        }
    }
    tracing::warn!("Rolled back to the previous release by the master; restarting the agent");
    let probe = updater.inner.agent.restart_and_probe().await;
    let release = updater.inner.slots.views().into_iter().next();
    match probe {
        Ok(probe) => Json(json!({ "status": "rolled_back", "release": release, "probe": probe })).into_response(),
        Err(err) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the agent is unhealthy after the rollback",
            &format!("rollback-probe: {err}"),
            true,
        ),
    }
}
