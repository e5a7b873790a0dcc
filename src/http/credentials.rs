//! `GET /credentials` (every captured secret, one row per address, decky, service, secret and
//! principal, with its attempts), `GET /credential-reuse` (the same secret tried against several
//! deckies or services) and `GET /credential-reuse/{reuse_id}` (one finding), in DECNET's shapes.
//! The ingester stores the credentials; the reuse findings are grouped from them on every request,
//! not kept apart.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::OrNotFound;
use super::extract::{FieldError, ValidQuery, Validate, check_max_chars, check_range, given};
use super::guard::Viewer;
use super::logs::MAX_SEARCH_CHARS;
use super::paging::{Listed, MAX_LIMIT, MAX_OFFSET, Page, Paging};
use super::responses::ViewerOnly;
use super::{AppState, Result};
use crate::db::{CredentialFilter, CredentialRecord, CredentialReuse, Db, MIN_REUSE_TARGETS};
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_credentials))
        .routes(routes!(list_credential_reuse))
        .routes(routes!(get_credential_reuse))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CredentialsQuery {
    /// Rows per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// A substring of the principal, printable secret, attacker address, decky or service; at most
    /// 512 characters.
    #[param(max_length = 512)]
    pub search: Option<String>,
    /// Only this service, exactly.
    pub service: Option<String>,
    /// Only this attacker address, exactly.
    pub attacker_ip: Option<String>,
}

impl Validate for CredentialsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_LIMIT, errors);
        check_max_chars("search", self.search.as_deref(), MAX_SEARCH_CHARS, errors);
    }
}

/// One captured secret, DECNET's credential row.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CredentialEntry {
    pub id: i64,
    pub attacker_ip: String,
    /// The profile of the address, once the profiler has made one.
    pub attacker_uuid: Option<Uuid>,
    pub decky_name: String,
    pub service: String,
    /// Who authenticated (user name, domain, DN); null for secrets without one.
    pub principal: Option<String>,
    /// `plaintext`, `http_bearer`, `vnc_des_response`, …
    pub secret_kind: String,
    pub secret_sha256: String,
    pub secret_b64: String,
    /// The secret with bytes outside printable ASCII as `?`.
    pub secret_printable: String,
    /// `success`, `failure` or `observed`, when the decoy said.
    pub outcome: Option<String>,
    /// Service-specific extras, a JSON object (DECNET's repository decodes its stored text);
    /// none are kept yet, so `{}`.
    #[schema(value_type = Object)]
    pub fields: serde_json::Value,
    /// RFC 3339, UTC, milliseconds.
    pub first_seen: String,
    pub last_seen: String,
    pub attempt_count: u64,
}

impl CredentialEntry {
    fn new(credential: CredentialRecord, attacker_uuid: Option<Uuid>) -> Self {
        CredentialEntry {
            id: credential.id,
            attacker_ip: credential.attacker_ip,
            attacker_uuid,
            decky_name: credential.decky,
            service: credential.service,
            principal: credential.principal,
            secret_kind: credential.secret_kind,
            secret_sha256: credential.secret_sha256,
            secret_b64: credential.secret_b64,
            secret_printable: credential.secret_printable,
            outcome: credential.outcome,
            fields: serde_json::json!({}),
            first_seen: format_utc(credential.first_seen),
            last_seen: format_utc(credential.last_seen),
            attempt_count: credential.attempt_count,
        }
    }
}

impl Listed for CredentialEntry {
    const PAGE: &'static str = "CredentialsResponse";
    const COUNTED: &'static str = "Credentials matching the filter, on every page.";
}

pub type CredentialsResponse = Page<CredentialEntry>;

/// One page of captured credentials, most recently tried first.
#[utoipa::path(
    get,
    path = "/credentials",
    tag = "logs",
    security(("bearer" = [])),
    params(CredentialsQuery),
    responses(
        (status = 200, description = "A page of credentials, most recently tried first", body = CredentialsResponse),
        (status = 422, description = "A parameter out of range or too long"),
        ViewerOnly,
    )
)]
pub async fn list_credentials(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<CredentialsQuery>,
) -> Result<Json<CredentialsResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let filter = CredentialFilter {
        search: given(&query.search).map(str::to_string),
        service: given(&query.service).map(str::to_string),
        attacker_ip: given(&query.attacker_ip).map(str::to_string),
    };
    let page = state.db.credentials(&filter, paging.limit, paging.offset).await?;
    let ips: Vec<String> = page.rows.iter().map(|row| row.attacker_ip.clone()).collect();
    let profiles = profile_uuids(&state.db, ips).await?;
    let data = page
        .rows
        .into_iter()
        .map(|credential| {
            let uuid = profiles.get(&credential.attacker_ip).copied();
            CredentialEntry::new(credential, uuid)
        })
        .collect();
    Ok(Json(paging.page_of(page.total, data)))
}

