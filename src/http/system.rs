//! `GET /system/deployment-mode`: which role this master plays and how many swarm hosts deckies can
//! be sent to (active, with an address, on a master with `SVC_SWARM_ENABLED`): `swarm`
//! as soon as there is one.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::guard::Viewer;
use super::responses::ViewerOnly;
use super::{AppState, Result};
use crate::config::Mode;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(deployment_mode))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeploymentKind {
    /// Every decky runs on this host.
    Unihost,
    /// Deckies are spread over enrolled swarm hosts.
    Swarm,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentMode {
    pub mode: DeploymentKind,
    /// `master` or `agent`, from `SVC_MODE`.
    pub role: String,
    /// Swarm hosts that are active or enrolled and have an address (0 unless this is a master with
    /// `SVC_SWARM_ENABLED`).
    pub swarm_host_count: u64,
}

/// Deployment role and topology size.
#[utoipa::path(
    get,
    path = "/system/deployment-mode",
    tag = "system",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The deployment mode", body = DeploymentMode),
        ViewerOnly,
    )
)]
pub async fn deployment_mode(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<DeploymentMode>> {
    // Only a master with the swarm on dispatches to hosts (what `POST /deckies/deploy` does), so
    // only there do usable hosts count: otherwise the dashboard would list swarm deckies while
    // deploys stay on this host.
    let dispatches = state.config.mode == Mode::Master && state.config.swarm.enabled;
    let swarm_host_count = if dispatches {
        state.db.swarm_hosts(None).await?.iter().filter(|host| host.is_usable()).count() as u64
    } else {
        0
    };
    let mode = if swarm_host_count > 0 { DeploymentKind::Swarm } else { DeploymentKind::Unihost };
    Ok(Json(DeploymentMode { mode, role: state.config.mode.as_str().to_string(), swarm_host_count }))
}
