//! A canary callback as the rest of svc sees it: an RFC 5424 line (APP-NAME `canary`, HOSTNAME the
//! token's decky, MSGID `canary_triggered`, the caller as `src_ip`) that the API appends to the
//! ingest file, so the ingester stores it for `/logs`, the profiler counts it on the caller's
//! attacker profile and the log stream shows it, exactly as any decoy's line; and the bus event
//! DECNET publishes (`canary.<token>.triggered`) that webhooks select. Pure: the caller says when.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::logline::{Entry, Severity};

/// The APP-NAME of a trigger's line: the service it is counted under.
pub const SERVICE: &str = "canary";
/// The MSGID of a trigger's line: the event type `/logs` shows.
pub const EVENT_TYPE: &str = "canary_triggered";
/// The longest value a line carries for a caller-chosen text (path, user agent); longer is cut.
const MAX_FIELD_CHARS: usize = 1024;

/// One callback of one token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub token_uuid: uuid::Uuid,
    pub trigger_uuid: uuid::Uuid,
    pub decky: String,
    /// DECNET's channel: `http`, `dns`, `aws_passive`.
    pub kind: String,
    pub generator: Option<String>,
    pub placement_path: String,
    pub src_ip: String,
    /// `GET`, `HEAD`, `POST`, or `DNS` for a lookup.
    pub method: String,
    /// The requested path and query, as sent; `None` for a lookup.
    pub path: Option<String>,
    pub user_agent: Option<String>,
    /// The name looked up, lowercased; `None` for an HTTP callback.
    pub dns_qname: Option<String>,
}

impl Trigger {
    /// The line for the ingest file, without its newline. Warning: a used bait is never noise.
    pub fn line(&self, at: DateTime<Utc>) -> String {
        let cut = |text: &str| crate::text::prefix_chars(text, MAX_FIELD_CHARS).to_string();
        let mut fields = vec![
            ("src_ip".to_string(), self.src_ip.clone()),
            ("token_uuid".to_string(), self.token_uuid.to_string()),
            ("trigger_uuid".to_string(), self.trigger_uuid.to_string()),
            ("kind".to_string(), self.kind.clone()),
            ("placement_path".to_string(), cut(&self.placement_path)),
            ("method".to_string(), self.method.clone()),
        ];
        if let Some(path) = &self.path {
            fields.push(("path".to_string(), cut(path)));
        }
        if let Some(name) = &self.dns_qname {
            fields.push(("dns_qname".to_string(), cut(name)));
        }
        if let Some(generator) = &self.generator {
            fields.push(("generator".to_string(), generator.clone()));
        }
        if let Some(agent) = &self.user_agent {
            fields.push(("user_agent".to_string(), cut(agent)));
        }
        crate::logline::format(&Entry {
            severity: Severity::Warning,
            timestamp: at,
            hostname: self.decky.clone(),
            app_name: SERVICE.into(),
            msgid: EVENT_TYPE.into(),
            fields,
            msg: None,
        })
    }

    /// The payload of the bus event, DECNET's fields (`token_id`, `trigger_id`, `decky_name`,
    /// `src_ip`, `user_agent`, `request_path`, `dns_qname`).
    pub fn event_payload(&self) -> Value {
        json!({
            "token_id": self.token_uuid,
            "trigger_id": self.trigger_uuid,
            "decky_name": self.decky,
            "src_ip": self.src_ip,
            "user_agent": self.user_agent,
            "request_path": self.path,
            "dns_qname": self.dns_qname,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_fetch() -> Trigger {
        Trigger {
            token_uuid: uuid::Uuid::nil(),
            trigger_uuid: uuid::Uuid::max(),
            decky: "web-01".into(),
            kind: "http".into(),
            generator: Some("git_config".into()),
            placement_path: "/home/admin/app/.git/config".into(),
            src_ip: "203.0.113.9".into(),
            method: "GET".into(),
            path: Some("/c/abc/info/refs?service=git-upload-pack".into()),
            user_agent: Some("git/2.43.0 \"quoted\"]".into()),
            dns_qname: None,
        }
    }

    #[test]
    fn the_line_reads_back_as_a_canary_event_of_the_caller() {
        let trigger = git_fetch();
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let parsed = crate::logline::parse(&trigger.line(at)).unwrap();
        assert_eq!((parsed.decky.as_str(), parsed.service.as_str()), ("web-01", SERVICE));
        assert_eq!(parsed.event_type, EVENT_TYPE);
        assert_eq!(parsed.attacker_ip, "203.0.113.9");
        assert_eq!(parsed.field("user_agent"), Some("git/2.43.0 \"quoted\"]"));
        assert_eq!(parsed.field("path"), Some("/c/abc/info/refs?service=git-upload-pack"));
        assert_eq!(parsed.field("generator"), Some("git_config"));
        assert_eq!(trigger.event_payload()["decky_name"], "web-01");
        assert_eq!(parsed.field("dns_qname"), None);
    }

    #[test]
    fn a_lookup_carries_its_name_and_no_path() {
        let trigger = Trigger {
            method: "DNS".into(),
            path: None,
            user_agent: None,
            dns_qname: Some("abc.trap.example.net".into()),
            ..git_fetch()
        };
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let parsed = crate::logline::parse(&trigger.line(at)).unwrap();
        assert_eq!(parsed.field("dns_qname"), Some("abc.trap.example.net"));
        assert_eq!((parsed.field("path"), parsed.field("method")), (None, Some("DNS")));
        let payload = trigger.event_payload();
        assert_eq!((&payload["dns_qname"], &payload["request_path"]), (&json!("abc.trap.example.net"), &Value::Null));
    }
}
