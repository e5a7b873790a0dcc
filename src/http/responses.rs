//! The failure responses many operations share, for their OpenAPI entries: each row written once
//! here and named in `responses(...)` of a route's `#[utoipa::path]`, beside the rows that route
//! alone has. A set follows what answers it: the guard a handler takes (`guard`: [`ViewerOnly`],
//! [`AdminOnly`], [`EventStream`]), the JSON body check ([`NotJson`]), a uuid path ([`NotAUuid`]),
//! a resource the path names ([`TopologyNotFound`]…).
//! What the bodies hold is the error contract's (`error`); these only say when each status comes.

use std::collections::BTreeMap;

use utoipa::IntoResponses;
use utoipa::openapi::{RefOr, Response};

type Rows = BTreeMap<String, RefOr<Response>>;

/// 401: no bearer token, or one that is invalid, expired or revoked.
#[derive(IntoResponses)]
#[response(status = 401, description = "Missing or invalid token")]
pub struct AuthRequired;

/// 403 from a role gate for any role: the user must change the password first.
#[derive(IntoResponses)]
#[response(status = 403, description = "Password change required")]
pub struct PasswordChangeRequired;

/// 403 from the admin gate.
#[derive(IntoResponses)]
#[response(status = 403, description = "Not an admin, or password change required")]
pub struct NotAdmin;

/// 401 of an event stream, which also takes a ticket.
#[derive(IntoResponses)]
#[response(
    status = 401,
    description = "No bearer header and no valid ticket (a token in the query string never authenticates)"
)]
pub struct StreamAuthRequired;

/// 429: the user holds every stream `SVC_SSE_MAX_PER_USER` allows.
#[derive(IntoResponses)]
#[response(status = 429, description = "This user already holds SVC_SSE_MAX_PER_USER open streams")]
pub struct TooManyStreams;

/// 415 from `extract::require_json`.
#[derive(IntoResponses)]
#[response(status = 415, description = "Body is not JSON")]
pub struct NotJson;

/// 422 of a route whose only parameter is a uuid in the path.
#[derive(IntoResponses)]
#[response(status = 422, description = "Not a uuid")]
pub struct NotAUuid;

/// 404 of a route under `/attackers/{uuid}`.
#[derive(IntoResponses)]
#[response(status = 404, description = "Attacker not found")]
pub struct AttackerNotFound;

/// 404 of a route under `/webhooks/{uuid}`.
#[derive(IntoResponses)]
#[response(status = 404, description = "Webhook not found")]
pub struct WebhookNotFound;

/// 404 of a route under `/topologies/{id}`.
#[derive(IntoResponses)]
#[response(status = 404, description = "Topology not found")]
pub struct TopologyNotFound;

/// 409 of an edit of a pending topology's LANs, deckies or edges.
#[derive(IntoResponses)]
#[response(
    status = 409,
    description = "Topology not pending, a version conflict, or what the topology refuses: a name or subnet taken, \
                   an address not free or not on the LAN, a decky's home LAN"
)]
pub struct TopologyEditRefused;

/// The rows of a route behind `guard::Viewer`: 401 and 403.
pub struct ViewerOnly;

impl IntoResponses for ViewerOnly {
    fn responses() -> Rows {
        rows([AuthRequired::responses(), PasswordChangeRequired::responses()])
    }
}

/// The rows of a route behind `guard::Admin`: 401 and 403.
pub struct AdminOnly;

impl IntoResponses for AdminOnly {
    fn responses() -> Rows {
        rows([AuthRequired::responses(), NotAdmin::responses()])
    }
}

/// The rows of an event stream (`guard::StreamViewer`, a slot of the per-user cap): 401, 403, 429.
pub struct EventStream;

impl IntoResponses for EventStream {
    fn responses() -> Rows {
        rows([StreamAuthRequired::responses(), PasswordChangeRequired::responses(), TooManyStreams::responses()])
    }
}

fn rows<const N: usize>(sets: [Rows; N]) -> Rows {
    sets.into_iter().flatten().collect()
}
