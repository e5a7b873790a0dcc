//! Identities in DECNET's shapes: `GET /identities` (newest-updated first), `/identities/{uuid}`,
//! `/identities/{uuid}/observations` (its attackers as `/attackers` rows) and
//! `/attackers/{uuid}/attribution` (the attacker's identity and its linking primitives). An
//! identity is attackers from different addresses linked by what they share (`crate::identity`);
//! beyond DECNET each carries its attackers and the links that explain it. DECNET's payload
//! similarity and C2 endpoints are not primitives here: those lists are empty. `window` pages a
//! computed list (the campaigns' routes use it too).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::attackers::{ATTACKER_NOT_FOUND, AttackerSummary};
use super::error::OrNotFound;
use super::extract::{FieldError, ValidPath, ValidQuery, Validate};
use super::guard::Viewer;
use super::paging::{Listed, MAX_LIMIT, Page, Paging};
use super::responses::{AttackerNotFound, NotAUuid, ViewerOnly};
use super::{ApiError, AppState, Result};
use crate::identity::{self, Identity, Link, Member, Primitive, Snapshot};
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_identities))
        .routes(routes!(identity_detail))
        .routes(routes!(identity_observations))
        .routes(routes!(attacker_attribution))
}

const IDENTITY_NOT_FOUND: &str = "Identity not found";

/// The identity `uuid` of `snapshot`, or DECNET's 404.
pub(super) fn identity_or_404(snapshot: &Snapshot, uuid: Uuid) -> Result<&Identity> {
    snapshot.identity(uuid).ok_or_else(|| ApiError::not_found(IDENTITY_NOT_FOUND))
}

/// An attacker of an identity.
#[derive(Debug, Serialize, ToSchema)]
pub struct IdentityMember {
    pub uuid: Uuid,
    pub ip: String,
}

/// One identity, DECNET's row with its attackers and links. The lists of values are JSON texts,
/// as DECNET sends them and its dashboard parses them.
#[derive(Debug, Serialize, ToSchema)]
pub struct IdentityRow {
    pub uuid: Uuid,
    pub schema_version: u32,
    /// The campaign it is part of, if any.
    pub campaign_id: Option<Uuid>,
    /// RFC 3339, UTC: its attackers' first and last sight, and their newest profile change.
    pub first_seen_at: String,
    pub last_seen_at: String,
    /// When it could first be formed: its second attacker's first sight.
    pub created_at: String,
    pub updated_at: String,
    /// The weakest link that joined it: 0.75 for two shared kinds of primitive, 0.875 for three…
    pub confidence: f64,
    /// Attackers (addresses) linked.
    pub observation_count: u64,
    /// The same, as DECNET's detail page reads it.
    pub observation_count_live: u64,
    /// A JSON list of its JA3s.
    pub ja3_hashes: String,
    /// A JSON list of the HASSHes of SSH servers on its attackers' hosts (the prober's).
    pub hassh_hashes: String,
    /// Not computed by svc: always `[]`.
    pub payload_simhashes: String,
    /// Not computed by svc: always `[]`.
    pub c2_endpoints: String,
    /// Not computed by svc: always null.
    pub kd_digraph_simhash: Option<String>,
    pub notes: Option<String>,
    /// Identities are recomputed, never merged: always null.
    pub merged_into_uuid: Option<Uuid>,
    /// Oldest first.
    pub attackers: Vec<IdentityMember>,
    /// Why they are one: a spanning set of links, strongest first.
    pub links: Vec<Link>,
}

/// The distinct values of `primitive` among `members`, sorted, as a JSON list text.
pub fn values_text<'a>(members: impl Iterator<Item = &'a Member>, primitive: Primitive) -> String {
    let mut values: Vec<&str> =
        members.flat_map(|m| m.primitives.iter().filter(|(p, _)| *p == primitive).map(|(_, v)| v.as_str())).collect();
    values.sort();
    values.dedup();
    serde_json::to_string(&values).expect("strings serialize")
}

impl From<&Identity> for IdentityRow {
    fn from(identity: &Identity) -> Self {
        let members = &identity.members;
        IdentityRow {
            uuid: identity.uuid,
            schema_version: 1,
            campaign_id: identity.campaign,
            first_seen_at: format_utc(members.iter().map(|m| m.first_seen).min().expect("members")),
            last_seen_at: format_utc(members.iter().map(|m| m.last_seen).max().expect("members")),
            created_at: format_utc(members[1].first_seen),
            updated_at: format_utc(members.iter().map(|m| m.updated_at).max().expect("members")),
            confidence: identity.confidence,
            observation_count: members.len() as u64,
            observation_count_live: members.len() as u64,
            ja3_hashes: values_text(members.iter(), Primitive::Ja3),
            hassh_hashes: values_text(members.iter(), Primitive::HasshServer),
            payload_simhashes: "[]".into(),
            c2_endpoints: "[]".into(),
            kd_digraph_simhash: None,
            notes: None,
            merged_into_uuid: None,
            attackers: members.iter().map(|m| IdentityMember { uuid: m.uuid, ip: m.ip.clone() }).collect(),
            links: identity.links.clone(),
        }
    }
}

impl Listed for IdentityRow {
    const PAGE: &'static str = "IdentitiesResponse";
    const COUNTED: &'static str = "Identities, on every page.";
}

