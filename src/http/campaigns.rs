//! Campaigns in DECNET's shapes: `GET /campaigns` (oldest first), `/campaigns/{uuid}` and
//! `/campaigns/{uuid}/identities` (its identities as `/identities` rows). A campaign is identities
//! whose attackers share a value of any one kind (`crate::identity::link`): several tools or people
//! behind one piece of infrastructure; beyond DECNET each carries the links that explain it.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::extract::{ValidPath, ValidQuery};
use super::guard::Viewer;
use super::identities::{IdentitiesQuery, IdentitiesResponse, IdentityRow, values_text, window};
use super::paging::{Listed, Page, Paging};
use super::responses::{NotAUuid, ViewerOnly};
use super::{ApiError, AppState, Result};
use crate::identity::{Campaign, Identity, Link, Primitive, Snapshot};
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_campaigns))
        .routes(routes!(campaign_detail))
        .routes(routes!(campaign_identities))
}

const CAMPAIGN_NOT_FOUND: &str = "Campaign not found";

/// The campaign `uuid` of `snapshot`, or DECNET's 404.
pub(super) fn campaign_or_404(snapshot: &Snapshot, uuid: Uuid) -> Result<&Campaign> {
    snapshot.campaign(uuid).ok_or_else(|| ApiError::not_found(CAMPAIGN_NOT_FOUND))
}

/// One campaign, DECNET's row with its links. The lists of values are JSON texts, as DECNET's.
#[derive(Debug, Serialize, ToSchema)]
pub struct CampaignRow {
    pub uuid: Uuid,
    pub schema_version: u32,
    /// RFC 3339, UTC, over its identities' attackers.
    pub first_seen_at: String,
    pub last_seen_at: String,
    pub updated_at: String,
    /// The weakest link that joined it (one shared kind: 0.5).
    pub confidence: f64,
    pub identity_count: u64,
    /// The same, as DECNET's detail page reads it.
    pub identity_count_live: u64,
    pub ja3_hashes: String,
    pub hassh_hashes: String,
    pub payload_simhashes: String,
    pub c2_endpoints: String,
    pub merged_into_uuid: Option<Uuid>,
    /// Its identities, in the order of their oldest attacker.
    pub identities: Vec<Uuid>,
    /// Why they are one: a spanning set of links between attackers of different identities.
    pub links: Vec<Link>,
}

impl CampaignRow {
    pub fn of(campaign: &Campaign, snapshot: &Snapshot) -> CampaignRow {
        let identities: Vec<&Identity> = campaign.identities.iter().filter_map(|&i| snapshot.identity(i)).collect();
        let members = || identities.iter().flat_map(|i| i.members.iter());
        CampaignRow {
            uuid: campaign.uuid,
            schema_version: 1,
            first_seen_at: format_utc(members().map(|m| m.first_seen).min().expect("members")),
            last_seen_at: format_utc(members().map(|m| m.last_seen).max().expect("members")),
            updated_at: format_utc(members().map(|m| m.updated_at).max().expect("members")),
            confidence: campaign.confidence,
            identity_count: identities.len() as u64,
            identity_count_live: identities.len() as u64,
            ja3_hashes: values_text(members(), Primitive::Ja3),
            hassh_hashes: values_text(members(), Primitive::HasshServer),
            payload_simhashes: "[]".into(),
            c2_endpoints: "[]".into(),
            merged_into_uuid: None,
            identities: campaign.identities.clone(),
            links: campaign.links.clone(),
        }
    }
}

impl Listed for CampaignRow {
    const PAGE: &'static str = "CampaignsResponse";
    const COUNTED: &'static str = "Campaigns, on every page.";
}

pub type CampaignsResponse = Page<CampaignRow>;

/// Campaigns, in the order of their oldest identity. Recomputed with the identities.
#[utoipa::path(
    get, path = "/campaigns", tag = "identities", security(("bearer" = [])),
    params(IdentitiesQuery),
    responses(
        (status = 200, description = "A page of campaigns", body = CampaignsResponse),
        (status = 422, description = "A parameter out of range"),
        ViewerOnly,
    )
)]
pub async fn list_campaigns(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<IdentitiesQuery>,
) -> Result<Json<CampaignsResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let snapshot = state.identities.snapshot(&state.db).await?;
    let data = window(&snapshot.campaigns, paging).iter().map(|c| CampaignRow::of(c, &snapshot)).collect();
    Ok(Json(paging.page_of(snapshot.campaigns.len() as u64, data)))
}

/// One campaign.
#[utoipa::path(
    get, path = "/campaigns/{uuid}", tag = "identities", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The campaign")),
    responses(
        (status = 200, description = "The campaign", body = CampaignRow),
        (status = 404, description = "Campaign not found"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn campaign_detail(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<CampaignRow>> {
    let snapshot = state.identities.snapshot(&state.db).await?;
    let campaign = campaign_or_404(&snapshot, uuid)?;
    Ok(Json(CampaignRow::of(campaign, &snapshot)))
}

/// The campaign's identities, in the order of their oldest attacker, as `/identities` rows.
#[utoipa::path(
    get, path = "/campaigns/{uuid}/identities", tag = "identities", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The campaign"), IdentitiesQuery),
    responses(
        (status = 200, description = "A page of its identities", body = IdentitiesResponse),
        (status = 404, description = "Campaign not found"),
        (status = 422, description = "Not a uuid, or a parameter out of range"),
        ViewerOnly,
    )
)]
pub async fn campaign_identities(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<IdentitiesQuery>,
) -> Result<Json<IdentitiesResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let snapshot = state.identities.snapshot(&state.db).await?;
    let campaign = campaign_or_404(&snapshot, uuid)?;
    let data = window(&campaign.identities, paging)
        .iter()
        .filter_map(|&i| snapshot.identity(i))
        .map(IdentityRow::from)
        .collect();
    Ok(Json(paging.page_of(campaign.identities.len() as u64, data)))
}
