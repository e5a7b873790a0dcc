//! `/webhooks/*` (admin): create, list, read, change and delete webhooks, and send one a test ping.
//! DECNET's paths, fields and texts. The secret is returned once, by create, and never again; a
//! URL must pass the destination rules (`webhook::destination`) at create and at patch, as it must
//! again before every delivery. Create is limited to 20 per minute per client address.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::routing::get;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::OrNotFound;
use super::extract::{FieldError, ValidJson, ValidPath, Validate, check_name};
use super::guard::Admin;
use super::responses::{AdminOnly, NotAUuid, NotJson, WebhookNotFound};
use super::{ApiError, AppState, Message, Result};
use crate::bus::{Event, topics};
use crate::db::{DbError, Webhook, WebhookChange};
use crate::secret::Secret;
use crate::time::format_utc;
use crate::webhook::send::Envelope;
use crate::webhook::{self, SimpleEvent, Target};

/// A webhook selects at most this many patterns.
const MAX_PATTERNS: usize = 100;
const SECRET_CHARS: std::ops::RangeInclusive<usize> = 16..=256;
const NOT_FOUND: &str = "Webhook not found";
const NAME_TAKEN: &str = "Webhook name already exists";
const NO_PATTERNS: &str = "Provide at least one simple_events entry or topic_patterns pattern.";
const CLEARED_PATTERNS: &str = "Cannot clear all patterns; disable the webhook instead.";
const INSECURE_URL: &str = "insecure_url: URL uses http://. Event bodies (including payload fields) traverse the \
     wire in plaintext; HMAC still detects tampering but anyone on-path can read the event. Use https:// in \
     production.";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(test_webhook))
        // Also without the trailing slash the document (as DECNET's) gives it.
        .route("/webhooks", get(list_webhooks).post(create_webhook))
}

/// A webhook as the API shows it: never its secret.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookResponse {
    pub uuid: Uuid,
    pub name: String,
    pub url: String,
    pub topic_patterns: Vec<String>,
    pub enabled: bool,
    pub consecutive_failures: u32,
    pub last_success_at: Option<String>,
    pub last_failure_at: Option<String>,
    pub last_error: Option<String>,
    pub auto_disabled_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Advice that does not block: `insecure_url: …` for an `http://` URL.
    pub warnings: Vec<String>,
}

impl From<Webhook> for WebhookResponse {
    fn from(webhook: Webhook) -> Self {
        let warnings = if webhook.url.to_ascii_lowercase().starts_with("http://") {
            vec![INSECURE_URL.to_string()]
        } else {
            vec![]
        };
        WebhookResponse {
            uuid: webhook.uuid,
            name: webhook.name,
            url: webhook.url,
            topic_patterns: webhook.topic_patterns,
            enabled: webhook.enabled,
            consecutive_failures: webhook.consecutive_failures,
            last_success_at: webhook.last_success_at.map(format_utc),
            last_failure_at: webhook.last_failure_at.map(format_utc),
            last_error: webhook.last_error,
            auto_disabled_at: webhook.auto_disabled_at.map(format_utc),
            created_at: format_utc(webhook.created_at),
            updated_at: format_utc(webhook.updated_at),
            warnings,
        }
    }
}

/// The create answer: the webhook and, this once, its secret.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub webhook: WebhookResponse,
    pub secret: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateWebhookRequest {
    /// 1 to 64 characters, unique in any letter case.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// `http` or `https`, to a host whose every address is public.
    #[schema(min_length = 1, max_length = 2000)]
    pub url: String,
    /// The HMAC key, 16 to 256 characters; generated when absent.
    #[serde(default)]
    #[schema(min_length = 16, max_length = 256)]
    pub secret: Option<String>,
    #[serde(default)]
    pub simple_events: Vec<SimpleEvent>,
    /// Bus subject patterns (`attacker.>`, `decky.*.state`).
    #[serde(default)]
    pub topic_patterns: Vec<String>,
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

impl Validate for CreateWebhookRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_name("name", &self.name, errors);
        check_url(&self.url, errors);
        check_secret(self.secret.as_deref(), errors);
        check_patterns(&self.topic_patterns, errors);
    }
}

/// Every field optional; what is absent stays as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct UpdateWebhookRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: Option<String>,
    #[schema(min_length = 1, max_length = 2000)]
    pub url: Option<String>,
    #[schema(min_length = 16, max_length = 256)]
    pub secret: Option<String>,
    pub simple_events: Option<Vec<SimpleEvent>>,
    pub topic_patterns: Option<Vec<String>>,
    /// Enabling a disabled webhook clears its failure state.
    pub enabled: Option<bool>,
}

impl Validate for UpdateWebhookRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(name) = &self.name {
            check_name("name", name, errors);
        }
        if let Some(url) = &self.url {
            check_url(url, errors);
        }
        check_secret(self.secret.as_deref(), errors);
        check_patterns(self.topic_patterns.as_deref().unwrap_or_default(), errors);
    }
}

