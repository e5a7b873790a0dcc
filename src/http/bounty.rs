//! `GET /bounty`: the vault of captured artifacts and fingerprints, newest first.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{FieldError, ValidQuery, Validate, check_max_chars, given};
use super::guard::Viewer;
use super::logs::MAX_SEARCH_CHARS;
use super::paging::{Listed, MAX_LIMIT, Page, Paging};
use super::redact;
use super::responses::ViewerOnly;
use super::{AppState, Result};
use crate::db::{BountyFilter, BountyRecord};
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_bounties))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BountyQuery {
    /// Rows per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// Only this type (`credential`, `fingerprint`, …), exactly.
    pub bounty_type: Option<String>,
    /// A substring of the decky, service, attacker address or payload; at most 512 characters.
    #[param(max_length = 512)]
    pub search: Option<String>,
}

impl Validate for BountyQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_LIMIT, errors);
        check_max_chars("search", self.search.as_deref(), MAX_SEARCH_CHARS, errors);
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
// The OpenAPI document keeps publishing the name clients were generated from.
#[schema(as = BountyRow)]
pub struct BountyEntry {
    pub id: i64,
    /// RFC 3339, UTC, milliseconds.
    pub timestamp: String,
    pub decky: String,
    pub service: String,
    pub attacker_ip: String,
    pub bounty_type: String,
    /// The captured data, decoded from its stored JSON (the stored text when it is not JSON).
    pub payload: serde_json::Value,
}

impl From<BountyRecord> for BountyEntry {
    fn from(bounty: BountyRecord) -> Self {
        let payload = decoded(bounty.payload);
        BountyEntry {
            id: bounty.id,
            timestamp: format_utc(bounty.timestamp),
            decky: bounty.decky,
            service: bounty.service,
            attacker_ip: bounty.attacker_ip,
            bounty_type: bounty.bounty_type,
            payload,
        }
    }
}

impl Listed for BountyEntry {
    const PAGE: &'static str = "BountyResponse";
    const COUNTED: &'static str = "Bounties matching the filter, on every page.";
}

pub type BountyResponse = Page<BountyEntry>;

/// One page of captured bounties, newest first.
#[utoipa::path(
    get,
    path = "/bounty",
    tag = "logs",
    security(("bearer" = [])),
    params(BountyQuery),
    responses(
        (status = 200, description = "A page of bounties, newest first", body = BountyResponse),
        (status = 422, description = "A parameter out of range or too long"),
        ViewerOnly,
    )
)]
pub async fn list_bounties(
    State(state): State<AppState>,
    Viewer(session): Viewer,
    ValidQuery(query): ValidQuery<BountyQuery>,
) -> Result<Json<BountyResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let filter = BountyFilter {
        bounty_type: given(&query.bounty_type).map(str::to_string),
        attacker_ip: None,
        search: given(&query.search).map(str::to_string),
    };
    let page = state.db.bounties(&filter, paging.limit, paging.offset).await?;
    let mut page: BountyResponse = paging.page(page);
    for bounty in &mut page.data {
        bounty.payload = redact::for_bounty(session.user.role, std::mem::take(&mut bounty.payload));
    }
    Ok(Json(page))
}

/// A stored JSON payload, decoded; the text itself when it is not JSON.
pub(super) fn decoded(payload: String) -> serde_json::Value {
    serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload))
}
