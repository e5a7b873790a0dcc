//! Who a request belongs to: a bearer token or a stream ticket in, a live user out. Revocation
//! (logout, password or role change, deleted user) is read from the database through caches that
//! live at most [`REVOCATION_DELAY`], so every replica honours it within that time; the replica that
//! made the change honours it at once.

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::ticket::{TICKET_LIFETIME, new_ticket, ticket_hash};
use super::token::{self, Claims, TokenKeys};
use crate::db::{Db, DbError, RevokedToken, SseTicket, User};
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
    /// What the session stands on, for re-checking it while a stream stays open.
    pub credential: Credential,
}

/// When a session's credential (a token or a stream ticket) was issued, and the token it rests
/// on (the token itself, or the one a ticket was minted with): what revocation is judged by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub issued_at: DateTime<Utc>,
    /// The token's `jti` and expiry.
    pub token: Option<(String, DateTime<Utc>)>,
}

impl Credential {
    fn of_token(claims: &Claims) -> Credential {
        let issued_ms = (claims.iat * 1000.0).round() as i64;
        Credential {
            issued_at: DateTime::from_timestamp_millis(issued_ms).unwrap_or(DateTime::<Utc>::MIN_UTC),
            token: Some((claims.jti.clone(), claims.expires_at())),
        }
    }

    /// Why the credential is no longer good for `user` at `now`, when it is not; `revoked` says
    /// whether its token is on the denylist.
    fn refusal(&self, user: &User, revoked: bool, now: DateTime<Utc>) -> Option<&'static str> {
        if user.tokens_valid_from.is_some_and(|from| self.issued_at.timestamp_millis() < from.timestamp_millis()) {
            return Some("the credential predates the user's last password or role change");
        }
        match &self.token {
            Some((_, expires_at)) if *expires_at <= now => Some("the token expired"),
            Some(_) if revoked => Some("the token was logged out"),
            _ => None,
        }
    }
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
        Ok(Session { user, credential: Credential::of_token(&claims), token: Some(claims) })
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

    /// A new single-use stream ticket for the session's user, resting on the session's token.
    pub async fn issue_ticket(&self, session: &Session) -> Result<String, DbError> {
        let ticket = new_ticket();
        let issued_at = Utc::now();
        let stored = SseTicket {
            user: session.user.uuid,
            issued_at,
            expires_at: issued_at + TICKET_LIFETIME,
            token: session.credential.token.clone(),
        };
        self.db.add_sse_ticket(&ticket_hash(&ticket), &stored).await?;
        Ok(ticket)
    }

    /// Redeems a ticket: the first call within its lifetime gets the session, every later one
    /// fails, and so does one minted before its user's last password or role change or with a
    /// token since logged out.
    pub async fn redeem_ticket(&self, ticket: &str) -> Result<Session, AuthError> {
        let taken = self
            .db
            .take_sse_ticket(&ticket_hash(ticket), Utc::now())
            .await?
            .ok_or_else(|| rejected("unknown, used or expired stream ticket"))?;
        let user = self.user(taken.user).await?.ok_or_else(|| rejected("the ticket's user no longer exists"))?;
        let credential = Credential { issued_at: taken.issued_at, token: taken.token };
        let revoked = match &credential.token {
            Some((jti, _)) => self.is_revoked(jti).await?,
            None => false,
        };
        if let Some(reason) = credential.refusal(&user, revoked, Utc::now()) {
            return Err(rejected(reason));
        }
        Ok(Session { user, token: None, credential })
    }

    /// Whether an open stream's session is still good, read afresh from the database (not the
    /// caches), so a revocation made on any replica ends the stream at the next check.
    pub async fn recheck(&self, user: Uuid, credential: &Credential) -> Result<(), AuthError> {
        let revoked = match &credential.token {
            Some((jti, _)) => self.db.is_token_revoked(jti).await?,
            None => false,
        };
        let user = match self.db.user_by_uuid(user).await {
            Ok(user) => user,
            Err(DbError::NotFound) => return Err(rejected("the user no longer exists")),
            Err(err) => return Err(err.into()),
        };
        match credential.refusal(&user, revoked, Utc::now()) {
            Some(reason) => Err(rejected(reason)),
            None => Ok(()),
        }
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
