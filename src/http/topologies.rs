//! The topology routes as DECNET's dashboard uses them: list, generate (seeded), blank, read with
//! LANs/deckies/edges, status events, deploy and teardown (202, in the background), delete, the
//! pending-only child edits of LANs, deckies and edges (`expected_version` locking), the catalog
//! (`services`, `archetypes`, `next-subnet`, `next-ip`) and the mutation queue. Path ids are UUIDs
//! (anything else is 422); 404 and 409 texts are DECNET's. The event stream is in `stream`.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{FieldError, ValidJson, ValidPath, ValidQuery, Validate};
use super::guard::{Admin, Viewer};
use super::{ApiError, AppState, Result};
use crate::db::{
    Edge, Lan, Mutation, MutationState, StatusEvent, Topology, TopologyDecky, TopologyEdit, TopologyStatus,
};
use crate::fleet::catalog;
use crate::topology::generate::{Params, next_ip};
use crate::topology::{NewTopology, TopologyError, ops};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/topologies", get(list).post(create))
        .route("/topologies/", get(list).post(create))
        .route("/topologies/blank", post(blank))
        .route("/topologies/services", get(services))
        .route("/topologies/archetypes", get(archetypes))
        .route("/topologies/next-subnet", get(next_subnet))
        .route("/topologies/{id}", get(detail).delete(remove))
        .route("/topologies/{id}/status-events", get(status_events))
        .route("/topologies/{id}/deploy", post(deploy))
        .route("/topologies/{id}/teardown", post(teardown))
        .route("/topologies/{id}/mutations", get(mutations).post(enqueue))
        .route("/topologies/{id}/lans", post(add_lan))
        .route("/topologies/{id}/lans/{lan}", patch(update_lan).delete(remove_lan))
        .route("/topologies/{id}/lans/{lan}/next-ip", get(lan_next_ip))
        .route("/topologies/{id}/deckies", post(add_decky))
        .route("/topologies/{id}/deckies/{decky}", patch(update_decky).delete(remove_decky))
        .route("/topologies/{id}/edges", post(add_edge))
        .route("/topologies/{id}/edges/{edge}", axum::routing::delete(remove_edge))
}

fn topology_error(err: TopologyError) -> ApiError {
    match err {
        TopologyError::NotFound(text) => ApiError::not_found(text),
        TopologyError::Conflict(text) => ApiError::conflict(text),
        TopologyError::BadRequest(text) => ApiError::bad_request(text),
        TopologyError::Store(err) => err.into(),
    }
}

fn range_error(errors: &mut Vec<FieldError>, field: &str, value: f64, min: f64, max: f64) {
    if value < min {
        errors.push(FieldError::new(
            "greater_than_equal",
            &["body", field],
            format!("Input should be greater than or equal to {min}"),
        ));
    } else if value > max {
        errors.push(FieldError::new(
            "less_than_equal",
            &["body", field],
            format!("Input should be less than or equal to {max}"),
        ));
    }
}

