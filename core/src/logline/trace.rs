//! The W3C trace context a line carries from the collector to the ingester, so one attack's trace
//! runs from the decky's line to its stored row: a structured-data element of its own,
//! `[trace@55555 traceparent="00-<trace id>-<span id>-<flags>"]`, put first in the line's
//! structured data (where a nil `-` stood, or before the decoy's `relay@55555` element). Only an
//! element exactly there is read, and only a well-formed `traceparent`, so text an attacker got into
//! a line's fields or message can never pose as one. The ingester stores the line without it.

use std::borrow::Cow;

use super::header;

const OPENING: &str = "[trace@55555 traceparent=\"";
const CLOSING: &str = "\"]";
/// `00-` + 32 + `-` + 16 + `-` + 2.
const TRACEPARENT_LEN: usize = 55;

/// A line's trace context: which trace, which span of it wrote the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext<'a> {
    /// The whole `traceparent` value.
    pub traceparent: &'a str,
    /// 32 lowercase hex digits.
    pub trace_id: &'a str,
    /// 16 lowercase hex digits.
    pub span_id: &'a str,
}

/// `line` with `traceparent` carried in it; `None` when the line is not one to carry it (not RFC
/// 5424, double-wrapped, already carrying one) or `traceparent` is malformed.
pub fn with_trace_context(line: &str, traceparent: &str) -> Option<String> {
    read_traceparent(traceparent)?;
    let head = header::split(line).ok()?;
    if header::inner(&head).is_some() || head.rest.starts_with(OPENING) {
        return None;
    }
    let at = line.len() - head.rest.len();
    let element = format!("{OPENING}{traceparent}{CLOSING}");
    let mut out = String::with_capacity(line.len() + element.len());
    out.push_str(&line[..at]);
    out.push_str(&element);
    match head.rest.strip_prefix('-') {
        Some(after_nil) => out.push_str(after_nil),
        None => out.push_str(head.rest),
    }
    Some(out)
}

/// The trace context `line` carries, if it carries a well-formed one where the collector puts it.
pub fn trace_context(line: &str) -> Option<TraceContext<'_>> {
    let head = header::split(line).ok()?;
    let value = head.rest.strip_prefix(OPENING)?.get(..TRACEPARENT_LEN)?;
    if !head.rest[OPENING.len() + TRACEPARENT_LEN..].starts_with(CLOSING) {
        return None;
    }
    read_traceparent(value)
}

/// `line` as it was before [`with_trace_context`]: what the ingester stores as the raw line.
pub fn without_trace_context(line: &str) -> Cow<'_, str> {
    if trace_context(line).is_none() {
        return Cow::Borrowed(line);
    }
    let Ok(head) = header::split(line) else { return Cow::Borrowed(line) };
    let at = line.len() - head.rest.len();
    let after = &head.rest[OPENING.len() + TRACEPARENT_LEN + CLOSING.len()..];
    // The element took the place of a nil `-` unless other structured data follows at once.
    let nil = if after.starts_with('[') { "" } else { "-" };
    Cow::Owned(format!("{}{nil}{after}", &line[..at]))
}

/// `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, ids not all zero (W3C Trace Context, version 00):
/// a `traceparent` as a line or a bus message's header carries it.
pub fn read_traceparent(value: &str) -> Option<TraceContext<'_>> {
    let b = value.as_bytes();
    if b.len() != TRACEPARENT_LEN || &b[..3] != b"00-" || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    let hex = |s: &[u8]| s.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
    let zero = |s: &[u8]| s.iter().all(|c| *c == b'0');
    let (trace, span, flags) = (&b[3..35], &b[36..52], &b[53..55]);
    if !hex(trace) || !hex(span) || !hex(flags) || zero(trace) || zero(span) {
        return None;
    }
    Some(TraceContext { traceparent: value, trace_id: &value[3..35], span_id: &value[36..52] })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn carried_in_front_of_the_relay_element_and_taken_out_again() {
        let line = r#"<134>1 2026-11-26T06:00:00Z decky-01 ssh - login_attempt [relay@55555 src_ip="198.51.100.7" user="root"] hi"#;
        let carried = with_trace_context(line, TP).unwrap();
        assert!(
            carried.contains(&format!("login_attempt [trace@55555 traceparent=\"{TP}\"][relay@55555 ")),
            "{carried}"
        );
        let context = trace_context(&carried).unwrap();
        assert_eq!((context.trace_id, context.span_id), ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"));
        assert_eq!(without_trace_context(&carried), line);
        let parsed = crate::logline::parse(&carried).unwrap();
        assert_eq!(parsed, crate::logline::parse(line).unwrap(), "the line reads the same with the context in it");
    }

    #[test]
    fn a_nil_structured_data_is_replaced_and_restored() {
        let line = "<134>1 2026-11-26T06:00:00Z decky-01 http - request - GET /";
        let carried = with_trace_context(line, TP).unwrap();
        assert_eq!(without_trace_context(&carried), line);
        assert_eq!(crate::logline::parse(&carried).unwrap().msg.as_deref(), Some("GET /"));
    }

    #[test]
    fn a_context_anywhere_else_or_malformed_is_not_read() {
        let in_msg = format!("<134>1 2026-11-26T06:00:00Z d ssh - x - [trace@55555 traceparent=\"{TP}\"]");
        assert_eq!(trace_context(&in_msg), None, "an attacker's message text");
        let in_field =
            format!(r#"<134>1 2026-11-26T06:00:00Z d ssh - x [relay@55555 u="[trace@55555 traceparent=\"{TP}\"]"]"#);
        assert_eq!(trace_context(&in_field), None);
        for bad in [
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
        ] {
            assert_eq!(with_trace_context("<134>1 - d s - x - m", bad), None, "{bad}");
        }
        assert_eq!(with_trace_context("not a syslog line", TP), None);
    }
}
