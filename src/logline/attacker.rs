//! Where a line names its attacker: the structured-data address fields first, then three fallbacks
//! over the MSG (`key=value` tokens, anchored phrases such as `from 1.2.3.4` or `rhost=…`, the first
//! bare IPv4), as DECNET's collector does (`reference/decnet-workers.md` §1).

use std::net::{IpAddr, Ipv6Addr};

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

/// The first non-empty address field, split. An empty value counts as absent: it names no one.
pub(super) fn from_fields(fields: &[(String, String)]) -> Option<Endpoint<'_>> {
    ADDRESS_FIELDS
        .iter()
        .find_map(|name| fields.iter().find(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| split_endpoint(v)))
}

/// Splits `a.b.c.d:port`, `host:port` and `[v6]:port` (brackets stripped; `[v6]` alone too). A value
/// that parses as an IPv6 address is an address: DECNET's split would read `2001:db8::1` as host
/// `2001:db8:` port `1` (CONTRACT.md). Anything else is taken verbatim as the host, as DECNET does
/// with structured data.
pub(super) fn split_endpoint(value: &str) -> Endpoint<'_> {
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
    if let Some((host, port)) = value.rsplit_once(':')
        && !host.is_empty()
        && !host.contains(':')
        && is_port(port)
    {
        return Endpoint { host, port: Some(port) };
    }
    Endpoint { host: value, port: None }
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The attacker address the MSG names, by DECNET's fallbacks in order. Unlike structured data, free
/// text is only believed when the candidate parses as an IP address (a `src=/dev/null` or
/// `from 999.1.1.1` names no one).
pub(super) fn from_msg(msg: &str) -> Option<&str> {
    from_tokens(msg).or_else(|| anchored(msg)).or_else(|| bare_ipv4(msg))
}

/// `key=value` tokens whose key is an address field, by field priority (then first in the text);
/// a port is dropped (`src=1.2.3.4:22` names 1.2.3.4).
fn from_tokens(msg: &str) -> Option<&str> {
    let mut best: Option<(usize, &str)> = None;
    for token in msg.split_ascii_whitespace() {
        let Some((key, value)) = token.split_once('=') else { continue };
        let Some(rank) = ADDRESS_FIELDS.iter().position(|name| *name == key) else { continue };
        if best.is_some_and(|(best_rank, _)| best_rank <= rank) {
            continue;
        }
        let host = split_endpoint(value).host;
        if host.parse::<IpAddr>().is_ok() {
            best = Some((rank, host));
            if rank == 0 {
                break;
            }
        }
    }
    best.map(|(_, host)| host)
}

/// DECNET's `\b(from|rhost[:=]|client[:=]|src[:=])\s*IP`, case-insensitive: the first anchor
/// followed by an address. Anchors keep `Connection from X port Y on Z port 22` from naming the
/// local listener Z.
fn anchored(msg: &str) -> Option<&str> {
    let b = msg.as_bytes();
    for i in 0..b.len() {
        if !matches!(b[i] | 0x20, b'f' | b'r' | b'c' | b's') || (i > 0 && is_word(b[i - 1])) {
            continue;
        }
        let Some(mut j) = anchor_end(&b[i..]).map(|len| i + len) else { continue };
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if let Some(ip) = address_at(msg, j) {
            return Some(ip);
        }
    }
    None
}

/// The length of the anchor starting `rest`, if one does.
fn anchor_end(rest: &[u8]) -> Option<usize> {
    let starts = |word: &str| rest.get(..word.len()).is_some_and(|head| head.eq_ignore_ascii_case(word.as_bytes()));
    if starts("from") {
        return Some(4);
    }
    ["rhost", "client", "src"]
        .into_iter()
        .find(|word| starts(word) && matches!(rest.get(word.len()), Some(b':' | b'=')))
        .map(|word| word.len() + 1)
}

/// The address starting at `at`: a dotted quad (a port or a sentence's full stop may follow), else
/// an IPv6 address made of the hex digits, colons and dots there.
fn address_at(msg: &str, at: usize) -> Option<&str> {
    let b = msg.as_bytes();
    if let Some(end) = dotted_quad(b, at)
        && !b.get(end).is_some_and(u8::is_ascii_digit)
    {
        return Some(&msg[at..end]);
    }
    let mut end = at;
    while end < b.len() && (b[end].is_ascii_hexdigit() || matches!(b[end], b':' | b'.')) {
        end += 1;
    }
    let candidate = msg[at..end].trim_end_matches('.');
    (candidate.contains(':') && candidate.parse::<Ipv6Addr>().is_ok()).then_some(candidate)
}

/// DECNET's `\b(\d{1,3}(?:\.\d{1,3}){3})\b`: the first dotted quad on word boundaries, here also
/// required to be a valid address.
fn bare_ipv4(msg: &str) -> Option<&str> {
    let b = msg.as_bytes();
    (0..b.len()).find_map(|i| {
        if !b[i].is_ascii_digit() || (i > 0 && is_word(b[i - 1])) {
            return None;
        }
        let end = dotted_quad(b, i)?;
        (!b.get(end).copied().is_some_and(is_word)).then(|| &msg[i..end])
    })
}

/// The end of a valid dotted quad starting at `at` (four 1–3 digit octets ≤ 255).
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
        let mut value = 0u32;
        while i < b.len() && i - start < 3 && b[i].is_ascii_digit() {
            value = value * 10 + u32::from(b[i] - b'0');
            i += 1;
        }
        if i == start || value > 255 {
            return None;
        }
    }
    Some(i)
}

/// A regex `\w` byte: ASCII letters, digits, `_`, and any byte of a non-ASCII character (Python's
/// `\w` takes Unicode letters; this errs towards "inside a word").
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}
