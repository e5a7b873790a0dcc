//! The OpenAPI 3.1 document generated from the handlers, and the interactive docs that render it.
//! Mounted only in developer mode.

use axum::Router;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi};
use utoipa_redoc::{Redoc, Servable};
use utoipa_swagger_ui::SwaggerUi;

use super::extract::TIME_FILTER_PATTERN;
use super::{
    AppState, attacker_evidence, attackers, auth, bounty, credentials, deckies, health, logs, stats, stream, system,
    tarpit, topologies, users, webhooks, workers,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "svc",
        version = "1.0.0",
        description = "Control plane of a honeypot fleet: logs, credentials, attacker profiles, the fleet, \
                       tarpit rules, topologies, workers and webhooks."
    ),
    paths(
        health::health,
        system::deployment_mode,
        auth::login,
        auth::logout,
        auth::change_password,
        auth::sse_ticket,
        users::config,
        users::create_user,
        users::delete_user,
        users::set_role,
        users::reset_password,
        webhooks::create_webhook,
        webhooks::list_webhooks,
        webhooks::get_webhook,
        webhooks::update_webhook,
        webhooks::delete_webhook,
        webhooks::test_webhook,
        workers::list_workers,
        workers::stop_worker,
        workers::start_worker,
        workers::start_all_workers,
        deckies::deploy,
        deckies::lifecycle,
        deckies::list_deckies,
        deckies::teardown,
        deckies::mutate,
        deckies::mutate_interval,
        tarpit::set_rule,
        tarpit::get_rule,
        tarpit::remove_rule,
        logs::list_logs,
        logs::histogram,
        stats::stats,
        bounty::list_bounties,
        credentials::list_credentials,
        credentials::list_credential_reuse,
        attackers::list_attackers,
        attackers::attacker_detail,
        attackers::attacker_commands,
        attacker_evidence::attacker_artifacts,
        attacker_evidence::attacker_mail,
        attacker_evidence::attacker_smtp_targets,
        stream::stream,
        stream::attacker_events::attacker_events,
        topologies::list,
        topologies::create,
        topologies::blank,
        topologies::services,
        topologies::archetypes,
        topologies::next_subnet,
        topologies::detail,
        topologies::remove,
        topologies::status_events,
        topologies::deploy,
        topologies::teardown,
        topologies::enqueue,
        topologies::mutations,
        topologies::lan_next_ip,
        topologies::add_lan,
        topologies::update_lan,
        topologies::remove_lan,
        topologies::add_decky,
        topologies::update_decky,
        topologies::remove_decky,
        topologies::add_edge,
        topologies::remove_edge,
        stream::topology_events::topology_events,
    ),
    modifiers(&BearerAuth, &ParameterRules),
    tags(
        (name = "system", description = "Health and deployment"),
        (name = "auth", description = "Login, logout, password change, stream tickets"),
        (name = "config", description = "Settings and user management"),
        (name = "workers", description = "Background workers: heartbeats and control"),
        (name = "fleet", description = "Deckies: deploy from an INI, lifecycle polling, inventory, teardown, tarpit rules"),
        (name = "logs", description = "Logs, their statistics, the live log stream and the bounty vault"),
        (name = "attackers", description = "Attacker profiles, their commands and behavioural observations"),
        (name = "topologies", description = "Topologies (multi-LAN decoy networks): generate, edit while pending, deploy, tear down, the mutation queue and its live events"),
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
/// ([`TIME_FILTER_PATTERN`], the one the server matches), and `Last-Event-ID` a non-negative integer.
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
                    "start_time" | "end_time" => schema.pattern = Some(TIME_FILTER_PATTERN.to_string()),
                    "Last-Event-ID" => schema.minimum = Some(0.into()),
                    _ => {}
                }
            }
        }
    }
}

/// `/openapi.json`, `/docs` (Swagger UI) and `/redoc`, outside the `/api/v1` prefix.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(SwaggerUi::new("/docs").url("/openapi.json", ApiDoc::openapi()))
        .merge(Redoc::with_url("/redoc", ApiDoc::openapi()))
}
