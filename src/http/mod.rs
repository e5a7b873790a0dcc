//! The HTTP API: one module per resource, each exposing `router()`, merged under `/api/v1` with every
//! layer added in one place by [`router`]. What every handler can reach is [`AppState`] (`state`);
//! how each failure is answered is decided in `error`; the live log stream, its SSE framing and the
//! log tail it waits on sit together under `stream`. Response types are named for what the client
//! sees (`…Entry`, `…Summary`, `…Response`); `…Row` is the database's word for what it stores.

pub mod artifacts;
pub mod attacker_evidence;
pub mod attackers;
pub mod auth;
pub mod bounty;
pub mod campaigns;
pub mod canary;
pub mod credentials;
pub mod deadline;
pub mod deckies;
pub mod docs;
pub mod error;
pub mod export;
pub mod extract;
pub mod guard;
pub mod headers;
pub mod health;
pub mod hot;
pub mod identities;
pub mod limit;
pub mod logs;
pub mod metrics;
pub mod paging;
pub mod profile;
pub mod realism;
pub mod redact;
pub mod responses;
mod serve;
pub mod state;
pub mod stats;
pub mod stream;
pub mod swarm;
pub mod system;
pub mod tarpit;
pub mod taxii;
pub mod topologies;
pub mod transcripts;
pub mod ttp;
pub mod users;
pub mod webhooks;
pub mod workers;

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::config::Config;

pub use error::{ApiError, Result};
pub use health::DatabaseHealth;
pub use hot::HotReads;
pub use limit::RateLimits;
pub use serve::{HEADER_READ_TIMEOUT, serve};
pub use state::AppState;
pub use stream::{LogTail, SseSlots};

/// Every request finishes or is answered 408 within this, so a graceful shutdown drains.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request body accepted (a deploy INI is at most 512 KiB).
const BODY_LIMIT: usize = 1024 * 1024;

/// The body of routes that only confirm: `{"message": …}`.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Message {
    pub message: String,
}

impl Message {
    pub fn new(message: impl Into<String>) -> Self {
        Message { message: message.into() }
    }
}

/// The routes under `/api/v1`, each registered once with its OpenAPI entry. Every write takes a JSON
/// body, but the routers whose routes also take others put that rule on their JSON routes
/// themselves, and are merged after it.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(health::router())
        .merge(system::router())
        .merge(auth::router())
        .merge(users::router())
        .merge(workers::router())
        .merge(ttp::router())
        .merge(tarpit::router())
        .merge(logs::router())
        .merge(stats::router())
        .merge(bounty::router())
        .merge(credentials::router())
        .merge(attackers::router())
        .merge(attacker_evidence::router())
        .merge(transcripts::router())
        .merge(artifacts::router())
        .merge(identities::router())
        .merge(campaigns::router())
        .merge(export::router())
        .merge(stream::router())
        .merge(webhooks::router())
        .merge(topologies::router())
        .merge(swarm::router())
        .merge(realism::router())
        .layer(axum::middleware::from_fn(extract::require_json))
        .merge(deckies::router())
        .merge(canary::router())
}

/// The API's routes and the OpenAPI document they describe.
fn routes_and_document() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (routes, mut document) =
        OpenApiRouter::with_openapi(docs::ApiDoc::openapi()).nest("/api/v1", api_routes()).split_for_parts();
    docs::complete(&mut document);
    (routes, document)
}

/// The OpenAPI document of the API, as `/openapi.json` serves it in developer mode.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes_and_document().1
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    let (app, document) = routes_and_document();
    let app = app.merge(taxii::router()).merge(metrics::router());
    let app = if state.config.api.developer { app.merge(docs::router(document)) } else { app };
    // The canary callback answers like any web server, so none of the API's layers (JSON errors,
    // security headers, CORS, metrics) wrap it.
    with_layers(app, state.clone()).merge(canary::callback_router(state))
}

/// Adds the shared layers (security headers, CORS, error reporting, panic recovery, timeouts, body limit, the 404
/// fallback, refusing a body not JSON under `/api/` as the API's routes do) to `routes`. Public so tests can wrap
/// routes of their own the same way.
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    let mut app = routes
        .fallback(error::not_found.layer(axum::middleware::from_fn(extract::require_json)))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(
            (state.config.clone(), REQUEST_TIMEOUT),
            deadline::request_deadline,
        ))
        .layer(CatchPanicLayer::custom(error::panic_response))
        .layer(axum::middleware::from_fn_with_state(state.clone(), error::report_internal_failures));
    if state.config.api.profile_requests {
        let profiler = profile::RequestProfiler::new(state.config.api.profile_dir.clone());
        app = app.layer(axum::middleware::from_fn_with_state(profiler, profile::profile_request));
    }
    if state.config.api.developer_tracing {
        // At INFO, so the default log filter shows every request with its status and latency; the
        // span is the request's server span when traces are exported (`crate::traces`).
        let trace =
            TraceLayer::new_for_http().make_span_with(crate::traces::server_span).on_response(metrics::span_response);
        app = app.layer(trace);
    }
    // Outside the timeout, panic and error layers, so what it counts is what the client got.
    app.layer(axum::middleware::from_fn_with_state(state.clone(), metrics::count_request))
        .layer(cors(&state.config))
        .layer(axum::middleware::from_fn(headers::security_headers))
        .with_state(state)
}

/// CORS exactly as the spec says: listed origins only, no credentials.
fn cors(config: &Config) -> CorsLayer {
    let origins: Vec<HeaderValue> = config.api.cors_origins.iter().filter_map(|o| o.parse().ok()).collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_credentials(false)
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE, Method::OPTIONS])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, HeaderName::from_static("last-event-id")])
}
