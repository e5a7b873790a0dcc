//! The sessions' statements, the same on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{RevokedToken, SessionStore, SseTicket};
use crate::db::DbResult;
use crate::db::codec::{millis, parse_uuid, time};
use crate::db::dialect::both_backends;

/// `user_uuid, expires_at, created_at, token_jti, token_expires_at`.
type TicketRow = (String, i64, i64, Option<String>, Option<i64>);

fn ticket((user, expires_at, issued_at, jti, token_expires_at): TicketRow) -> DbResult<SseTicket> {
    let token = match (jti, token_expires_at) {
        (Some(jti), Some(expires_at)) => Some((jti, time(expires_at)?)),
        _ => None,
    };
    Ok(SseTicket { user: parse_uuid(&user)?, issued_at: time(issued_at)?, expires_at: time(expires_at)?, token })
}

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

        async fn add_sse_ticket(&self, ticket_hash: &str, ticket: &SseTicket) -> DbResult<()> {
            sqlx::query(
                "insert into sse_tickets (ticket_hash, user_uuid, expires_at, created_at, token_jti, token_expires_at) \
                 values (?, ?, ?, ?, ?, ?)",
            )
            .bind(ticket_hash)
            .bind(ticket.user.to_string())
            .bind(millis(ticket.expires_at))
            .bind(millis(ticket.issued_at))
            .bind(ticket.token.as_ref().map(|(jti, _)| jti.clone()))
            .bind(ticket.token.as_ref().map(|(_, expires_at)| millis(*expires_at)))
            .execute(&self.pool)
            .await?;
            Ok(())
        }

        async fn take_sse_ticket(&self, ticket_hash: &str, now: DateTime<Utc>) -> DbResult<Option<SseTicket>> {
            let held: Option<TicketRow> = sqlx::query_as(
                "select user_uuid, expires_at, created_at, token_jti, token_expires_at from sse_tickets \
                 where ticket_hash = ?",
            )
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
                Some(row) if row.1 >= millis(now) => Ok(Some(ticket(row)?)),
                _ => Ok(None),
            }
        }
    }
}
