//! The OpenAPI 3.1 document generated from the handlers, and the interactive docs that render it.
//! Mounted only in developer mode.

use axum::Router;
use utoipa::OpenApi;
use utoipa_redoc::{Redoc, Servable};
use utoipa_swagger_ui::SwaggerUi;

use super::{AppState, health, system, workers};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "svc",
        version = "1.0.0",
        description = "Control plane of a honeypot fleet: logs, credentials, attacker profiles, the fleet, \
                       tarpit rules, topologies, workers and webhooks."
    ),
    paths(health::health, system::deployment_mode, workers::list_workers, workers::stop_worker),
    tags(
        (name = "system", description = "Health and deployment"),
        (name = "workers", description = "Background workers: heartbeats and control")
    )
)]
pub struct ApiDoc;

/// `/openapi.json`, `/docs` (Swagger UI) and `/redoc`, outside the `/api/v1` prefix.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(SwaggerUi::new("/docs").url("/openapi.json", ApiDoc::openapi()))
        .merge(Redoc::with_url("/redoc", ApiDoc::openapi()))
}
