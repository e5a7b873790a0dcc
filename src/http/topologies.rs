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
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::extract::{FieldError, ValidJson, ValidPath, ValidQuery, Validate, integral, integral_or_null};
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

/// Where a topology runs: `unihost` (this host's engine) or `agent` (a swarm host; this build has
/// none, so `agent` is always refused).
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

/// The generator's parameters (DECNET's `TopologyGenerateRequest`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerateRequest {
    /// Unique among topologies, exactly as written (see the README).
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    #[serde(default = "default_mode")]
    #[schema(schema_with = unihost_only_schema)]
    mode: Mode,
    #[serde(default)]
    #[schema(schema_with = no_swarm_host_schema)]
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

/// `mode`: this build has no swarm hosts, so `agent` is refused (400) and only `unihost` is valid.
fn unihost_only_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["unihost"]))
        .default(Some("unihost".into()))
        .description(Some("Where it runs: this host's engine. `agent` (a swarm host) is refused: none exists."))
        .into()
}

/// The swarm host fields: this build has no swarm hosts, so only null (or absence) is accepted.
fn no_swarm_host_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Null)
        .description(Some("A swarm host; none exists in this build, so any value is refused (400)."))
        .into()
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
    #[schema(schema_with = unihost_only_schema)]
    mode: Mode,
    #[serde(default)]
    #[schema(schema_with = no_swarm_host_schema)]
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
        super::extract::check_range("limit", self.limit.unwrap_or(50), 1, 500, errors);
        super::extract::check_range("offset", self.offset.unwrap_or(0), 0, i64::from(i32::MAX), errors);
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TopologyPage {
    total: u64,
    limit: i64,
    offset: i64,
    data: Vec<Topology>,
}

/// A page of topologies, newest first.
#[utoipa::path(
    get, path = "/api/v1/topologies/", tag = "topologies", security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "The page", body = TopologyPage),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
        (status = 422, description = "limit or offset out of range"),
    )
)]
pub async fn list(
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

/// Generates a topology under a seed; stored `pending` (deploy it with `/deploy`).
#[utoipa::path(
    post, path = "/api/v1/topologies/", tag = "topologies", security(("bearer" = [])),
    request_body = GenerateRequest,
    responses(
        (status = 201, description = "The topology, pending", body = Topology),
        (status = 400, description = "Malformed body or empty name; deckies_per_lan_min above deckies_per_lan_max; an unknown service; mode 'agent' (no swarm host exists) or a target_host_uuid without it"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 409, description = "Topology name already exists, or the subnet pool is exhausted"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "A parameter out of range, or a name over 64 characters"),
    )
)]
pub async fn create(
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

/// Stores a topology with no LANs, `pending`, to be built with the child edits.
#[utoipa::path(
    post, path = "/api/v1/topologies/blank", tag = "topologies", security(("bearer" = [])),
    request_body = BlankRequest,
    responses(
        (status = 201, description = "The topology, pending", body = Topology),
        (status = 400, description = "Malformed body or empty name; mode 'agent' (no swarm host exists) or a target_host_uuid without it"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 409, description = "Topology name already exists"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "A name over 64 characters"),
    )
)]
pub async fn blank(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<BlankRequest>,
) -> Result<(StatusCode, Json<Topology>)> {
    check_mode(request.mode, &request.target_host_uuid)?;
    let new = NewTopology { name: request.name, mode: request.mode.as_str().into(), target_host_uuid: None };
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
    get, path = "/api/v1/topologies/{id}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 200, description = "The topology and its parts", body = DetailResponse),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
        (status = 404, description = "Topology not found"),
        (status = 422, description = "Not a uuid"),
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
    delete, path = "/api/v1/topologies/{id}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found"),
        (status = 409, description = "Not pending, torn_down or failed: tear it down first"),
        (status = 422, description = "Not a uuid"),
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
        super::extract::check_range("limit", self.limit.unwrap_or(100), 1, 1000, errors);
    }
}

