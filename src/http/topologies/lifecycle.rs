//! A topology as a whole: list, generate (seeded), blank, read with its LANs, deckies and edges,
//! delete, its status events, and deploy and teardown (202, the work in the background; refused
//! while the container engine does not answer). A topology targeted at a swarm host (`mode`
//! `agent`) is deployed and torn down by that host's agent (`swarm::topology`).

use super::{name_error, range_error, topology_error};
use crate::db::{DbError, Edge, Lan, StatusEvent, Topology, TopologyDecky, TopologyStatus};
use crate::fleet::catalog;
use crate::http::error::OrNotFound;
use crate::http::extract::{FieldError, ValidJson, ValidPath, ValidQuery, Validate, integral, integral_or_null};
use crate::http::guard::{Admin, Viewer};
use crate::http::paging::{Listed, Page, Paging};
use crate::http::responses::{AdminOnly, NotAUuid, NotJson, TopologyNotFound, ViewerOnly};
use crate::http::{ApiError, AppState, Result};
use crate::swarm::topology::{self as swarm, usable_target};
use crate::topology::generate::Params;
use crate::topology::{NOT_FOUND, NewTopology};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

/// Where a topology runs: `unihost` (this host's engine) or `agent` (the swarm host
/// `target_host_uuid` names, which applies it whole).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Unihost,
    Agent,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Unihost => "unihost",
            Mode::Agent => "agent",
        }
    }
}

fn default_mode() -> Mode {
    Mode::Unihost
}

/// The target host a topology is stored with: `agent` needs a known, usable swarm host (its uuid,
/// as stored), `unihost` none.
async fn check_mode(state: &AppState, mode: Mode, target: &Option<String>) -> Result<Option<String>> {
    match (mode, target) {
        (Mode::Agent, None) => Err(ApiError::bad_request("mode='agent' requires target_host_uuid")),
        (Mode::Unihost, Some(_)) => Err(ApiError::bad_request("target_host_uuid is only valid when mode='agent'")),
        (Mode::Agent, Some(host)) => {
            let host = usable_target(&state.db, host).await.map_err(topology_error)?;
            Ok(Some(host.uuid.to_string()))
        }
        (Mode::Unihost, None) => Ok(None),
    }
}

/// The swarm host a topology is targeted at: `None` for one that runs here.
async fn target_of(state: &AppState, id: Uuid) -> Result<Option<String>> {
    Ok(state.topologies.detail(id).await.map_err(topology_error)?.topology.target_host_uuid)
}

fn one() -> u32 {
    1
}
fn three() -> u32 {
    3
}
fn certain() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

/// The generator's parameters (DECNET's `TopologyGenerateRequest`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerateRequest {
    /// Unique among topologies, exactly as written (see the README).
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    #[serde(default = "default_mode")]
    mode: Mode,
    /// With `mode` `agent`: the swarm host (uuid) that runs it; it must be `active`.
    #[serde(default)]
    #[schema(format = Uuid)]
    target_host_uuid: Option<String>,
    /// Levels of LANs below the DMZ root.
    #[schema(minimum = 1, maximum = 16)]
    #[serde(deserialize_with = "integral")]
    depth: u32,
    /// At most this many child LANs per LAN.
    #[schema(minimum = 1, maximum = 8)]
    #[serde(deserialize_with = "integral")]
    branching_factor: u32,
    /// Deckies per LAN, at least (no more than `deckies_per_lan_max`).
    #[serde(default = "one", deserialize_with = "integral")]
    #[schema(minimum = 0, maximum = 32, default = 1)]
    deckies_per_lan_min: u32,
    #[serde(default = "three", deserialize_with = "integral")]
    #[schema(minimum = 1, maximum = 32, default = 3)]
    deckies_per_lan_max: u32,
    /// How likely a bridging decky routes between its LANs.
    #[serde(default = "certain")]
    #[schema(minimum = 0, maximum = 1, default = 1.0)]
    bridge_forward_probability: f64,
    /// How likely a LAN gets an extra decky bridging it to another.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1, default = 0.0)]
    cross_edge_probability: f64,
    /// The services deckies pick from (names from `GET /topologies/services`); default all.
    #[serde(default)]
    #[schema(schema_with = catalog::services_or_null_schema)]
    services_explicit: Option<Vec<String>>,
    #[serde(default = "yes")]
    #[schema(default = true)]
    randomize_services: bool,
    /// The same seed and parameters give the same topology; default a random one.
    #[serde(default, deserialize_with = "integral_or_null")]
    #[schema(minimum = 0, maximum = 9223372036854775807_i64)]
    seed: Option<u64>,
}

