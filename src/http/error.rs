//! The HTTP error contract: one error type for every handler, mapped to a status and a body in one
//! place. Internal failures never show their cause to the client: the body carries an `error_id`,
//! and one middleware logs the cause under the same id (adding it to the body in developer mode).

use std::any::Any;
use std::borrow::Cow;
use std::time::Duration;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use uuid::Uuid;

use super::AppState;
use super::extract::Rejection;
use crate::db::DbError;

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Every failure a handler can answer with. Details are written for the client; anything from a store
/// or a tool goes in `Internal` or `DataConsistency`, whose cause only the server log sees.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A status with `{"detail": …}`.
    #[error("{1}")]
    Status(StatusCode, Cow<'static, str>),
    /// 401 with `WWW-Authenticate: Bearer`, so clients know to (re)authenticate.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// 400, 409 or 422 from request validation, already decided by the error contract (`extract`).
    #[error("invalid request")]
    Invalid(Rejection),
    /// 429: `limit` in words ("10 per 5 minute"), and when a retry can succeed.
    #[error("rate limit exceeded")]
    RateLimited { limit: &'static str, retry_after: Duration },
    /// Stored data that no longer fits the model: 422, cause logged.
    #[error(transparent)]
    DataConsistency(anyhow::Error),
    /// Anything the client cannot act on: a store or tool failure, a bug.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Invalid or missing credentials on a protected route.
pub const INVALID_CREDENTIALS: &str = "Could not validate credentials";

impl ApiError {
    pub fn not_found(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Status(StatusCode::NOT_FOUND, detail.into())
    }

    pub fn forbidden(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Status(StatusCode::FORBIDDEN, detail.into())
    }

    pub fn conflict(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Status(StatusCode::CONFLICT, detail.into())
    }

    pub fn unauthorized(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Status(StatusCode::UNAUTHORIZED, detail.into())
    }
}

impl From<DbError> for ApiError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::NotFound => ApiError::not_found("Not Found"),
            other => ApiError::Internal(anyhow::Error::new(other)),
        }
    }
}

fn detail(status: StatusCode, detail: &str) -> Response {
    (status, Json(json!({"detail": detail}))).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Status(status, text) => detail(status, &text),
            ApiError::Unauthenticated(text) => {
                let mut response = detail(StatusCode::UNAUTHORIZED, text);
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            ApiError::Invalid(rejection) => rejection.into_response(),
            ApiError::RateLimited { limit, retry_after } => {
                // Whole seconds, rounded up, so a client that waits exactly this long is let in.
                let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
                let body = json!({
                    "error": format!("Rate limit exceeded: {limit}"),
                    "detail": format!("Too many requests; retry in {seconds} s"),
                });
                (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, seconds.to_string())], Json(body))
                    .into_response()
            }
            ApiError::DataConsistency(err) => {
                tracing::error!(error = %format!("{err:#}"), "Stored data failed validation");
                let body = json!({"detail": "Internal data consistency error", "type": "internal_validation_error"});
                (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
            }
            ApiError::Internal(err) => InternalFailure {
                exception_type: "anyhow::Error".into(),
                message: format!("{err:#}"),
                traceback: format!("{err:?}"),
            }
            .into_response(),
        }
    }
}

/// What went wrong inside; travels in the response extensions to [`report_internal_failures`].
#[derive(Clone, Debug)]
struct InternalFailure {
    exception_type: String,
    /// One line, the whole cause chain: what the server log gets.
    message: String,
    /// Multi-line detail (causes, backtrace when captured): what developer mode shows the client.
    traceback: String,
}

impl IntoResponse for InternalFailure {
    fn into_response(self) -> Response {
        let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
        response.extensions_mut().insert(self);
        response
    }
}

/// For `CatchPanicLayer`: a panicking handler becomes an ordinary internal failure.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".into());
    InternalFailure { exception_type: "panic".into(), traceback: message.clone(), message }.into_response()
}

/// Logs each internal failure once, with its id, and writes the client's opaque body.
pub async fn report_internal_failures(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // Cheap clones (a small enum and a ref-counted URI), kept only to name the request in the log.
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let response = next.run(request).await;
    let Some(failure) = response.extensions().get::<InternalFailure>().cloned() else {
        return response;
    };
    let error_id = Uuid::new_v4().simple().to_string();
    tracing::error!(
        %error_id, %method, path = uri.path(), exception_type = %failure.exception_type, error = %failure.message,
        "Request failed with an internal error"
    );
    let mut body = json!({"detail": "Internal Server Error", "error_id": error_id});
    if state.config.api.developer {
        body["exception_type"] = failure.exception_type.into();
        body["traceback"] = failure.traceback.into();
    }
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    (parts, Json(body)).into_response()
}

/// Unknown routes answer like every other 404.
pub async fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}
