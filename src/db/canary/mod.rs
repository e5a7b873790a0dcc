//! Canary tokens: the tokens (a bait in a decky, named by its callback token), the blobs operators
//! upload to make bait from, and the callbacks each token received. A token's `state` and
//! `last_error` belong to placement (`pending` until a planter says `planted` or `failed`; an
//! operator's delete says `revoked`); a trigger raises its token's count in the same transaction
//! that stores it. Both dialects accept every statement (`sql.rs`).

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::DbResult;

/// A token as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryToken {
    pub uuid: Uuid,
    /// The channel it calls home by: DECNET's `http`, `dns` or `aws_passive`.
    pub kind: String,
    pub decky_name: String,
    pub topology_id: Option<String>,
    pub blob_uuid: Option<Uuid>,
    pub instrumenter: Option<String>,
    /// The generator (`CanaryKind`'s name), when the bait is generated rather than an upload.
    pub generator: Option<String>,
    pub placement_path: String,
    /// The unguessable text in the callback URL and DNS name; unique.
    pub callback_token: String,
    pub placed_at: Option<DateTime<Utc>>,
    pub last_triggered_at: Option<DateTime<Utc>>,
    pub trigger_count: u64,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub state: CanaryTokenState,
    pub last_error: Option<String>,
}

/// Where a token's bait stands: stored and served as DECNET's words (`pending`, `planted`,
/// `failed`, `revoked`), which its dashboard reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CanaryTokenState {
    /// Made, its bait not yet planted (or failed to be).
    Pending,
    /// Its bait is in its decky (`placed_at` says since when).
    Planted,
    /// Its bait could not be planted; `last_error` says why.
    Failed,
    /// An operator's delete: kept, with its triggers, its bait removed.
    Revoked,
}

impl CanaryTokenState {
    pub fn as_str(self) -> &'static str {
        match self {
            CanaryTokenState::Pending => "pending",
            CanaryTokenState::Planted => "planted",
            CanaryTokenState::Failed => "failed",
            CanaryTokenState::Revoked => "revoked",
        }
    }
}

impl std::str::FromStr for CanaryTokenState {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(CanaryTokenState::Pending),
            "planted" => Ok(CanaryTokenState::Planted),
            "failed" => Ok(CanaryTokenState::Failed),
            "revoked" => Ok(CanaryTokenState::Revoked),
            other => Err(anyhow::anyhow!("unknown canary token state `{other}`")),
        }
    }
}

/// Which tokens a listing returns: each `Some` must match exactly. Each is the text a client asked
/// for, so a state no token can be in selects none rather than being refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CanaryTokenFilter {
    pub decky_name: Option<String>,
    pub state: Option<String>,
    pub kind: Option<String>,
    pub topology_id: Option<String>,
}

/// A blob as listed: everything but its bytes, and how many tokens use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryBlob {
    pub uuid: Uuid,
    /// Hex SHA-256 of the bytes; unique, so the same file uploaded twice is one blob.
    pub sha256: String,
    pub filename: String,
    pub content_type: String,
    pub size_bytes: u64,
    pub uploaded_by: String,
    pub uploaded_at: DateTime<Utc>,
    pub token_count: u64,
}

/// A blob to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCanaryBlob {
    pub uuid: Uuid,
    pub sha256: String,
    pub filename: String,
    pub content_type: String,
    pub uploaded_by: String,
    pub uploaded_at: DateTime<Utc>,
    pub bytes: Vec<u8>,
}

/// One callback a token received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryTrigger {
    pub uuid: Uuid,
    pub token_uuid: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub src_ip: String,
    pub user_agent: Option<String>,
    /// `GET`, `HEAD`, `POST`, or `DNS` for a lookup.
    pub method: String,
    pub request_path: Option<String>,
    pub dns_qname: Option<String>,
    /// A JSON object text of the request's headers (name to value).
    pub headers: String,
}

#[async_trait]
pub trait CanaryStore {
    /// `Conflict` when the uuid or the callback token is taken.
    async fn add_canary_token(&self, token: &CanaryToken) -> DbResult<()>;

    /// The tokens `filter` selects, newest first.
    async fn canary_tokens(&self, filter: &CanaryTokenFilter) -> DbResult<Vec<CanaryToken>>;

    /// `NotFound` when there is none.
    async fn canary_token(&self, uuid: Uuid) -> DbResult<CanaryToken>;

    /// The token a callback names, if any.
    async fn canary_token_by_callback(&self, callback_token: &str) -> DbResult<Option<CanaryToken>>;

    /// Sets what placement (or a revoke) made of the token: its state, the error (`None` clears it)
    /// and, when given, when it was planted. `NotFound` when there is none.
    async fn set_canary_token_state(
        &self,
        uuid: Uuid,
        state: CanaryTokenState,
        last_error: Option<&str>,
        placed_at: Option<DateTime<Utc>>,
    ) -> DbResult<()>;

    /// Stores the trigger and, in the same transaction, raises its token's count and last trigger
    /// time. `NotFound` (nothing stored) when the token is gone.
    async fn record_canary_trigger(&self, trigger: &CanaryTrigger) -> DbResult<()>;

    /// A token's triggers, newest first.
    async fn canary_triggers(&self, token_uuid: Uuid, limit: u32, offset: u64) -> DbResult<Vec<CanaryTrigger>>;

    /// Stores the blob, or returns the one already stored with the same bytes (its SHA-256).
    async fn add_canary_blob(&self, blob: &NewCanaryBlob) -> DbResult<CanaryBlob>;

    /// Every blob, newest first, without bytes.
    async fn canary_blobs(&self) -> DbResult<Vec<CanaryBlob>>;

    /// `NotFound` when there is none.
    async fn canary_blob(&self, uuid: Uuid) -> DbResult<CanaryBlob>;

    /// The blob's bytes (what placement instruments); `NotFound` when there is none.
    async fn canary_blob_bytes(&self, uuid: Uuid) -> DbResult<Vec<u8>>;

    /// `NotFound` when there is none; `Conflict` (nothing deleted) while a token uses it.
    async fn delete_canary_blob(&self, uuid: Uuid) -> DbResult<()>;
}
