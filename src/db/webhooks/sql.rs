//! The webhook statements, the same on both backends. An update's assignments are ordered so that
//! MySQL, which evaluates them left to right on the new values, and sqlite, which reads the old
//! row, agree: `enabled` is assigned last, after the columns that depend on its old value.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::{Delivery, DeliveryFailure, FailureOutcome, NewDelivery, Webhook, WebhookChange, WebhookStore};
use crate::db::codec::{
    MAX_ROWS_PER_INSERT, convert, count, found, json_text, millis, parse_uuid, row_sets, settle, time,
};
use crate::db::dialect::both_backends;
use crate::db::seal::Seal;
use crate::db::{DbError, DbResult};
use crate::secret::Secret;

#[derive(sqlx::FromRow)]
struct WebhookRow {
    uuid: String,
    name: String,
    url: String,
    secret: String,
    topic_patterns: String,
    enabled: bool,
    consecutive_failures: i32,
    last_success_at: Option<i64>,
    last_failure_at: Option<i64>,
    last_error: Option<String>,
    auto_disabled_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<WebhookRow> for Webhook {
    type Error = DbError;

    fn try_from(row: WebhookRow) -> Result<Self, DbError> {
        let topic_patterns = serde_json::from_str(&row.topic_patterns)
            .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored topic patterns are not a JSON list: {e}")))?;
        Ok(Webhook {
            uuid: parse_uuid(&row.uuid)?,
            name: row.name,
            url: row.url,
            secret: Secret::new(row.secret),
            topic_patterns,
            enabled: row.enabled,
            consecutive_failures: row.consecutive_failures.max(0) as u32,
            last_success_at: row.last_success_at.map(time).transpose()?,
            last_failure_at: row.last_failure_at.map(time).transpose()?,
            last_error: row.last_error,
            auto_disabled_at: row.auto_disabled_at.map(time).transpose()?,
            created_at: time(row.created_at)?,
            updated_at: time(row.updated_at)?,
        })
    }
}

/// The webhook with its stored secret opened (`seal`).
fn opened(seal: &Seal, mut webhook: Webhook) -> DbResult<Webhook> {
    webhook.secret = Secret::new(seal.open(webhook.secret.expose())?);
    Ok(webhook)
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    webhook_uuid: String,
    event_id: String,
    topic: String,
    body: String,
    attempts: i32,
}

impl TryFrom<DeliveryRow> for Delivery {
    type Error = DbError;

