//! The blob routes (admins only): list the uploaded blobs, upload one as multipart/form-data (the
//! `file` part, at most [`BLOB_LIMIT`]), delete one no token uses. Storing is the planter's
//! (`canary::tokens`).

use axum::Json;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::{CanaryBlob, DbError};
use crate::http::error::OrNotFound;
use crate::http::extract::ValidPath;
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotAUuid};
use crate::http::{ApiError, AppState, Message, Result};
use crate::time::format_utc;

/// The largest blob an upload may carry.
pub const BLOB_LIMIT: usize = 8 * 1024 * 1024;
const BLOB_NOT_FOUND: &str = "blob not found";
const BLOB_IN_USE: &str = "blob is still referenced by one or more tokens";
const NO_FILE: &str = "multipart/form-data body with a `file` part required";
const EMPTY_FILE: &str = "uploaded file is empty";
const BLOB_TOO_LARGE: &str = "uploaded file is larger than 8 MiB";

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

/// The multipart upload, as documented (the handler reads the body itself).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct BlobUpload {
    /// The file, at most 8 MiB.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
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
    let stored = state.planter.store_blob(filename, bytes, admin.user.uuid.to_string()).await?;
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
    match state.db.delete_canary_blob(uuid).await {
        Err(DbError::Conflict) => return Err(ApiError::conflict(BLOB_IN_USE)),
        deleted => deleted.or_not_found(BLOB_NOT_FOUND)?,
    }
    tracing::info!(%uuid, by = %admin.user.username, "Canary blob deleted");
    Ok(Json(Message::new("ok")))
}
