//! `GET /stats`: the dashboard's headline counters, also sent by the log stream.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::guard::Viewer;
use super::responses::ViewerOnly;
use super::{AppState, Result};
use crate::db::{Db, DbResult};
use crate::fleet::Fleet;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stats))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StatsResponse {
    /// Log rows stored.
    pub total_logs: u64,
    /// Distinct attacker addresses among them.
    pub unique_attackers: u64,
    /// Deckies whose container is running now.
    pub active_deckies: u64,
    /// Deckies deployed, running or not.
    pub deployed_deckies: u64,
}

/// The counters as they stand.
pub async fn summary(db: &Db, fleet: &Fleet) -> DbResult<StatsResponse> {
    let logs = db.log_stats().await?;
    let (active_deckies, deployed_deckies) = fleet.counts().await?;
    Ok(StatsResponse {
        total_logs: logs.total_logs,
        unique_attackers: logs.unique_attackers,
        active_deckies,
        deployed_deckies,
    })
}

/// Log and attacker counts, and the fleet's size.
#[utoipa::path(
    get,
    path = "/stats",
    tag = "logs",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The counters", body = StatsResponse),
        ViewerOnly,
    )
)]
pub async fn stats(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<StatsResponse>> {
    Ok(Json(summary(&state.db, &state.fleet).await?))
}
