//! The webhook worker (`svc worker webhook`; inside `svc api` with `SVC_EMBED_WEBHOOK`): takes the
//! bus events webhooks select into a durable outbox in the database (`intake`), and delivers the
//! outbox: each event signed and posted to each selecting webhook, retried with doubling delays
//! while the receiver fails (network errors, 429, 5xx), dropped when it refuses for good (another
//! 4xx, a 3xx, a destination the rules now forbid). A delivered event leaves the outbox in the same
//! transaction that records the success, so a restart neither loses an accepted event nor sends a
//! delivered one again (only a crash between the receiver's answer and that commit repeats one,
//! under the same event id, which receivers de-duplicate on). A webhook failing
//! `SVC_WEBHOOK_FAILURE_LIMIT` times in a row is turned off with the reason, as DECNET does; its
//! waiting events are delivered once it is enabled again. One worker delivers at a time: it holds
//! the lease `webhook`; another stands by.

mod intake;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use svc::config::WebhookConfig;
use svc::db::{Delivery, DeliveryFailure, Webhook};
use svc::roster::counters::webhook as counter;
use svc::webhook::send::Envelope;
use svc::webhook::{self, Outcome};
use svc::worker::{WorkerBody, WorkerContext};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::lease::{Held, Lease};

/// The worker's name, and its lease's.
pub const NAME: &str = "webhook";
/// Outbox rows read per round.
const ROUND: u32 = 200;
/// Webhooks delivered to at once; each webhook's events go one after another.
const PARALLEL_WEBHOOKS: usize = 8;
/// How often the outbox is looked at when nothing wakes the worker sooner.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// The pause before retrying after the database failed.
const RETRY_PAUSE: Duration = Duration::from_secs(2);

/// The worker `svc worker webhook` runs, and `svc api` embeds with `SVC_EMBED_WEBHOOK`.
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, run)
}

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    if ctx.config.webhook.allow_private {
        tracing::warn!("SVC_WEBHOOK_ALLOW_PRIVATE is on: webhooks may deliver to private and loopback addresses");
    }
    let leading = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(Notify::new());
    let deliverer = Deliverer::new(ctx.clone(), leading.clone(), accepted.clone());
    tokio::join!(deliverer.run(), intake::run(ctx, leading, accepted));
    Ok(())
}

struct Deliverer {
    ctx: WorkerContext,
    lease: Lease,
    leading: Arc<AtomicBool>,
    accepted: Arc<Notify>,
}

/// What a round found.
enum Round {
    /// A full round: there may be more due.
    More,
    /// Nothing more is due; the earliest retry this round scheduled, if any.
    Done(Option<DateTime<Utc>>),
    StandingBy,
}

impl Deliverer {
    fn new(ctx: WorkerContext, leading: Arc<AtomicBool>, accepted: Arc<Notify>) -> Deliverer {
        let lease = Lease::new(NAME, ctx.config.worker.lease);
        Deliverer { ctx, lease, leading, accepted }
    }

    async fn run(mut self) {
        tracing::info!("Delivering webhook events");
        while !self.ctx.cancel.is_cancelled() {
            let wait = match self.round().await {
                Ok(Round::More) => continue,
                Ok(Round::Done(next)) => {
                    next.and_then(|at| (at - Utc::now()).to_std().ok()).map_or(IDLE_POLL, |until| until.min(IDLE_POLL))
                }
                Ok(Round::StandingBy) => self.ctx.config.worker.lease / 3,
                Err(err) => {
                    tracing::error!(error = %format!("{err:#}"), "Webhook delivery failed; retrying");
                    RETRY_PAUSE
                }
            };
            tokio::select! {
                () = self.ctx.cancel.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
                () = self.accepted.notified() => {}
            }
        }
        self.leading.store(false, Ordering::Relaxed);
        self.lease.release(&self.ctx.db).await;
    }

    /// Delivers what is due: each webhook's events in order, webhooks side by side.
    async fn round(&mut self) -> anyhow::Result<Round> {
        if !self.hold_lease().await? {
            return Ok(Round::StandingBy);
        }
        let db = &self.ctx.db;
        let due = db.due_deliveries(Utc::now(), ROUND).await?;
        if due.is_empty() {
            return Ok(Round::Done(None));
        }
        let full = due.len() == ROUND as usize;
        let webhooks: BTreeMap<Uuid, Webhook> = db.webhooks().await?.into_iter().map(|w| (w.uuid, w)).collect();
        let mut queues: BTreeMap<Uuid, Vec<Delivery>> = BTreeMap::new();
        for delivery in due {
            queues.entry(delivery.webhook_uuid).or_default().push(delivery);
        }
        let retries: Vec<Option<DateTime<Utc>>> = futures::stream::iter(queues)
            .filter_map(|(uuid, queue)| {
                let webhook = webhooks.get(&uuid).filter(|w| w.enabled).cloned();
                async move { webhook.map(|webhook| (webhook, queue)) }
            })
            .map(|(webhook, queue)| self.deliver_queue(webhook, queue))
            .buffer_unordered(PARALLEL_WEBHOOKS)
            .collect()
            .await;
        if full {
            return Ok(Round::More);
        }
        Ok(Round::Done(retries.into_iter().flatten().min()))
    }