impl Validate for GenerateRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        name_error(errors, "name", &self.name);
        range_error(errors, "depth", self.depth.into(), 1.0, 16.0);
        range_error(errors, "branching_factor", self.branching_factor.into(), 1.0, 8.0);
        range_error(errors, "deckies_per_lan_min", self.deckies_per_lan_min.into(), 0.0, 32.0);
        range_error(errors, "deckies_per_lan_max", self.deckies_per_lan_max.into(), 1.0, 32.0);
        range_error(errors, "bridge_forward_probability", self.bridge_forward_probability, 0.0, 1.0);
        range_error(errors, "cross_edge_probability", self.cross_edge_probability, 0.0, 1.0);
        if self.seed.is_some_and(|seed| i64::try_from(seed).is_err()) {
            let message = format!("Input should be less than or equal to {}", i64::MAX);
            errors.push(FieldError::new("less_than_equal", &["body", "seed"], message));
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BlankRequest {
    /// Unique among topologies, exactly as written (see the README).
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    #[serde(default = "default_mode")]
    mode: Mode,
    /// With `mode` `agent`: the swarm host (uuid) that runs it; it must be `active`.
    #[serde(default)]
    #[schema(format = Uuid)]
    target_host_uuid: Option<String>,
}

impl Validate for BlankRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        name_error(errors, "name", &self.name);
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only topologies in this status (one that does not exist lists nothing).
    status: Option<String>,
    #[param(minimum = 1, maximum = 500, default = 50)]
    limit: Option<i64>,
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    offset: Option<i64>,
}

impl Validate for ListQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_PAGE, errors);
    }
}

/// The most topologies a page holds.
const MAX_PAGE: i64 = 500;

impl Listed for Topology {
    const PAGE: &'static str = "TopologyPage";
    const COUNTED: &'static str = "Topologies in the status asked for (all of them without one), on every page.";
}

pub type TopologyPage = Page<Topology>;

/// A page of topologies, newest first.
#[utoipa::path(
    get, path = "/topologies/", tag = "topologies", security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "The page", body = TopologyPage),
        (status = 422, description = "limit or offset out of range"),
        ViewerOnly,
    )
)]
pub async fn list(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<ListQuery>,
) -> Result<Json<TopologyPage>> {
    let paging = Paging::of(query.limit, query.offset);
    let status = match crate::http::extract::given(&query.status) {
        None => None,
        Some(text) => match text.parse::<TopologyStatus>() {
            Ok(status) => Some(status),
            // No topology has a status that does not exist.
            Err(_) => return Ok(Json(paging.page_of(0, Vec::new()))),
        },
    };
    let page = state.db.topologies(status, paging.limit, paging.offset).await?;
    Ok(Json(paging.page(page)))
}

/// Generates a topology under a seed; stored `pending` (deploy it with `/deploy`).
#[utoipa::path(
    post, path = "/topologies/", tag = "topologies", security(("bearer" = [])),
    request_body = GenerateRequest,
    responses(
        (status = 201, description = "The topology, pending", body = Topology),
        (status = 400, description = "Malformed body or empty name; deckies_per_lan_min above deckies_per_lan_max; an unknown service; mode 'agent' without an active swarm host as target_host_uuid, or a target_host_uuid without it"),
        (status = 409, description = "Topology name already exists, the subnet pool is exhausted, or the tree would have over 256 LANs"),
        (status = 422, description = "A parameter out of range, or a name over 64 characters"),
        AdminOnly, NotJson,
    )
)]
pub async fn create(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<GenerateRequest>,
) -> Result<(StatusCode, Json<Topology>)> {
    let target_host_uuid = check_mode(&state, request.mode, &request.target_host_uuid).await?;
    if request.deckies_per_lan_min > request.deckies_per_lan_max {
        return Err(ApiError::bad_request("deckies_per_lan_min must not exceed deckies_per_lan_max"));
    }
    if let Some(services) = &request.services_explicit
        && let Some(unknown) = services.iter().find(|s| !catalog::is_service(s))
    {
        return Err(ApiError::bad_request(format!("unknown service '{unknown}'")));
    }
    let params = Params {
        depth: request.depth,
        branching_factor: request.branching_factor,
        deckies_per_lan_min: request.deckies_per_lan_min,
        deckies_per_lan_max: request.deckies_per_lan_max,
        bridge_forward_probability: request.bridge_forward_probability,
        cross_edge_probability: request.cross_edge_probability,
        services_explicit: request.services_explicit,
        randomize_services: request.randomize_services,
        seed: request.seed.unwrap_or_else(|| u64::from(rand_seed())),
    };
    let new = NewTopology { name: request.name, mode: request.mode.as_str().into(), target_host_uuid };
    let topology = state.topologies.generate(new, params).await.map_err(topology_error)?;
    Ok((StatusCode::CREATED, Json(topology)))
}

/// A seed for a request that gave none (recorded in the topology's snapshot).
fn rand_seed() -> u32 {
    Uuid::new_v4().as_u128() as u32
}

