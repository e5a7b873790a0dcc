//! Who a request belongs to: a bearer token or a stream ticket in, a live user out. Revocation
//! (logout, password or role change, deleted user) is read from the database through caches that
//! live at most [`REVOCATION_DELAY`], so every replica honours it within that time; the replica that
//! made the change honours it at once.

use std::time::Duration;

use chrono::Utc;
use uuid::Uuid;

use super::ticket::{TICKET_LIFETIME, new_ticket, ticket_hash};
use super::token::{self, Claims, TokenKeys};
use crate::db::{Db, DbError, RevokedToken, User};
use crate::recent::RecentByKey;

/// How long a revocation made on another replica may go unseen here.
pub const REVOCATION_DELAY: Duration = Duration::from_secs(10);
/// Enough for every active user and token of a busy dashboard; past it the caches start over.
const CACHE_ENTRIES: usize = 10_000;

/// An authenticated request's user, as stored at most [`REVOCATION_DELAY`] ago.
#[derive(Clone, Debug)]
pub struct Session {
    pub user: User,
    /// Absent when the session came from a stream ticket.
    pub token: Option<Claims>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The credential is missing, forged, expired, revoked, or its user is gone. The reason is for
    /// the server log only.
    #[error("not authenticated: {0}")]
    Rejected(String),
    #[error(transparent)]
    Store(#[from] DbError),
}

fn rejected(reason: impl Into<String>) -> AuthError {
    AuthError::Rejected(reason.into())
}

pub struct Sessions {
    keys: TokenKeys,
    db: Db,
    users: RecentByKey<Uuid, User>,
    revoked: RecentByKey<String, bool>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("keys", &self.keys).finish_non_exhaustive()
    }
}

impl Sessions {
    pub fn new(keys: TokenKeys, db: Db) -> Self {
        Sessions {
            keys,
            db,
            users: RecentByKey::new(REVOCATION_DELAY, CACHE_ENTRIES),
            revoked: RecentByKey::new(REVOCATION_DELAY, CACHE_ENTRIES),
        }
    }

    pub fn mint(&self, user: &User) -> anyhow::Result<String> {
        self.keys.mint(user.uuid, user.tokens_valid_from, Utc::now())
    }

    /// A bearer token's session: the token must verify, its user exist, and neither the token nor
    /// the user's earlier tokens be revoked.
    pub async fn authenticate(&self, bearer: &str) -> Result<Session, AuthError> {
        let claims = self.keys.decode(bearer).map_err(|e| rejected(e.to_string()))?;
        let user = self.user(claims.sub).await?.ok_or_else(|| rejected("the token's user no longer exists"))?;
        if !token::issued_after(claims.iat, user.tokens_valid_from) {
            return Err(rejected("the token predates the user's last password or role change"));
        }
        if self.is_revoked(&claims.jti).await? {
            return Err(rejected("the token was logged out"));
        }
        Ok(Session { user, token: Some(claims) })
    }

    /// Revokes the session's token on every replica.
    pub async fn logout(&self, claims: &Claims) -> Result<(), DbError> {
        let entry = RevokedToken { jti: claims.jti.clone(), user: claims.sub, expires_at: claims.expires_at() };
        self.db.revoke_token(&entry, Utc::now()).await?;
        self.revoked.insert(claims.jti.clone(), true);
        Ok(())
    }

    /// Call after changing a user's row, so this replica sees the change at once.
    pub fn forget_user(&self, uuid: Uuid) {
        self.users.remove(&uuid);
    }

    /// A new single-use stream ticket for `user`.
    pub async fn issue_ticket(&self, user: Uuid) -> Result<String, DbError> {
        let ticket = new_ticket();
        let expires_at = Utc::now() + TICKET_LIFETIME;
        self.db.add_sse_ticket(&ticket_hash(&ticket), user, expires_at).await?;
        Ok(ticket)
    }

    /// Redeems a ticket: the first call within its lifetime gets the session, every later one fails.
    pub async fn redeem_ticket(&self, ticket: &str) -> Result<Session, AuthError> {
        let owner = self
            .db
            .take_sse_ticket(&ticket_hash(ticket), Utc::now())
            .await?
            .ok_or_else(|| rejected("unknown, used or expired stream ticket"))?;
        let user = self.user(owner).await?.ok_or_else(|| rejected("the ticket's user no longer exists"))?;
        Ok(Session { user, token: None })
    }

    async fn user(&self, uuid: Uuid) -> Result<Option<User>, DbError> {
        if let Some(user) = self.users.get(&uuid) {
            return Ok(Some(user));
        }
        match self.db.user_by_uuid(uuid).await {
            Ok(user) => {
                self.users.insert(uuid, user.clone());
                Ok(Some(user))
            }
            Err(DbError::NotFound) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn is_revoked(&self, jti: &str) -> Result<bool, DbError> {
        if let Some(revoked) = self.revoked.get(&jti.to_string()) {
            return Ok(revoked);
        }
        let revoked = self.db.is_token_revoked(jti).await?;
        self.revoked.insert(jti.to_string(), revoked);
        Ok(revoked)
    }
}
