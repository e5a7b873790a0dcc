//! Sessions: the token denylist (logout) and the one-use stream tickets. Both live in the database
//! so that every API replica honours them. Both dialects accept every statement (`sql.rs`); a
//! ticket is taken by a select and a delete that only one redeemer can win, as neither MySQL 8 nor
//! sqlite's `returning` is common to all three servers.

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::DbResult;

/// A token denied before its expiry (logout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevokedToken {
    pub jti: String,
    pub user: Uuid,
    /// The token's own expiry: after it, the entry is useless and is pruned.
    pub expires_at: DateTime<Utc>,
}

/// A stream ticket as stored (by its hash): whose it is, when it was minted and with which token,
/// so that a stream it opens can be ended by the same revocations as one opened by the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseTicket {
    pub user: Uuid,
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The token the ticket was minted with: its `jti` and expiry.
    pub token: Option<(String, DateTime<Utc>)>,
}

#[async_trait]
pub trait SessionStore {
    /// Adds the token to the denylist (again is a no-op) and forgets entries that expired before `now`.
    async fn revoke_token(&self, token: &RevokedToken, now: DateTime<Utc>) -> DbResult<()>;

    async fn is_token_revoked(&self, jti: &str) -> DbResult<bool>;

    /// Stores a stream ticket by its hash; the ticket itself is never stored.
    async fn add_sse_ticket(&self, ticket_hash: &str, ticket: &SseTicket) -> DbResult<()>;

    /// Removes the ticket and returns it when it had not expired at `now`: a ticket opens one
    /// stream, even when two replicas redeem it at once. Also forgets expired tickets.
    async fn take_sse_ticket(&self, ticket_hash: &str, now: DateTime<Utc>) -> DbResult<Option<SseTicket>>;
}
