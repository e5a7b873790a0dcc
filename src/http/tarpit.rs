//! The tarpit's routes, `/deckies/{name}/tarpit`: `POST` sets the decky's rule (admin, 201),
//! `GET` reads it with the attackers caught now (viewer), `DELETE` removes it (admin). DECNET's
//! shapes, plus how the rule stands: `delay_in_force` is false, and `enforcement` says why, where
//! the kernel lacks netem (the ports are throttled instead) or traffic control failed. `tc`'s own
//! words never reach the client.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{FieldError, Integer, ValidJson, ValidPath, Validate};
use super::guard::{Admin, Viewer};
use super::responses::{AdminOnly, ViewerOnly};
use super::{ApiError, AppState, Message, Result};
use crate::db::{Enforcement, StoredRule, TarpitRule};
use crate::fleet::decky_name::DeckyName;
use crate::tarpit::TarpitError;

/// The most ports one rule may name (a filter per port and protocol each).
const MAX_PORTS: usize = 256;
const MIN_DELAY_MS: i64 = 100;
const MAX_DELAY_MS: i64 = 300_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_rule, set_rule, remove_rule))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TarpitRequest {
    /// The decky's TCP ports to slow, 1 to 65535; at least one, at most 256.
    #[schema(schema_with = port_list)]
    pub ports: Vec<Integer>,
    /// The delay added to the decky's replies on those ports, 100 to 300000 ms.
    #[schema(value_type = i64, minimum = 100, maximum = 300000)]
    pub delay_ms: Integer,
}

/// `ports` as the document states it, every bound the server checks included.
fn port_list() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let port = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(65535));
    ArrayBuilder::new()
        .items(port)
        .min_items(Some(1))
        .max_items(Some(MAX_PORTS))
        .description(Some("The decky's TCP ports to slow, 1 to 65535; at least one, at most 256."))
        .build()
}

impl Validate for TarpitRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if self.ports.is_empty() {
            errors.push(FieldError::new("too_short", &["body", "ports"], "List should have at least 1 item"));
        }
        if self.ports.len() > MAX_PORTS {
            errors.push(FieldError::new(
                "too_long",
                &["body", "ports"],
                format!("List should have at most {MAX_PORTS} items"),
            ));
        }
        if self.ports.iter().any(|p| !(1..=65535).contains(&p.0)) {
            errors.push(FieldError::new("value_error", &["body", "ports"], "Every port must be from 1 to 65535"));
        }
        if !(MIN_DELAY_MS..=MAX_DELAY_MS).contains(&self.delay_ms.0) {
            errors.push(FieldError::new(
                "value_error",
                &["body", "delay_ms"],
                format!("delay_ms must be from {MIN_DELAY_MS} to {MAX_DELAY_MS}"),
            ));
        }
    }
}

/// How a rule stands in its decky.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuleStanding {
    /// `delay` (in force), `throttle` (the kernel lacks netem: the ports are rate-limited, with no
    /// delay), `failed` (traffic control failed; retried at each watcher poll) or `pending` (not
    /// applied yet).
    pub enforcement: Enforcement,
    /// Whether the rule's delay is in force now.
    pub delay_in_force: bool,
}

