//! What the tarpit reports, as RFC 5424 lines (APP-NAME `tarpit`, HOSTNAME the decky, MSGID the
//! event) appended to the ingest file like every other event, so they are stored, streamed and
//! searched like the rest: `tarpit_enabled` and `tarpit_disabled` from the routes, `tarpit_enter`
//! and `tarpit_exit` (with `duration_s`) from the watcher. Enter and exit carry the attacker as
//! `src_ip`, so the ingester attributes them; enabled and disabled name no attacker.

use std::path::Path;

use chrono::{DateTime, Utc};

use crate::db::Enforcement;
use crate::logline::{Entry, Severity};

/// The APP-NAME of every tarpit line.
pub const APP_NAME: &str = "tarpit";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TarpitEvent {
    Enabled { decky: String, ports: Vec<u16>, delay_ms: u32, operator: String, enforcement: Enforcement },
    Disabled { decky: String, operator: String },
    Enter { decky: String, attacker_ip: String, port: u16 },
    Exit { decky: String, attacker_ip: String, port: u16, duration_s: i64 },
}

impl TarpitEvent {
    pub fn kind(&self) -> &'static str {
        match self {
            TarpitEvent::Enabled { .. } => "tarpit_enabled",
            TarpitEvent::Disabled { .. } => "tarpit_disabled",
            TarpitEvent::Enter { .. } => "tarpit_enter",
            TarpitEvent::Exit { .. } => "tarpit_exit",
        }
    }

    fn decky(&self) -> &str {
        match self {
            TarpitEvent::Enabled { decky, .. }
            | TarpitEvent::Disabled { decky, .. }
            | TarpitEvent::Enter { decky, .. }
            | TarpitEvent::Exit { decky, .. } => decky,
        }
    }

    fn fields(&self) -> Vec<(String, String)> {
        let field = |k: &str, v: String| (k.to_string(), v);
        match self {
            TarpitEvent::Enabled { ports, delay_ms, operator, enforcement, .. } => vec![
                field("ports", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",")),
                field("delay_ms", delay_ms.to_string()),
                field("delay_in_force", (*enforcement == Enforcement::Delay).to_string()),
                field("enforcement", enforcement.as_str().to_string()),
                field("operator", operator.clone()),
            ],
            TarpitEvent::Disabled { operator, .. } => vec![field("operator", operator.clone())],
            TarpitEvent::Enter { attacker_ip, port, .. } => {
                vec![field("src_ip", attacker_ip.clone()), field("port", port.to_string())]
            }
            TarpitEvent::Exit { attacker_ip, port, duration_s, .. } => vec![
                field("src_ip", attacker_ip.clone()),
                field("port", port.to_string()),
                field("duration_s", duration_s.to_string()),
            ],
        }
    }

    /// The event as a log line at `at`, without its newline.
    pub fn line(&self, at: DateTime<Utc>) -> String {
        crate::logline::format(&Entry {
            severity: Severity::Info,
            timestamp: at,
            hostname: self.decky().to_string(),
            app_name: APP_NAME.into(),
            msgid: self.kind().into(),
            fields: self.fields(),
            msg: None,
        })
    }
}

/// Appends the events, in one write, to the ingest file; without one (`SVC_INGEST_LOG_FILE`
/// empty) they are only logged, as there is nowhere they could be stored.
pub async fn write(ingest: Option<&Path>, events: &[(DateTime<Utc>, TarpitEvent)]) {
    if events.is_empty() {
        return;
    }
    let Some(path) = ingest else {
        for (_, event) in events {
            tracing::warn!(event = event.kind(), decky = event.decky(), "No ingest file: tarpit event not stored");
        }
        return;
    };
    let text: String = events.iter().map(|(at, event)| event.line(*at) + "\n").collect();
    if let Err(err) = crate::logline::append(path, text.as_bytes()).await {
        tracing::error!(path = %path.display(), error = %err, "Cannot write tarpit events to the ingest file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_tarpit_events_of_the_attacker() {
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let exit =
            TarpitEvent::Exit { decky: "web-01".into(), attacker_ip: "fd7a::250".into(), port: 22, duration_s: 42 };
        let line = exit.line(at);
        let parsed = crate::logline::parse(&line).unwrap();
        assert_eq!((parsed.decky.as_str(), parsed.service.as_str()), ("web-01", "tarpit"));
        assert_eq!(parsed.event_type, "tarpit_exit");
        assert_eq!(parsed.attacker_ip, "fd7a::250");
        assert_eq!((parsed.field("port"), parsed.field("duration_s")), (Some("22"), Some("42")));

        let enabled = TarpitEvent::Enabled {
            decky: "web-01".into(),
            ports: vec![22, 80],
            delay_ms: 500,
            operator: "root".into(),
            enforcement: Enforcement::Throttle,
        };
        let parsed = crate::logline::parse(&enabled.line(at)).unwrap();
        assert_eq!(parsed.event_type, "tarpit_enabled");
        assert_eq!(parsed.field("ports"), Some("22,80"));
        assert_eq!(parsed.field("delay_in_force"), Some("false"));
        assert_eq!(parsed.attacker_ip, crate::logline::UNKNOWN_IP, "an operator's action names no attacker");
    }
}
