//! Canary tokens, in DECNET's shapes: `/canary/tokens` (viewers list and read a token and its
//! triggers; admins create, preview and revoke) and `/canary/blobs` (admins only: list, upload as
//! multipart/form-data, delete), plus the callback listeners baits call home to: HTTP,
//! [`callback_router`], and DNS under `SVC_CANARY_DNS_ZONE`, [`DnsListener`] (`dns`).
//!
//! A token is stored `pending` with no `placed_at`: planting the bait in the decky is placement's
//! work, which reports through `CanaryStore::set_canary_token_state`. Delete revokes, as DECNET
//! does: the row and its triggers stay, `state` says `revoked`.
//!
//! The callback (`GET|HEAD|POST /c/{token}` and anything below it, any query) needs no login and
//! answers like an ordinary web server: a 1×1 GIF for a known token, a plain 404 page for anything
//! else, no JSON and nothing naming svc. It is served at the root, outside `/api/v1` and outside the
//! API's layers, so `SVC_CANARY_HTTP_BASE` can name the API host (or a reverse proxy mapping a
//! public host to it). A known token's callback, HTTP or DNS, is a trigger (`trigger`, one path for
//! both, at most `SVC_CANARY_TRIGGERS_PER_MINUTE` a token; past it the callback answers as ever):
//!
//! 1. the trigger row, its token's `trigger_count` and `last_triggered_at`, in one transaction;
//! 2. an RFC 5424 line (`canary`/`canary_triggered`, the caller as `src_ip`) appended to the ingest
//!    file, the path every decoy's line and the tarpit's events take: the ingester stores it (so it
//!    is in `/logs`, the log stream and the caller's attacker profile, whose profiler reads stored
//!    lines) with no second way into those tables to keep in step;
//! 3. DECNET's bus event `canary.<token uuid>.triggered`, which webhooks selecting `canary.>` get.
//!
//! The caller is the socket peer: svc trusts no `X-Forwarded-For` (the spec's rule, also the rate
//! limiter's), so behind a proxy every trigger names the proxy.

use axum::Json;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::extract::{
    FieldError, ValidJson, ValidPath, ValidQuery, Validate, check_max_chars, given, is_lowercase_name,
};
use super::guard::{Admin, Viewer};
use super::paging::Paging;
use super::responses::{AdminOnly, NotAUuid, NotJson, ViewerOnly};
use super::{ApiError, AppState, Message, Result};
use crate::canary::{self, CallbackToken, CanaryKind};
use crate::db::{CanaryBlob, CanaryToken, CanaryTokenFilter, CanaryTrigger, DbError, NewCanaryBlob};
use crate::fleet::file_drop::DropPath;
use crate::planting::{self, PlantError};
use crate::time::format_utc;

mod callback;
mod dns;
mod trigger;

/// The largest blob an upload may carry.
pub const BLOB_LIMIT: usize = 8 * 1024 * 1024;
/// The multipart framing around it (boundaries, part headers).
const BLOB_FRAMING: usize = 64 * 1024;
/// The most triggers a page holds (DECNET's).
const MAX_TRIGGERS_LIMIT: i64 = 500;
const TOKEN_NOT_FOUND: &str = "token not found";
const BLOB_NOT_FOUND: &str = "blob not found";
const BLOB_IN_USE: &str = "blob is still referenced by one or more tokens";
const ONE_SOURCE: &str = "provide exactly one of blob_uuid or generator";
const NO_FILE: &str = "multipart/form-data body with a `file` part required";
const EMPTY_FILE: &str = "uploaded file is empty";
const BLOB_TOO_LARGE: &str = "uploaded file is larger than 8 MiB";
const NO_PREVIEW: &str = "token has neither generator nor instrumenter — nothing to preview";

pub fn router() -> OpenApiRouter<AppState> {
    let uploads = OpenApiRouter::new()
        .routes(routes!(list_blobs, upload_blob))
        .layer(DefaultBodyLimit::max(BLOB_LIMIT + BLOB_FRAMING));
    OpenApiRouter::new()
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(get_token, revoke_token))
        .routes(routes!(list_triggers))
        .routes(routes!(preview_token))
        .routes(routes!(delete_blob))
        .layer(axum::middleware::from_fn(super::extract::require_json))
        .merge(uploads)
}

pub use callback::callback_router;
pub use dns::DnsListener;

// ---- shapes ----

