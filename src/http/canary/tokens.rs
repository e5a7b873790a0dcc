//! The token routes: list, create, read, revoke a token, page its triggers, preview its bait. The
//! shapes are DECNET's; minting and previewing are the planter's (`canary::tokens`), revoking too.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::canary::{BaitSource, CanaryKind, MintError, NewToken, PlantError, TokenKind};
use crate::db::{CanaryToken, CanaryTokenFilter, CanaryTokenState, CanaryTrigger};
use crate::http::error::OrNotFound;
use crate::http::extract::{
    FieldError, ValidJson, ValidPath, ValidQuery, Validate, check_max_chars, given, is_lowercase_name,
};
use crate::http::guard::{Admin, Viewer};
use crate::http::paging::Paging;
use crate::http::responses::{AdminOnly, NotAUuid, NotJson, ViewerOnly};
use crate::http::{ApiError, AppState, Message, Result};
use crate::time::format_utc;

/// The most triggers a page holds (DECNET's).
const MAX_TRIGGERS_LIMIT: i64 = 500;
const TOKEN_NOT_FOUND: &str = "token not found";
const ONE_SOURCE: &str = "provide exactly one of blob_uuid or generator";
const NO_PREVIEW: &str = "token has neither generator nor instrumenter — nothing to preview";

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
    pub state: CanaryTokenState,
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
    let source = BaitSource::one_of(body.generator, body.blob_uuid).ok_or_else(|| ApiError::bad_request(ONE_SOURCE))?;
    let new = NewToken {
        decky_name: body.decky_name,
        kind: body.kind,
        topology_id: body.topology_id,
        source,
        placement_path: body.placement_path,
        created_by: admin.user.uuid.to_string(),
    };
    let token = state.planter.mint(new).await.map_err(not_minted)?;
    tracing::info!(uuid = %token.uuid, decky = %token.decky_name, by = %admin.user.username, "Canary token created");
    Ok((StatusCode::CREATED, Json(token.into())))
}

fn not_minted(err: MintError) -> ApiError {
    match err {
        MintError::TopologyNotFound(_) | MintError::BlobNotFound => ApiError::not_found(err.to_string()),
        MintError::NotInTopology { .. } => ApiError::unprocessable(err.to_string()),
        MintError::Refused(reason) => ApiError::bad_request(reason),
        MintError::Db(err) => err.into(),
        MintError::Randomness(_) | MintError::Plant(_) => ApiError::Internal(err.into()),
    }
}

/// A bait that cannot be made as asked: the reason is the client's.
fn refused(err: PlantError) -> ApiError {
    not_minted(err.into())
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
    Ok(Json(state.db.canary_token(uuid).await.or_not_found(TOKEN_NOT_FOUND)?.into()))
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
    state.planter.revoke(uuid).await.or_not_found(TOKEN_NOT_FOUND)?;
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
    state.db.canary_token(uuid).await.or_not_found(TOKEN_NOT_FOUND)?;
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
    let token = state.db.canary_token(uuid).await.or_not_found(TOKEN_NOT_FOUND)?;
    let bait = state.planter.preview(&token).map_err(refused)?.ok_or_else(|| ApiError::conflict(NO_PREVIEW))?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bait.file.content).into_response())
}