/// The topology's status changes, newest first.
#[utoipa::path(
    get, path = "/api/v1/topologies/{id}/status-events", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), EventsQuery),
    responses(
        (status = 200, description = "The newest status events", body = [StatusEvent]),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
        (status = 404, description = "Topology not found"),
        (status = 422, description = "Not a uuid, or limit out of range"),
    )
)]
pub async fn status_events(
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

/// Deploys a `pending` topology in the background: `deploying` now, then `active`, `degraded`
/// or `failed` with the reason (see `/status-events`). Refused (409) while the container engine
/// does not answer, so the topology stays `pending`.
#[utoipa::path(
    post, path = "/api/v1/topologies/{id}/deploy", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 202, description = "Accepted; the topology, deploying", body = Topology),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found"),
        (status = 422, description = "Not a uuid"),
        (status = 409, description = "Not pending; or `Container runtime unavailable`: the engine does not answer (nothing changed)"),
    )
)]
pub async fn deploy(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<(StatusCode, Json<Topology>)> {
    state.topologies.engine_ready(id, &[TopologyStatus::Pending]).await.map_err(topology_error)?;
    let topology = state.topologies.start_deploy(id).await.map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(topology)))
}

/// Tears a topology down in the background: `tearing_down` now, then `torn_down`, or `degraded`
/// with the reason when something stayed. Refused (409) while the container engine does not answer.
#[utoipa::path(
    post, path = "/api/v1/topologies/{id}/teardown", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 202, description = "Accepted; the topology, tearing down", body = Topology),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found"),
        (status = 422, description = "Not a uuid"),
        (status = 409, description = "Not active, degraded, failed or deploying; or `Container runtime unavailable`: the engine does not answer (nothing changed)"),
    )
)]
pub async fn teardown(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<(StatusCode, Json<Topology>)> {
    state.topologies.engine_ready(id, &crate::topology::TEARDOWNABLE).await.map_err(topology_error)?;
    let topology = state.topologies.start_teardown(id).await.map_err(topology_error)?;
    Ok((StatusCode::ACCEPTED, Json(topology)))
}

/// What a mutation does; its payload's fields are the op's.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
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
pub struct EnqueueRequest {
    op: Op,
    #[serde(default)]
    payload: serde_json::Map<String, Value>,
    #[serde(default, deserialize_with = "integral_or_null")]
    expected_version: Option<i64>,
}

/// The document states the request as one object per op, each with that op's payload, so a
/// request it calls valid has a payload its op can take (anything else is 400).
impl utoipa::PartialSchema for EnqueueRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{
            AdditionalProperties, KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, SchemaType, Type,
        };
        let payloads = [
            ("add_lan", ops::AddLan::schema()),
            ("remove_lan", ops::Named::schema()),
            ("add_decky", ops::AddDecky::schema()),
            ("attach_decky", ops::Attach::schema()),
            ("detach_decky", ops::Detach::schema()),
            ("remove_decky", ops::RemoveDecky::schema()),
            ("update_decky", ops::UpdateDecky::schema()),
            ("update_lan", ops::UpdateLan::schema()),
        ];
        let variants = payloads.into_iter().map(|(op, payload)| {
            let version = ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .description(Some("Refused (409) unless the topology is at this version."));
            ObjectBuilder::new()
                .property("op", ObjectBuilder::new().schema_type(Type::String).enum_values(Some([op])))
                .required("op")
                .property("payload", payload)
                .required("payload")
                .property("expected_version", version)
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        });
        variants.fold(OneOfBuilder::new(), OneOfBuilder::item).into()
    }
}

impl ToSchema for EnqueueRequest {}

impl Validate for EnqueueRequest {}

#[derive(Debug, Serialize, ToSchema)]
pub struct EnqueueResponse {
    mutation_id: Uuid,
    /// Always `pending`.
    state: &'static str,
}