fn check_url(url: &str, errors: &mut Vec<FieldError>) {
    if let Err(refusal) = Target::parse(url) {
        errors.push(FieldError::new("url_parsing", &["body", "url"], refusal.to_string()));
    }
}

fn check_secret(secret: Option<&str>, errors: &mut Vec<FieldError>) {
    let Some(chars) = secret.map(|s| s.chars().count()) else { return };
    if chars < *SECRET_CHARS.start() {
        errors.push(FieldError::new(
            "string_too_short",
            &["body", "secret"],
            "String should have at least 16 characters",
        ));
    } else if chars > *SECRET_CHARS.end() {
        errors.push(FieldError::new(
            "string_too_long",
            &["body", "secret"],
            "String should have at most 256 characters",
        ));
    }
}

fn check_patterns(patterns: &[String], errors: &mut Vec<FieldError>) {
    if patterns.len() > MAX_PATTERNS {
        errors.push(FieldError::new("too_long", &["body", "topic_patterns"], "List should have at most 100 items"));
    }
    for pattern in patterns {
        if let Err(err) = topics::check_pattern(pattern) {
            errors.push(FieldError::new("value_error", &["body", "topic_patterns"], err.to_string()));
        }
    }
}

/// The URL as stored, once its host resolved to allowed addresses only: 422 otherwise.
async fn checked_url(state: &AppState, url: &str) -> Result<String> {
    let target = Target::parse(url).map_err(|refusal| ApiError::unprocessable(refusal.to_string()))?;
    target
        .resolve(state.config.webhook.allow_private)
        .await
        .map_err(|refusal| ApiError::unprocessable(refusal.to_string()))?;
    Ok(target.as_str().to_string())
}

/// A webhook written: a name another webhook has is a 409, a webhook that is gone a 404.
fn written<T>(result: std::result::Result<T, DbError>) -> Result<T> {
    match result {
        Err(DbError::Conflict) => Err(ApiError::conflict(NAME_TAKEN)),
        other => other.or_not_found(NOT_FOUND),
    }
}

/// Tells the delivery worker at once; it also reloads on its own, so a lost notice only delays.
async fn announce_change(state: &AppState) {
    let event = Event::new(topics::WEBHOOKS_CHANGED, "changed", json!({}));
    if let Err(err) = state.bus.publish(&event).await {
        tracing::debug!(error = %err, "Webhook change notice not published");
    }
}

/// Creates a webhook; the answer carries its secret, the only time it is shown.
#[utoipa::path(
    post, path = "/webhooks/", tag = "webhooks", security(("bearer" = [])),
    request_body = CreateWebhookRequest,
    responses(
        (status = 201, description = "Created; the secret is in this answer only", body = WebhookCreated),
        (status = 400, description = "No event selected, or a structurally invalid body"),
        (status = 409, description = "Webhook name already exists"),
        (status = 422, description = "Invalid URL, pattern or secret, or a destination the rules refuse"),
        (status = 429, description = "Over 20 creations a minute from this address; see Retry-After"),
        AdminOnly, NotJson,
    )
)]
pub async fn create_webhook(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<CreateWebhookRequest>,
) -> Result<(StatusCode, Json<WebhookCreated>)> {
    state.limits.webhook_create(peer.ip()).await?;
    let topic_patterns = webhook::merge_patterns(&body.simple_events, &body.topic_patterns);
    if topic_patterns.is_empty() {
        return Err(ApiError::bad_request(NO_PATTERNS));
    }
    let url = checked_url(&state, &body.url).await?;
    let secret = body.secret.map(Secret::new).unwrap_or_else(webhook::generate_secret);
    let now = Utc::now();
    let created = Webhook {
        uuid: Uuid::new_v4(),
        name: body.name,
        url,
        secret: secret.clone(),
        topic_patterns,
        enabled: body.enabled,
        consecutive_failures: 0,
        last_success_at: None,
        last_failure_at: None,
        last_error: None,
        auto_disabled_at: None,
        created_at: now,
        updated_at: now,
    };
    written(state.db.add_webhook(&created).await)?;
    tracing::info!(uuid = %created.uuid, name = %created.name, by = %admin.user.username, "Webhook created");
    announce_change(&state).await;
    let answer = WebhookCreated { webhook: created.into(), secret: secret.expose().to_string() };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// Every webhook, oldest first, without secrets.
#[utoipa::path(
    get, path = "/webhooks/", tag = "webhooks", security(("bearer" = [])),
    responses(
        (status = 200, description = "The webhooks", body = [WebhookResponse]),
        AdminOnly,
    )
)]
pub async fn list_webhooks(State(state): State<AppState>, Admin(_admin): Admin) -> Result<Json<Vec<WebhookResponse>>> {
    Ok(Json(state.db.webhooks().await?.into_iter().map(WebhookResponse::from).collect()))
}

