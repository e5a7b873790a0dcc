//! The attack techniques an attacker showed, as DECNET's attacker page reads them
//! (`GET /ttp/by-attacker/{uuid}`): one row per technique its commands show, by the mapping the
//! exports use (`export::techniques`), with how many commands showed it and when first and last.
//! A technique is named only by what a command's own words show, so each row's confidence is 1.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::attackers::attacker_not_found;
use super::extract::ValidPath;
use super::guard::Viewer;
use super::responses::{AttackerNotFound, ViewerOnly};
use super::{AppState, Result};
use crate::export::techniques::{Seen, seen_in};
use crate::time::format_utc;

/// The commands read per attacker, newest first: the rows' counts are over these.
const COMMANDS_READ: u32 = 10_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(techniques_by_attacker))
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
    /// Commands that showed it.
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
    state.db.attacker(uuid).await.map_err(attacker_not_found)?;
    let commands = state.db.attacker_commands(uuid, None, COMMANDS_READ, 0).await?.rows;
    Ok(Json(seen_in(&commands).into_iter().map(TechniqueRow::from).collect()))
}
