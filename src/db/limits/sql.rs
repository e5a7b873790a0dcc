//! The limit windows' statements, the same on both backends but for the upsert's clause.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{LimitStore, LimitWindow};
use crate::db::DbResult;
use crate::db::codec::millis;
use crate::db::dialect::both_backends;

both_backends! {
    #[async_trait]
    impl LimitStore for Backend {
        async fn count_attempt(&self, window: &LimitWindow<'_>) -> DbResult<u32> {
            // The increment and the read share a transaction: the upsert holds the row (MySQL's
            // row lock, sqlite's write lock) until the read, so the count read is this attempt's
            // own and two replicas counting at once never both see the same number.
            let mut tx = self.pool.begin().await?;
            sqlx::query(&format!(
                "insert into rate_limit_windows (limit_name, limit_key, window_index, hits, expires_at) \
                 values (?, ?, ?, 1, ?){}hits = hits + 1",
                Backend::on_conflict_update("limit_name, limit_key, window_index")
            ))
            .bind(window.limit)
            .bind(Backend::indexed(window.key))
            .bind(window.index)
            .bind(millis(window.closes_at))
            .execute(&mut *tx)
            .await?;
            let (hits,): (i64,) = sqlx::query_as(
                "select hits from rate_limit_windows where limit_name = ? and limit_key = ? and window_index = ?",
            )
            .bind(window.limit)
            .bind(Backend::indexed(window.key))
            .bind(window.index)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(u32::try_from(hits).unwrap_or(u32::MAX))
        }

        async fn prune_limit_windows(&self, now: DateTime<Utc>) -> DbResult<u64> {
            let pruned = sqlx::query("delete from rate_limit_windows where expires_at < ?")
                .bind(millis(now))
                .execute(&self.pool)
                .await?;
            Ok(pruned.rows_affected())
        }
    }
}