/// Queues a mutation of a live (`active` or `degraded`) topology for the mutator; bumps the
/// topology's version and announces `topology.<id>.mutation.enqueued`.
#[utoipa::path(
    post, path = "/api/v1/topologies/{id}/mutations", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = EnqueueRequest,
    responses(
        (status = 202, description = "Queued", body = EnqueueResponse),
        (status = 400, description = "Malformed body, or a payload the op cannot take"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found"),
        (status = 409, description = "Not active or degraded, or a version conflict"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "Not a uuid, or an unknown op"),
    )
)]
pub async fn enqueue(
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

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MutationsQuery {
    /// Only mutations in this state.
    #[param(inline)]
    state: Option<MutationState>,
}

impl Validate for MutationsQuery {}

/// The topology's mutations, newest first.
#[utoipa::path(
    get, path = "/api/v1/topologies/{id}/mutations", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), MutationsQuery),
    responses(
        (status = 200, description = "The mutations", body = [Mutation]),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
        (status = 404, description = "Topology not found"),
        (status = 422, description = "Not a uuid, or an unknown state"),
    )
)]
pub async fn mutations(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<MutationsQuery>,
) -> Result<Json<Vec<Mutation>>> {
    Ok(Json(state.db.mutations(id, query.state).await.map_err(not_found)?))
}

// The catalog.

#[derive(Debug, Serialize, ToSchema)]
pub struct ArchetypeCatalog {
    archetypes: Vec<ArchetypeEntry>,
}

/// A kind of host a decky can be made as (DECNET's archetype shape).
#[derive(Debug, Serialize, ToSchema)]
pub struct ArchetypeEntry {
    slug: &'static str,
    display_name: &'static str,
    description: &'static str,
    services: &'static [&'static str],
    preferred_distros: &'static [&'static str],
    nmap_os: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NextSubnet {
    /// A /24 no topology holds.
    subnet: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NextIp {
    subnet: String,
    /// The LAN's next free host address (`.1` is the gateway).
    ip: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServiceCatalog {
    services: Vec<&'static str>,
    fleet_singletons: Vec<&'static str>,
}

/// The services a topology decky may run.
#[utoipa::path(
    get, path = "/api/v1/topologies/services", tag = "topologies", security(("bearer" = [])),
    responses(
        (status = 200, description = "The catalog", body = ServiceCatalog),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
    )
)]
pub async fn services(_viewer: Viewer) -> Json<ServiceCatalog> {
    Json(ServiceCatalog { services: catalog::service_names(), fleet_singletons: Vec::new() })
}

/// The archetypes a decky may be made as (`add_decky`'s `archetype`).
#[utoipa::path(
    get, path = "/api/v1/topologies/archetypes", tag = "topologies", security(("bearer" = [])),
    responses(
        (status = 200, description = "The archetypes", body = ArchetypeCatalog),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
    )
)]
pub async fn archetypes(_viewer: Viewer) -> Json<ArchetypeCatalog> {
    let archetypes = catalog::ARCHETYPES
        .iter()
        .map(|a| ArchetypeEntry {
            slug: a.name,
            display_name: a.name,
            description: "",
            services: a.services,
            preferred_distros: &[],
            nmap_os: a.nmap_os,
        })
        .collect();
    Json(ArchetypeCatalog { archetypes })
}

