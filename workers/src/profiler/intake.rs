//! The bus intake: observations other sensors publish on `attacker.observation.<primitive>` are
//! validated and stored. DECNET publishes the envelope plus an `attacker_uuid` key, which the
//! schema does not allow; it is taken out and, when the record names no identity, becomes its
//! `identity_ref`. The profiler's own records are skipped: they were stored with their batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use svc::bus::{Event, topics};
use svc::observation::{self, Observation};
use svc::roster::counters::profiler as counter;
use svc::worker::WorkerContext;

use super::shell;

/// Rejections are logged at most this often, with how many there were since the last line.
const REJECTION_LOG_EVERY: Duration = Duration::from_secs(1);

/// What became of one bus message.
#[derive(Debug, PartialEq)]
pub enum Intake {
    Valid(Observation),
    /// This profiler's own: stored already.
    Own,
    /// Not an event, or not a valid observation; the reason, for the log.
    Rejected(String),
}

/// Reads one `attacker.observation.*` message.
pub fn read(body: &[u8]) -> Intake {
    // Strictly: a record that names a key twice could be read two ways.
    let event = observation::parse_strict(body).and_then(serde_json::from_value::<Event>);
    let event = match event {
        Ok(event) => event,
        Err(err) => return Intake::Rejected(format!("not a bus event: {err}")),
    };
    let mut record = event.payload;
    let Some(fields) = record.as_object_mut() else {
        return Intake::Rejected("the payload is not an object".into());
    };
    if let Some(attacker) = fields.remove("attacker_uuid")
        && fields.get("identity_ref").is_none_or(serde_json::Value::is_null)
        && attacker.is_string()
    {
        fields.insert("identity_ref".into(), attacker);
    }
    if fields.get("source").and_then(|s| s.as_str()) == Some(shell::SOURCE) {
        return Intake::Own;
    }
    match observation::validate(&record) {
        Ok(observation) => Intake::Valid(observation),
        Err(invalid) => Intake::Rejected(invalid.to_string()),
    }
}

/// Stores what arrives while `leading` (this process holds the profiler lease) until cancelled.
/// What has arrived already is stored together, up to [`BATCH`] records a transaction: one record
/// a transaction would fall behind a flood, while a lone record still goes in at once.
pub async fn run(ctx: WorkerContext, leading: Arc<AtomicBool>) {
    let Some(mut messages) = ctx.bus.subscribe(topics::ALL_ATTACKER_OBSERVATIONS.to_string()).await else {
        return;
    };
    let mut rejections = RejectionLog::default();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let message = tokio::select! {
            () = ctx.cancel.cancelled() => return,
            message = messages.next() => message,
        };
        let Some(mut message) = message else { return };
        loop {
            if leading.load(Ordering::Relaxed) {
                match read(&message.payload) {
                    Intake::Valid(observation) => batch.push(observation),
                    Intake::Own => {}
                    Intake::Rejected(reason) => {
                        ctx.counters.add(counter::OBSERVATIONS_REJECTED, 1);
                        rejections.note(&message.subject, &reason);
                    }
                }
            }
            if batch.len() >= BATCH {
                break;
            }
            match messages.next().now_or_never() {
                Some(Some(next)) => message = next,
                // Nothing more has arrived, or the subscription ended (seen on the next turn).
                _ => break,
            }
        }
        store(&ctx, &mut batch).await;
    }
}

/// Observations stored in one transaction at most.
const BATCH: usize = 500;

async fn store(ctx: &WorkerContext, batch: &mut Vec<Observation>) {
    if batch.is_empty() {
        return;
    }
    match ctx.db.add_observations(batch).await {
        Ok(stored) => {
            ctx.counters.add(counter::OBSERVATIONS_STORED, stored.stored);
            ctx.counters.add(counter::OBSERVATIONS_DUPLICATE, stored.duplicates);
        }
        Err(err) => {
            // The bus is best-effort: records lost to a database outage are counted, not retried.
            ctx.counters.add(counter::OBSERVATIONS_FAILED, batch.len() as u64);
            tracing::warn!(records = batch.len(), error = %err, "Could not store observations from the bus");
        }
    }
    batch.clear();
}

/// Logs rejections without flooding: one line per second at most, with a count.
#[derive(Default)]
struct RejectionLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RejectionLog {
    fn note(&mut self, subject: &str, reason: &str) {
        self.unlogged += 1;
        if self.last.is_some_and(|at| at.elapsed() < REJECTION_LOG_EVERY) {
            return;
        }
        let reason: String = reason.chars().take(300).collect();
        tracing::warn!(count = self.unlogged, subject, reason, "Rejected observations from the bus");
        self.unlogged = 0;
        self.last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(payload: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&Event::new("attacker.observation.x.y", "x.y", payload)).unwrap()
    }

    fn record() -> serde_json::Value {
        json!({
            "primitive": "cognitive.tool_vocabulary",
            "value": "broad",
            "confidence": 0.5,
            "window": {"start_ts": 1.0, "end_ts": 2.0},
            "source": "decnet/profiler/behave_shell/_handler.py",
        })
    }

    #[test]
    fn attacker_uuid_becomes_the_identity() {
        let mut payload = record();
        payload["attacker_uuid"] = json!("5f0c5e8e-1d2b-4c53-9d7e-2b7f2c1a9e11");
        let Intake::Valid(observation) = read(&message(payload.clone())) else { panic!() };
        assert_eq!(observation.identity_ref.as_deref(), Some("5f0c5e8e-1d2b-4c53-9d7e-2b7f2c1a9e11"));
        // A record's own identity wins; the extra key goes either way.
        payload["identity_ref"] = json!("00000000-0000-4000-8000-000000000000");
        let Intake::Valid(observation) = read(&message(payload)) else { panic!() };
        assert_eq!(observation.identity_ref.as_deref(), Some("00000000-0000-4000-8000-000000000000"));
    }

    #[test]
    fn own_records_are_skipped() {
        let mut payload = record();
        payload["source"] = json!(shell::SOURCE);
        assert_eq!(read(&message(payload)), Intake::Own);
    }

    #[test]
    fn garbage_is_rejected_with_a_reason() {
        assert!(matches!(read(b"not json"), Intake::Rejected(r) if r.starts_with("not a bus event")));
        assert!(matches!(read(&message(json!([1]))), Intake::Rejected(r) if r.contains("not an object")));
        let mut extra = record();
        extra["surprise"] = json!(1);
        assert!(matches!(read(&message(extra)), Intake::Rejected(_)));
    }

    #[test]
    fn a_payload_naming_a_key_twice_is_rejected_and_the_hex_id_accepted() {
        let mut payload = record();
        payload["id"] = json!("5f0c5e8e1d2b4c539d7e2b7f2c1a9e11");
        payload["v"] = json!(1.0);
        let body = String::from_utf8(message(payload)).unwrap();
        assert!(
            matches!(read(body.as_bytes()), Intake::Valid(o) if o.id.as_deref() == Some("5f0c5e8e1d2b4c539d7e2b7f2c1a9e11"))
        );
        let twice = body.replacen(r#""confidence":0.5"#, r#""confidence":0.5,"confidence":0.9"#, 1);
        assert!(
            matches!(read(twice.as_bytes()), Intake::Rejected(r) if r.contains("duplicate key `confidence`")),
            "{twice}"
        );
    }
}
