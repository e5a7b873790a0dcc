//! `GET /stats`: the dashboard's headline counters, also sent by the log stream.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::guard::Viewer;
use super::{AppState, Result};
use crate::db::{Db, DbResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/stats", get(stats))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StatsResponse {
    /// Log rows stored.
    pub total_logs: u64,
    /// Distinct attacker addresses among them.
    pub unique_attackers: u64,
    /// Deckies running now. Always 0 until the fleet inventory lands.
    pub active_deckies: u64,
    /// Deckies deployed, running or not. Always 0 until the fleet inventory lands.
    pub deployed_deckies: u64,
}

/// The counters as they stand.
pub async fn summary(db: &Db) -> DbResult<StatsResponse> {
    let logs = db.log_stats().await?;
    Ok(StatsResponse {
        total_logs: logs.total_logs,
        unique_attackers: logs.unique_attackers,
        // The fleet (deckies, topologies) is not stored yet; DECNET counts its deckies here.
        active_deckies: 0,
        deployed_deckies: 0,
    })
}

/// Log and attacker counts, and the fleet's size (the decky counts are 0 until the fleet lands).
#[utoipa::path(
    get,
    path = "/api/v1/stats",
    tag = "logs",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The counters", body = StatsResponse),
        (status = 401, description = "Missing or invalid token"),
        (status = 403, description = "Password change required"),
    )
)]
pub async fn stats(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<StatsResponse>> {
    Ok(Json(summary(&state.db).await?))
}
