//! What the sniffer reports: one [`SnifferEvent`] per fingerprint seen (the fields of
//! `reference/decnet-workers.md` §5), written as an RFC 5424 line (APP-NAME `sniffer`, HOSTNAME the
//! decky) and published on `decky.<decky>.traffic`; and the [`Dedup`] window that keeps one event
//! per attacker and fingerprint. Times are capture times, so a replay writes the same lines.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hash::RandomState;

use chrono::{DateTime, Utc};
use svc::bus::{Event, topics};
use svc::logline::{Entry, Severity};

/// The APP-NAME of every sniffer line.
pub const APP_NAME: &str = "sniffer";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnifferEvent {
    /// Capture time, microseconds since the epoch.
    pub at_us: i64,
    pub decky: String,
    pub kind: &'static str,
    pub severity: Severity,
    pub fields: Vec<(String, String)>,
}

impl SnifferEvent {
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn timestamp(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.at_us).unwrap_or_default()
    }

    /// The log line, without its newline.
    pub fn line(&self) -> String {
        svc::logline::format(&Entry {
            severity: self.severity,
            timestamp: self.timestamp(),
            hostname: self.decky.clone(),
            app_name: APP_NAME.into(),
            msgid: self.kind.into(),
            fields: self.fields.clone(),
            msg: None,
        })
    }

    /// The bus message: type = event kind, payload = the fields.
    pub fn bus_event(&self) -> Result<Event, topics::BadToken> {
        let payload = self.fields.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
        Ok(Event::new(topics::decky_traffic(&self.decky)?, self.kind, serde_json::Value::Object(payload)))
    }
}

/// Remembers (attacker, event, fingerprint) for a window, by a keyed 64-bit hash of the three (16
/// bytes an entry, so a million fit in a few tens of MB). Bounded: when full, a new key is let
/// through without being remembered until the periodic sweep has made room.
#[derive(Debug)]
pub struct Dedup {
    window_us: i64,
    max: usize,
    keys: RandomState,
    seen: HashMap<u64, i64>,
}

impl Dedup {
    pub fn new(window_us: i64, max: usize) -> Dedup {
        Dedup { window_us, max, keys: RandomState::new(), seen: HashMap::new() }
    }

    /// True the first time within the window.
    pub fn first(&mut self, attacker: &str, kind: &'static str, fingerprint: &str, now_us: i64) -> bool {
        let key = self.keys.hash_one((attacker, kind, fingerprint));
        if self.seen.get(&key).is_some_and(|&at| now_us - at < self.window_us) {
            return false;
        }
        if self.seen.len() < self.max || self.seen.contains_key(&key) {
            self.seen.insert(key, now_us);
        }
        true
    }

    /// Forgets what is out of the window.
    pub fn sweep(&mut self, now_us: i64) {
        let window = self.window_us;
        self.seen.retain(|_, at| now_us - *at < window);
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_per_attacker_and_fingerprint_within_the_window() {
        let mut dedup = Dedup::new(300_000_000, 10);
        assert!(dedup.first("1.2.3.4", "tls_client_hello", "ja3|ja4", 0));
        assert!(!dedup.first("1.2.3.4", "tls_client_hello", "ja3|ja4", 299_000_000));
        assert!(dedup.first("1.2.3.5", "tls_client_hello", "ja3|ja4", 1));
        assert!(dedup.first("1.2.3.4", "tls_client_hello", "other", 1));
        assert!(dedup.first("1.2.3.4", "tls_client_hello", "ja3|ja4", 300_000_000), "the window ended");
    }

    #[test]
    fn the_window_is_bounded() {
        let mut dedup = Dedup::new(1_000, 3);
        for n in 0..10 {
            assert!(dedup.first(&n.to_string(), "x", "fp", 0));
        }
        assert_eq!(dedup.len(), 3);
    }

    #[test]
    fn the_line_reads_back_with_the_decky_and_fields() {
        let event = SnifferEvent {
            at_us: 1_700_000_000_123_456,
            decky: "web-1".into(),
            kind: "tls_client_hello",
            severity: Severity::Info,
            fields: vec![("src_ip".into(), "10.9.0.1".into()), ("ja3".into(), "abc".into())],
        };
        let parsed = svc::logline::parse(&event.line()).unwrap();
        assert_eq!((parsed.decky.as_str(), parsed.service.as_str()), ("web-1", "sniffer"));
        assert_eq!((parsed.event_type.as_str(), parsed.attacker_ip.as_str()), ("tls_client_hello", "10.9.0.1"));
        assert_eq!(parsed.timestamp, Some(event.timestamp()));
        let bus = event.bus_event().unwrap();
        assert_eq!(bus.topic, "decky.web-1.traffic");
    }
}