/// A token as DECNET's dashboard reads it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenEntry {
    pub uuid: Uuid,
    /// `http`, `dns` or `aws_passive`.
    pub kind: String,
    pub decky_name: String,
    pub topology_id: Option<String>,
    pub blob_uuid: Option<Uuid>,
    pub instrumenter: Option<String>,
    pub generator: Option<String>,
    pub placement_path: String,
    pub callback_token: String,
    /// When the bait was planted; null until placement did it.
    pub placed_at: Option<String>,
    pub last_triggered_at: Option<String>,
    pub trigger_count: u64,
    pub created_by: String,
    /// `pending`, `planted`, `failed` or `revoked`.
    pub state: String,
    pub last_error: Option<String>,
}

impl From<CanaryToken> for TokenEntry {
    fn from(token: CanaryToken) -> Self {
        TokenEntry {
            uuid: token.uuid,
            kind: token.kind,
            decky_name: token.decky_name,
            topology_id: token.topology_id,
            blob_uuid: token.blob_uuid,
            instrumenter: token.instrumenter,
            generator: token.generator,
            placement_path: token.placement_path,
            callback_token: token.callback_token,
            placed_at: token.placed_at.map(format_utc),
            last_triggered_at: token.last_triggered_at.map(format_utc),
            trigger_count: token.trigger_count,
            created_by: token.created_by,
            state: token.state,
            last_error: token.last_error,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokensResponse {
    pub tokens: Vec<TokenEntry>,
    pub total: u64,
}

/// One callback of a token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TriggerEntry {
    pub uuid: Uuid,
    pub token_uuid: Uuid,
    pub occurred_at: String,
    pub src_ip: String,
    pub user_agent: Option<String>,
    /// `GET`, `HEAD` or `POST`, or `DNS` for a lookup (svc's addition: DECNET keeps no method).
    pub method: String,
    pub request_path: Option<String>,
    pub dns_qname: Option<String>,
    /// The request's headers, name to value.
    #[schema(value_type = Object)]
    pub headers: serde_json::Map<String, serde_json::Value>,
    /// Always null: the caller's profile is found by `src_ip`.
    pub attacker_id: Option<String>,
}

impl From<CanaryTrigger> for TriggerEntry {
    fn from(trigger: CanaryTrigger) -> Self {
        TriggerEntry {
            uuid: trigger.uuid,
            token_uuid: trigger.token_uuid,
            occurred_at: format_utc(trigger.occurred_at),
            src_ip: trigger.src_ip,
            user_agent: trigger.user_agent,
            method: trigger.method,
            request_path: trigger.request_path,
            dns_qname: trigger.dns_qname,
            headers: serde_json::from_str(&trigger.headers).unwrap_or_default(),
            attacker_id: None,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TriggersResponse {
    pub triggers: Vec<TriggerEntry>,
    /// The triggers on this page (DECNET's count).
    pub total: u64,
}

/// A blob as DECNET's dashboard reads it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlobEntry {
    pub uuid: Uuid,
    pub sha256: String,
    pub filename: String,
    pub content_type: String,
    pub size_bytes: u64,
    pub uploaded_by: String,
    pub uploaded_at: String,
    /// The tokens made from it.
    pub token_count: u64,
}

impl From<CanaryBlob> for BlobEntry {
    fn from(blob: CanaryBlob) -> Self {
        BlobEntry {
            uuid: blob.uuid,
            sha256: blob.sha256,
            filename: blob.filename,
            content_type: blob.content_type,
            size_bytes: blob.size_bytes,
            uploaded_by: blob.uploaded_by,
            uploaded_at: format_utc(blob.uploaded_at),
            token_count: blob.token_count,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlobsResponse {
    pub blobs: Vec<BlobEntry>,
    pub total: u64,
}

/// How a token calls home (DECNET's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    Http,
    Dns,
    AwsPassive,
}

impl TokenKind {
    fn as_str(self) -> &'static str {
        match self {
            TokenKind::Http => "http",
            TokenKind::Dns => "dns",
            TokenKind::AwsPassive => "aws_passive",
        }
    }
}

/// A new token: a decky, and exactly one of a generator or an uploaded blob.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateTokenRequest {
    /// The decky the bait goes in.
    #[schema(pattern = r"^[a-z0-9][a-z0-9-]{0,62}$")]
    pub decky_name: String,
    #[serde(default = "http_kind")]
    pub kind: TokenKind,
    /// Where the bait goes, absolute; the generator's default place when absent.
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub placement_path: Option<String>,
    /// The MazeNET topology the decky belongs to; absent for a fleet decky. (The uuid fields'
    /// patterns say what their `format` alone does not keep generated clients from: `""`.)
    #[serde(default)]
    #[schema(pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    pub topology_id: Option<Uuid>,
    #[serde(default)]
    pub generator: Option<CanaryKind>,
    #[serde(default)]
    #[schema(pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    pub blob_uuid: Option<Uuid>,
}

fn http_kind() -> TokenKind {
    TokenKind::Http
}

impl Validate for CreateTokenRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if !is_lowercase_name(&self.decky_name) {
            errors.push(FieldError::new(
                "string_pattern_mismatch",
                &["body", "decky_name"],
                "String should match pattern '^[a-z0-9][a-z0-9-]{0,62}$'",
            ));
        }
        if self.placement_path.as_deref().is_some_and(|path| path.chars().count() > 1024) {
            errors.push(FieldError::new(
                "string_too_long",
                &["body", "placement_path"],
                "String should have at most 1024 characters",
            ));
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TokensQuery {
    #[param(max_length = 255)]
    pub decky_name: Option<String>,
    #[param(max_length = 16)]
    pub state: Option<String>,
    #[param(max_length = 16)]
    pub kind: Option<String>,
    #[param(max_length = 64)]
    pub topology_id: Option<String>,
}

impl Validate for TokensQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_max_chars("decky_name", self.decky_name.as_deref(), 255, errors);
        check_max_chars("state", self.state.as_deref(), 16, errors);
        check_max_chars("kind", self.kind.as_deref(), 16, errors);
        check_max_chars("topology_id", self.topology_id.as_deref(), 64, errors);
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TriggersQuery {
    /// Triggers per page, 1 to 500.
    #[param(minimum = 1, maximum = 500, default = 100)]
    pub limit: Option<i64>,
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
}

impl Validate for TriggersQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_TRIGGERS_LIMIT, errors);
    }
}

/// The multipart upload, as documented (the handler reads the body itself).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct BlobUpload {
    /// The file, at most 8 MiB.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

// ---- tokens ----

fn token_not_found(err: DbError) -> ApiError {
    match err {
        DbError::NotFound => ApiError::not_found(TOKEN_NOT_FOUND),
        other => other.into(),
    }
}

/// Every token the filters select, newest first.
#[utoipa::path(
    get, path = "/canary/tokens", tag = "canary", security(("bearer" = [])),
    params(TokensQuery),
    responses(
        (status = 200, description = "The tokens", body = TokensResponse),
        (status = 422, description = "A filter too long"),
        ViewerOnly,
    )
)]
pub async fn list_tokens(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<TokensQuery>,
) -> Result<Json<TokensResponse>> {
    let filter = CanaryTokenFilter {
        decky_name: given(&query.decky_name).map(str::to_string),
        state: given(&query.state).map(str::to_string),
        kind: given(&query.kind).map(str::to_string),
        topology_id: given(&query.topology_id).map(str::to_string),
    };
    let tokens: Vec<TokenEntry> = state.db.canary_tokens(&filter).await?.into_iter().map(TokenEntry::from).collect();
    Ok(Json(TokensResponse { total: tokens.len() as u64, tokens }))
}

