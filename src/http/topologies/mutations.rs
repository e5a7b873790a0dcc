//! The mutation queue of a live topology: enqueue (its request documented as one object per op,
//! each with that op's payload) and the list of its mutations.

use super::topology_error;
use crate::db::{Mutation, MutationState};
use crate::http::error::OrNotFound;
use crate::http::extract::{ValidJson, ValidPath, ValidQuery, Validate, integral_or_null};
use crate::http::guard::{Admin, Viewer};
use crate::http::responses::{AdminOnly, NotJson, TopologyNotFound, ViewerOnly};
use crate::http::{ApiError, AppState, Result};
use crate::topology::{NOT_FOUND, ops};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

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
    post, path = "/topologies/{id}/mutations", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology")),
    request_body = EnqueueRequest,
    responses(
        (status = 202, description = "Queued", body = EnqueueResponse),
        (status = 400, description = "Malformed body, or a payload the op cannot take"),
        (status = 409, description = "Not active or degraded, or a version conflict"),
        (status = 422, description = "Not a uuid, or an unknown op"),
        AdminOnly, NotJson, TopologyNotFound,
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
    get, path = "/topologies/{id}/mutations", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), MutationsQuery),
    responses(
        (status = 200, description = "The mutations", body = [Mutation]),
        (status = 422, description = "Not a uuid, or an unknown state"),
        ViewerOnly, TopologyNotFound,
    )
)]
pub async fn mutations(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(id): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<MutationsQuery>,
) -> Result<Json<Vec<Mutation>>> {
    Ok(Json(state.db.mutations(id, query.state).await.or_not_found(NOT_FOUND)?))
}