/// The profile uuid of each of `ips` that has one.
async fn profile_uuids(db: &Db, mut ips: Vec<String>) -> Result<HashMap<String, Uuid>> {
    ips.sort();
    ips.dedup();
    let profiles = db.attackers_by_ip(&ips).await?;
    Ok(profiles.into_iter().map(|profile| (profile.ip, profile.uuid)).collect())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReuseQuery {
    /// Findings per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Findings to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// Only secrets tried against at least this many distinct (decky, service) pairs.
    #[param(minimum = 2, maximum = 2147483647, default = 2)]
    pub min_target_count: Option<i64>,
    /// Only this kind of secret (`plaintext`, …), exactly.
    pub secret_kind: Option<String>,
}

impl Validate for ReuseQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_LIMIT, errors);
        let min = i64::from(MIN_REUSE_TARGETS);
        check_range("min_target_count", self.min_target_count.unwrap_or(min), min, MAX_OFFSET, errors);
    }
}

/// One secret (with its principal) tried against several targets, DECNET's credential-reuse row.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CredentialReuseEntry {
    /// 32 hex digits, the same for the same secret, kind and principal.
    pub id: String,
    pub secret_sha256: String,
    pub secret_kind: String,
    pub principal: Option<String>,
    /// The principal, or "" when there is none.
    pub principal_key: String,
    /// The profiles of the addresses that have one.
    pub attacker_uuids: Vec<Uuid>,
    /// Distinct, sorted; at most 100.
    pub attacker_ips: Vec<String>,
    pub deckies: Vec<String>,
    pub services: Vec<String>,
    /// Distinct (decky, service) pairs.
    pub target_count: u64,
    pub attempt_count: u64,
    /// Always 1: findings are exact matches of the secret.
    pub confidence: f64,
    /// RFC 3339, UTC, milliseconds.
    pub first_seen: String,
    pub last_seen: String,
    /// Findings are grouped when asked for: the newest attempt.
    pub updated_at: String,
    pub secret_printable: String,
    pub secret_b64: String,
}

impl Listed for CredentialReuseEntry {
    const PAGE: &'static str = "CredentialReuseResponse";
    const COUNTED: &'static str = "Findings matching the filter, on every page.";
}

pub type CredentialReuseResponse = Page<CredentialReuseEntry>;

/// One page of credential-reuse findings, most targets first.
#[utoipa::path(
    get,
    path = "/credential-reuse",
    tag = "logs",
    security(("bearer" = [])),
    params(ReuseQuery),
    responses(
        (status = 200, description = "A page of findings, most targets first", body = CredentialReuseResponse),
        (status = 422, description = "A parameter out of range"),
        ViewerOnly,
    )
)]
pub async fn list_credential_reuse(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<ReuseQuery>,
) -> Result<Json<CredentialReuseResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let min_targets = query.min_target_count.map_or(MIN_REUSE_TARGETS, |min| min as u32);
    let page = state.db.credential_reuse(min_targets, given(&query.secret_kind), paging.limit, paging.offset).await?;
    let ips = page.rows.iter().flat_map(|finding| finding.attacker_ips.iter().cloned()).collect();
    let profiles = profile_uuids(&state.db, ips).await?;
    let data = page.rows.into_iter().map(|finding| reuse_entry(finding, &profiles)).collect();
    Ok(Json(paging.page_of(page.total, data)))
}

/// One credential-reuse finding, the row `GET /credential-reuse` lists under this id.
#[utoipa::path(
    get,
    path = "/credential-reuse/{reuse_id}",
    tag = "logs",
    security(("bearer" = [])),
    params(("reuse_id" = String, Path, description = "The finding's id, as the list gives it")),
    responses(
        (status = 200, description = "The finding", body = CredentialReuseEntry),
        (status = 404, description = "credential_reuse not found"),
        ViewerOnly,
    )
)]
pub async fn get_credential_reuse(
    State(state): State<AppState>,
    _viewer: Viewer,
    Path(reuse_id): Path<String>,
) -> Result<Json<CredentialReuseEntry>> {
    let finding = state.db.credential_reuse_finding(&reuse_id).await.or_not_found("credential_reuse not found")?;
    let profiles = profile_uuids(&state.db, finding.attacker_ips.clone()).await?;
    Ok(Json(reuse_entry(finding, &profiles)))
}

fn reuse_entry(finding: CredentialReuse, profiles: &HashMap<String, Uuid>) -> CredentialReuseEntry {
    CredentialReuseEntry {
        attacker_uuids: finding.attacker_ips.iter().filter_map(|ip| profiles.get(ip).copied()).collect(),
        id: finding.id,
        secret_sha256: finding.secret_sha256,
        secret_kind: finding.secret_kind,
        principal: finding.principal,
        principal_key: finding.principal_key,
        attacker_ips: finding.attacker_ips,
        deckies: finding.deckies,
        services: finding.services,
        target_count: finding.target_count,
        attempt_count: finding.attempt_count,
        confidence: 1.0,
        first_seen: format_utc(finding.first_seen),
        last_seen: format_utc(finding.last_seen),
        updated_at: format_utc(finding.last_seen),
        secret_printable: finding.secret_printable,
        secret_b64: finding.secret_b64,
    }
}
