//! Webhooks as DECNET defines them: which bus events a webhook selects (DECNET's simple events and
//! subject patterns), the body every delivery carries (`{v, id, ts, topic, type, payload}`, keys
//! sorted) and its HMAC-SHA256 signature in DECNET's headers. Where a delivery may go, and how it
//! gets there, are `destination` and `send`; the API's test route and the delivery worker share all
//! three, so a test ping proves exactly what delivery does.

pub mod destination;
pub mod send;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

pub use destination::{Destination, Refusal, Target};
pub use send::{Outcome, deliver};

use crate::secret::Secret;

/// The body's schema version (DECNET's `v`).
pub const PAYLOAD_VERSION: u32 = 1;

/// Headers every delivery carries, in DECNET's names.
pub const SIGNATURE_HEADER: &str = "X-DECNET-Signature";
pub const EVENT_ID_HEADER: &str = "X-DECNET-Event-Id";
pub const EVENT_TOPIC_HEADER: &str = "X-DECNET-Event-Topic";
pub const TIMESTAMP_HEADER: &str = "X-DECNET-Timestamp";
pub const USER_AGENT: &str = "svc-webhook/1.0";

/// The dashboard's friendly event families; each stands for subject patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum SimpleEvent {
    /// Every attacker event: first sightings, scores, observations.
    AttackerDetail,
    /// Decky state and traffic.
    DeckyStatus,
    /// Worker health and every other `system.` event.
    SystemStatus,
}

impl SimpleEvent {
    pub fn patterns(self) -> &'static [&'static str] {
        match self {
            SimpleEvent::AttackerDetail => &["attacker.>"],
            SimpleEvent::DeckyStatus => &["decky.*.state", "decky.*.traffic"],
            SimpleEvent::SystemStatus => &["system.>"],
        }
    }
}

/// The simple events' patterns, then the raw patterns, each once, in first-seen order (DECNET's
/// `merge_patterns`).
pub fn merge_patterns(simple: &[SimpleEvent], raw: &[String]) -> Vec<String> {
    let expanded = simple.iter().flat_map(|event| event.patterns().iter().map(|p| p.to_string()));
    let mut merged: Vec<String> = Vec::new();
    for pattern in expanded.chain(raw.iter().cloned()) {
        if !merged.contains(&pattern) {
            merged.push(pattern);
        }
    }
    merged
}

/// One event as a receiver gets it. Field order is the sorted key order DECNET signs.
#[derive(Debug, Serialize)]
struct Body<'a> {
    id: Uuid,
    payload: &'a serde_json::Value,
    topic: &'a str,
    ts: String,
    #[serde(rename = "type")]
    kind: &'a str,
    v: u32,
}

/// The JSON body of event `id`: what is stored in the outbox and signed at every attempt.
pub fn body(id: Uuid, topic: &str, kind: &str, at: DateTime<Utc>, payload: &serde_json::Value) -> String {
    let body = Body { id, payload, topic, ts: crate::time::format_utc(at), kind, v: PAYLOAD_VERSION };
    serde_json::to_string(&body).expect("an event body serialises")
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`: the signature header's value.
pub fn signature(secret: &Secret, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={:x}", mac.finalize().into_bytes())
}

/// A fresh secret for a webhook created without one: 244 random bits as 64 hex characters, the
/// stream tickets' generator (DECNET's `token_urlsafe(32)` is about as strong).
pub fn generate_secret() -> Secret {
    Secret::new(crate::auth::ticket::new_ticket())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_events_expand_to_deduplicated_patterns_in_order() {
        let merged = merge_patterns(
            &[SimpleEvent::DeckyStatus, SimpleEvent::AttackerDetail],
            &["decky.*.state".into(), "credential.captured".into()],
        );
        assert_eq!(merged, ["decky.*.state", "decky.*.traffic", "attacker.>", "credential.captured"]);
        assert!(merge_patterns(&[], &[]).is_empty());
    }

    #[test]
    fn the_body_has_sorted_keys_and_the_signature_is_hmac_sha256() {
        let id = Uuid::nil();
        let at = DateTime::from_timestamp_millis(1_790_000_000_123).unwrap();
        let body = body(id, "attacker.observed", "observed", at, &serde_json::json!({"b": 1, "a": 2}));
        assert_eq!(
            body,
            r#"{"id":"00000000-0000-0000-0000-000000000000","payload":{"a":2,"b":1},"topic":"attacker.observed","ts":"2026-09-21T14:13:20.123Z","type":"observed","v":1}"#
        );
        // RFC 4231 test case 2.
        let secret = Secret::new("Jefe");
        assert_eq!(
            signature(&secret, b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn generated_secrets_are_long_and_distinct() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a, b);
    }
}
