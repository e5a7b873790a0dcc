//! `GET /system/deployment-mode`: which role this master plays and how large its fleet topology is.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::guard::Viewer;
use super::responses::ViewerOnly;

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
    /// Swarm hosts that are active or enrolled and have an address.
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
pub async fn deployment_mode(State(state): State<AppState>, _viewer: Viewer) -> Json<DeploymentMode> {
    // Swarm hosts are enrolled through the swarm API, which has not landed: until it does no host
    // can be enrolled, so every deployment is single-host.
    Json(DeploymentMode {
        mode: DeploymentKind::Unihost,
        role: state.config.mode.as_str().to_string(),
        swarm_host_count: 0,
    })
}