pub type IdentitiesResponse = Page<IdentityRow>;
pub type ObservationsResponse = Page<AttackerSummary>;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IdentitiesQuery {
    /// Rows per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
}

impl Validate for IdentitiesQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_LIMIT, errors);
    }
}

/// The part of `items` `paging` asks for.
pub fn window<T>(items: &[T], paging: Paging) -> &[T] {
    let start = (paging.offset as usize).min(items.len());
    &items[start..(start + paging.limit as usize).min(items.len())]
}

/// Identities, newest-updated first. Recomputed from the attackers at most every 30 s.
#[utoipa::path(
    get, path = "/identities", tag = "identities", security(("bearer" = [])),
    params(IdentitiesQuery),
    responses(
        (status = 200, description = "A page of identities", body = IdentitiesResponse),
        (status = 422, description = "A parameter out of range"),
        ViewerOnly,
    )
)]
pub async fn list_identities(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<IdentitiesQuery>,
) -> Result<Json<IdentitiesResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let snapshot = state.identities.snapshot(&state.db).await?;
    let data = window(&snapshot.identities, paging).iter().map(IdentityRow::from).collect();
    Ok(Json(paging.page_of(snapshot.identities.len() as u64, data)))
}

/// One identity.
#[utoipa::path(
    get, path = "/identities/{uuid}", tag = "identities", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The identity")),
    responses(
        (status = 200, description = "The identity", body = IdentityRow),
        (status = 404, description = "Identity not found"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn identity_detail(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<IdentityRow>> {
    let snapshot = state.identities.snapshot(&state.db).await?;
    let identity = identity_or_404(&snapshot, uuid)?;
    Ok(Json(identity.into()))
}

/// The identity's attackers, oldest first, as `/attackers` rows (with `identity_id`).
#[utoipa::path(
    get, path = "/identities/{uuid}/observations", tag = "identities", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The identity"), IdentitiesQuery),
    responses(
        (status = 200, description = "A page of its attackers", body = ObservationsResponse),
        (status = 404, description = "Identity not found"),
        (status = 422, description = "Not a uuid, or a parameter out of range"),
        ViewerOnly,
    )
)]
pub async fn identity_observations(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<IdentitiesQuery>,
) -> Result<Json<ObservationsResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let snapshot = state.identities.snapshot(&state.db).await?;
    let identity = identity_or_404(&snapshot, uuid)?;
    let members = window(&identity.members, paging);
    let ips: Vec<String> = members.iter().map(|m| m.ip.clone()).collect();
    let mut profiles: std::collections::HashMap<Uuid, _> =
        state.db.attackers_by_ip(&ips).await?.into_iter().map(|p| (p.uuid, p)).collect();
    // In the identity's order; an attacker removed since the identities were computed is left out.
    let data = members
        .iter()
        .filter_map(|m| profiles.remove(&m.uuid))
        .map(|profile| AttackerSummary { identity_id: Some(uuid.to_string()), ..profile.into() })
        .collect();
    Ok(Json(paging.page_of(identity.members.len() as u64, data)))
}

/// One primitive of an attacker, DECNET's attribution row.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttributionPrimitive {
    /// `ja3`, `ssh_client`, `hassh_server`, `jarm` or `certificate`.
    pub primitive: String,
    /// The newest value.
    pub current_value: String,
    /// `stable` (one value) or `drifting` (several).
    pub state: String,
    /// 1 divided by the number of values.
    pub confidence: f64,
    /// Distinct values seen.
    pub observation_count: u64,
    /// Unix seconds. svc keeps no time per fingerprint: the attacker's first sight (last sight
    /// when drifting) and last sight stand in.
    pub last_change_ts: f64,
    pub last_observation_ts: f64,
}

/// The attacker's identity (null when it is linked to no other) and its linking primitives.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Attribution {
    pub identity_uuid: Option<Uuid>,
    pub primitives: Vec<AttributionPrimitive>,
}

/// The attacker's identity and the primitives it is linked by, by primitive name.
#[utoipa::path(
    get, path = "/attackers/{uuid}/attribution", tag = "attackers", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "Its identity and primitives", body = Attribution),
        ViewerOnly, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_attribution(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Attribution>> {
    let profile = state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let snapshot = state.identities.snapshot(&state.db).await?;
    let values = identity::primitives(&profile);
    let seconds = |at: chrono::DateTime<chrono::Utc>| at.timestamp_millis() as f64 / 1000.0;
    let mut primitives: Vec<AttributionPrimitive> = Primitive::ALL
        .iter()
        .filter_map(|&primitive| {
            let of_kind: Vec<&String> = values.iter().filter(|(p, _)| *p == primitive).map(|(_, v)| v).collect();
            let current = (*of_kind.last()?).clone();
            let count = of_kind.len() as u64;
            Some(AttributionPrimitive {
                primitive: primitive.name().into(),
                current_value: current,
                state: if count == 1 { "stable" } else { "drifting" }.into(),
                confidence: 1.0 / count as f64,
                observation_count: count,
                last_change_ts: seconds(if count == 1 { profile.first_seen } else { profile.last_seen }),
                last_observation_ts: seconds(profile.last_seen),
            })
        })
        .collect();
    primitives.sort_by(|a, b| a.primitive.cmp(&b.primitive));
    Ok(Json(Attribution { identity_uuid: snapshot.of_attacker(uuid).map(|i| i.uuid), primitives }))
}
