//! `/auth/*`: login, logout, password change and stream tickets.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::response::IntoResponse;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{FieldError, ValidJson, Validate, check_password};
use super::guard::{Authenticated, Viewer};
use super::headers::NO_STORE;
use super::responses::{NotJson, ViewerOnly};
use super::{ApiError, AppState, Message, Result};
use crate::auth::password::MAX_BYTES;
use crate::auth::ticket::TICKET_LIFETIME;
use crate::db::DbError;

pub const LOGIN_FAILED: &str = "Incorrect username or password";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(logout))
        .routes(routes!(change_password))
        .routes(routes!(sse_ticket))
}

/// Other fields are ignored, as DECNET's dashboard may send them.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginRequest {
    pub username: String,
    /// At most 72 bytes (UTF-8): the format `utf8-bytes-max-72`.
    #[schema(max_length = 72, format = "utf8-bytes-max-72")]
    pub password: String,
}

/// A password longer than any we store cannot be right; saying so early skips a hash.
fn check_max_bytes(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    if value.len() > MAX_BYTES {
        errors.push(FieldError::new("string_too_long", &["body", field], format!("at most {MAX_BYTES} bytes")));
    }
}

impl Validate for LoginRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_max_bytes("password", &self.password, errors);
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: String,
    /// When true, every route but logout and change-password answers 403 until the password changes.
    pub must_change_password: bool,
}

/// Exchanges credentials for an access token.
#[utoipa::path(
    post, path = "/auth/login", tag = "auth", request_body = LoginRequest,
    responses(
        (status = 200, description = "Logged in", body = TokenResponse),
        (status = 400, description = "Structurally invalid body"),
        (status = 401, description = "Incorrect username or password (the same for both)"),
        (status = 422, description = "Invalid parameters or malformed JSON"),
        (status = 429, description = "Over 10 attempts in 5 minutes from this address or for this username; see Retry-After"),
        NotJson,
    )
)]
pub async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ValidJson(body): ValidJson<LoginRequest>,
) -> Result<impl IntoResponse> {
    state.limits.login(peer.ip(), &body.username).await?;
    let user = match state.db.user_by_name(&body.username).await {
        Ok(user) => Some(user),
        Err(DbError::NotFound) => None,
        Err(err) => return Err(err.into()),
    };
    let verified = state.passwords.verify(body.password, user.as_ref().map(|u| u.password_hash.clone())).await?;
    let Some(user) = user.filter(|_| verified) else {
        tracing::info!(client = %peer.ip(), "Login failed");
        return Err(ApiError::Unauthenticated(LOGIN_FAILED));
    };
    tracing::info!(user = %user.username, client = %peer.ip(), "Logged in");
    let token = TokenResponse {
        access_token: state.sessions.mint(&user)?,
        token_type: "bearer".into(),
        must_change_password: user.must_change_password,
    };
    Ok((NO_STORE, Json(token)))
}

/// Revokes the token that made this request, on every replica within seconds.
#[utoipa::path(
    post, path = "/auth/logout", tag = "auth", security(("bearer" = [])),
    responses(
        (status = 200, description = "Logged out", body = Message),
        (status = 401, description = "Missing, invalid or already revoked token"),
    )
)]
pub async fn logout(State(state): State<AppState>, Authenticated(session): Authenticated) -> Result<Json<Message>> {
    if let Some(claims) = &session.token {
        state.sessions.logout(claims).await?;
    }
    Ok(Json(Message::new("Logged out")))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePasswordRequest {
    /// At most 72 bytes (UTF-8): the format `utf8-bytes-max-72`.
    #[schema(max_length = 72, format = "utf8-bytes-max-72")]
    pub old_password: String,
    /// 12 characters to 72 bytes (UTF-8): the format `utf8-bytes-max-72`.
    #[schema(min_length = 12, max_length = 72, format = "utf8-bytes-max-72")]
    pub new_password: String,
}

impl Validate for ChangePasswordRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_max_bytes("old_password", &self.old_password, errors);
        check_password("new_password", &self.new_password, errors);
    }
}

/// Changes the caller's password, clears the must-change flag and ends every existing session,
/// this one included: the client logs in again.
#[utoipa::path(
    post, path = "/auth/change-password", tag = "auth", security(("bearer" = [])),
    request_body = ChangePasswordRequest,
    responses(
        (status = 200, description = "Password changed", body = Message),
        (status = 400, description = "Structurally invalid body, or a new password under 12 characters"),
        (status = 401, description = "Invalid token, or incorrect old password"),
        (status = 422, description = "A password over 72 bytes, or malformed JSON"),
        (status = 429, description = "Over 5 changes a minute from this address; see Retry-After"),
        NotJson,
    )
)]
pub async fn change_password(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Authenticated(session): Authenticated,
    ValidJson(body): ValidJson<ChangePasswordRequest>,
) -> Result<Json<Message>> {
    state.limits.change_password(peer.ip()).await?;
    let user = session.user;
    if !state.passwords.verify(body.old_password, Some(user.password_hash.clone())).await? {
        return Err(ApiError::unauthorized("Incorrect old password"));
    }
    let hash = state.passwords.hash(body.new_password).await?;
    state.db.set_password(user.uuid, &hash, false, Utc::now()).await?;
    state.sessions.forget_user(user.uuid);
    tracing::info!(user = %user.username, "Password changed; earlier tokens revoked");
    Ok(Json(Message::new("Password updated successfully")))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SseTicketResponse {
    /// Opaque; pass as `?ticket=` to open one event stream.
    pub ticket: String,
    /// Seconds the ticket stays redeemable.
    pub expires_in: u64,
}

/// Mints a single-use ticket for opening one event stream within 60 seconds.
#[utoipa::path(
    post, path = "/auth/sse-ticket", tag = "auth", security(("bearer" = [])),
    responses(
        (status = 200, description = "A fresh ticket", body = SseTicketResponse),
        ViewerOnly,
    )
)]
pub async fn sse_ticket(State(state): State<AppState>, Viewer(session): Viewer) -> Result<impl IntoResponse> {
    let ticket = state.sessions.issue_ticket(&session).await?;
    Ok((NO_STORE, Json(SseTicketResponse { ticket, expires_in: TICKET_LIFETIME.as_secs() })))
}
