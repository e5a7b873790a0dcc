//! The sessions' statements, the same on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{RevokedToken, SessionStore};
use crate::db::DbResult;
use crate::db::codec::{millis, parse_uuid};
use crate::db::dialect::both_backends;

both_backends! {
    #[async_trait]
    impl SessionStore for Backend {
        async fn revoke_token(&self, token: &RevokedToken, now: DateTime<Utc>) -> DbResult<()> {
            sqlx::query(&format!(
                "{} into revoked_tokens (jti, user_uuid, expires_at, revoked_at) values (?, ?, ?, ?){}",
                Backend::INSERT_OR_SKIP,
                Backend::SKIP_HELD
            ))
            .bind(&token.jti)
            .bind(token.user.to_string())
            .bind(millis(token.expires_at))
            .bind(millis(now))
            .execute(&self.pool)
            .await?;
            sqlx::query("delete from revoked_tokens where expires_at < ?").bind(millis(now)).execute(&self.pool).await?;
            Ok(())
        }

        async fn is_token_revoked(&self, jti: &str) -> DbResult<bool> {
            let (count,): (i64,) = sqlx::query_as("select count(*) from revoked_tokens where jti = ?")
                .bind(jti)
                .fetch_one(&self.pool)
                .await?;
            Ok(count > 0)
        }

        async fn add_sse_ticket(&self, ticket_hash: &str, user: Uuid, expires_at: DateTime<Utc>) -> DbResult<()> {
            sqlx::query("insert into sse_tickets (ticket_hash, user_uuid, expires_at, created_at) values (?, ?, ?, ?)")
                .bind(ticket_hash)
                .bind(user.to_string())
                .bind(millis(expires_at))
                .bind(millis(Utc::now()))
                .execute(&self.pool)
                .await?;
            Ok(())
        }

        async fn take_sse_ticket(&self, ticket_hash: &str, now: DateTime<Utc>) -> DbResult<Option<Uuid>> {
            let held: Option<(String, i64)> =
                sqlx::query_as("select user_uuid, expires_at from sse_tickets where ticket_hash = ?")
                    .bind(ticket_hash)
                    .fetch_optional(&self.pool)
                    .await?;
            // Of two redeemers that both read the row, only the one whose delete removed it wins.
            let taken = match held {
                Some(row) => {
                    let deleted = sqlx::query("delete from sse_tickets where ticket_hash = ?")
                        .bind(ticket_hash)
                        .execute(&self.pool)
                        .await?;
                    (deleted.rows_affected() == 1).then_some(row)
                }
                None => None,
            };
            sqlx::query("delete from sse_tickets where expires_at < ?").bind(millis(now)).execute(&self.pool).await?;
            match taken {
                Some((user, expires_at)) if expires_at >= millis(now) => Ok(Some(parse_uuid(&user)?)),
                _ => Ok(None),
            }
        }
    }
}
