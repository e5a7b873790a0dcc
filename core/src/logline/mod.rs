//! The one RFC 5424 parser and formatter every component uses (ingester, profiler, replay, the
//! workers that write lines). Lines look like
//! `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [relay@55555 k="v" …] MSG`, with
//! decky = HOSTNAME, service = APP-NAME, event type = MSGID (`reference/decnet-workers.md` §1).
//! Parsing never panics, whatever the input.
//!
//! It is the ingest hot path, so it scans bytes by hand and allocates only what it returns. The
//! parts: `header` (PRI, tokens, double wrap, timestamp), `sd` (structured data and MSG),
//! `attacker` (which address a line names), `format` (writing lines), `shell` (`CMD …` bodies),
//! `text` (Python's whitespace and word characters, as DECNET's reader sees them), `trace` (the
//! trace context a line carries from the collector to the ingester). Handing lines
//! to the ingest file (`svc::logline::append`) needs the async runtime, so it stays in `svc`.

mod attacker;
mod format;
mod header;
mod sd;
mod shell;
#[cfg(test)]
mod tests;
mod text;
mod trace;

pub use format::{field_key, format, header_token};
pub use shell::{ShellCommand, parse_shell_command};
pub use trace::{TraceContext, read_traceparent, trace_context, with_trace_context, without_trace_context};

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

    /// The fields as a JSON object text, in line order. (`serde_json::Map` would sort the keys: this
    /// workspace does not enable `preserve_order`.) Keys are unique in a parsed line; a hand-built
    /// `LogLine` with a repeated key gets it repeated in the text.
    pub fn fields_json(&self) -> String {
        let mut out = Vec::with_capacity(2 + self.fields.iter().map(|(k, v)| k.len() + v.len() + 6).sum::<usize>());
        out.push(b'{');
        for (n, (k, v)) in self.fields.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            // Writing a string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, k);
            out.push(b':');
            let _ = serde_json::to_writer(&mut out, v);
        }
        out.push(b'}');
        // serde_json writes UTF-8 only.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Why a line is not an RFC 5424 line we understand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not an RFC 5424 line: {0}")]
    NotRfc5424(&'static str),
}

/// Parses one line, as DECNET reads it (`reference/decnet-workers.md` §1 and
/// `core/tests/data/logline-sample.jsonl`), except where DECNET is wrong: a `\]` in a value, timestamps
/// it mangles, and bare IPv6 addresses are read correctly. A trailing `\n` (and `\r` before it) is
/// ignored.
///
/// The header decides whether a line is one ([`header::split`]); everything after it is read
/// leniently. An unparsable timestamp is `None`. A double-wrapped line takes the decky, service and
/// event from its inner header and its time from the outer one. A nil MSGID whose MSG starts
/// `CMD ` is a `command`.
pub fn parse(line: &str) -> Result<LogLine, ParseError> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let outer = header::split(line)?;
    let timestamp = header::parse_timestamp(outer.timestamp);
    let head = header::inner(&outer).unwrap_or(outer);

    let body = sd::split(head.rest);
    let mut fields = body.fields;
    let event_type =
        if head.msgid == "-" && body.msg.is_some_and(|m| m.starts_with("CMD ")) { "command" } else { head.msgid };

    let attacker_ip = match attacker::field_value(&fields) {
        Some("") => UNKNOWN_IP.to_owned(),
        Some(value) => {
            let endpoint = attacker::split_endpoint(value);
            let ip = endpoint.host.to_owned();
            if let Some(port) = endpoint.port
                && !fields.iter().any(|(k, _)| k == "remote_port")
            {
                fields.push(("remote_port".to_owned(), port.to_owned()));
            }
            ip
        }
        None => body.msg.and_then(attacker::from_msg).unwrap_or(UNKNOWN_IP).to_owned(),
    };

    Ok(LogLine {
        pri: head.pri,
        timestamp,
        decky: head.hostname.to_owned(),
        service: head.app_name.to_owned(),
        event_type: event_type.to_owned(),
        attacker_ip,
        fields,
        msg: body.msg.map(str::to_owned),
    })
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
