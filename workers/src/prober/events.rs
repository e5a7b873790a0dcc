//! What the prober reports: one [`ProberEvent`] per fingerprint of a probed host, written as an
//! RFC 5424 line as DECNET's prober writes it (HOSTNAME `decnet-prober`, APP-NAME `prober`, MSGID
//! `jarm_fingerprint`, `hassh_fingerprint`, `tcpfp_fingerprint`, `tls_certificate`, `icmp_error` or
//! `icmp6_error`, the probed host in `target_ip` and `target_port` first). The ingester makes them
//! fingerprints of the attacker at `target_ip` (`workers/src/ingest/derive.rs`).

use chrono::{DateTime, Utc};
use svc::logline::{Entry, Severity};

pub const HOSTNAME: &str = "decnet-prober";
pub const APP_NAME: &str = "prober";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProberEvent {
    pub at: DateTime<Utc>,
    pub kind: &'static str,
    /// `target_ip`, `target_port`, then the probe's own.
    pub fields: Vec<(String, String)>,
    /// What makes two results the same fingerprint (for the de-duplication window).
    pub identity: String,
    pub msg: String,
}

impl ProberEvent {
    pub fn new(kind: &'static str, target: std::net::SocketAddr, identity: String, msg: String) -> ProberEvent {
        let fields =
            vec![("target_ip".into(), target.ip().to_string()), ("target_port".into(), target.port().to_string())];
        ProberEvent { at: Utc::now(), kind, fields, identity, msg }
    }

    pub fn with(mut self, key: &str, value: impl ToString) -> ProberEvent {
        self.fields.push((key.into(), value.to_string()));
        self
    }

    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The log line, without its newline.
    pub fn line(&self) -> String {
        svc::logline::format(&Entry {
            severity: Severity::Info,
            timestamp: self.at,
            hostname: HOSTNAME.into(),
            app_name: APP_NAME.into(),
            msgid: self.kind.into(),
            fields: self.fields.clone(),
            msg: Some(self.msg.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_probed_host_as_the_attacker() {
        let event =
            ProberEvent::new("jarm_fingerprint", "198.51.100.7:443".parse().unwrap(), "h".into(), "JARM".into())
                .with("jarm_hash", "2ad2ad0002ad2ad00042d42d000000");
        let parsed = svc::logline::parse(&event.line()).unwrap();
        assert_eq!((parsed.decky.as_str(), parsed.service.as_str()), ("decnet-prober", "prober"));
        assert_eq!((parsed.event_type.as_str(), parsed.attacker_ip.as_str()), ("jarm_fingerprint", "198.51.100.7"));
        assert_eq!(parsed.field("target_port"), Some("443"));
    }
}
