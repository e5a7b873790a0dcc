//! The HTTP error contract: one error type for every handler, mapped to a status and a body in one
//! place. Internal failures never show their cause to the client: the body carries an `error_id`,
//! and one middleware logs the cause under the same id (adding it to the body in developer mode).

use std::any::Any;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use uuid::Uuid;

use super::AppState;
use crate::db::DbError;

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("not found")]
    NotFound,
    /// Anything the client cannot act on: a store or tool failure, a bug.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<DbError> for ApiError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::NotFound => ApiError::NotFound,
            other => ApiError::Internal(anyhow::Error::new(other)),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::NotFound => (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))).into_response(),
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
    if state.config.developer {
        body["exception_type"] = failure.exception_type.into();
        body["traceback"] = failure.traceback.into();
    }
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    (parts, Json(body)).into_response()
}

/// Unknown routes answer like every other 404.
pub async fn not_found() -> ApiError {
    ApiError::NotFound
}