/// Mints a token with a new unguessable callback; it is `pending` until placement plants it.
#[utoipa::path(
    post, path = "/canary/tokens", tag = "canary", security(("bearer" = [])),
    request_body = CreateTokenRequest,
    responses(
        (status = 201, description = "Created", body = TokenEntry),
        (status = 400, description = "Not exactly one of generator and blob_uuid, a bad placement path, a generator needing a DNS zone, or a structurally invalid body"),
        (status = 404, description = "Blob or topology not found"),
        (status = 422, description = "A decky name out of pattern, an unknown generator or kind, or a decky not in the topology"),
        AdminOnly, NotJson,
    )
)]
pub async fn create_token(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<CreateTokenRequest>,
) -> Result<(StatusCode, Json<TokenEntry>)> {
    if body.generator.is_some() == body.blob_uuid.is_some() {
        return Err(ApiError::bad_request(ONE_SOURCE));
    }
    if let Some(topology) = body.topology_id {
        let detail = state.db.topology_detail(topology).await.map_err(|err| match err {
            DbError::NotFound => ApiError::not_found(format!("topology {topology} not found")),
            other => other.into(),
        })?;
        if detail.decky_named(&body.decky_name).is_none() {
            return Err(ApiError::unprocessable(format!("decky {:?} is not in topology {topology}", body.decky_name)));
        }
    }
    let callback_token = CallbackToken::random().map_err(|err| ApiError::Internal(err.into()))?;
    let placement_path = match (body.generator, &body.blob_uuid) {
        (Some(generator), _) => {
            state
                .planter
                .generate(generator, &callback_token, body.placement_path.as_deref())
                .map_err(refused)?
                .file
                .path
        }
        (None, Some(blob)) => {
            state.db.canary_blob(*blob).await.map_err(|err| match err {
                DbError::NotFound => ApiError::not_found(BLOB_NOT_FOUND),
                other => other.into(),
            })?;
            let path = body.placement_path.clone().unwrap_or_default();
            check_placement(&path)?;
            path
        }
        (None, None) => unreachable!("checked above"),
    };
    let token = CanaryToken {
        uuid: Uuid::new_v4(),
        kind: body.kind.as_str().to_string(),
        decky_name: body.decky_name,
        topology_id: body.topology_id.map(|id| id.to_string()),
        blob_uuid: body.blob_uuid,
        instrumenter: None,
        generator: body.generator.map(|kind| kind.as_str().to_string()),
        placement_path,
        callback_token: callback_token.to_string(),
        placed_at: None,
        last_triggered_at: None,
        trigger_count: 0,
        created_by: admin.user.uuid.to_string(),
        created_at: Utc::now(),
        state: planting::PENDING.to_string(),
        last_error: None,
    };
    state.db.add_canary_token(&token).await?;
    state.planter.wake();
    tracing::info!(uuid = %token.uuid, decky = %token.decky_name, by = %admin.user.username, "Canary token created");
    Ok((StatusCode::CREATED, Json(token.into())))
}