fn name_error(errors: &mut Vec<FieldError>, field: &str, value: &str) {
    if value.is_empty() {
        errors.push(FieldError::new("string_too_short", &["body", field], "String should have at least 1 character"));
    } else if value.chars().count() > 64 {
        errors.push(FieldError::new("string_too_long", &["body", field], "String should have at most 64 characters"));
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Mode {
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

/// This build runs every topology on its own engine: there are no swarm hosts to pin one to.
fn check_mode(mode: Mode, target: &Option<String>) -> Result<()> {
    match (mode, target) {
        (Mode::Agent, None) => Err(ApiError::bad_request("mode='agent' requires target_host_uuid")),
        (Mode::Unihost, Some(_)) => Err(ApiError::bad_request("target_host_uuid is only valid when mode='agent'")),
        (Mode::Agent, Some(host)) => Err(ApiError::bad_request(format!("swarm host {host:?} not found"))),
        (Mode::Unihost, None) => Ok(()),
    }
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerateRequest {
    name: String,
    #[serde(default = "default_mode")]
    mode: Mode,
    #[serde(default)]
    target_host_uuid: Option<String>,
    depth: u32,
    branching_factor: u32,
    #[serde(default = "one")]
    deckies_per_lan_min: u32,
    #[serde(default = "three")]
    deckies_per_lan_max: u32,
    #[serde(default = "certain")]
    bridge_forward_probability: f64,
    #[serde(default)]
    cross_edge_probability: f64,
    #[serde(default)]
    services_explicit: Option<Vec<String>>,
    #[serde(default = "yes")]
    randomize_services: bool,
    #[serde(default)]
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
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlankRequest {
    name: String,
    #[serde(default = "default_mode")]
    mode: Mode,
    #[serde(default)]
    target_host_uuid: Option<String>,
}

impl Validate for BlankRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        name_error(errors, "name", &self.name);
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

impl Validate for ListQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        super::extract::check_range("limit", self.limit.unwrap_or(50), 1, 500, errors);
        super::extract::check_range("offset", self.offset.unwrap_or(0), 0, i64::from(i32::MAX), errors);
    }
}

#[derive(Debug, Serialize)]
struct TopologyPage {
    total: u64,
    limit: i64,
    offset: i64,
    data: Vec<Topology>,
}

async fn list(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<ListQuery>,
) -> Result<Json<TopologyPage>> {
    let (limit, offset) = (query.limit.unwrap_or(50), query.offset.unwrap_or(0));
    let status = match super::extract::given(&query.status) {
        None => None,
        Some(text) => match text.parse::<TopologyStatus>() {
            Ok(status) => Some(status),
            // No topology has a status that does not exist.
            Err(_) => return Ok(Json(TopologyPage { total: 0, limit, offset, data: Vec::new() })),
        },
    };
    let page = state.db.topologies(status, limit as u32, offset as u64).await?;
    Ok(Json(TopologyPage { total: page.total, limit, offset, data: page.rows }))
}

async fn create(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<GenerateRequest>,
) -> Result<(StatusCode, Json<Topology>)> {
    check_mode(request.mode, &request.target_host_uuid)?;
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
    let new = NewTopology { name: request.name, mode: request.mode.as_str().into(), target_host_uuid: None };
    let topology = state.topologies.generate(new, params).await.map_err(topology_error)?;
    Ok((StatusCode::CREATED, Json(topology)))
}

/// A seed for a request that gave none (recorded in the topology's snapshot).
fn rand_seed() -> u32 {
    Uuid::new_v4().as_u128() as u32
}

async fn blank(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<BlankRequest>,
) -> Result<(StatusCode, Json<Topology>)> {
    check_mode(request.mode, &request.target_host_uuid)?;
    let new = NewTopology { name: request.name, mode: request.mode.as_str().into(), target_host_uuid: None };
    let topology = state.topologies.blank(new).await.map_err(topology_error)?;
    Ok((StatusCode::CREATED, Json(topology)))
}

#[derive(Debug, Serialize)]
struct DetailResponse {
    topology: Topology,
    lans: Vec<Lan>,
    deckies: Vec<TopologyDecky>,
    edges: Vec<Edge>,
}

async fn detail(
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

async fn remove(State(state): State<AppState>, _admin: Admin, ValidPath(id): ValidPath<Uuid>) -> Result<StatusCode> {
    state.topologies.delete(id).await.map_err(topology_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    limit: Option<i64>,
}

impl Validate for EventsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        super::extract::check_range("limit", self.limit.unwrap_or(100), 1, 1000, errors);
    }
}

async fn status_events(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<EventsQuery>,
) -> Result<Json<Vec<StatusEvent>>> {
    let events = state.db.status_events(id, query.limit.unwrap_or(100) as u32).await.map_err(not_found)?;
    Ok(Json(events))
}

fn not_found(err: crate::db::DbError) -> ApiError {
    match err {
        crate::db::DbError::NotFound => ApiError::not_found(crate::topology::NOT_FOUND),
        other => other.into(),
    }
}

async fn deploy(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<(StatusCode, Json<Topology>)> {
    let topology = state.topologies.start_deploy(id).await.map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(topology)))
}

async fn teardown(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<(StatusCode, Json<Topology>)> {
    let topology = state.topologies.start_teardown(id).await.map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(topology)))
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Op {
    AddLan,
    RemoveLan,
    AddDecky,
    AttachDecky,
    DetachDecky,
    RemoveDecky,
    UpdateDecky,
    UpdateLan,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::AddLan => "add_lan",
            Op::RemoveLan => "remove_lan",
            Op::AddDecky => "add_decky",
            Op::AttachDecky => "attach_decky",
            Op::DetachDecky => "detach_decky",
            Op::RemoveDecky => "remove_decky",
            Op::UpdateDecky => "update_decky",
            Op::UpdateLan => "update_lan",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnqueueRequest {
    op: Op,
    #[serde(default)]
    payload: serde_json::Map<String, Value>,
    #[serde(default)]
    expected_version: Option<i64>,
}

impl Validate for EnqueueRequest {}

#[derive(Debug, Serialize)]
struct EnqueueResponse {
    mutation_id: Uuid,
    state: &'static str,
}

async fn enqueue(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<EnqueueRequest>,
) -> Result<(StatusCode, Json<EnqueueResponse>)> {
    let payload = Value::Object(request.payload);
    let topologies = &state.topologies;
    // Only the payload's shape here: whether it applies is decided against the topology the
    // mutator applies it to, so a queued op may name what an earlier queued op makes.
    ops::check_payload(request.op.as_str(), &payload).map_err(|e| ApiError::bad_request(e.0))?;
    let mutation = topologies
        .enqueue(id, request.op.as_str(), &payload, request.expected_version)
        .await
        .map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(EnqueueResponse { mutation_id: mutation.id, state: "pending" })))
}

#[derive(Debug, Deserialize)]
struct MutationsQuery {
    state: Option<MutationState>,
}

impl Validate for MutationsQuery {}

async fn mutations(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<MutationsQuery>,
) -> Result<Json<Vec<Mutation>>> {
    Ok(Json(state.db.mutations(id, query.state).await.map_err(not_found)?))
}

// The catalog.

#[derive(Debug, Serialize)]
struct ServiceCatalog {
    services: Vec<&'static str>,
    fleet_singletons: Vec<&'static str>,
}

async fn services(_viewer: Viewer) -> Json<ServiceCatalog> {
    Json(ServiceCatalog { services: catalog::service_names(), fleet_singletons: Vec::new() })
}

async fn archetypes(_viewer: Viewer) -> Json<Value> {
    let archetypes: Vec<Value> = catalog::ARCHETYPES
        .iter()
        .map(|a| {
            json!({
                "slug": a.name, "display_name": a.name, "description": "", "services": a.services,
                "preferred_distros": [], "nmap_os": a.nmap_os,
            })
        })
        .collect();
    Json(json!({ "archetypes": archetypes }))
}

async fn next_subnet(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<Value>> {
    let subnet = state.topologies.next_subnet().await.map_err(topology_error)?;
    Ok(Json(json!({ "subnet": subnet })))
}

async fn lan_next_ip(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
) -> Result<Json<Value>> {
    let detail = state.topologies.detail(id).await.map_err(topology_error)?;
    let lan = detail.lans.iter().find(|l| l.id == lan).ok_or_else(|| ApiError::not_found("LAN not found"))?;
    let taken: BTreeSet<Ipv4Addr> =
        detail.edges.iter().filter(|e| e.lan_id == lan.id).filter_map(|e| e.ip.as_deref()?.parse().ok()).collect();
    let ip = next_ip(&lan.subnet, &taken).ok_or_else(|| ApiError::conflict("IP allocator exhausted"))?;
    Ok(Json(json!({ "subnet": lan.subnet, "ip": ip.to_string() })))
}

// Pending-only child edits.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LanCreate {
    name: String,
    subnet: Option<String>,
    #[serde(default)]
    is_dmz: bool,
    #[serde(default)]
    host_uuid: Option<String>,
    x: Option<f64>,
    y: Option<f64>,
    expected_version: Option<i64>,
}

impl Validate for LanCreate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        name_error(errors, "name", &self.name);
    }
}

