//! Where a line names its attacker, as DECNET's collector decides (`reference/decnet-workers.md`
//! §1): the first address field present in the structured data (`host:port` split, the port kept
//! as `remote_port`); without one, three fallbacks over the MSG in order: a `key=value` token whose
//! key is an address field, an anchored phrase (`from X`, `rhost=X`, `client:X`, `src=X`), the
//! first dotted quad. Like DECNET's, the fallbacks take what they find as it is written (a
//! `src=/dev/null` names `/dev/null`). Every scan moves forward only: linear in the MSG's length.

use std::net::Ipv6Addr;

use super::text::{char_at, char_before, is_space, is_word};

/// The fields that may carry the attacker address, in priority order. `target_ip` is the prober's:
/// the host it probed is the attacker.
pub(super) const ADDRESS_FIELDS: [&str; 7] =
    ["src_ip", "src", "client_ip", "remote_ip", "remote_addr", "target_ip", "ip"];

/// An address value split into host and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Endpoint<'a> {
    pub host: &'a str,
    pub port: Option<&'a str>,
}

/// The value of the first address field present, empty or not: DECNET takes the first present
/// one, and an empty one names no one (no fallback is tried).
pub(super) fn field_value(fields: &[(String, String)]) -> Option<&str> {
    ADDRESS_FIELDS.iter().find_map(|name| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()))
}

/// Splits `host:port` at the last colon (a port of ASCII digits, a host not empty) and `[v6]:port`
/// or `[v6]` (brackets stripped). A value that parses as an IPv6 address is an address: DECNET's
/// split would read `2001:db8::1` as host `2001:db8:` port `1` (CONTRACT.md). Anything else is the
/// host as written.
pub(super) fn split_endpoint(value: &str) -> Endpoint<'_> {
    if value.parse::<Ipv6Addr>().is_ok() {
        return Endpoint { host: value, port: None };
    }
    if let Some(inside) = value.strip_prefix('[')
        && let Some(close) = inside.find(']')
    {
        let after = &inside[close + 1..];
        if after.is_empty() {
            return Endpoint { host: &inside[..close], port: None };
        }
        if let Some(port) = after.strip_prefix(':').filter(|p| is_port(p)) {
            return Endpoint { host: &inside[..close], port: Some(port) };
        }
        return Endpoint { host: value, port: None };
    }
    match value.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && is_port(port) => Endpoint { host, port: Some(port) },
        _ => Endpoint { host: value, port: None },
    }
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The attacker address the MSG names, by DECNET's fallbacks in order.
pub(super) fn from_msg(msg: &str) -> Option<&str> {
    from_tokens(msg).or_else(|| anchored(msg)).or_else(|| bare_ipv4(msg))
}

/// Python's `findall` of `(\w+)=(\S+)` in text order: the value of the first whose key is an
/// address field.
fn from_tokens(msg: &str) -> Option<&str> {
    let mut i = 0;
    while let Some(c) = char_at(msg, i) {
        if !is_word(c) {
            i += c.len_utf8();
            continue;
        }
        let run_end = msg[i..].find(|c: char| !is_word(c)).map_or(msg.len(), |n| i + n);
        let value_start = run_end + 1;
        if msg[run_end..].starts_with('=') && char_at(msg, value_start).is_some_and(|c| !is_space(c)) {
            let value_end = msg[value_start..].find(is_space).map_or(msg.len(), |n| value_start + n);
            if ADDRESS_FIELDS.contains(&&msg[i..run_end]) {
                return Some(&msg[value_start..value_end]);
            }
            i = value_end;
        } else {
            i = run_end;
        }
    }
    None
}

/// DECNET's `\b(from|rhost[:=]|client[:=]|src[:=])\s*ADDRESS` (anchors in any letter case), where
/// ADDRESS is a dotted quad of 1–3 digit numbers, else a run of hex digits and colons holding a
/// colon: the first anchor followed by one. Anchors keep `Connection from X port Y on Z port 22`
/// from naming the local listener Z.
fn anchored(msg: &str) -> Option<&str> {
    let b = msg.as_bytes();
    for i in 0..b.len() {
        if !matches!(b[i] | 0x20, b'f' | b'r' | b'c' | b's') || char_before(msg, i).is_some_and(is_word) {
            continue;
        }
        let Some(anchor) = anchor_len(&b[i..]) else { continue };
        let at = i + anchor;
        let start = msg[at..].find(|c: char| !is_space(c)).map_or(msg.len(), |n| at + n);
        if let Some(address) = address_at(msg, start) {
            return Some(address);
        }
    }
    None
}

/// The length of the anchor starting `rest`, if one does.
fn anchor_len(rest: &[u8]) -> Option<usize> {
    let starts = |word: &str| rest.get(..word.len()).is_some_and(|head| head.eq_ignore_ascii_case(word.as_bytes()));
    if starts("from") {
        return Some(4);
    }
    ["rhost", "client", "src"]
        .into_iter()
        .find(|word| starts(word) && matches!(rest.get(word.len()), Some(b':' | b'=')))
        .map(|word| word.len() + 1)
}

/// `(?:\d{1,3}\.){3}\d{1,3}` at `at` (the longest, a digit may follow), else
/// `[0-9a-fA-F:]*:[0-9a-fA-F:]*` (the whole run, when it holds a colon).
fn address_at(msg: &str, at: usize) -> Option<&str> {
    let b = msg.as_bytes();
    if let Some(end) = dotted_quad(b, at) {
        return Some(&msg[at..end]);
    }
    let end = b[at..].iter().position(|c| !(c.is_ascii_hexdigit() || *c == b':')).map_or(b.len(), |n| at + n);
    msg[at..end].contains(':').then(|| &msg[at..end])
}

/// DECNET's `\b(\d{1,3}(?:\.\d{1,3}){3})\b`: the first dotted quad on word boundaries.
fn bare_ipv4(msg: &str) -> Option<&str> {
    let b = msg.as_bytes();
    (0..b.len()).find_map(|i| {
        if !b[i].is_ascii_digit() || char_before(msg, i).is_some_and(is_word) {
            return None;
        }
        let end = dotted_quad(b, i)?;
        (!char_at(msg, end).is_some_and(is_word)).then(|| &msg[i..end])
    })
}

/// The end of `\d{1,3}(?:\.\d{1,3}){3}` at `at`, each number as long as it is (at most 3 digits):
/// a longer run of digits never matches before a dot, and the last number's greedy match is where
/// a word boundary may follow.
fn dotted_quad(b: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    for octet in 0..4 {
        if octet > 0 {
            if b.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
        let start = i;
        while i < b.len() && i - start < 3 && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    Some(i)
}
