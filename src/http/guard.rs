//! Who may call a route. Each extractor authenticates the caller and applies one gate:
//! [`Authenticated`] (any live token, even one whose user must change password), [`Viewer`] and
//! [`Admin`] (role gates, closed until the password is changed), and [`StreamViewer`] for event
//! streams (a bearer header, or else a single-use `?ticket=`). A token in the query string never
//! authenticates. [`MetricsReader`] is the scraper of `/metrics`, who has no user: it holds
//! `SVC_METRICS_TOKEN`, or the API binds loopback and no token is configured.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::error::INVALID_CREDENTIALS;
use super::{ApiError, AppState};
use crate::auth::session::{AuthError, Session};
use crate::db::Role;

pub const PASSWORD_CHANGE_REQUIRED: &str = "Password change required before accessing this resource";
pub const INSUFFICIENT_PERMISSIONS: &str = "Insufficient permissions";

/// Any caller with a live bearer token.
#[derive(Debug)]
pub struct Authenticated(pub Session);

/// A caller with a changed password and any role.
#[derive(Debug)]
pub struct Viewer(pub Session);

/// A caller with a changed password and the admin role.
#[derive(Debug)]
pub struct Admin(pub Session);

/// An event-stream caller: the header is used when present (and then fully checked), else a ticket.
#[derive(Debug)]
pub struct StreamViewer(pub Session);

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::Rejected(reason) => {
                tracing::debug!(%reason, "Credentials rejected");
                ApiError::Unauthenticated(INVALID_CREDENTIALS)
            }
            AuthError::Store(err) => err.into(),
        }
    }
}

/// Who may scrape `/metrics`: the holder of `SVC_METRICS_TOKEN` as a bearer token; with no token
/// configured, anyone while the API binds loopback, and no one (404, as if the route did not exist)
/// on a public binding, so metrics are never open to the network by default.
#[derive(Debug)]
pub struct MetricsReader;

impl FromRequestParts<AppState> for MetricsReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        use sha2::{Digest, Sha256};
        let Some(expected) = &state.config.telemetry.metrics_token else {
            return if state.config.api.binds_loopback() {
                Ok(MetricsReader)
            } else {
                Err(ApiError::not_found("Not Found"))
            };
        };
        let given = bearer(parts)?.ok_or(ApiError::Unauthenticated(INVALID_CREDENTIALS))?;
        // Digests compared, so the time taken says nothing about how much of the token matched.
        if Sha256::digest(given.as_bytes()) == Sha256::digest(expected.expose().as_bytes()) {
            Ok(MetricsReader)
        } else {
            Err(ApiError::Unauthenticated(INVALID_CREDENTIALS))
        }
    }
}

/// The token of `Authorization: Bearer <token>`; `None` when the header is absent.
fn bearer(parts: &Parts) -> Result<Option<&str>, ApiError> {
    let Some(value) = parts.headers.get(header::AUTHORIZATION) else { return Ok(None) };
    let value = value.to_str().map_err(|_| ApiError::Unauthenticated(INVALID_CREDENTIALS))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(Some(token.trim()))
        }
        _ => Err(ApiError::Unauthenticated(INVALID_CREDENTIALS)),
    }
}

async fn authenticate(parts: &Parts, state: &AppState) -> Result<Session, ApiError> {
    let token = bearer(parts)?.ok_or(ApiError::Unauthenticated(INVALID_CREDENTIALS))?;
    Ok(state.sessions.authenticate(token).await?)
}

/// The role gate shared by every gated route.
fn admit(session: Session, needs: Role) -> Result<Session, ApiError> {
    if session.user.must_change_password {
        return Err(ApiError::forbidden(PASSWORD_CHANGE_REQUIRED));
    }
    if needs == Role::Admin && session.user.role != Role::Admin {
        return Err(ApiError::forbidden(INSUFFICIENT_PERMISSIONS));
    }
    Ok(session)
}

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authenticate(parts, state).await.map(Authenticated)
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        admit(authenticate(parts, state).await?, Role::Viewer).map(Viewer)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        admit(authenticate(parts, state).await?, Role::Admin).map(Admin)
    }
}

impl FromRequestParts<AppState> for StreamViewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if bearer(parts)?.is_some() {
            return admit(authenticate(parts, state).await?, Role::Viewer).map(StreamViewer);
        }
        let ticket = parts
            .uri
            .query()
            .and_then(|q| url_param(q, "ticket"))
            .ok_or(ApiError::Unauthenticated(INVALID_CREDENTIALS))?;
        // Minting already required a changed password; checking again covers an admin reset since.
        admit(state.sessions.redeem_ticket(&ticket).await?, Role::Viewer).map(StreamViewer)
    }
}

fn url_param(query: &str, name: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}
