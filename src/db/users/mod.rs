//! Users: the accounts that sign in to the API, their role and their password hash. Both dialects
//! accept every statement (`sql.rs`).

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::DbResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Viewer => "viewer",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Role::Admin),
            "viewer" => Ok(Role::Viewer),
            other => Err(anyhow::anyhow!("unknown role `{other}` (expected admin or viewer)")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub uuid: Uuid,
    pub username: String,
    pub password_hash: String,
    pub role: Role,
    pub must_change_password: bool,
    /// Tokens issued before this instant are dead (password change, role change, reset).
    pub tokens_valid_from: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug)]
pub struct NewUser {
    pub username: String,
    pub password_hash: String,
    pub role: Role,
    pub must_change_password: bool,
}

#[async_trait]
pub trait UserStore {
    /// `Conflict` when the username is taken, in any letter case.
    async fn add_user(&self, user: NewUser, now: DateTime<Utc>) -> DbResult<User>;

    /// Matches the username in any letter case.
    async fn user_by_name(&self, username: &str) -> DbResult<User>;

    /// Ordered by username.
    async fn list_users(&self) -> DbResult<Vec<User>>;

    async fn user_by_uuid(&self, uuid: Uuid) -> DbResult<User>;

    /// `NotFound` when no such user exists. Their tokens die with them: a token's user must exist.
    async fn delete_user(&self, uuid: Uuid) -> DbResult<()>;

    /// Replaces the hash and kills every token issued before `tokens_valid_from`.
    async fn set_password(
        &self,
        user: Uuid,
        password_hash: &str,
        must_change_password: bool,
        tokens_valid_from: DateTime<Utc>,
    ) -> DbResult<()>;

    /// Changes the role and kills every token issued before `tokens_valid_from`.
    async fn set_role(&self, user: Uuid, role: Role, tokens_valid_from: DateTime<Utc>) -> DbResult<()>;
}