async fn add_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<LanCreate>,
) -> Result<(StatusCode, Json<Lan>)> {
    if let Some(host) = &request.host_uuid {
        return Err(ApiError::bad_request(format!("swarm host {host:?} not found")));
    }
    let detail = pending(&state, id).await?;
    let mut pool = state.topologies.pool().await.map_err(topology_error)?;
    let add =
        ops::AddLan { name: request.name, subnet: request.subnet, is_dmz: request.is_dmz, x: request.x, y: request.y };
    let lan = ops::new_lan(&detail, add, &mut pool).map_err(|e| ApiError::bad_request(e.0))?;
    edit(&state, id, request.expected_version, vec![TopologyEdit::AddLan(lan.clone())]).await?;
    Ok((StatusCode::CREATED, Json(lan)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LanUpdate {
    name: Option<String>,
    subnet: Option<String>,
    is_dmz: Option<bool>,
    #[serde(default)]
    host_uuid: Option<String>,
    x: Option<f64>,
    y: Option<f64>,
    expected_version: Option<i64>,
}

impl Validate for LanUpdate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(name) = &self.name {
            name_error(errors, "name", name);
        }
    }
}

async fn update_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
    ValidJson(request): ValidJson<LanUpdate>,
) -> Result<Json<Lan>> {
    if let Some(host) = &request.host_uuid {
        return Err(ApiError::bad_request(format!("swarm host {host:?} not found")));
    }
    let detail = pending(&state, id).await?;
    let current = detail.lans.iter().find(|l| l.id == lan).ok_or_else(|| ApiError::not_found("LAN not found"))?;
    let update = ops::UpdateLan {
        name: current.name.clone(),
        new_name: request.name,
        subnet: request.subnet,
        is_dmz: request.is_dmz,
        x: request.x,
        y: request.y,
    };
    let edit_lan = ops::update_lan(&detail, update, false).map_err(|e| ApiError::bad_request(e.0))?;
    let TopologyEdit::UpdateLan(updated) = &edit_lan else { unreachable!("update_lan makes an UpdateLan") };
    let updated = updated.clone();
    edit(&state, id, request.expected_version, vec![edit_lan]).await?;
    Ok(Json(updated))
}

