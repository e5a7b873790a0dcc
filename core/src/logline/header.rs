//! The RFC 5424 header — `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID` — split into borrowed
//! tokens, the double-wrapped header Docker/rsyslog put around `logger` lines, and the timestamp.
//!
//! A line is one exactly when DECNET's header regex (`^<\d+>1 (\S+) (\S+) (\S+) \S+ (\S+) (.+)$`,
//! Python's Unicode `\S`) matches it: tokens are runs of anything but whitespace (Python's:
//! [`is_space`]), each followed by exactly one ASCII space, and something follows MSGID's space.

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, Utc};

use super::ParseError;
use super::text::is_space;

/// A header's tokens, borrowed from the line.
#[derive(Clone, Copy, Debug)]
pub(super) struct Header<'a> {
    pub pri: u16,
    pub timestamp: &'a str,
    pub hostname: &'a str,
    pub app_name: &'a str,
    pub msgid: &'a str,
    /// Everything after MSGID and its separating space: structured data and MSG; never empty.
    pub rest: &'a str,
}

/// Splits `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID rest`. PRI is any run of digits (DECNET
/// reads none of it; a value past `u16` is kept as `u16::MAX`); `rest` must not be empty.
pub(super) fn split(line: &str) -> Result<Header<'_>, ParseError> {
    let bytes = line.as_bytes();
    if bytes.first() != Some(&b'<') {
        return Err(ParseError::NotRfc5424("no <PRI> at the start"));
    }
    let digits = bytes[1..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || bytes.get(1 + digits) != Some(&b'>') {
        return Err(ParseError::NotRfc5424("PRI is not digits closed by >"));
    }
    let pri = line[1..1 + digits].parse::<u16>().unwrap_or(u16::MAX);
    let i = 2 + digits;
    if bytes.get(i..i + 2) != Some(b"1 ") {
        return Err(ParseError::NotRfc5424("version is not 1"));
    }
    let ([timestamp, hostname, app_name, _procid, msgid], rest) = tokens(&line[i + 2..])?;
    Ok(Header { pri, timestamp, hostname, app_name, msgid, rest })
}

/// The inner header of a double-wrapped line, if `outer` is one.
///
/// SSH's PROMPT_COMMAND runs `logger --rfc5424 --msgid command -t bash "CMD …"`, and Docker/rsyslog
/// wrap that line in a header of their own with everything nil:
/// `<14>1 TS <decky> 1 - - -  <inner line without its PRI>`. When the outer MSGID is nil and what
/// follows is `-`, whitespace and a header starting `YYYY-MM-DDT`, the inner header names the decky,
/// service and event (the outer timestamp stays the line's). It keeps the outer PRI.
pub(super) fn inner<'a>(outer: &Header<'a>) -> Option<Header<'a>> {
    if outer.msgid != "-" {
        return None;
    }
    let after_nil_sd = outer.rest.strip_prefix('-')?;
    let remainder = after_nil_sd.trim_start_matches(is_space);
    if remainder.len() == after_nil_sd.len() || !starts_like_a_date(remainder.as_bytes()) {
        return None;
    }
    let ([timestamp, hostname, app_name, _procid, msgid], rest) = tokens(remainder).ok()?;
    Some(Header { pri: outer.pri, timestamp, hostname, app_name, msgid, rest })
}

/// `YYYY-MM-DDT`: how DECNET recognises the inner header.
fn starts_like_a_date(bytes: &[u8]) -> bool {
    let Some(head) = bytes.get(..11) else { return false };
    head.iter().enumerate().all(|(i, &b)| match i {
        4 | 7 => b == b'-',
        10 => b == b'T',
        _ => b.is_ascii_digit(),
    })
}

/// The five space-separated tokens TIMESTAMP … MSGID and the non-empty text after MSGID's space.
fn tokens(text: &str) -> Result<([&str; 5], &str), ParseError> {
    let mut out = [""; 5];
    let mut rest = text;
    for slot in out.iter_mut() {
        let end = rest.find(is_space).unwrap_or(rest.len());
        if end == 0 {
            return Err(ParseError::NotRfc5424("empty header field"));
        }
        if !rest[end..].starts_with(' ') {
            return Err(ParseError::NotRfc5424("header fields are not separated by one space"));
        }
        *slot = &rest[..end];
        rest = &rest[end + 1..];
    }
    if rest.is_empty() {
        return Err(ParseError::NotRfc5424("nothing after MSGID"));
    }
    Ok((out, rest))
}

/// An RFC 3339 timestamp with any offset (`Z` or `±HH:MM`), or a naive `YYYY-MM-DDTHH:MM:SS[.f]`
/// taken as UTC, normalised to UTC. Fractions keep up to nanosecond precision (digits past the
/// ninth are ignored); a leap second `:60` becomes chrono's leap representation. `None` for `-` and
/// anything else.
pub(super) fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    let b = text.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let hour = digits(&b[11..13])?;
    let minute = digits(&b[14..16])?;
    let second = digits(&b[17..19])?;

    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        let kept = (i - start).min(9);
        if kept == 0 {
            return None;
        }
        nanos *= 10u32.pow(9 - kept as u32);
    }

    let offset_seconds: i64 = match b.get(i) {
        None => 0,
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let hours = digits(&b[i + 1..i + 3])?;
            let minutes = digits(&b[i + 4..i + 6])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = i64::from(hours * 3600 + minutes * 60);
            if sign == b'-' { -seconds } else { seconds }
        }
        _ => return None,
    };

    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
    let time = if second == 60 {
        NaiveTime::from_hms_nano_opt(hour, minute, 59, 1_000_000_000 + nanos)?
    } else {
        NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)?
    };
    let local = date.and_time(time);
    Some(local.checked_sub_signed(TimeDelta::seconds(offset_seconds))?.and_utc())
}

/// The value of a run of ASCII digits (at most 4 here, so no overflow).
fn digits(bytes: &[u8]) -> Option<u32> {
    bytes.iter().try_fold(0u32, |acc, &b| b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0')))
}