#[utoipa::path(
    get, path = "/webhooks/{uuid}", tag = "webhooks", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The webhook")),
    responses(
        (status = 200, description = "The webhook", body = WebhookResponse),
        AdminOnly, NotAUuid, WebhookNotFound,
    )
)]
pub async fn get_webhook(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<WebhookResponse>> {
    Ok(Json(state.db.webhook(uuid).await.or_not_found(NOT_FOUND)?.into()))
}

/// Changes what is given; enabling a disabled webhook clears its failure state. An empty change
/// answers the webhook as it is.
#[utoipa::path(
    patch, path = "/webhooks/{uuid}", tag = "webhooks", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The webhook")),
    request_body = UpdateWebhookRequest,
    responses(
        (status = 200, description = "The webhook as changed", body = WebhookResponse),
        (status = 400, description = "Every pattern cleared, or a structurally invalid body"),
        (status = 409, description = "Webhook name already exists"),
        (status = 422, description = "Invalid URL, pattern or secret, a destination the rules refuse, or not a uuid"),
        AdminOnly, NotJson, WebhookNotFound,
    )
)]
pub async fn update_webhook(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidJson(body): ValidJson<UpdateWebhookRequest>,
) -> Result<Json<WebhookResponse>> {
    let current = state.db.webhook(uuid).await.or_not_found(NOT_FOUND)?;
    let mut change = WebhookChange {
        name: body.name.filter(|name| *name != current.name),
        secret: body.secret.map(Secret::new),
        enabled: body.enabled.filter(|enabled| *enabled != current.enabled),
        ..WebhookChange::default()
    };
    if body.simple_events.is_some() || body.topic_patterns.is_some() {
        let patterns = webhook::merge_patterns(
            body.simple_events.as_deref().unwrap_or_default(),
            body.topic_patterns.as_deref().unwrap_or_default(),
        );
        if patterns.is_empty() {
            return Err(ApiError::bad_request(CLEARED_PATTERNS));
        }
        change.topic_patterns = Some(patterns);
    }
    if let Some(url) = &body.url {
        change.url = Some(checked_url(&state, url).await?);
    }
    if change.is_empty() {
        return Ok(Json(current.into()));
    }
    let updated = written(state.db.update_webhook(uuid, &change, Utc::now()).await)?;
    tracing::info!(%uuid, name = %updated.name, enabled = updated.enabled, by = %admin.user.username, "Webhook changed");
    announce_change(&state).await;
    Ok(Json(updated.into()))
}

/// Deletes a webhook and the events still waiting for it.
#[utoipa::path(
    delete, path = "/webhooks/{uuid}", tag = "webhooks", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The webhook")),
    responses(
        (status = 200, description = "Deleted", body = Message),
        AdminOnly, NotAUuid, WebhookNotFound,
    )
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Message>> {
    state.db.delete_webhook(uuid).await.or_not_found(NOT_FOUND)?;
    tracing::info!(%uuid, by = %admin.user.username, "Webhook deleted");
    announce_change(&state).await;
    Ok(Json(Message::new("Webhook deleted")))
}

/// What one test delivery came to.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookTestResponse {
    pub delivered: bool,
    pub status_code: Option<u16>,
    pub error: Option<String>,
}

/// Sends the webhook one `test.ping`, signed and checked like every delivery, once, without retry,
/// and answers what came of it. Nothing is recorded on the webhook.
#[utoipa::path(
    post, path = "/webhooks/{uuid}/test", tag = "webhooks", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The webhook")),
    responses(
        (status = 200, description = "The delivery's outcome", body = WebhookTestResponse),
        AdminOnly, NotAUuid, WebhookNotFound,
    )
)]
pub async fn test_webhook(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<WebhookTestResponse>> {
    let target = state.db.webhook(uuid).await.or_not_found(NOT_FOUND)?;
    let event_id = Uuid::new_v4();
    let payload = json!({
        "message": "Synthetic test event from svc",
        "triggered_by": admin.user.username,
    });
    let body = webhook::body(event_id, topics::TEST_PING, "test", Utc::now(), &payload);
    let envelope = Envelope { event_id, topic: topics::TEST_PING, body: &body };
    let config = &state.config.webhook;
    let outcome = webhook::deliver(&target.url, &target.secret, envelope, config.allow_private, config.timeout).await;
    tracing::info!(%uuid, status = ?outcome.status(), by = %admin.user.username, "Webhook test delivery sent");
    let status_code = outcome.status();
    Ok(Json(match outcome {
        webhook::Outcome::Delivered { .. } => WebhookTestResponse { delivered: true, status_code, error: None },
        webhook::Outcome::Failed { error, .. } => {
            WebhookTestResponse { delivered: false, status_code, error: Some(error) }
        }
    }))
}
