//! `GET` and `PUT /topologies/{id}/personas`: the topology's email personas, as DECNET's MazeNET
//! PERSONAS editor reads and replaces them. Any status may be edited (the list is the operator's,
//! last write wins, as in DECNET). A `PUT` keeps the valid entries; one where every entry is
//! invalid is refused, so a schema mistake cannot wipe the list.

use crate::http::error::OrNotFound;
use crate::http::extract::{FieldError, ValidJson, ValidPath, Validate};
use crate::http::guard::{Admin, Viewer};
use crate::http::responses::{AdminOnly, NotAUuid, NotJson, TopologyNotFound, ViewerOnly};
use crate::http::{ApiError, AppState, Result};
use crate::topology::NOT_FOUND;
use crate::topology::personas::{self, Persona};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// A topology's personas and the language an entry without one falls back to.
#[derive(Debug, Serialize, ToSchema)]
pub struct PersonasResponse {
    topology_id: Uuid,
    topology_name: String,
    language_default: String,
    personas: Vec<Persona>,
}

/// The new list, whole.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PersonasBody {
    /// A list of personas (each as `Persona` reads); an invalid entry is dropped, not refused, so
    /// any item is allowed here (400 when every entry is invalid).
    #[schema(value_type = Vec<Value>)]
    pub personas: Option<Value>,
}

impl Validate for PersonasBody {
    fn validate(&self, _errors: &mut Vec<FieldError>) {}
}

pub const ALL_INVALID: &str =
    "All persona entries failed validation. Required fields: name, email (user@host.tld), role, tone, mannerisms.";

/// The topology's email personas.
#[utoipa::path(
    get, path = "/topologies/{id}/personas", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    responses(
        (status = 200, description = "The personas", body = PersonasResponse),
        ViewerOnly, NotAUuid, TopologyNotFound,
    )
)]
pub async fn personas(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
) -> Result<Json<PersonasResponse>> {
    let topology = state.db.topology(id).await.or_not_found(NOT_FOUND)?;
    let language_default = language_default(&topology.language_default);
    Ok(Json(PersonasResponse {
        personas: personas::stored(&topology.email_personas, &language_default),
        topology_id: id,
        topology_name: topology.name,
        language_default,
    }))
}

/// Replaces the topology's email personas with the valid entries given.
#[utoipa::path(
    put, path = "/topologies/{id}/personas", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = PersonasBody,
    responses(
        (status = 200, description = "The personas as stored", body = PersonasResponse),
        (status = 400, description = "`personas` is not a list, or every entry in it is invalid"),
        AdminOnly, NotAUuid, NotJson, TopologyNotFound,
    )
)]
pub async fn replace_personas(
    State(state): State<AppState>,
    admin: Admin,
    ValidPath(id): ValidPath<Uuid>,
    ValidJson(body): ValidJson<PersonasBody>,
) -> Result<Json<PersonasResponse>> {
    let Some(Value::Array(entries)) = body.personas else {
        return Err(ApiError::bad_request("body.personas must be a list"));
    };
    let topology = state.db.topology(id).await.or_not_found(NOT_FOUND)?;
    let language_default = language_default(&topology.language_default);
    let given = entries.len();
    let kept = personas::parse(entries, &language_default);
    if given > 0 && kept.is_empty() {
        return Err(ApiError::bad_request(ALL_INVALID));
    }
    let text = serde_json::to_string(&kept).map_err(|err| ApiError::Internal(err.into()))?;
    state.db.set_email_personas(id, &text).await.or_not_found(NOT_FOUND)?;
    tracing::info!(user = %admin.0.user.username, topology = %id, given, kept = kept.len(), "Topology personas replaced");
    Ok(Json(PersonasResponse { topology_id: id, topology_name: topology.name, language_default, personas: kept }))
}

/// DECNET's fallback for a topology with no default language.
fn language_default(stored: &str) -> String {
    if stored.is_empty() { "en".into() } else { stored.into() }
}
