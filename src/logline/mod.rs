//! The one RFC 5424 parser and formatter every component uses (ingester, profiler, replay, the
//! workers that write lines). Lines look like
//! `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [relay@55555 k="v" …] MSG`, with
//! decky = HOSTNAME, service = APP-NAME, event type = MSGID (`reference/decnet-workers.md` §1).
//! Parsing never panics, whatever the input.

use chrono::{DateTime, Utc};

/// The attacker address when a line names none.
pub const UNKNOWN_IP: &str = "Unknown";

/// Syslog severities our components write (facility local0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// One parsed line: what the ingester stores and the profiler reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// The PRI value (`<134>` → 134).
    pub pri: u16,
    /// The header's timestamp in UTC; `None` when it does not parse (the line is still kept).
    pub timestamp: Option<DateTime<Utc>>,
    /// HOSTNAME (the inner one for a double-wrapped line).
    pub decky: String,
    /// APP-NAME.
    pub service: String,
    /// MSGID; `command` for a `CMD …` shell line whose MSGID is nil; `-` when nil otherwise.
    pub event_type: String,
    /// From the structured data, then the MSG fallbacks; [`UNKNOWN_IP`] when none.
    pub attacker_ip: String,
    /// The `relay@55555` parameters in line order, unescaped, plus `remote_port` when the attacker
    /// value carried a port.
    pub fields: Vec<(String, String)>,
    /// Free text after the structured data, if any.
    pub msg: Option<String>,
}

impl LogLine {
    /// The value of field `key`, if present.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The fields as a JSON object text, in line order.
    pub fn fields_json(&self) -> String {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.fields {
            map.insert(k.clone(), serde_json::Value::String(v.clone()));
        }
        serde_json::Value::Object(map).to_string()
    }
}

/// Why a line is not an RFC 5424 line we understand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not an RFC 5424 line: {0}")]
    NotRfc5424(&'static str),
}

/// Parses one line (without its newline).
pub fn parse(line: &str) -> Result<LogLine, ParseError> {
    let _ = line;
    Err(ParseError::NotRfc5424("parser not written yet"))
}

/// A line to write: what a component (sniffer, tarpit, mutator, tests) emits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub severity: Severity,
    pub timestamp: DateTime<Utc>,
    pub hostname: String,
    pub app_name: String,
    pub msgid: String,
    pub fields: Vec<(String, String)>,
    pub msg: Option<String>,
}

/// Formats `entry` as one line, without the newline.
pub fn format(entry: &Entry) -> String {
    let _ = entry;
    String::new()
}
