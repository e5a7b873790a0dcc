//! The intake: every bus event a webhook selects becomes one outbox row per selecting webhook,
//! under one event id, with the exact body the receivers will get. Only the lease holder takes
//! events in (two workers would accept each event twice, under two ids). The webhook set is read
//! from the database at start, when the API announces a change, and every [`RELOAD_EVERY`] in case
//! a notice was lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::{FutureExt, StreamExt};
use svc::bus::{Event, topics};
use svc::db::{NewDelivery, Webhook};
use svc::roster::counters::webhook as counter;
use svc::webhook;
use svc::worker::WorkerContext;
use tokio::sync::Notify;
use uuid::Uuid;

/// How often the webhook set is read again without a change notice.
const RELOAD_EVERY: Duration = Duration::from_secs(10);
/// Events stored in one transaction at most.
const BATCH: usize = 500;
/// A larger event is not accepted: no receiver should get megabytes per event.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Accepts events while `leading`, until cancelled; `accepted` is told when rows were stored.
pub async fn run(ctx: WorkerContext, leading: Arc<AtomicBool>, accepted: Arc<Notify>) {
    let Some(mut messages) = ctx.bus.subscribe(topics::EVERYTHING.to_string()).await else {
        tracing::warn!("No bus: webhooks deliver only what is already in the outbox");
        return;
    };
    let mut webhooks = Webhooks::default();
    let mut batch = Vec::new();
    loop {
        let message = tokio::select! {
            () = ctx.cancel.cancelled() => return,
            () = tokio::time::sleep(RELOAD_EVERY) => None,
            message = messages.next() => match message {
                Some(message) => Some(message),
                None => return,
            },
        };
        if webhooks.is_stale() {
            webhooks.reload(&ctx).await;
        }
        let Some(mut message) = message else { continue };
        loop {
            if message.subject.as_str() == topics::WEBHOOKS_CHANGED {
                webhooks.reload(&ctx).await;
            }
            if leading.load(Ordering::Relaxed) {
                let _handling = svc::bus::received(&message).entered();
                accept(&ctx, &webhooks.enabled, &message.subject, &message.payload, &mut batch);
            }
            if batch.len() >= BATCH {
                break;
            }
            match messages.next().now_or_never() {
                Some(Some(next)) => message = next,
                _ => break,
            }
        }
        store(&ctx, &mut batch, &accepted).await;
    }
}

/// The enabled webhooks, as last read.
#[derive(Default)]
struct Webhooks {
    enabled: Vec<Webhook>,
    read_at: Option<Instant>,
}

impl Webhooks {
    fn is_stale(&self) -> bool {
        self.read_at.is_none_or(|at| at.elapsed() >= RELOAD_EVERY)
    }

    async fn reload(&mut self, ctx: &WorkerContext) {
        match ctx.db.webhooks().await {
            Ok(all) => {
                self.enabled = all.into_iter().filter(|w| w.enabled).collect();
                self.read_at = Some(Instant::now());
            }
            // The last set read stays in force; the next reload tries again.
            Err(err) => tracing::warn!(error = %err, "Could not read the webhooks"),
        }
    }
}

/// One outbox row per webhook `subject` is selected by, all under one new event id.
fn accept(ctx: &WorkerContext, webhooks: &[Webhook], subject: &str, body: &[u8], batch: &mut Vec<NewDelivery>) {
    if topics::is_housekeeping(subject) {
        return;
    }
    let selecting: Vec<&Webhook> =
        webhooks.iter().filter(|w| w.topic_patterns.iter().any(|pattern| topics::matches(pattern, subject))).collect();
    if selecting.is_empty() {
        return;
    }
    if body.len() > MAX_EVENT_BYTES {
        ctx.counters.add(counter::EVENTS_OVERSIZED, 1);
        tracing::warn!(subject, bytes = body.len(), "Event too large for webhooks; not accepted");
        return;
    }
    let Ok(event) = serde_json::from_slice::<Event>(body) else {
        ctx.counters.add(counter::EVENTS_MALFORMED, 1);
        tracing::debug!(subject, "Not a bus event; not accepted for webhooks");
        return;
    };
    let event_id = Uuid::new_v4();
    // The subject it arrived on is the topic receivers get (the envelope's could say otherwise).
    let body = webhook::body(event_id, subject, &event.kind, event_time(event.ts), &event.payload);
    batch.extend(selecting.into_iter().map(|w| NewDelivery {
        webhook_uuid: w.uuid,
        event_id,
        topic: subject.to_string(),
        body: body.clone(),
    }));
}

/// A bus timestamp (epoch seconds) as a time; now when it is none.
fn event_time(ts: f64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros((ts * 1e6) as i64).unwrap_or_else(Utc::now)
}

async fn store(ctx: &WorkerContext, batch: &mut Vec<NewDelivery>, accepted: &Notify) {
    if batch.is_empty() {
        return;
    }
    match ctx.db.enqueue_deliveries(batch, Utc::now()).await {
        Ok(stored) => {
            ctx.counters.add(counter::DELIVERIES_QUEUED, stored);
            accepted.notify_one();
        }
        Err(err) => {
            // The bus is at most once: what was not stored is counted and logged, not retried.
            ctx.counters.add(counter::DELIVERIES_LOST, batch.len() as u64);
            tracing::error!(deliveries = batch.len(), error = %err, "Could not store events for webhooks");
        }
    }
    batch.clear();
}