/// An upload's placement: absolute, no `..`, no control characters or quotes (the generators'
/// rule), under a directory a decky takes files in.
fn check_placement(path: &str) -> Result<()> {
    let quoted = path.chars().any(|c| c == '"' || c == '\'');
    if quoted {
        return Err(ApiError::bad_request(canary::GenerateError::BadPath(path.to_string()).to_string()));
    }
    DropPath::parse(path).map(drop).map_err(|err| ApiError::bad_request(err.to_string()))
}

/// A bait that cannot be made as asked: the reason is the client's.
fn refused(err: PlantError) -> ApiError {
    match err {
        PlantError::Bait(reason) => ApiError::bad_request(reason),
        other => ApiError::Internal(other.into()),
    }
}

#[utoipa::path(
    get, path = "/canary/tokens/{uuid}", tag = "canary", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The token")),
    responses(
        (status = 200, description = "The token", body = TokenEntry),
        (status = 404, description = "Token not found"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn get_token(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<TokenEntry>> {
    Ok(Json(state.db.canary_token(uuid).await.map_err(token_not_found)?.into()))
}

/// Revokes the token (DECNET's delete): it stays listed, with its triggers, as `revoked`.
#[utoipa::path(
    delete, path = "/canary/tokens/{uuid}", tag = "canary", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The token")),
    responses(
        (status = 200, description = "Revoked", body = Message),
        (status = 404, description = "Token not found"),
        AdminOnly, NotAUuid,
    )
)]
pub async fn revoke_token(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Message>> {
    state.planter.revoke(uuid).await.map_err(token_not_found)?;
    tracing::info!(%uuid, by = %admin.user.username, "Canary token revoked");
    Ok(Json(Message::new("ok")))
}

/// A page of the token's callbacks, newest first.
#[utoipa::path(
    get, path = "/canary/tokens/{uuid}/triggers", tag = "canary", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The token"), TriggersQuery),
    responses(
        (status = 200, description = "The triggers", body = TriggersResponse),
        (status = 404, description = "Token not found"),
        (status = 422, description = "Not a uuid, or limit or offset out of range"),
        ViewerOnly,
    )
)]
pub async fn list_triggers(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<TriggersQuery>,
) -> Result<Json<TriggersResponse>> {
    state.db.canary_token(uuid).await.map_err(token_not_found)?;
    let paging = Paging::of(query.limit.or(Some(100)), query.offset);
    let triggers: Vec<TriggerEntry> = state
        .db
        .canary_triggers(uuid, paging.limit, paging.offset)
        .await?
        .into_iter()
        .map(TriggerEntry::from)
        .collect();
    Ok(Json(TriggersResponse { total: triggers.len() as u64, triggers }))
}

/// The bait's bytes as a generator token makes them (deterministic: what placement plants).
#[utoipa::path(
    get, path = "/canary/tokens/{uuid}/preview", tag = "canary", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The token")),
    responses(
        (status = 200, description = "The bait's bytes", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "Token not found"),
        (status = 409, description = "Nothing to preview (an uploaded blob's token)"),
        AdminOnly, NotAUuid,
    )
)]
pub async fn preview_token(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Response> {
    let token = state.db.canary_token(uuid).await.map_err(token_not_found)?;
    let generator = token.generator.as_deref().and_then(|name| name.parse::<CanaryKind>().ok());
    let callback = CallbackToken::parse(&token.callback_token).ok();
    let (Some(generator), Some(callback)) = (generator, callback) else {
        return Err(ApiError::conflict(NO_PREVIEW));
    };
    let bait = state.planter.generate(generator, &callback, Some(&token.placement_path)).map_err(refused)?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bait.file.content).into_response())
}