/// Stores a topology with no LANs, `pending`, to be built with the child edits.
#[utoipa::path(
    post, path = "/topologies/blank", tag = "topologies", security(("bearer" = [])),
    request_body = BlankRequest,
    responses(
        (status = 201, description = "The topology, pending", body = Topology),
        (status = 400, description = "Malformed body or empty name; mode 'agent' without an active swarm host as target_host_uuid, or a target_host_uuid without it"),
        (status = 409, description = "Topology name already exists"),
        (status = 422, description = "A name over 64 characters"),
        AdminOnly, NotJson,
    )
)]
pub async fn blank(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<BlankRequest>,
) -> Result<(StatusCode, Json<Topology>)> {
    let target_host_uuid = check_mode(&state, request.mode, &request.target_host_uuid).await?;
    let new = NewTopology { name: request.name, mode: request.mode.as_str().into(), target_host_uuid };
    let topology = state.topologies.blank(new).await.map_err(topology_error)?;
    Ok((StatusCode::CREATED, Json(topology)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DetailResponse {
    topology: Topology,
    lans: Vec<Lan>,
    deckies: Vec<TopologyDecky>,
    edges: Vec<Edge>,
}

/// A topology with its LANs, deckies and edges.
#[utoipa::path(
    get, path = "/topologies/{id}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 200, description = "The topology and its parts", body = DetailResponse),
        ViewerOnly, NotAUuid, TopologyNotFound,
    )
)]
pub async fn detail(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<Json<DetailResponse>> {
    let detail = state.topologies.detail(id).await.map_err(topology_error)?;
    Ok(Json(DetailResponse {
        topology: detail.topology,
        lans: detail.lans,
        deckies: detail.deckies,
        edges: detail.edges,
    }))
}

/// Deletes a topology that is `pending`, `torn_down` or `failed`, with everything of it.
#[utoipa::path(
    delete, path = "/topologies/{id}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 409, description = "Not pending, torn_down or failed: tear it down first"),
        AdminOnly, NotAUuid, TopologyNotFound,
    )
)]
pub async fn remove(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<StatusCode> {
    state.topologies.delete(id).await.map_err(topology_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<i64>,
}

impl Validate for EventsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        crate::http::extract::check_range("limit", self.limit.unwrap_or(100), 1, 1000, errors);
    }
}

/// The topology's status changes, newest first.
#[utoipa::path(
    get, path = "/topologies/{id}/status-events", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), EventsQuery),
    responses(
        (status = 200, description = "The newest status events", body = [StatusEvent]),
        (status = 422, description = "Not a uuid, or limit out of range"),
        ViewerOnly, TopologyNotFound,
    )
)]
pub async fn status_events(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<EventsQuery>,
) -> Result<Json<Vec<StatusEvent>>> {
    let events = state.db.status_events(id, query.limit.unwrap_or(100) as u32).await.or_not_found(NOT_FOUND)?;
    Ok(Json(events))
}

/// Deploys a `pending` topology in the background: `deploying` now, then `active`, `degraded`
/// or `failed` with the reason (see `/status-events`). Refused (409) while the container engine
/// does not answer, so the topology stays `pending`.
#[utoipa::path(
    post, path = "/topologies/{id}/deploy", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 202, description = "Accepted; the topology, deploying", body = Topology),
        (status = 409, description = "Not pending; or `Container runtime unavailable`: the engine does not answer (nothing changed)"),
        AdminOnly, NotAUuid, TopologyNotFound,
    )
)]
pub async fn deploy(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<(StatusCode, Json<Topology>)> {
    if let Some(target) = target_of(&state, id).await? {
        let host = usable_target(&state.db, &target).await.map_err(topology_error)?;
        let topology = swarm::start_deploy(&state.topologies, &state.swarm, host, id).await;
        return Ok((StatusCode::ACCEPTED, Json(topology.map_err(topology_error)?)));
    }
    state.topologies.engine_ready(id, &[TopologyStatus::Pending]).await.map_err(topology_error)?;
    let topology = state.topologies.start_deploy(id).await.map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(topology)))
}

/// Tears a topology down in the background: `tearing_down` now, then `torn_down`, or `degraded`
/// with the reason when something stayed. Refused (409) while the container engine does not answer.
#[utoipa::path(
    post, path = "/topologies/{id}/teardown", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 202, description = "Accepted; the topology, tearing down", body = Topology),
        (status = 409, description = "Not active, degraded, failed or deploying; or `Container runtime unavailable`: the engine does not answer (nothing changed)"),
        AdminOnly, NotAUuid, TopologyNotFound,
    )
)]
pub async fn teardown(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<(StatusCode, Json<Topology>)> {
    if let Some(target) = target_of(&state, id).await? {
        let host = match target.parse() {
            Ok(uuid) => state.db.swarm_host(uuid).await.map(Some).or_else(|err| match err {
                DbError::NotFound => Ok(None),
                other => Err(other),
            })?,
            Err(_) => None,
        };
        let topology = swarm::start_teardown(&state.topologies, &state.swarm, host, id).await;
        return Ok((StatusCode::ACCEPTED, Json(topology.map_err(topology_error)?)));
    }
    state.topologies.engine_ready(id, &crate::topology::TEARDOWNABLE).await.map_err(topology_error)?;
    let topology = state.topologies.start_teardown(id).await.map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(topology)))
}