    fn try_from(row: DeliveryRow) -> Result<Self, DbError> {
        Ok(Delivery {
            id: row.id,
            webhook_uuid: parse_uuid(&row.webhook_uuid)?,
            event_id: parse_uuid(&row.event_id)?,
            topic: row.topic,
            body: row.body,
            attempts: row.attempts.max(0) as u32,
        })
    }
}

/// Names are unique in any letter case, compared the same way on both backends.
fn name_key(name: &str) -> String {
    name.to_lowercase()
}

/// Stored error texts stay short: they are shown in every listing.
fn error_text(error: &str) -> &str {
    crate::text::prefix_chars(error, 500)
}

const WEBHOOK_COLUMNS: &str = "uuid, name, url, secret, topic_patterns, enabled, consecutive_failures, \
     last_success_at, last_failure_at, last_error, auto_disabled_at, created_at, updated_at";

both_backends! {
    #[async_trait]
    impl WebhookStore for Backend {
        async fn add_webhook(&self, webhook: &Webhook) -> DbResult<()> {
            sqlx::query(&format!(
                "insert into webhook_subscriptions ({WEBHOOK_COLUMNS}, name_key) \
                 values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(webhook.uuid.to_string())
            .bind(&webhook.name)
            .bind(&webhook.url)
            .bind(self.seal.seal(webhook.secret.expose())?)
            .bind(json_text(&webhook.topic_patterns))
            .bind(webhook.enabled)
            .bind(webhook.consecutive_failures as i32)
            .bind(webhook.last_success_at.map(millis))
            .bind(webhook.last_failure_at.map(millis))
            .bind(&webhook.last_error)
            .bind(webhook.auto_disabled_at.map(millis))
            .bind(millis(webhook.created_at))
            .bind(millis(webhook.updated_at))
            .bind(name_key(&webhook.name))
            .execute(&self.pool)
            .await?;
            Ok(())
        }

        async fn webhooks(&self) -> DbResult<Vec<Webhook>> {
            let rows: Vec<WebhookRow> = sqlx::query_as(&format!(
                "select {WEBHOOK_COLUMNS} from webhook_subscriptions order by created_at, uuid"
            ))
            .fetch_all(&self.pool)
            .await?;
            convert(rows)?.into_iter().map(|webhook| opened(&self.seal, webhook)).collect()
        }

        async fn webhook(&self, uuid: Uuid) -> DbResult<Webhook> {
            let row: WebhookRow =
                sqlx::query_as(&format!("select {WEBHOOK_COLUMNS} from webhook_subscriptions where uuid = ?"))
                    .bind(uuid.to_string())
                    .fetch_one(&self.pool)
                    .await?;
            opened(&self.seal, row.try_into()?)
        }

        async fn seal_webhook_secrets(&self) -> DbResult<u64> {
            let stored: Vec<(String, String)> =
                sqlx::query_as("select uuid, secret from webhook_subscriptions").fetch_all(&self.pool).await?;
            let mut sealed = 0;
            for (uuid, secret) in stored.into_iter().filter(|(_, secret)| !Seal::is_sealed(secret)) {
                // Only if still the plaintext read: a concurrent update's new (sealed) value stays.
                let done = sqlx::query("update webhook_subscriptions set secret = ? where uuid = ? and secret = ?")
                    .bind(self.seal.seal(&secret)?)
                    .bind(&uuid)
                    .bind(&secret)
                    .execute(&self.pool)
                    .await?;
                sealed += done.rows_affected();
            }
            Ok(sealed)
        }

        async fn update_webhook(&self, uuid: Uuid, change: &WebhookChange, now: DateTime<Utc>) -> DbResult<Webhook> {
            let enabling = change.enabled == Some(true);
            let done = sqlx::query(
                "update webhook_subscriptions set name = coalesce(?, name), name_key = coalesce(?, name_key), \
                 url = coalesce(?, url), secret = coalesce(?, secret), topic_patterns = coalesce(?, topic_patterns), \
                 consecutive_failures = case when ? and not enabled then 0 else consecutive_failures end, \
                 auto_disabled_at = case when ? and not enabled then null else auto_disabled_at end, \
                 last_error = case when ? and not enabled then null else last_error end, \
                 enabled = coalesce(?, enabled), updated_at = ? \
                 where uuid = ?",
            )
            .bind(change.name.as_deref())
            .bind(change.name.as_deref().map(name_key))
            .bind(change.url.as_deref())
            .bind(change.secret.as_ref().map(|secret| self.seal.seal(secret.expose())).transpose()?)
            .bind(change.topic_patterns.as_ref().map(json_text))
            .bind(enabling)
            .bind(enabling)
            .bind(enabling)
            .bind(change.enabled)
            .bind(millis(now))
            .bind(uuid.to_string())
            .execute(&self.pool)
            .await?;
            found(done.rows_affected())?;
            self.webhook(uuid).await
        }

        async fn delete_webhook(&self, uuid: Uuid) -> DbResult<()> {
            let done = sqlx::query("delete from webhook_subscriptions where uuid = ?")
                .bind(uuid.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }

        async fn enqueue_deliveries(&self, deliveries: &[NewDelivery], now: DateTime<Utc>) -> DbResult<u64> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<u64> = async {
                let mut new = 0;
                let size = |d: &NewDelivery| d.body.len() + d.topic.len() + 128;
                for rows in row_sets(deliveries, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, size) {
                    let mut insert = QueryBuilder::<Sql>::new(format!(
                        "{} into webhook_outbox (webhook_uuid, event_id, topic, body, attempts, next_attempt_at, \
                         created_at) ",
                        Backend::INSERT_OR_SKIP
                    ));
                    insert.push_values(rows, |mut row, delivery| {
                        row.push_bind(delivery.webhook_uuid.to_string())
                            .push_bind(delivery.event_id.to_string())
                            .push_bind(Backend::indexed(&delivery.topic))
                            .push_bind(delivery.body.as_str())
                            .push("0")
                            .push_bind(millis(now))
                            .push_bind(millis(now));
                    });
                    insert.push(Backend::SKIP_HELD);
                    new += insert.build().execute(&mut *tx).await?.rows_affected();
                }
                Ok(new)
            }
            .await;
            settle(tx, result).await
        }

        async fn due_deliveries(&self, now: DateTime<Utc>, limit: u32) -> DbResult<Vec<Delivery>> {
            let rows: Vec<DeliveryRow> = sqlx::query_as(
                "select o.id, o.webhook_uuid, o.event_id, o.topic, o.body, o.attempts from webhook_outbox o \
                 join webhook_subscriptions w on w.uuid = o.webhook_uuid \
                 where w.enabled and o.next_attempt_at <= ? order by o.next_attempt_at, o.id limit ?",
            )
            .bind(millis(now))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn pending_deliveries(&self) -> DbResult<u64> {
            let (n,): (i64,) = sqlx::query_as("select count(*) from webhook_outbox").fetch_one(&self.pool).await?;
            Ok(count(n))
        }

        async fn delivery_succeeded(&self, delivery: &Delivery, now: DateTime<Utc>) -> DbResult<()> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<()> = async {
                sqlx::query("delete from webhook_outbox where id = ?").bind(delivery.id).execute(&mut *tx).await?;
                sqlx::query(
                    "update webhook_subscriptions set consecutive_failures = 0, last_success_at = ? where uuid = ?",
                )
                .bind(millis(now))
                .bind(delivery.webhook_uuid.to_string())
                .execute(&mut *tx)
                .await?;
                Ok(())
            }
            .await;
            settle(tx, result).await
        }

        async fn delivery_failed(
            &self,
            delivery: &Delivery,
            failure: &DeliveryFailure,
            now: DateTime<Utc>,
        ) -> DbResult<FailureOutcome> {
            let error = error_text(&failure.error);
            let webhook = delivery.webhook_uuid.to_string();
            let mut tx = self.begin_write().await?;
            let result: DbResult<FailureOutcome> = async {
                match failure.retry_at {
                    Some(at) => sqlx::query(
                        "update webhook_outbox set attempts = attempts + 1, next_attempt_at = ?, last_error = ? \
                         where id = ?",
                    )
                    .bind(millis(at))
                    .bind(error)
                    .bind(delivery.id),
                    None => sqlx::query("delete from webhook_outbox where id = ?").bind(delivery.id),
                }
                .execute(&mut *tx)
                .await?;
                // The update locks the row (MySQL) before it is read back.
                let done = sqlx::query(
                    "update webhook_subscriptions set consecutive_failures = consecutive_failures + 1, \
                     last_failure_at = ?, last_error = ? where uuid = ?",
                )
                .bind(millis(now))
                .bind(error)
                .bind(&webhook)
                .execute(&mut *tx)
                .await?;
                found(done.rows_affected())?;
                let (failures, enabled): (i32, bool) =
                    sqlx::query_as("select consecutive_failures, enabled from webhook_subscriptions where uuid = ?")
                        .bind(&webhook)
                        .fetch_one(&mut *tx)
                        .await?;
                let consecutive_failures = failures.max(0) as u32;
                let disabled = enabled && consecutive_failures >= failure.failure_limit;
                if disabled {
                    let reason = format!("auto-disabled after {consecutive_failures} consecutive failures: {error}");
                    sqlx::query(
                        "update webhook_subscriptions set enabled = ?, auto_disabled_at = ?, last_error = ? \
                         where uuid = ?",
                    )
                    .bind(false)
                    .bind(millis(now))
                    .bind(error_text(&reason))
                    .bind(&webhook)
                    .execute(&mut *tx)
                    .await?;
                }
                Ok(FailureOutcome { consecutive_failures, disabled })
            }
            .await;
            settle(tx, result).await
        }
    }
}