/// The next /24 of the subnet pool no topology holds.
#[utoipa::path(
    get, path = "/api/v1/topologies/next-subnet", tag = "topologies", security(("bearer" = [])),
    responses(
        (status = 200, description = "A free subnet", body = NextSubnet),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
        (status = 409, description = "Subnet pool exhausted"),
    )
)]
pub async fn next_subnet(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<NextSubnet>> {
    let subnet = state.topologies.next_subnet().await.map_err(topology_error)?;
    Ok(Json(NextSubnet { subnet }))
}

/// The next free address on one of the topology's LANs.
#[utoipa::path(
    get, path = "/api/v1/topologies/{id}/lans/{lan}/next-ip", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("lan" = Uuid, Path, description = "The LAN")),
    responses(
        (status = 200, description = "A free address", body = NextIp),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
        (status = 404, description = "Topology not found, or LAN not found"),
        (status = 409, description = "IP allocator exhausted"),
        (status = 422, description = "Not a uuid"),
    )
)]
pub async fn lan_next_ip(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
) -> Result<Json<NextIp>> {
    let detail = state.topologies.detail(id).await.map_err(topology_error)?;
    let lan = detail.lans.iter().find(|l| l.id == lan).ok_or_else(|| ApiError::not_found("LAN not found"))?;
    let taken: BTreeSet<Ipv4Addr> =
        detail.edges.iter().filter(|e| e.lan_id == lan.id).filter_map(|e| e.ip.as_deref()?.parse().ok()).collect();
    let ip = next_ip(&lan.subnet, &taken).ok_or_else(|| ApiError::conflict("IP allocator exhausted"))?;
    Ok(Json(NextIp { subnet: lan.subnet.clone(), ip: ip.to_string() }))
}

// Pending-only child edits. A request's own form is checked first (400); what the topology as it is
// then refuses (a name or subnet taken, an address not free, a home LAN) is a conflict (409).

fn refused(err: ops::OpError) -> ApiError {
    ApiError::conflict(err.0)
}

/// A LAN's name and subnet as written, before the topology is looked at.
fn check_lan_form(name: Option<&str>, subnet: Option<&str>) -> Result<()> {
    name.map_or(Ok(()), |name| ops::check_name("LAN", name)).map_err(|e| ApiError::bad_request(e.0))?;
    subnet.map_or(Ok(()), ops::check_subnet_format).map_err(|e| ApiError::bad_request(e.0))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LanCreate {
    /// Letters, digits, `-`, `_` and `.`; unique in the topology.
    #[schema(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    name: String,
    /// Default: the next free /24 of the pool.
    /// A /24 no other LAN of the topology has.
    #[schema(pattern = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}0/24$")]
    subnet: Option<String>,
    #[serde(default)]
    is_dmz: bool,
    #[serde(default)]
    #[schema(schema_with = no_swarm_host_schema)]
    host_uuid: Option<String>,
    x: Option<f64>,
    y: Option<f64>,
    #[serde(default, deserialize_with = "integral_or_null")]
    expected_version: Option<i64>,
}

impl Validate for LanCreate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        name_error(errors, "name", &self.name);
    }
}

/// Adds a LAN to a pending topology (its subnet from the pool when none is given).
#[utoipa::path(
    post, path = "/api/v1/topologies/{id}/lans", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = LanCreate,
    responses(
        (status = 201, description = "The LAN", body = Lan),
        (status = 400, description = "Malformed body or empty name; a name or subnet not of the documented form, or a host_uuid (no swarm host exists)"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn add_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<LanCreate>,
) -> Result<(StatusCode, Json<Lan>)> {
    if let Some(host) = &request.host_uuid {
        return Err(ApiError::bad_request(format!("swarm host {host:?} not found")));
    }
    check_lan_form(Some(&request.name), request.subnet.as_deref())?;
    let detail = pending(&state, id).await?;
    let mut pool = state.topologies.pool().await.map_err(topology_error)?;
    let add =
        ops::AddLan { name: request.name, subnet: request.subnet, is_dmz: request.is_dmz, x: request.x, y: request.y };
    let lan = ops::new_lan(&detail, add, &mut pool).map_err(refused)?;
    edit(&state, id, request.expected_version, vec![TopologyEdit::AddLan(lan.clone())]).await?;
    Ok((StatusCode::CREATED, Json(lan)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LanUpdate {
    /// Letters, digits, `-`, `_` and `.`; unique in the topology.
    #[schema(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    name: Option<String>,
    /// A /24 no other LAN of the topology has.
    #[schema(pattern = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}0/24$")]
    subnet: Option<String>,
    is_dmz: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = no_swarm_host_schema)]
    host_uuid: Option<String>,
    x: Option<f64>,
    y: Option<f64>,
    #[serde(default, deserialize_with = "integral_or_null")]
    expected_version: Option<i64>,
}

impl Validate for LanUpdate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(name) = &self.name {
            name_error(errors, "name", name);
        }
    }
}