// ---- blobs ----

fn blob_not_found(err: DbError) -> ApiError {
    match err {
        DbError::NotFound => ApiError::not_found(BLOB_NOT_FOUND),
        DbError::Conflict => ApiError::conflict(BLOB_IN_USE),
        other => other.into(),
    }
}

#[utoipa::path(
    get, path = "/canary/blobs", tag = "canary", security(("bearer" = [])),
    responses(
        (status = 200, description = "The blobs, newest first", body = BlobsResponse),
        AdminOnly,
    )
)]
pub async fn list_blobs(State(state): State<AppState>, Admin(_admin): Admin) -> Result<Json<BlobsResponse>> {
    let blobs: Vec<BlobEntry> = state.db.canary_blobs().await?.into_iter().map(BlobEntry::from).collect();
    Ok(Json(BlobsResponse { total: blobs.len() as u64, blobs }))
}

/// Stores an uploaded file (the `file` part of a multipart/form-data body, at most 8 MiB); the same
/// bytes uploaded again answer the blob already stored.
#[utoipa::path(
    post, path = "/canary/blobs", tag = "canary", security(("bearer" = [])),
    request_body(content = BlobUpload, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "Stored", body = BlobEntry),
        (status = 400, description = "Not a multipart/form-data body, no `file` part, or an empty file"),
        (status = 413, description = "The file is larger than 8 MiB"),
        AdminOnly,
    )
)]
pub async fn upload_blob(
    State(state): State<AppState>,
    Admin(admin): Admin,
    request: Request,
) -> Result<(StatusCode, Json<BlobEntry>)> {
    let (filename, bytes) = read_upload(request, &state).await?;
    let blob = NewCanaryBlob {
        uuid: Uuid::new_v4(),
        sha256: crate::text::hex(&Sha256::digest(&bytes)),
        content_type: canary::sniff_content_type(&filename, &bytes).to_string(),
        filename,
        uploaded_by: admin.user.uuid.to_string(),
        uploaded_at: Utc::now(),
        bytes,
    };
    let stored = state.db.add_canary_blob(&blob).await?;
    tracing::info!(uuid = %stored.uuid, size = stored.size_bytes, by = %admin.user.username, "Canary blob uploaded");
    Ok((StatusCode::CREATED, Json(stored.into())))
}

/// The `file` part's name and bytes: 400 when there is none or it is empty, 413 past the limit.
async fn read_upload(request: Request, state: &AppState) -> Result<(String, Vec<u8>)> {
    let mut multipart = Multipart::from_request(request, state).await.map_err(|err| {
        if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(BLOB_TOO_LARGE.into())
        } else {
            ApiError::bad_request(NO_FILE)
        }
    })?;
    let refused = |err: axum::extract::multipart::MultipartError| {
        if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(BLOB_TOO_LARGE.into())
        } else {
            ApiError::bad_request(NO_FILE)
        }
    };
    while let Some(field) = multipart.next_field().await.map_err(refused)? {
        if field.name() != Some("file") {
            continue;
        }
        let filename = clean_filename(field.file_name().unwrap_or_default());
        let bytes = field.bytes().await.map_err(refused)?;
        if bytes.len() > BLOB_LIMIT {
            return Err(ApiError::PayloadTooLarge(BLOB_TOO_LARGE.into()));
        }
        if bytes.is_empty() {
            return Err(ApiError::bad_request(EMPTY_FILE));
        }
        return Ok((filename, bytes.to_vec()));
    }
    Err(ApiError::bad_request(NO_FILE))
}

/// The upload's base name, without control characters, at most 255 characters.
fn clean_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let clean: String = base.chars().filter(|c| !c.is_control()).take(255).collect();
    if clean.trim().is_empty() || clean == "." || clean == ".." { "(unnamed)".to_string() } else { clean }
}

#[utoipa::path(
    delete, path = "/canary/blobs/{uuid}", tag = "canary", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The blob")),
    responses(
        (status = 200, description = "Deleted", body = Message),
        (status = 404, description = "Blob not found"),
        (status = 409, description = "Blob still referenced by a token"),
        AdminOnly, NotAUuid,
    )
)]
pub async fn delete_blob(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Message>> {
    state.db.delete_canary_blob(uuid).await.map_err(blob_not_found)?;
    tracing::info!(%uuid, by = %admin.user.username, "Canary blob deleted");
    Ok(Json(Message::new("ok")))
}
