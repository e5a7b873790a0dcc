//! The attack techniques an attacker showed, as DECNET's attacker page reads them
//! (`GET /ttp/by-attacker/{uuid}`): one row per technique its commands and logins show, by the
//! rules the exports use (`export::techniques`), with how many commands or login attempts showed it
//! and when first and last. `GET /ttp/by-identity/{uuid}` and `/ttp/by-campaign/{uuid}` are the
//! same rows over every attacker of an identity or a campaign (its identity and campaign pages). A technique is named only by what was typed or tried, so each row's
//! confidence is 1. `GET /ttp/rules` lists those rules in DECNET's catalogue shape (Config → TTP
//! rules); they are built in, so each is `enabled` and no operator state is kept.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::attackers::ATTACKER_NOT_FOUND;
use super::campaigns::campaign_or_404;
use super::error::OrNotFound;
use super::extract::ValidPath;
use super::guard::Viewer;
use super::identities::identity_or_404;
use super::responses::{AttackerNotFound, ViewerOnly};
use super::{AppState, Result};
use crate::db::CredentialFilter;
use crate::export::techniques::{Login, RULES, Rule, Seen, seen_in};
use crate::time::format_utc;

/// The commands (and credentials) read per attacker, newest first: the rows' counts are over these.
const COMMANDS_READ: u32 = 10_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(techniques_by_attacker))
        .routes(routes!(techniques_by_identity))
        .routes(routes!(techniques_by_campaign))
        .routes(routes!(rules))
}

/// DECNET's `IdentityTechniqueRow`: a technique (or a sub-technique under its technique).
#[derive(Debug, Serialize, ToSchema)]
pub struct TechniqueRow {
    /// The technique, `T1059` (a sub-technique's parent).
    pub technique_id: String,
    pub technique_name: Option<String>,
    /// `T1059.004`, or null for a technique without one.
    pub sub_technique_id: Option<String>,
    pub sub_technique_name: Option<String>,
    /// The ATT&CK tactic's short name.
    pub tactic: String,
    /// Commands, or login attempts, that showed it.
    pub count: u64,
    /// RFC 3339, UTC.
    pub first_seen: String,
    pub last_seen: String,
    pub confidence_max: f64,
    pub mitre_url: Option<String>,
}

impl From<Seen> for TechniqueRow {
    fn from(seen: Seen) -> Self {
        let technique = seen.technique;
        let (technique_id, technique_name, sub) = match technique.parent() {
            Some((id, name)) => (id, name, Some((technique.id.to_string(), technique.name.to_string()))),
            None => (technique.id, technique.name, None),
        };
        TechniqueRow {
            technique_id: technique_id.into(),
            technique_name: Some(technique_name.into()),
            sub_technique_id: sub.as_ref().map(|(id, _)| id.clone()),
            sub_technique_name: sub.map(|(_, name)| name),
            tactic: technique.tactic.into(),
            count: seen.count,
            first_seen: format_utc(seen.first),
            last_seen: format_utc(seen.last),
            confidence_max: 1.0,
            mitre_url: Some(technique.url()),
        }
    }
}

