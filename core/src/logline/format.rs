//! Writing lines: `<PRI>1 TIMESTAMP HOSTNAME APP-NAME - MSGID [relay@55555 k="v" …] MSG`, byte for
//! byte what DECNET's `syslog_line` writes, made safe so that every output is one line that
//! [`super::parse`] reads back.
//!
//! What the formatter changes so that holds:
//! - HOSTNAME, APP-NAME, MSGID: an empty value becomes `-` (nil); whitespace and control characters
//!   become `_` (a header token cannot hold a space). See [`header_token`].
//! - Field keys keep only `[A-Za-z0-9_]` (DECNET's `\w+` parameter names); a key with none of those
//!   becomes `_`. Two keys that reduce to the same name are one field when read back (last wins).
//!   See [`field_key`].
//! - Values escape `\` `"` `]` (RFC 5424 §6.3.3). In values and MSG, CR and LF are written as the
//!   two-character texts `\r` and `\n`: a line is one line, and a reader of the raw log sees where
//!   the breaks were. They do not come back as control characters.
//! - The timestamp is written the way Python's `isoformat()` writes a UTC time: microseconds, and
//!   no fraction at all when they are zero (`2026-05-02T06:22:48.089309+00:00`,
//!   `2024-01-15T12:00:00+00:00`); finer digits are cut. A year outside 0000–9999 cannot be
//!   written in RFC 3339 and is written as nil `-`.
//!
//! Two readings are the format's own, not the formatter's: with MSGID `-`, a MSG starting `CMD `
//! reads back as event type `command`, and one shaped like a header (`YYYY-MM-DDT… HOST APP PROCID
//! MSGID …`) with no fields reads back as a double-wrapped line.

use std::borrow::Cow;
use std::fmt::Write as _;

use chrono::{DateTime, Datelike, Timelike, Utc};

use super::sd::RELAY_SD_ID;
use super::{Entry, Severity};

/// Syslog facility local0, which every DECNET writer uses.
const FACILITY_LOCAL0: u16 = 16;

impl Severity {
    /// The RFC 5424 severity number.
    pub fn code(self) -> u16 {
        match self {
            Severity::Error => 3,
            Severity::Warning => 4,
            Severity::Info => 6,
        }
    }

    /// PRI for facility local0: 131, 132, 134.
    pub fn pri(self) -> u16 {
        FACILITY_LOCAL0 * 8 + self.code()
    }
}

/// Formats `entry` as one line, without the newline.
pub fn format(entry: &Entry) -> String {
    let mut out = String::with_capacity(96 + entry.fields.iter().map(|(k, v)| k.len() + v.len() + 4).sum::<usize>());
    let _ = write!(out, "<{}>1 ", entry.severity.pri());
    write_timestamp(&mut out, entry.timestamp);
    for token in [&entry.hostname, &entry.app_name] {
        out.push(' ');
        out.push_str(&header_token(token));
    }
    out.push_str(" - ");
    out.push_str(&header_token(&entry.msgid));
    out.push(' ');
    if entry.fields.is_empty() {
        out.push('-');
    } else {
        out.push('[');
        out.push_str(RELAY_SD_ID);
        for (key, value) in &entry.fields {
            out.push(' ');
            out.push_str(&field_key(key));
            out.push_str("=\"");
            push_escaped(&mut out, value, true);
            out.push('"');
        }
        out.push(']');
    }
    if let Some(msg) = entry.msg.as_deref().filter(|m| !m.is_empty()) {
        out.push(' ');
        push_escaped(&mut out, msg, false);
    }
    out
}

/// A header token as written: empty → `-`; whitespace and control characters → `_`.
pub fn header_token(value: &str) -> Cow<'_, str> {
    if value.is_empty() {
        return Cow::Borrowed("-");
    }
    let unsafe_char = |c: char| c.is_whitespace() || c.is_control();
    if !value.chars().any(unsafe_char) {
        return Cow::Borrowed(value);
    }
    Cow::Owned(value.chars().map(|c| if unsafe_char(c) { '_' } else { c }).collect())
}

/// A field key as written: only `[A-Za-z0-9_]` kept; `_` when nothing is left.
pub fn field_key(key: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if !key.is_empty() && key.chars().all(allowed) {
        return Cow::Borrowed(key);
    }
    let kept: String = key.chars().filter(|&c| allowed(c)).collect();
    if kept.is_empty() { Cow::Borrowed("_") } else { Cow::Owned(kept) }
}

/// Appends `text` with line breaks made visible, and, inside a parameter value, the RFC 5424
/// escapes.
fn push_escaped(out: &mut String, text: &str, in_value: bool) {
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\\' | '"' | ']' if in_value => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

/// Python's `datetime.now(timezone.utc).isoformat()`.
fn write_timestamp(out: &mut String, at: DateTime<Utc>) {
    if !(0..=9999).contains(&at.year()) {
        out.push('-');
        return;
    }
    // A leap second (nanoseconds ≥ 1e9) is written as the 59th second's fraction.
    let micros = (at.nanosecond() % 1_000_000_000) / 1000;
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    );
    if micros != 0 {
        let _ = write!(out, ".{micros:06}");
    }
    out.push_str("+00:00");
}
