//! The agent's API, DECNET's routes (reference §1.8): `GET /health` and `GET /status` for any
//! certificate the swarm CA signed; `POST /deploy`, `/mutate`, `/teardown`, `/self-destruct` and
//! the topology routes (`topology`) for the master's certificate alone (CN `svc-master`): any other peer gets 403, logged. Fleet
//! refusals keep their operator texts; engine and store errors stay in the log.

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::Agent;
use crate::fleet::FleetError;
use crate::fleet::ini::Ini;
use crate::fleet::plan::is_decky_section;
use crate::swarm::pki::MASTER_CN;
use crate::swarm::refusal::{Refusal, detail};
use crate::swarm::serve::Peer;
use crate::swarm::wire::{
    AgentStatus, DEPLOY_PATH, DeployAccepted, DeployRequest, HEALTH_PATH, MAX_BODY_BYTES, MUTATE_PATH, MutateRequest,
    SELF_DESTRUCT_PATH, STATUS_PATH, TEARDOWN_PATH, TOPOLOGY_APPLY_PATH, TOPOLOGY_TEARDOWN_PATH, TeardownRequest,
};

pub fn router(agent: Agent) -> Router {
    let master_only = Router::new()
        .route(DEPLOY_PATH, post(deploy))
        .route(MUTATE_PATH, post(mutate))
        .route(TEARDOWN_PATH, post(teardown))
        .route(SELF_DESTRUCT_PATH, post(self_destruct))
        .route(TOPOLOGY_APPLY_PATH, post(super::topology::apply))
        .route(TOPOLOGY_TEARDOWN_PATH, post(super::topology::teardown))
        .route_layer(middleware::from_fn(require_master));
    let routes = Router::new()
        .route(HEALTH_PATH, get(health))
        .route(STATUS_PATH, get(status))
        .merge(master_only)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
    // With traces exported, a server span per call continuing the caller's (the master's) trace.
    let routes = if crate::traces::enabled() {
        routes.layer(tower_http::trace::TraceLayer::new_for_http().make_span_with(crate::traces::server_span))
    } else {
        routes
    };
    routes.with_state(agent)
}

/// Only the master may change this host; any other certificate of the swarm (another agent, an
/// updater) is refused and logged.
pub(crate) async fn require_master(Extension(peer): Extension<Peer>, request: Request, next: Next) -> Response {
    if peer.common_name.as_deref() == Some(MASTER_CN) {
        return next.run(request).await;
    }
    tracing::warn!(
        peer = %peer.addr,
        cn = peer.common_name.as_deref().unwrap_or("<none>"),
        path = %request.uri().path(),
        "Refused a master-only agent route to a certificate that is not the master's"
    );
    detail(StatusCode::FORBIDDEN, "master certificate required")
}

/// The body as the JSON a route takes, or [`Refusal::bad_body`].
pub(super) fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, Refusal> {
    serde_json::from_slice(bytes).map_err(|err| {
        tracing::info!(error = %err, "Malformed agent request body");
        Refusal::bad_body()
    })
}

/// `{"status": "ok"}`, with the release this agent runs (`release`: its provenance) when it was
/// installed as one by the updater.
async fn health() -> Json<serde_json::Value> {
    static RELEASE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    match RELEASE.get_or_init(|| crate::swarm::updater::releases::running_release().map(|info| info.sha)) {
        Some(release) => Json(json!({ "status": "ok", "release": release })),
        None => Json(json!({ "status": "ok" })),
    }
}

async fn status(State(agent): State<Agent>) -> Result<Json<AgentStatus>, Refusal> {
    Ok(Json(agent.status().await?))
}

async fn deploy(State(agent): State<Agent>, bytes: Bytes) -> Result<Response, Refusal> {
    let request: DeployRequest = body(&bytes)?;
    let ini =
        Ini::parse(&request.config).map_err(|err| Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, err.to_string()))?;
    let deckies: Vec<String> =
        ini.sections().map(|(name, _)| name).filter(|n| is_decky_section(n)).map(String::from).collect();
    if deckies.is_empty() {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "INI must contain at least one section naming a decky",
        ));
    }
    if request.dry_run {
        return Ok(Json(DeployAccepted { status: "dry_run".into(), deckies }).into_response());
    }
    // A host whose deckies have a network of their own puts them there (as DECNET re-localises).
    let config = match agent.settings.decky_net {
        Some(subnet) => crate::swarm::dispatch::localised(&ini, subnet),
        None => request.config,
    };
    let accepted = agent.fleet.deploy(&config, false).await?;
    tracing::info!(deckies = deckies.len(), "Deploy accepted from the master");
    agent.follow(accepted.lifecycle_ids, "deploy");
    Ok((StatusCode::ACCEPTED, Json(DeployAccepted { status: "accepted".into(), deckies })).into_response())
}

async fn mutate(State(agent): State<Agent>, bytes: Bytes) -> Result<Response, Refusal> {
    let request: MutateRequest = body(&bytes)?;
    let answer = |status: &str| json!({ "status": status, "decky_id": request.decky_id, "services": request.services });
    if request.dry_run {
        let stored = agent.db.fleet().await.map_err(FleetError::from)?;
        if stored.deckies.is_empty() {
            return Err(Refusal::new(StatusCode::NOT_FOUND, "no active deployment on this worker"));
        }
        if !stored.deckies.iter().any(|d| d.config.name == request.decky_id) {
            let text = format!("decky '{}' not found in worker state", request.decky_id);
            return Err(Refusal::new(StatusCode::NOT_FOUND, text));
        }
        return Ok(Json(answer("dry_run")).into_response());
    }
    let id = agent.fleet.mutate(&request.decky_id, "master", agent.ingest.clone()).await?;
    agent.follow(vec![id], "mutate");
    Ok((StatusCode::ACCEPTED, Json(answer("accepted"))).into_response())
}

async fn teardown(State(agent): State<Agent>, bytes: Bytes) -> Result<Json<serde_json::Value>, Refusal> {
    let request: TeardownRequest = if bytes.is_empty() { TeardownRequest::default() } else { body(&bytes)? };
    match &request.decky_id {
        Some(name) => agent.fleet.teardown(name).await?,
        None => agent.teardown_all().await?,
    }
    Ok(Json(json!({ "status": "torn_down", "decky_id": request.decky_id })))
}

async fn self_destruct(State(agent): State<Agent>) -> Response {
    tracing::warn!("Self-destruct requested by the master");
    agent.self_destruct();
    Json(json!({ "status": "self_destruct_scheduled" })).into_response()
}
