//! Webhooks: the subscriptions operators make (where to send which bus events, signed with which
//! key, and how delivery has been going), and the outbox of events accepted for delivery, one row
//! per event and webhook, kept until the receiver took it so a restart loses and repeats nothing.
//! Both dialects accept every statement (`sql.rs`).

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::DbResult;
use crate::secret::Secret;

/// A webhook as stored. The secret is the HMAC key: it never leaves through a listing or a log.
#[derive(Clone, Debug, PartialEq)]
pub struct Webhook {
    pub uuid: Uuid,
    pub name: String,
    pub url: String,
    pub secret: Secret,
    /// Bus subject patterns (`attacker.>`, `decky.*.state`), in the order given.
    pub topic_patterns: Vec<String>,
    pub enabled: bool,
    pub consecutive_failures: u32,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// When delivery turned it off for failing too often; cleared when it is enabled again.
    pub auto_disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a PATCH changes: `None` leaves a field as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WebhookChange {
    pub name: Option<String>,
    pub url: Option<String>,
    pub secret: Option<Secret>,
    pub topic_patterns: Option<Vec<String>>,
    /// Enabling a disabled webhook also clears its failure state.
    pub enabled: Option<bool>,
}

impl WebhookChange {
    pub fn is_empty(&self) -> bool {
        *self == WebhookChange::default()
    }
}

/// An event accepted for one webhook: `body` is the exact JSON that will be signed and sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDelivery {
    pub webhook_uuid: Uuid,
    pub event_id: Uuid,
    pub topic: String,
    pub body: String,
}

/// An outbox row waiting for its (next) attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: i64,
    pub webhook_uuid: Uuid,
    pub event_id: Uuid,
    pub topic: String,
    pub body: String,
    /// Attempts that failed so far.
    pub attempts: u32,
}

/// How a failed attempt is recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryFailure {
    /// What went wrong, for the webhook's `last_error` (never the secret, never a body).
    pub error: String,
    /// When to try the event again; `None` drops it (the receiver refused it for good).
    pub retry_at: Option<DateTime<Utc>>,
    /// This many consecutive failures turn the webhook off.
    pub failure_limit: u32,
}

/// What a recorded failure did to the webhook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailureOutcome {
    pub consecutive_failures: u32,
    /// This failure turned the webhook off.
    pub disabled: bool,
}

#[async_trait]
pub trait WebhookStore {
    /// `Conflict` when the name is taken, in any letter case.
    async fn add_webhook(&self, webhook: &Webhook) -> DbResult<()>;

    /// Every webhook, oldest first.
    async fn webhooks(&self) -> DbResult<Vec<Webhook>>;

    async fn webhook(&self, uuid: Uuid) -> DbResult<Webhook>;

    /// Applies `change` and returns the webhook as it is now; `NotFound`, or `Conflict` when the
    /// new name is taken.
    async fn update_webhook(&self, uuid: Uuid, change: &WebhookChange, now: DateTime<Utc>) -> DbResult<Webhook>;

    /// Deletes the webhook and its undelivered events; `NotFound` when there is none.
    async fn delete_webhook(&self, uuid: Uuid) -> DbResult<()>;

    /// Seals every signing secret still stored in plaintext (an earlier version's); how many.
    async fn seal_webhook_secrets(&self) -> DbResult<u64>;

    /// Stores events for delivery, due at once; an event already stored for a webhook is skipped.
    /// Returns how many were new.
    async fn enqueue_deliveries(&self, deliveries: &[NewDelivery], now: DateTime<Utc>) -> DbResult<u64>;

    /// Events of enabled webhooks due at `now`, longest waiting first, at most `limit`.
    async fn due_deliveries(&self, now: DateTime<Utc>, limit: u32) -> DbResult<Vec<Delivery>>;

    /// Events waiting for delivery, due or not.
    async fn pending_deliveries(&self) -> DbResult<u64>;

    /// The receiver took the event: it leaves the outbox and the webhook's failure count resets.
    async fn delivery_succeeded(&self, delivery: &Delivery, now: DateTime<Utc>) -> DbResult<()>;

    /// An attempt failed: the event waits for its retry (or is dropped), the webhook counts one
    /// more consecutive failure and is turned off, with the reason, once it reaches the limit.
    async fn delivery_failed(
        &self,
        delivery: &Delivery,
        failure: &DeliveryFailure,
        now: DateTime<Utc>,
    ) -> DbResult<FailureOutcome>;
}