async fn remove_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
) -> Result<StatusCode> {
    let detail = pending(&state, id).await?;
    let current = detail.lans.iter().find(|l| l.id == lan).ok_or_else(|| ApiError::not_found("LAN not found"))?;
    if detail.deckies.iter().any(|d| detail.edges_of(d).first().is_some_and(|home| home.lan_id == current.id)) {
        return Err(ApiError::bad_request(format!("LAN '{}' is the home LAN of a decky", current.name)));
    }
    edit(&state, id, None, vec![TopologyEdit::RemoveLan(lan)]).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeckyCreate {
    name: String,
    #[serde(default)]
    services: Vec<String>,
    decky_config: Option<serde_json::Map<String, Value>>,
    x: Option<f64>,
    y: Option<f64>,
    expected_version: Option<i64>,
}

impl Validate for DeckyCreate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        name_error(errors, "name", &self.name);
    }
}

fn check_decky(name: &str, services: &[String]) -> Result<()> {
    let ok = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        return Err(ApiError::bad_request(format!("invalid decky name '{name}': use a-z, 0-9 and -")));
    }
    match services.iter().find(|s| !catalog::is_service(s)) {
        Some(unknown) => Err(ApiError::bad_request(format!("unknown service '{unknown}'"))),
        None => Ok(()),
    }
}

async fn add_decky(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<DeckyCreate>,
) -> Result<(StatusCode, Json<TopologyDecky>)> {
    check_decky(&request.name, &request.services)?;
    let detail = pending(&state, id).await?;
    if detail.decky_named(&request.name).is_some() {
        return Err(ApiError::bad_request(format!("decky '{}' already exists", request.name)));
    }
    let decky = TopologyDecky {
        uuid: Uuid::new_v4(),
        topology_id: id,
        name: request.name,
        services: request.services,
        decky_config: request.decky_config.map(Value::Object),
        ip: None,
        state: "pending".into(),
        last_error: None,
        x: request.x,
        y: request.y,
    };
    edit(&state, id, request.expected_version, vec![TopologyEdit::AddDecky(decky.clone(), Vec::new())]).await?;
    Ok((StatusCode::CREATED, Json(decky)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeckyUpdate {
    name: Option<String>,
    services: Option<Vec<String>>,
    decky_config: Option<serde_json::Map<String, Value>>,
    x: Option<f64>,
    y: Option<f64>,
    expected_version: Option<i64>,
}

impl Validate for DeckyUpdate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(name) = &self.name {
            name_error(errors, "name", name);
        }
    }
}

async fn update_decky(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, decky)): ValidPath<(Uuid, Uuid)>,
    ValidJson(request): ValidJson<DeckyUpdate>,
) -> Result<Json<TopologyDecky>> {
    let detail = pending(&state, id).await?;
    let mut updated = detail
        .deckies
        .iter()
        .find(|d| d.uuid == decky)
        .cloned()
        .ok_or_else(|| ApiError::not_found("Decky not found"))?;
    if let Some(name) = request.name {
        if name != updated.name && detail.decky_named(&name).is_some() {
            return Err(ApiError::bad_request(format!("decky '{name}' already exists")));
        }
        updated.name = name;
    }
    updated.services = request.services.unwrap_or(updated.services);
    check_decky(&updated.name, &updated.services)?;
    if let Some(config) = request.decky_config {
        updated.decky_config = Some(Value::Object(config));
    }
    updated.x = request.x.or(updated.x);
    updated.y = request.y.or(updated.y);
    edit(&state, id, request.expected_version, vec![TopologyEdit::UpdateDecky(updated.clone())]).await?;
    Ok(Json(updated))
}