/// Changes a LAN of a pending topology.
#[utoipa::path(
    patch, path = "/api/v1/topologies/{id}/lans/{lan}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("lan" = Uuid, Path, description = "The LAN")),
    request_body = LanUpdate,
    responses(
        (status = 200, description = "The LAN as changed", body = Lan),
        (status = 400, description = "Malformed body or empty name; a name or subnet not of the documented form, or a host_uuid (no swarm host exists)"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found, or LAN not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn update_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
    ValidJson(request): ValidJson<LanUpdate>,
) -> Result<Json<Lan>> {
    if let Some(host) = &request.host_uuid {
        return Err(ApiError::bad_request(format!("swarm host {host:?} not found")));
    }
    check_lan_form(request.name.as_deref(), request.subnet.as_deref())?;
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
    let edit_lan = ops::update_lan(&detail, update, false).map_err(refused)?;
    let TopologyEdit::UpdateLan(updated) = &edit_lan else { unreachable!("update_lan makes an UpdateLan") };
    let updated = updated.clone();
    edit(&state, id, request.expected_version, vec![edit_lan]).await?;
    Ok(Json(updated))
}

/// Removes a LAN of a pending topology, with its attachments.
#[utoipa::path(
    delete, path = "/api/v1/topologies/{id}/lans/{lan}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("lan" = Uuid, Path, description = "The LAN")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found, or LAN not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn remove_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
) -> Result<StatusCode> {
    let detail = pending(&state, id).await?;
    let current = detail.lans.iter().find(|l| l.id == lan).ok_or_else(|| ApiError::not_found("LAN not found"))?;
    if detail.deckies.iter().any(|d| detail.edges_of(d).first().is_some_and(|home| home.lan_id == current.id)) {
        return Err(ApiError::conflict(format!("LAN '{}' is the home LAN of a decky", current.name)));
    }
    edit(&state, id, None, vec![TopologyEdit::RemoveLan(lan)]).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeckyCreate {
    /// Lower-case letters, digits and `-` (it names the decky's container); unique in the topology.
    #[schema(pattern = "^[a-z0-9-]{1,64}$")]
    name: String,
    #[serde(default)]
    #[schema(schema_with = catalog::services_schema)]
    services: Vec<String>,
    #[schema(value_type = Option<Object>)]
    decky_config: Option<serde_json::Map<String, Value>>,
    x: Option<f64>,
    y: Option<f64>,
    #[serde(default, deserialize_with = "integral_or_null")]
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

/// Adds a decky, on no LAN yet, to a pending topology (attach it with `/edges`).
#[utoipa::path(
    post, path = "/api/v1/topologies/{id}/deckies", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = DeckyCreate,
    responses(
        (status = 201, description = "The decky", body = TopologyDecky),
        (status = 400, description = "Malformed body or empty name; a name not of a-z, 0-9 and -, or an unknown service"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn add_decky(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<DeckyCreate>,
) -> Result<(StatusCode, Json<TopologyDecky>)> {
    check_decky(&request.name, &request.services)?;
    let detail = pending(&state, id).await?;
    if detail.decky_named(&request.name).is_some() {
        return Err(ApiError::conflict(format!("decky '{}' already exists", request.name)));
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeckyUpdate {
    /// Lower-case letters, digits and `-` (it names the decky's container); unique in the topology.
    #[schema(pattern = "^[a-z0-9-]{1,64}$")]
    name: Option<String>,
    #[schema(schema_with = catalog::services_or_null_schema)]
    services: Option<Vec<String>>,
    /// Replaces the decky's configuration.
    #[schema(value_type = Option<Object>)]
    decky_config: Option<serde_json::Map<String, Value>>,
    x: Option<f64>,
    y: Option<f64>,
    #[serde(default, deserialize_with = "integral_or_null")]
    expected_version: Option<i64>,
}

impl Validate for DeckyUpdate {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(name) = &self.name {
            name_error(errors, "name", name);
        }
    }
}

/// Changes a decky of a pending topology.
#[utoipa::path(
    patch, path = "/api/v1/topologies/{id}/deckies/{decky}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("decky" = Uuid, Path, description = "The decky")),
    request_body = DeckyUpdate,
    responses(
        (status = 200, description = "The decky as changed", body = TopologyDecky),
        (status = 400, description = "Malformed body or empty name; a name not of a-z, 0-9 and -, or an unknown service"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found, or decky not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn update_decky(
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
            return Err(ApiError::conflict(format!("decky '{name}' already exists")));
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

/// Removes a decky of a pending topology, with its attachments.
#[utoipa::path(
    delete, path = "/api/v1/topologies/{id}/deckies/{decky}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("decky" = Uuid, Path, description = "The decky")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found, or decky not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn remove_decky(
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeCreate {
    decky_uuid: Uuid,
    lan_id: Uuid,
    #[serde(default)]
    is_bridge: bool,
    #[serde(default)]
    forwards_l3: bool,
    /// The decky's address on the LAN; default its next free one.
    #[schema(
        pattern = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"
    )]
    ip: Option<String>,
    #[serde(default, deserialize_with = "integral_or_null")]
    expected_version: Option<i64>,
}

impl Validate for EdgeCreate {}

/// Attaches a decky of a pending topology to one of its LANs (its first LAN is its home, with its own address).
#[utoipa::path(
    post, path = "/api/v1/topologies/{id}/edges", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = EdgeCreate,
    responses(
        (status = 201, description = "The attachment", body = Edge),
        (status = 400, description = "Malformed body, or an ip that is not an IPv4 address"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found, or the decky or LAN named is not in it"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a decky already on the LAN, an address not free or not on the LAN"),
        (status = 415, description = "Body is not JSON"),
        (status = 422, description = "Not a uuid"),
    )
)]
pub async fn add_edge(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<EdgeCreate>,
) -> Result<(StatusCode, Json<Edge>)> {
    if let Some(ip) = &request.ip
        && ip.parse::<Ipv4Addr>().is_err()
    {
        return Err(ApiError::bad_request(format!("'{ip}' is not an IPv4 address")));
    }
    let detail = pending(&state, id).await?;
    let Some(decky) = detail.deckies.iter().find(|d| d.uuid == request.decky_uuid) else {
        return Err(ApiError::not_found(format!("decky '{}' not in topology '{id}'", request.decky_uuid)));
    };
    let Some(lan) = detail.lans.iter().find(|l| l.id == request.lan_id) else {
        return Err(ApiError::not_found(format!("lan '{}' not in topology '{id}'", request.lan_id)));
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
        .map_err(refused)?;
        let edge = Edge { decky_uuid: decky.uuid, is_bridge: request.is_bridge, ..edge };
        let updated = TopologyDecky { ip: edge.ip.clone(), ..decky.clone() };
        vec![TopologyEdit::UpdateDecky(updated), TopologyEdit::AddEdge(edge)]
    } else {
        ops::edits(&detail, "attach_decky", &payload, &mut pool, false).map_err(refused)?
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

/// Removes an attachment of a pending topology.
#[utoipa::path(
    delete, path = "/api/v1/topologies/{id}/edges/{edge}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("edge" = Uuid, Path, description = "The edge")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Not an admin, or password change required"),
        (status = 404, description = "Topology not found, or edge not found"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, an address not free or not on the LAN, a decky's home LAN"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
    )
)]
pub async fn remove_edge(
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
