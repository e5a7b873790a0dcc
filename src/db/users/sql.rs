//! The users' statements, the same on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewUser, Role, User, UserStore};
use crate::db::codec::{convert, found, millis, parse_uuid, time};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};

/// What usernames are unique by and looked up by: case does not make a different user.
fn username_key(username: &str) -> String {
    username.to_lowercase()
}

#[derive(sqlx::FromRow)]
struct UserRow {
    uuid: String,
    username: String,
    password_hash: String,
    role: String,
    must_change_password: bool,
    tokens_valid_from: Option<i64>,
    created_at: i64,
}

impl TryFrom<UserRow> for User {
    type Error = DbError;

    fn try_from(row: UserRow) -> Result<Self, DbError> {
        Ok(User {
            uuid: parse_uuid(&row.uuid)?,
            username: row.username,
            password_hash: row.password_hash,
            role: row.role.parse().map_err(DbError::Corrupt)?,
            must_change_password: row.must_change_password,
            tokens_valid_from: row.tokens_valid_from.map(time).transpose()?,
            created_at: time(row.created_at)?,
        })
    }
}

both_backends! {
    #[async_trait]
    impl UserStore for Backend {
        async fn add_user(&self, user: NewUser, now: DateTime<Utc>) -> DbResult<User> {
            sqlx::query(
                "insert into users (uuid, username, username_key, password_hash, role, must_change_password, \
                 created_at) values (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(Uuid::new_v4().to_string())
            .bind(&user.username)
            .bind(username_key(&user.username))
            .bind(&user.password_hash)
            .bind(user.role.as_str())
            .bind(user.must_change_password)
            .bind(millis(now))
            .execute(&self.pool)
            .await?;
            self.user_by_name(&user.username).await
        }

        async fn user_by_name(&self, username: &str) -> DbResult<User> {
            let row: UserRow = sqlx::query_as("select * from users where username_key = ?")
                .bind(username_key(username))
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn list_users(&self) -> DbResult<Vec<User>> {
            let rows: Vec<UserRow> =
                sqlx::query_as("select * from users order by username_key").fetch_all(&self.pool).await?;
            convert(rows)
        }

        async fn user_by_uuid(&self, uuid: Uuid) -> DbResult<User> {
            let row: UserRow = sqlx::query_as("select * from users where uuid = ?")
                .bind(uuid.to_string())
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn delete_user(&self, uuid: Uuid) -> DbResult<()> {
            let done =
                sqlx::query("delete from users where uuid = ?").bind(uuid.to_string()).execute(&self.pool).await?;
            found(done.rows_affected())
        }

        async fn set_password(
            &self,
            user: Uuid,
            password_hash: &str,
            must_change_password: bool,
            tokens_valid_from: DateTime<Utc>,
        ) -> DbResult<()> {
            let done = sqlx::query(
                "update users set password_hash = ?, must_change_password = ?, tokens_valid_from = ? where uuid = ?",
            )
            .bind(password_hash)
            .bind(must_change_password)
            .bind(millis(tokens_valid_from))
            .bind(user.to_string())
            .execute(&self.pool)
            .await?;
            found(done.rows_affected())
        }

        async fn set_role(&self, user: Uuid, role: Role, tokens_valid_from: DateTime<Utc>) -> DbResult<()> {
            let done = sqlx::query("update users set role = ?, tokens_valid_from = ? where uuid = ?")
                .bind(role.as_str())
                .bind(millis(tokens_valid_from))
                .bind(user.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }
    }
}