async fn remove_decky(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, decky)): ValidPath<(Uuid, Uuid)>,
) -> Result<StatusCode> {
    let detail = pending(&state, id).await?;
    if !detail.deckies.iter().any(|d| d.uuid == decky) {
        return Err(ApiError::not_found("Decky not found"));
    }
    edit(&state, id, None, vec![TopologyEdit::RemoveDecky(decky)]).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EdgeCreate {
    decky_uuid: Uuid,
    lan_id: Uuid,
    #[serde(default)]
    is_bridge: bool,
    #[serde(default)]
    forwards_l3: bool,
    ip: Option<String>,
    expected_version: Option<i64>,
}

impl Validate for EdgeCreate {}

async fn add_edge(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<EdgeCreate>,
) -> Result<(StatusCode, Json<Edge>)> {
    let detail = pending(&state, id).await?;
    let Some(decky) = detail.deckies.iter().find(|d| d.uuid == request.decky_uuid) else {
        return Err(ApiError::bad_request(format!("decky '{}' not in topology '{id}'", request.decky_uuid)));
    };
    let Some(lan) = detail.lans.iter().find(|l| l.id == request.lan_id) else {
        return Err(ApiError::bad_request(format!("lan '{}' not in topology '{id}'", request.lan_id)));
    };
    let mut payload = json!({"decky": decky.name, "lan": lan.name, "forwards_l3": request.forwards_l3});
    if let Some(ip) = request.ip {
        payload["ip"] = Value::String(ip);
    }
    let mut pool = state.topologies.pool().await.map_err(topology_error)?;
    let home = detail.edges_of(decky).is_empty();
    let mut edits = if home {
        // The first LAN a decky joins is its home: the decky's own address is there.
        let (_, edge) = ops::new_decky(
            &crate::db::TopologyDetail { deckies: Vec::new(), ..detail.clone() },
            ops::AddDecky {
                name: decky.name.clone(),
                lan: lan.name.clone(),
                services: Some(decky.services.clone()),
                archetype: None,
                forwards_l3: request.forwards_l3,
                ip: payload.get("ip").and_then(Value::as_str).map(str::to_string),
                x: None,
                y: None,
            },
        )
        .map_err(|e| ApiError::bad_request(e.0))?;
        let edge = Edge { decky_uuid: decky.uuid, is_bridge: request.is_bridge, ..edge };
        let updated = TopologyDecky { ip: edge.ip.clone(), ..decky.clone() };
        vec![TopologyEdit::UpdateDecky(updated), TopologyEdit::AddEdge(edge)]
    } else {
        ops::edits(&detail, "attach_decky", &payload, &mut pool, false).map_err(|e| ApiError::bad_request(e.0))?
    };
    let edge = edits
        .iter()
        .find_map(|e| match e {
            TopologyEdit::AddEdge(edge) => Some(edge.clone()),
            _ => None,
        })
        .expect("an attachment adds an edge");
    edits.sort_by_key(|e| !matches!(e, TopologyEdit::UpdateDecky(_)));
    edit(&state, id, request.expected_version, edits).await?;
    Ok((StatusCode::CREATED, Json(edge)))
}

async fn remove_edge(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, edge)): ValidPath<(Uuid, Uuid)>,
) -> Result<StatusCode> {
    let detail = pending(&state, id).await?;
    if !detail.edges.iter().any(|e| e.id == edge) {
        return Err(ApiError::not_found("Edge not found"));
    }
    edit(&state, id, None, vec![TopologyEdit::RemoveEdge(edge)]).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The topology, if it is `pending` (404 / 409 in DECNET's words otherwise).
async fn pending(state: &AppState, id: Uuid) -> Result<crate::db::TopologyDetail> {
    let detail = state.topologies.detail(id).await.map_err(topology_error)?;
    if detail.topology.status != TopologyStatus::Pending {
        return Err(ApiError::conflict(crate::topology::pending_only(detail.topology.status)));
    }
    Ok(detail)
}

async fn edit(state: &AppState, id: Uuid, version: Option<i64>, edits: Vec<TopologyEdit>) -> Result<Topology> {
    state.topologies.edit_pending(id, version, &edits).await.map_err(topology_error)
}
