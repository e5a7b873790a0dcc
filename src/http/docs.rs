//! The OpenAPI 3.1 document generated from the handlers, and the interactive docs that render it.
//! Mounted only in developer mode. The operations come from the routes themselves (each module's
//! `router()` registers a handler and its `#[utoipa::path]` together); here are what the document
//! says as a whole ([`ApiDoc`]: title, tags, the bearer scheme) and the rules [`complete`] writes
//! into every operation once they are all in.

use axum::Router;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi};
use utoipa_redoc::{Redoc, Servable};
use utoipa_swagger_ui::SwaggerUi;

use super::AppState;
use super::extract::TIME_FILTER_PATTERN;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "svc",
        version = "1.0.0",
        description = "Control plane of a honeypot fleet: logs, credentials, attacker profiles, the fleet, \
                       tarpit rules, topologies, workers, webhooks and swarm hosts."
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "system", description = "Health and deployment"),
        (name = "auth", description = "Login, logout, password change, stream tickets"),
        (name = "config", description = "Settings and user management"),
        (name = "workers", description = "Background workers: heartbeats and control"),
        (name = "fleet", description = "Deckies: deploy from an INI, lifecycle polling, inventory, teardown, tarpit rules"),
        (name = "logs", description = "Logs, their statistics, the live log stream and the bounty vault"),
        (name = "attackers", description = "Attacker profiles, their commands and behavioural observations"),
        (name = "identities", description = "Attackers seen from several addresses linked into one identity, with the evidence"),
        (name = "export", description = "Threat-intel downloads: STIX 2.1, MISP, ATT&CK Navigator, DECNET's JSON export"),
        (name = "topologies", description = "Topologies (multi-LAN decoy networks): generate, edit while pending, deploy, tear down, the mutation queue and its live events"),
        (name = "swarm", description = "Worker hosts: enrollment bundles, hosts and their deckies, teardown, decommission"),
        (name = "realism", description = "What makes deckies look lived in: the planner's weights, the global persona pool, the synthetic files, the LLM provider"),
        (name = "canary", description = "Canary tokens: bait planted in deckies that calls home, the blobs they are made from, and their triggers"),
    )
)]
pub struct ApiDoc;

/// Declares the `bearer` scheme the operations' `security` refers to.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let scheme = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build();
        components.add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

/// Rules of parameters the handlers check by hand, written into every operation that takes them, so
/// the document states exactly what the server enforces: the time filters' pattern
/// ([`TIME_FILTER_PATTERN`], the one the server matches) on `start_time` and `end_time` and the
/// exports' `since` and `until`, and `Last-Event-ID` a non-negative integer.
struct ParameterRules;

impl Modify for ParameterRules {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let items = openapi.paths.paths.values_mut();
        let operations =
            items.flat_map(|item| [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete]);
        for operation in operations.flatten() {
            for parameter in operation.parameters.iter_mut().flatten() {
                let Some(RefOr::T(Schema::Object(schema))) = &mut parameter.schema else { continue };
                match parameter.name.as_str() {
                    "start_time" | "end_time" | "since" | "until" => {
                        schema.pattern = Some(TIME_FILTER_PATTERN.to_string())
                    }
                    "Last-Event-ID" => schema.minimum = Some(0.into()),
                    _ => {}
                }
            }
        }
    }
}

/// Finishes `document` once every route's operation is in it.
pub(super) fn complete(document: &mut utoipa::openapi::OpenApi) {
    ParameterRules.modify(document);
}

/// `/openapi.json`, `/docs` (Swagger UI) and `/redoc`, outside the `/api/v1` prefix.
pub fn router(document: utoipa::openapi::OpenApi) -> Router<AppState> {
    Router::new()
        .merge(SwaggerUi::new("/docs").url("/openapi.json", document.clone()))
        .merge(Redoc::with_url("/redoc", document))
}