    /// Delivers one webhook's due events in order, stopping at the first that must wait (the
    /// receiver is failing: the rest would only fail too). Returns when that one is due again.
    async fn deliver_queue(&self, webhook: Webhook, queue: Vec<Delivery>) -> Option<DateTime<Utc>> {
        for delivery in queue {
            match self.attempt(&webhook, &delivery).await {
                Ok(None) => {}
                Ok(Some(retry_at)) => return Some(retry_at),
                Err(err) => {
                    tracing::error!(webhook = %webhook.uuid, error = %format!("{err:#}"), "Could not record a webhook delivery");
                    return None;
                }
            }
        }
        None
    }

    /// One attempt, recorded; `Some(retry_at)` when the event waits for a retry, or `None` when it
    /// is done with (delivered, or dropped).
    async fn attempt(&self, webhook: &Webhook, delivery: &Delivery) -> anyhow::Result<Option<DateTime<Utc>>> {
        let config = &self.ctx.config.webhook;
        let envelope = Envelope { event_id: delivery.event_id, topic: &delivery.topic, body: &delivery.body };
        let outcome =
            webhook::deliver(&webhook.url, &webhook.secret, envelope, config.allow_private, config.timeout).await;
        let counters = &self.ctx.counters;
        let db = &self.ctx.db;
        let (error, status, retry) = match outcome {
            Outcome::Delivered { status } => {
                db.delivery_succeeded(delivery, Utc::now()).await?;
                counters.add(counter::DELIVERIES_OK, 1);
                tracing::debug!(webhook = %webhook.uuid, event = %delivery.event_id, topic = %delivery.topic, status, "Webhook event delivered");
                return Ok(None);
            }
            Outcome::Failed { error, status, retry } => (error, status, retry),
        };
        let now = Utc::now();
        let retry_at = retry.then(|| now + retry_delay(config, delivery.attempts));
        let failure = DeliveryFailure { error: error.clone(), retry_at, failure_limit: config.failure_limit };
        let outcome = db.delivery_failed(delivery, &failure, now).await?;
        counters.add(counter::DELIVERIES_FAILED, 1);
        tracing::warn!(
            webhook = %webhook.uuid, name = %webhook.name, event = %delivery.event_id, topic = %delivery.topic,
            status, error, attempt = delivery.attempts + 1, retry = retry_at.is_some(), "Webhook delivery failed"
        );
        if retry_at.is_none() {
            counters.add(counter::EVENTS_DROPPED, 1);
        }
        if outcome.disabled {
            counters.add(counter::WEBHOOKS_DISABLED, 1);
            tracing::warn!(
                webhook = %webhook.uuid, name = %webhook.name, failures = outcome.consecutive_failures,
                "Webhook turned off after consecutive failures; enable it again to resume delivery"
            );
            // Its other events wait for it to be enabled again.
            return Ok(None);
        }
        Ok(retry_at)
    }

    /// Takes or renews the lease when due; false while another worker holds it.
    async fn hold_lease(&mut self) -> anyhow::Result<bool> {
        let held = self.lease.hold(&self.ctx.db).await?;
        match held {
            Held::Taken { .. } => tracing::info!("Holding the webhook lease"),
            Held::Lost => tracing::warn!("Lost the webhook lease to another worker"),
            Held::StandingBy => tracing::info!("Another webhook worker holds the lease; standing by"),
            Held::Kept | Held::StillStandingBy => {}
        }
        self.leading.store(held.is_held(), Ordering::Relaxed);
        Ok(held.is_held())
    }
}

/// The delay before retrying an event that failed `attempts` times before: the base, doubled at
/// each failure, at most [`WebhookConfig::MAX_RETRY_DELAY`].
fn retry_delay(config: &WebhookConfig, attempts: u32) -> chrono::Duration {
    let delay = config.retry_base.saturating_mul(2u32.saturating_pow(attempts.min(20)));
    chrono::Duration::from_std(delay.min(WebhookConfig::MAX_RETRY_DELAY)).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_by_doubling_up_to_the_cap() {
        let config = WebhookConfig {
            allow_private: false,
            timeout: Duration::from_secs(10),
            retry_base: Duration::from_secs(1),
            failure_limit: 5,
        };
        let delays: Vec<i64> = (0..4).map(|n| retry_delay(&config, n).num_seconds()).collect();
        assert_eq!(delays, [1, 2, 4, 8]);
        assert_eq!(retry_delay(&config, 30).num_seconds(), 300);
    }
}