/// The techniques the attacker's commands show, in technique order.
#[utoipa::path(
    get,
    path = "/ttp/by-attacker/{uuid}",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "One row per technique its commands show", body = Vec<TechniqueRow>),
        (status = 422, description = "Not a uuid"),
        ViewerOnly, AttackerNotFound,
    )
)]
pub async fn techniques_by_attacker(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Vec<TechniqueRow>>> {
    let profile = state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    techniques_of(&state, &[(uuid, profile.ip)]).await.map(Json)
}

/// The techniques the commands of an identity's attackers show, in technique order.
#[utoipa::path(
    get,
    path = "/ttp/by-identity/{uuid}",
    tag = "identities",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The identity")),
    responses(
        (status = 200, description = "One row per technique its attackers' commands show", body = Vec<TechniqueRow>),
        (status = 404, description = "Identity not found"),
        (status = 422, description = "Not a uuid"),
        ViewerOnly,
    )
)]
pub async fn techniques_by_identity(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Vec<TechniqueRow>>> {
    let snapshot = state.identities.snapshot(&state.db).await?;
    let identity = identity_or_404(&snapshot, uuid)?;
    let attackers: Vec<(Uuid, String)> = identity.members.iter().map(|m| (m.uuid, m.ip.clone())).collect();
    techniques_of(&state, &attackers).await.map(Json)
}

/// The techniques the commands of a campaign's attackers show, in technique order.
#[utoipa::path(
    get,
    path = "/ttp/by-campaign/{uuid}",
    tag = "identities",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The campaign")),
    responses(
        (status = 200, description = "One row per technique its attackers' commands show", body = Vec<TechniqueRow>),
        (status = 404, description = "Campaign not found"),
        (status = 422, description = "Not a uuid"),
        ViewerOnly,
    )
)]
pub async fn techniques_by_campaign(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Vec<TechniqueRow>>> {
    let snapshot = state.identities.snapshot(&state.db).await?;
    let campaign = campaign_or_404(&snapshot, uuid)?;
    let attackers: Vec<(Uuid, String)> = campaign
        .identities
        .iter()
        .filter_map(|identity| snapshot.identity(*identity))
        .flat_map(|identity| identity.members.iter().map(|m| (m.uuid, m.ip.clone())))
        .collect();
    techniques_of(&state, &attackers).await.map(Json)
}

/// The attackers of one identity or campaign read at most (the oldest first): each costs two reads.
const ATTACKERS_READ: usize = 500;

/// The rows over everything these attackers (uuid and address) typed and tried.
async fn techniques_of(state: &AppState, attackers: &[(Uuid, String)]) -> Result<Vec<TechniqueRow>> {
    let (mut commands, mut credentials) = (Vec::new(), Vec::new());
    for (uuid, ip) in attackers.iter().take(ATTACKERS_READ) {
        commands.extend(state.db.attacker_commands(*uuid, None, COMMANDS_READ, 0).await?.rows);
        let filter = CredentialFilter { attacker_ip: Some(ip.clone()), ..CredentialFilter::default() };
        credentials.extend(state.db.credentials(&filter, COMMANDS_READ, 0).await?.rows);
    }
    let logins: Vec<Login<'_>> = credentials
        .iter()
        .map(|c| Login {
            outcome: c.outcome.as_deref(),
            attempts: c.attempt_count,
            first: c.first_seen,
            last: c.last_seen,
        })
        .collect();
    Ok(seen_in(&commands, &logins).into_iter().map(TechniqueRow::from).collect())
}

/// DECNET's `RuleCatalogueRow`: a rule and its operational state.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuleRow {
    pub rule_id: String,
    pub rule_version: u32,
    /// The technique it tags, `T1105 Ingress Tool Transfer`.
    pub name: String,
    pub description: String,
    /// Always `enabled`: the rules are built in and no operator state is kept.
    pub state: String,
    pub confidence_max: Option<f64>,
    pub expires_at: Option<String>,
    pub reason: Option<String>,
    pub set_by: Option<String>,
    pub set_at: Option<String>,
}

impl From<&Rule> for RuleRow {
    fn from(rule: &Rule) -> Self {
        RuleRow {
            rule_id: rule.id.into(),
            rule_version: rule.version,
            name: format!("{} {}", rule.technique.id, rule.technique.name),
            description: rule.description(),
            state: "enabled".into(),
            confidence_max: None,
            expires_at: None,
            reason: None,
            set_by: None,
            set_at: None,
        }
    }
}

/// The tagging rules, by id.
#[utoipa::path(
    get,
    path = "/ttp/rules",
    tag = "attackers",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every rule, by id", body = Vec<RuleRow>),
        ViewerOnly,
    )
)]
pub async fn rules(_viewer: Viewer) -> Json<Vec<RuleRow>> {
    let mut rows: Vec<RuleRow> = RULES.iter().map(RuleRow::from).collect();
    rows.sort_by(|a, b| a.rule_id.cmp(&b.rule_id));
    Json(rows)
}
