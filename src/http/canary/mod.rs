//! The canary's routes, in DECNET's shapes: `/canary/tokens` (viewers list and read a token and its
//! triggers; admins create, preview and revoke; `tokens`) and `/canary/blobs` (admins only: list,
//! upload as multipart/form-data, delete; `blobs`), plus the HTTP callback baits call home to,
//! [`callback_router`] (`callback`). Each handler extracts, calls one `canary` verb or store read
//! and maps the outcome; minting, planting, the trigger recorder and the DNS listener are `canary`'s.
//!
//! A token is stored `pending` with no `placed_at`: planting the bait in the decky is the planter's
//! work, which reports through `CanaryStore::set_canary_token_state`. Delete revokes, as DECNET
//! does: the row and its triggers stay, `state` says `revoked`.
//!
//! The callback (`GET|HEAD|POST /c/{token}` and anything below it, any query) needs no login and
//! answers like an ordinary web server: a 1×1 GIF for a known token, a plain 404 page for anything
//! else, no JSON and nothing naming svc. It is served at the root, outside `/api/v1` and outside the
//! API's layers, so `SVC_CANARY_HTTP_BASE` can name the API host (or a reverse proxy mapping a
//! public host to it).

use axum::extract::DefaultBodyLimit;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

mod blobs;
mod callback;
mod tokens;

pub use blobs::BLOB_LIMIT;
pub use callback::callback_router;

/// The multipart framing around an upload (boundaries, part headers).
const BLOB_FRAMING: usize = 64 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    let uploads = OpenApiRouter::new()
        .routes(routes!(blobs::list_blobs, blobs::upload_blob))
        .layer(DefaultBodyLimit::max(BLOB_LIMIT + BLOB_FRAMING));
    OpenApiRouter::new()
        .routes(routes!(tokens::list_tokens, tokens::create_token))
        .routes(routes!(tokens::get_token, tokens::revoke_token))
        .routes(routes!(tokens::list_triggers))
        .routes(routes!(tokens::preview_token))
        .routes(routes!(blobs::delete_blob))
        .layer(axum::middleware::from_fn(super::extract::require_json))
        .merge(uploads)
}
