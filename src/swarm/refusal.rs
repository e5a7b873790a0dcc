//! What the swarm's servers (the agent, the updater, the master's heartbeat listener) answer when
//! they refuse: one body, DECNET's `{"detail": …}` (a text, or the updater's object saying what
//! failed), and one mapping of the fleet's and the topologies' errors onto it. A refusal keeps its
//! operator text; a store error goes to the log and the caller gets a generic text.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::fleet::FleetError;
use crate::topology::TopologyError;

/// A swarm server's refusal: a status and its `detail`.
#[derive(Debug)]
pub struct Refusal {
    status: StatusCode,
    detail: Value,
}

impl Refusal {
    pub fn new(status: StatusCode, detail: impl Into<Value>) -> Refusal {
        Refusal { status, detail: detail.into() }
    }

    /// A body that is not the JSON a route takes: 422 with a generic text (the parser's words go
    /// to the log).
    pub fn bad_body() -> Refusal {
        Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid request body")
    }

    /// The store failed: 500 with a generic text, the cause in the log.
    fn store(err: &dyn std::error::Error) -> Refusal {
        tracing::error!(error = %err, "Agent store error");
        Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "detail": self.detail }))).into_response()
    }
}

/// `{"detail": detail}` with `status`: how every swarm server refuses.
pub fn detail(status: StatusCode, detail: impl Into<Value>) -> Response {
    Refusal::new(status, detail).into_response()
}

impl From<FleetError> for Refusal {
    fn from(err: FleetError) -> Refusal {
        match err {
            FleetError::Refused(text) => Refusal::new(StatusCode::CONFLICT, text),
            FleetError::NotFound(text) => Refusal::new(StatusCode::NOT_FOUND, text),
            FleetError::Runtime => Refusal::new(StatusCode::CONFLICT, "Container runtime operation failed"),
            FleetError::Store(err) => Refusal::store(&err),
        }
    }
}

impl From<TopologyError> for Refusal {
    fn from(err: TopologyError) -> Refusal {
        match err {
            TopologyError::NotFound(text) => Refusal::new(StatusCode::NOT_FOUND, text),
            TopologyError::Conflict(text) => Refusal::new(StatusCode::CONFLICT, text),
            TopologyError::BadRequest(text) => Refusal::new(StatusCode::BAD_REQUEST, text),
            TopologyError::Store(err) => Refusal::store(&err),
        }
    }
}