impl RuleStanding {
    fn of(enforcement: Enforcement) -> RuleStanding {
        RuleStanding { enforcement, delay_in_force: enforcement == Enforcement::Delay }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TarpitEnabled {
    /// `tarpit active`.
    pub message: String,
    #[serde(flatten)]
    pub standing: RuleStanding,
}

/// An attacker held by the tarpit now (as of the watcher's last poll).
#[derive(Debug, Serialize, ToSchema)]
pub struct ActiveConnection {
    pub ip: String,
    pub port: u16,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TarpitStatus {
    pub rule: TarpitRule,
    pub active_connections: Vec<ActiveConnection>,
    #[serde(flatten)]
    pub standing: RuleStanding,
}

fn tarpit_error(err: TarpitError) -> ApiError {
    match err {
        TarpitError::NotFound(detail) => ApiError::NotFound(detail.into()),
        TarpitError::TrafficControl => ApiError::Conflict("tarpit command failed".into()),
        TarpitError::Store(err) => err.into(),
    }
}

/// Sets the decky's rule, replacing any, and puts it in force; logs `tarpit_enabled`.
#[utoipa::path(
    post,
    path = "/deckies/{name}/tarpit",
    tag = "fleet",
    params(("name" = DeckyName, Path, description = "The decky's name")),
    request_body = TarpitRequest,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Set; `delay_in_force` says whether the delay holds", body = TarpitEnabled),
        (status = 400, description = "Malformed body"),
        (status = 404, description = "No such decky, or it is not running"),
        (status = 409, description = "Traffic control failed (generic detail)"),
        (status = 422, description = "Invalid name, ports or delay"),
        AdminOnly,
    )
)]
pub async fn set_rule(
    State(state): State<AppState>,
    Admin(session): Admin,
    ValidPath(DeckyName(name)): ValidPath<DeckyName>,
    ValidJson(request): ValidJson<TarpitRequest>,
) -> Result<(StatusCode, Json<TarpitEnabled>)> {
    // Validated above: every port is in 1..=65535 and the delay in range.
    let ports: Vec<u16> = request.ports.iter().filter_map(|p| u16::try_from(p.0).ok()).collect();
    let delay_ms = u32::try_from(request.delay_ms.0).unwrap_or_default();
    let stored = state.tarpit.enable(&name, &ports, delay_ms, &session.user).await.map_err(tarpit_error)?;
    let body = TarpitEnabled { message: "tarpit active".into(), standing: RuleStanding::of(stored.enforcement) };
    Ok((StatusCode::CREATED, Json(body)))
}

/// The decky's rule, how it stands, and the attackers it holds now.
#[utoipa::path(
    get,
    path = "/deckies/{name}/tarpit",
    tag = "fleet",
    params(("name" = DeckyName, Path, description = "The decky's name")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The rule", body = TarpitStatus),
        (status = 404, description = "No rule for this decky"),
        (status = 422, description = "Invalid name"),
        ViewerOnly,
    )
)]
pub async fn get_rule(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(DeckyName(name)): ValidPath<DeckyName>,
) -> Result<Json<TarpitStatus>> {
    let (stored, sessions) = state.tarpit.rule(&name).await.map_err(tarpit_error)?;
    let StoredRule { rule, enforcement, .. } = stored;
    let active_connections =
        sessions.into_iter().map(|s| ActiveConnection { ip: s.attacker_ip, port: s.port }).collect();
    Ok(Json(TarpitStatus { rule, active_connections, standing: RuleStanding::of(enforcement) }))
}

/// Removes the decky's rule and what it put in force; logs `tarpit_disabled`.
#[utoipa::path(
    delete,
    path = "/deckies/{name}/tarpit",
    tag = "fleet",
    params(("name" = DeckyName, Path, description = "The decky's name")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Removed", body = Message),
        (status = 404, description = "No rule for this decky"),
        (status = 409, description = "Traffic control failed (generic detail)"),
        (status = 422, description = "Invalid name"),
        AdminOnly,
    )
)]
pub async fn remove_rule(
    State(state): State<AppState>,
    Admin(session): Admin,
    ValidPath(DeckyName(name)): ValidPath<DeckyName>,
) -> Result<Json<Message>> {
    state.tarpit.disable(&name, &session.user).await.map_err(tarpit_error)?;
    Ok(Json(Message::new("tarpit removed")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(ports: Vec<i64>, delay_ms: i64) -> Vec<&'static str> {
        let mut errors = Vec::new();
        TarpitRequest { ports: ports.into_iter().map(Integer).collect(), delay_ms: Integer(delay_ms) }
            .validate(&mut errors);
        errors.iter().map(|e| e.kind).collect()
    }

    #[test]
    fn ports_and_delay_are_checked() {
        assert!(problems(vec![22, 65535, 1], 100).is_empty());
        assert!(problems(vec![22], 300_000).is_empty());
        assert_eq!(problems(vec![], 500), ["too_short"]);
        assert_eq!(problems(vec![0], 500), ["value_error"]);
        assert_eq!(problems(vec![65536], 500), ["value_error"]);
        assert_eq!(problems(vec![22], 99), ["value_error"]);
        assert_eq!(problems(vec![22], 300_001), ["value_error"]);
        assert_eq!(problems((1..=257).collect(), 500), ["too_long"]);
    }
}
