//! The pending-only child edits of a topology's LANs, deckies and edges, under `expected_version`
//! locking. A request's own form is checked first (400); what the topology as it is then refuses
//! (a name or subnet taken, an address not free, a home LAN) is a conflict (409).

use super::{name_error, no_swarm_host_schema, topology_error};
use crate::db::{Edge, Lan, Topology, TopologyDecky, TopologyEdit, TopologyStatus};
use crate::fleet::catalog;
use crate::fleet::decky_name::DeckyName;
use crate::http::extract::{FieldError, ValidJson, ValidPath, Validate, integral_or_null};
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotAUuid, NotJson, TopologyEditRefused, TopologyNotFound};
use crate::http::{ApiError, AppState, Result};
use crate::topology::ops;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use std::net::Ipv4Addr;
use utoipa::ToSchema;
use uuid::Uuid;

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

/// A LAN has no host of its own: the whole topology runs where its `target_host_uuid` says.
const LAN_HOST: &str =
    "a LAN runs on its topology's host: set the topology's target_host_uuid, not the LAN's host_uuid";

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
    post, path = "/topologies/{id}/lans", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = LanCreate,
    responses(
        (status = 201, description = "The LAN", body = Lan),
        (status = 400, description = "Malformed body or empty name; a name or subnet not of the documented form, or a host_uuid (a LAN runs on its topology's host)"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, NotJson, TopologyNotFound, TopologyEditRefused,
    )
)]
pub async fn add_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(request): ValidJson<LanCreate>,
) -> Result<(StatusCode, Json<Lan>)> {
    if request.host_uuid.is_some() {
        return Err(ApiError::bad_request(LAN_HOST));
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
    patch, path = "/topologies/{id}/lans/{lan}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("lan" = Uuid, Path, description = "The LAN")),
    request_body = LanUpdate,
    responses(
        (status = 200, description = "The LAN as changed", body = Lan),
        (status = 400, description = "Malformed body or empty name; a name or subnet not of the documented form, or a host_uuid (a LAN runs on its topology's host)"),
        (status = 404, description = "Topology not found, or LAN not found"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, NotJson, TopologyEditRefused,
    )
)]
pub async fn update_lan(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
    ValidJson(request): ValidJson<LanUpdate>,
) -> Result<Json<Lan>> {
    if request.host_uuid.is_some() {
        return Err(ApiError::bad_request(LAN_HOST));
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
    delete, path = "/topologies/{id}/lans/{lan}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("lan" = Uuid, Path, description = "The LAN")),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "Topology not found, or LAN not found"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, TopologyEditRefused,
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
    #[schema(value_type = DeckyName)]
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
    post, path = "/topologies/{id}/deckies", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = DeckyCreate,
    responses(
        (status = 201, description = "The decky", body = TopologyDecky),
        (status = 400, description = "Malformed body or empty name; a name not of a-z, 0-9 and -, or an unknown service"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, NotJson, TopologyNotFound, TopologyEditRefused,
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
    #[schema(value_type = DeckyName)]
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
    patch, path = "/topologies/{id}/deckies/{decky}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("decky" = Uuid, Path, description = "The decky")),
    request_body = DeckyUpdate,
    responses(
        (status = 200, description = "The decky as changed", body = TopologyDecky),
        (status = 400, description = "Malformed body or empty name; a name not of a-z, 0-9 and -, or an unknown service"),
        (status = 404, description = "Topology not found, or decky not found"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, NotJson, TopologyEditRefused,
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
    delete, path = "/topologies/{id}/deckies/{decky}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("decky" = Uuid, Path, description = "The decky")),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "Topology not found, or decky not found"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, TopologyEditRefused,
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
    post, path = "/topologies/{id}/edges", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = EdgeCreate,
    responses(
        (status = 201, description = "The attachment", body = Edge),
        (status = 400, description = "Malformed body, or an ip that is not an IPv4 address"),
        (status = 404, description = "Topology not found, or the decky or LAN named is not in it"),
        (status = 409, description = "Topology not pending, a version conflict, or what the topology refuses: a decky already on the LAN, an address not free or not on the LAN"),
        AdminOnly, NotJson, NotAUuid,
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
    delete, path = "/topologies/{id}/edges/{edge}", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("edge" = Uuid, Path, description = "The edge")),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "Topology not found, or edge not found"),
        (status = 422, description = "Not a uuid, or a name over 64 characters"),
        AdminOnly, TopologyEditRefused,
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
