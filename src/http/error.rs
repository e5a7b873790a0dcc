//! The HTTP error contract: one error type for every handler, with a named variant per kind of
//! failure, each mapped to its status and body here and nowhere else (handlers and extractors say
//! what went wrong, never which status that is; only success statuses such as 202 stay with their
//! route). The validation failures `extract` classifies ([`Rejection`]) and a panicking handler get
//! theirs here too (the request timeout's empty 408 is `deadline`'s). Internal failures never show their cause to the client:
//! the body carries an `error_id`, and one middleware logs the cause under the same id (adding it to
//! the body in developer mode).

use std::any::Any;
use std::borrow::Cow;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use uuid::Uuid;

use super::AppState;
use super::extract::STRUCTURAL_DETAIL;
use super::health::HealthResponse;
use crate::db::DbError;

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Every failure a handler can answer with. Details are written for the client; anything from a store
/// or a tool goes in `Internal` or `DataConsistency`, whose cause only the server log sees.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 with `{"detail": …}`: the request asks for something that cannot be (no event selected).
    #[error("{0}")]
    BadRequest(Cow<'static, str>),
    /// 422 with `{"detail": …}`: a well-formed value a rule refuses (a forbidden webhook destination).
    #[error("{0}")]
    Unprocessable(Cow<'static, str>),
    /// 404 with `{"detail": …}`: no such resource (or route).
    #[error("{0}")]
    NotFound(Cow<'static, str>),
    /// 403 with `{"detail": …}`: not allowed for this user.
    #[error("{0}")]
    Forbidden(Cow<'static, str>),
    /// 409 with `{"detail": …}`: the change clashes with what is stored.
    #[error("{0}")]
    Conflict(Cow<'static, str>),
    /// 401 with `{"detail": …}` and no challenge: a credential in the body was wrong.
    #[error("{0}")]
    Unauthorized(Cow<'static, str>),
    /// 401 with `WWW-Authenticate: Bearer`, so clients know to (re)authenticate.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// 400, 409 or 422 from request validation, as `extract` classified it.
    #[error("invalid request")]
    Invalid(Rejection),
    /// 415 in plain text: a write under `/api/` whose body is not declared JSON.
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// 413 with `{"detail": …}`: an upload over its route's limit.
    #[error("{0}")]
    PayloadTooLarge(Cow<'static, str>),
    /// A request body that could not be read: 413 when over the body limit, otherwise the status
    /// axum gives the failure (400).
    #[error("unreadable request body")]
    UnreadableBody(BytesRejection),
    /// 429: `limit` in words ("10 per 5 minute"), and when a retry can succeed.
    #[error("rate limit exceeded")]
    RateLimited { limit: &'static str, retry_after: Duration },
    /// 429: the user already holds every event stream `SVC_SSE_MAX_PER_USER` allows.
    #[error("SSE connection limit ({max_per_user}) reached")]
    TooManyStreams { max_per_user: u32 },
    /// 503 with `{"detail": …}`: what the route needs is not there (a unit not installed).
    #[error("{0}")]
    Unavailable(Cow<'static, str>),
    /// 502 with `{"detail": …}`: the tool the route drives failed (generic words; its own go to the log).
    #[error("{0}")]
    BadGateway(Cow<'static, str>),
    /// 503: a message the route exists to publish could not go out on the bus.
    #[error("bus unavailable")]
    BusUnavailable,
    /// 503 with health's generic words: the database cannot serve now (cause logged).
    #[error("database unavailable")]
    DatabaseUnavailable(anyhow::Error),
    /// 503 with the whole health report: a required component is failing.
    #[error("a required component is failing")]
    Unhealthy(HealthResponse),
    /// Stored data that no longer fits the model (`DbError::Corrupt`, however it arrives): 422
    /// with the spec's `internal_validation_error` body, cause logged.
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
        ApiError::NotFound(detail.into())
    }

    pub fn bad_request(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::BadRequest(detail.into())
    }

    pub fn unprocessable(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Unprocessable(detail.into())
    }

    pub fn forbidden(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Forbidden(detail.into())
    }

    pub fn conflict(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Conflict(detail.into())
    }

    pub fn unauthorized(detail: impl Into<Cow<'static, str>>) -> Self {
        ApiError::Unauthorized(detail.into())
    }
}

/// A request that failed validation, in the class the contract in `extract::reject` put it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// The request's shape is wrong (wrong type, extra or missing field, invalid length): 400 with
    /// [`STRUCTURAL_DETAIL`].
    Structural,
    /// One of the INI configuration conflicts: 409 with this detail.
    Conflict(&'static str),
    /// Any other invalid input: 422 with this detail (generic words, or the error list in developer
    /// mode).
    Unprocessable(Value),
}

impl Rejection {
    /// The status and body this rejection is answered with.
    pub fn answer(self) -> (StatusCode, Value) {
        match self {
            Rejection::Structural => (StatusCode::BAD_REQUEST, json!({"detail": STRUCTURAL_DETAIL})),
            Rejection::Conflict(detail) => (StatusCode::CONFLICT, json!({"detail": detail})),
            Rejection::Unprocessable(detail) => (StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": detail})),
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let (status, body) = self.answer();
        (status, Json(body)).into_response()
    }
}

impl From<DbError> for ApiError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::NotFound => ApiError::not_found("Not Found"),
            DbError::Unavailable(err) => ApiError::DatabaseUnavailable(err),
            DbError::Corrupt(err) => ApiError::DataConsistency(err),
            other => ApiError::Internal(anyhow::Error::new(other)),
        }
    }
}

/// A store lookup whose `NotFound` the route answers 404 with its own words; every other store
/// error maps as [`From<DbError>`] says.
pub trait OrNotFound<T> {
    fn or_not_found(self, detail: impl Into<Cow<'static, str>>) -> Result<T>;
}

impl<T> OrNotFound<T> for std::result::Result<T, DbError> {
    fn or_not_found(self, detail: impl Into<Cow<'static, str>>) -> Result<T> {
        self.map_err(|err| match err {
            DbError::NotFound => ApiError::not_found(detail),
            other => other.into(),
        })
    }
}

fn detail(status: StatusCode, detail: &str) -> Response {
    (status, Json(json!({"detail": detail}))).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(text) => detail(StatusCode::BAD_REQUEST, &text),
            ApiError::Unprocessable(text) => detail(StatusCode::UNPROCESSABLE_ENTITY, &text),
            ApiError::NotFound(text) => detail(StatusCode::NOT_FOUND, &text),
            ApiError::Forbidden(text) => detail(StatusCode::FORBIDDEN, &text),
            ApiError::Conflict(text) => detail(StatusCode::CONFLICT, &text),
            ApiError::PayloadTooLarge(text) => detail(StatusCode::PAYLOAD_TOO_LARGE, &text),
            ApiError::Unauthorized(text) => detail(StatusCode::UNAUTHORIZED, &text),
            ApiError::Unauthenticated(text) => {
                let mut response = detail(StatusCode::UNAUTHORIZED, text);
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            ApiError::Invalid(rejection) => rejection.into_response(),
            ApiError::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "Unsupported Media Type — Content-Type must be application/json")
                    .into_response()
            }
            ApiError::UnreadableBody(rejection) => {
                let status = rejection.status();
                let text = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    "Request body too large"
                } else {
                    "Unreadable request body"
                };
                detail(status, text)
            }
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
            ApiError::TooManyStreams { max_per_user } => {
                detail(StatusCode::TOO_MANY_REQUESTS, &format!("SSE connection limit ({max_per_user}) reached"))
            }
            ApiError::BusUnavailable => detail(StatusCode::SERVICE_UNAVAILABLE, "bus unavailable"),
            ApiError::Unavailable(text) => detail(StatusCode::SERVICE_UNAVAILABLE, &text),
            ApiError::BadGateway(text) => detail(StatusCode::BAD_GATEWAY, &text),
            ApiError::DatabaseUnavailable(err) => database_unavailable(&err),
            // A store failure that reached here through `anyhow` is still the store's.
            ApiError::Internal(err)
                if err.chain().any(|c| c.downcast_ref::<DbError>().is_some_and(DbError::is_unavailable)) =>
            {
                database_unavailable(&err)
            }
            // So is a stored row that does not decode.
            ApiError::Internal(err) if err.chain().any(|c| matches!(c.downcast_ref(), Some(DbError::Corrupt(_)))) => {
                data_consistency(&err)
            }
            ApiError::Unhealthy(report) => (StatusCode::SERVICE_UNAVAILABLE, Json(report)).into_response(),
            ApiError::DataConsistency(err) => data_consistency(&err),
            ApiError::Internal(err) => InternalFailure {
                exception_type: "anyhow::Error".into(),
                message: format!("{err:#}"),
                traceback: format!("{err:?}"),
            }
            .into_response(),
        }
    }
}

fn database_unavailable(err: &anyhow::Error) -> Response {
    tracing::error!(error = %format!("{err:#}"), "Database unavailable; answering 503");
    detail(StatusCode::SERVICE_UNAVAILABLE, DATABASE_UNAVAILABLE)
}

/// The spec's answer to stored data that no longer fits the model; the cause goes to the log.
fn data_consistency(err: &anyhow::Error) -> Response {
    tracing::error!(error = %format!("{err:#}"), "Stored data failed validation");
    let body = json!({"detail": "Internal data consistency error", "type": "internal_validation_error"});
    (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
}

/// What a client is told when the database cannot serve: the words health uses.
pub const DATABASE_UNAVAILABLE: &str = "database unavailable";

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

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;
    use crate::http::health::OverallStatus;

    /// Status, `Content-Type` and body text of `error`'s response.
    async fn answer(error: ApiError) -> (StatusCode, String, String) {
        let response = error.into_response();
        let status = response.status();
        let kind = response.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, kind.unwrap_or_default(), String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn each_kind_of_failure_gets_its_status_and_body() {
        let json = "application/json".to_string();
        let cases = [
            (ApiError::not_found("No such thing"), StatusCode::NOT_FOUND, r#"{"detail":"No such thing"}"#),
            (ApiError::forbidden("Nope"), StatusCode::FORBIDDEN, r#"{"detail":"Nope"}"#),
            (ApiError::bad_request("Pick one"), StatusCode::BAD_REQUEST, r#"{"detail":"Pick one"}"#),
            (ApiError::unprocessable("Refused"), StatusCode::UNPROCESSABLE_ENTITY, r#"{"detail":"Refused"}"#),
            (ApiError::conflict("Taken"), StatusCode::CONFLICT, r#"{"detail":"Taken"}"#),
            (ApiError::unauthorized("Wrong"), StatusCode::UNAUTHORIZED, r#"{"detail":"Wrong"}"#),
            (
                ApiError::TooManyStreams { max_per_user: 5 },
                StatusCode::TOO_MANY_REQUESTS,
                r#"{"detail":"SSE connection limit (5) reached"}"#,
            ),
            (ApiError::BusUnavailable, StatusCode::SERVICE_UNAVAILABLE, r#"{"detail":"bus unavailable"}"#),
            (ApiError::Invalid(Rejection::Conflict("Clash")), StatusCode::CONFLICT, r#"{"detail":"Clash"}"#),
        ];
        for (error, status, body) in cases {
            assert_eq!(answer(error).await, (status, json.clone(), body.to_string()));
        }
        let unhealthy = HealthResponse { status: OverallStatus::Unhealthy, components: Default::default() };
        assert_eq!(
            answer(ApiError::Unhealthy(unhealthy)).await,
            (StatusCode::SERVICE_UNAVAILABLE, json, r#"{"status":"unhealthy","components":{}}"#.to_string())
        );
        assert_eq!(
            answer(ApiError::UnsupportedMediaType).await,
            (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "text/plain; charset=utf-8".to_string(),
                "Unsupported Media Type — Content-Type must be application/json".to_string()
            )
        );
        let challenged = ApiError::Unauthenticated(INVALID_CREDENTIALS).into_response();
        assert_eq!(challenged.headers().get(header::WWW_AUTHENTICATE).unwrap(), "Bearer");
        let plain = ApiError::unauthorized("Wrong").into_response();
        assert!(plain.headers().get(header::WWW_AUTHENTICATE).is_none());
    }

    #[tokio::test]
    async fn a_stored_row_that_does_not_decode_is_a_data_consistency_error_however_it_arrives() {
        let corrupt = || DbError::Corrupt(anyhow::anyhow!("stored state `sideways`"));
        let body = r#"{"detail":"Internal data consistency error","type":"internal_validation_error"}"#;
        for error in [ApiError::from(corrupt()), ApiError::Internal(anyhow::Error::new(corrupt()).context("listing"))] {
            let (status, _, text) = answer(error).await;
            assert_eq!((status, text.as_str()), (StatusCode::UNPROCESSABLE_ENTITY, body));
        }
    }
}
