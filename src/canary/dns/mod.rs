//! The canary's DNS channel. Here, without the socket: the zone baits look names up under
//! (`{token}.{zone}`), a query read from a datagram (the header and its one question; anything else
//! is refused with FORMERR) and the answer written back. Bounded on hostile bytes: a name is at most
//! 255 bytes of at most 63-byte labels, compression pointers are refused, nothing loops or panics.
//! Which token a name carries is a guess made here ([`Query::place`]); whether it is known is the
//! question the UDP server (`listener`) asks the trigger recorder.

mod listener;

pub use listener::{CanaryDns, DnsListener};

use std::net::Ipv4Addr;

use super::bait::{CallbackToken, is_dns_label};

/// The longest name on the wire (RFC 1035 §2.3.4), length bytes included.
const MAX_NAME_WIRE: usize = 255;
/// The longest zone: room for a 32-character token label and its dot within 253 characters.
pub const MAX_ZONE_CHARS: usize = 253 - 33;
/// How many labels left of the zone are tried as tokens, nearest first.
const MAX_CANDIDATES: usize = 4;
const HEADER: usize = 12;
const TYPE_A: u16 = 1;
const TYPE_ANY: u16 = 255;
const CLASS_IN: u16 = 1;
const CLASS_ANY: u16 = 255;

/// The zone the canary answers for: lowercase, without the final dot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsZone(String);

impl DnsZone {
    /// Labels of `a-z`, `0-9` and inner `-`, at most 63 characters each and [`MAX_ZONE_CHARS`] in
    /// all; upper case is folded and one final dot dropped.
    pub fn parse(text: &str) -> Result<DnsZone, String> {
        let zone = text.trim().strip_suffix('.').unwrap_or(text.trim()).to_ascii_lowercase();
        if zone.len() > MAX_ZONE_CHARS {
            return Err(format!("must be at most {MAX_ZONE_CHARS} characters, so a token's name fits in 253"));
        }
        if zone.is_empty() || !zone.split('.').all(is_dns_label) {
            return Err("must be a DNS name: dot-separated labels of a-z, 0-9 and inner -, 63 characters each".into());
        }
        Ok(DnsZone(zone))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn labels(&self) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.0.split('.').map(str::as_bytes)
    }
}

/// The answer codes this server gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rcode {
    NoError = 0,
    FormErr = 1,
    NxDomain = 3,
    NotImp = 4,
    Refused = 5,
}

/// What a datagram is.
#[derive(Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    /// A standard query with one well-formed question.
    Query(Query<'a>),
    /// Something to refuse: the datagram's reply (FORMERR or NOTIMP, no question).
    Refuse(Vec<u8>),
    /// Too short to answer, or itself an answer: no reply (none could be addressed, or a reply to a
    /// reply could loop between two servers).
    Ignore,
}

/// A query's header and one question.
#[derive(Debug, PartialEq, Eq)]
pub struct Query<'a> {
    id: u16,
    flags: u16,
    /// The question as sent (name, type, class), echoed in the answer with its case.
    question: &'a [u8],
    /// The name's labels, lowercased, leftmost first.
    labels: Vec<Vec<u8>>,
    qtype: u16,
    qclass: u16,
}

/// Where a name stands against the zone.
#[derive(Debug, PartialEq, Eq)]
pub enum Place {
    /// Not the zone nor under it: REFUSED.
    Outside,
    /// The zone itself: it exists, with no data.
    Apex,
    /// Under the zone: the labels that could be tokens, nearest the zone first (empty: NXDOMAIN).
    Below(Vec<CallbackToken>),
}

/// Reads one datagram.
pub fn parse(packet: &[u8]) -> Packet<'_> {
    let Some(header) = packet.get(..HEADER) else { return Packet::Ignore };
    let word = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    let (id, flags) = (word(0), word(2));
    if flags & 0x8000 != 0 {
        return Packet::Ignore;
    }
    if (flags >> 11) & 0xf != 0 {
        return Packet::Refuse(bare(id, flags, Rcode::NotImp));
    }
    if word(4) != 1 {
        return Packet::Refuse(bare(id, flags, Rcode::FormErr));
    }
    match question(&packet[HEADER..]) {
        Some((length, labels)) => {
            let question = &packet[HEADER..HEADER + length];
            let at = length - 4;
            let qtype = u16::from_be_bytes([question[at], question[at + 1]]);
            let qclass = u16::from_be_bytes([question[at + 2], question[at + 3]]);
            Packet::Query(Query { id, flags, question, labels, qtype, qclass })
        }
        None => Packet::Refuse(bare(id, flags, Rcode::FormErr)),
    }
}

/// The question's length in bytes (name, type, class) and its lowercased labels; `None` when it is
/// truncated, compressed, or longer than a name may be.
fn question(bytes: &[u8]) -> Option<(usize, Vec<Vec<u8>>)> {
    let mut labels = Vec::new();
    let mut at = 0;
    loop {
        let length = usize::from(*bytes.get(at)?);
        if length == 0 {
            at += 1;
            break;
        }
        // 0xC0 is a compression pointer, 0x40 and 0x80 are reserved: none belongs in a question.
        if length > 63 || at + 1 + length >= MAX_NAME_WIRE {
            return None;
        }
        labels.push(bytes.get(at + 1..at + 1 + length)?.to_ascii_lowercase());
        at += 1 + length;
    }
    bytes.get(at..at + 4)?;
    Some((at + 4, labels))
}

/// A header-only reply: the query's id, opcode and recursion wish, `rcode`.
fn bare(id: u16, flags: u16, rcode: Rcode) -> Vec<u8> {
    let mut reply = Vec::with_capacity(HEADER);
    reply.extend_from_slice(&id.to_be_bytes());
    reply.extend_from_slice(&reply_flags(flags, false, rcode).to_be_bytes());
    reply.extend_from_slice(&[0; 8]);
    reply
}

/// QR set, the opcode and RD copied, AA when `authoritative`, no recursion available.
fn reply_flags(query: u16, authoritative: bool, rcode: Rcode) -> u16 {
    0x8000 | (query & 0x7900) | if authoritative { 0x0400 } else { 0 } | rcode as u16
}

impl Query<'_> {
    /// The name, lowercased, without the final dot; bytes other than letters, digits, `-` and `_`
    /// written `\DDD` as `dig` does.
    pub fn name(&self) -> String {
        let mut name = String::new();
        for (index, label) in self.labels.iter().enumerate() {
            if index > 0 {
                name.push('.');
            }
            for &byte in label {
                if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
                    name.push(char::from(byte));
                } else {
                    name.push_str(&format!("\\{byte:03}"));
                }
            }
        }
        name
    }

    /// Where the name stands against `zone`, and which of its labels could be tokens.
    pub fn place(&self, zone: &DnsZone) -> Place {
        let zone_len = zone.labels().count();
        let Some(left) = self.labels.len().checked_sub(zone_len) else { return Place::Outside };
        if !self.labels[left..].iter().map(Vec::as_slice).eq(zone.labels()) {
            return Place::Outside;
        }
        if left == 0 {
            return Place::Apex;
        }
        let tokens = self.labels[..left]
            .iter()
            .rev()
            .filter_map(|label| std::str::from_utf8(label).ok())
            .filter_map(|label| CallbackToken::parse(label).ok())
            .take(MAX_CANDIDATES)
            .collect();
        Place::Below(tokens)
    }

    /// The answer: the id, flags and question echoed, `rcode`, AA unless refused, and an A record
    /// (TTL 0, so every lookup comes back here) when `address` is given and the question asks for A.
    pub fn answer(&self, rcode: Rcode, address: Option<Ipv4Addr>) -> Vec<u8> {
        let asks_a = matches!(self.qtype, TYPE_A | TYPE_ANY) && matches!(self.qclass, CLASS_IN | CLASS_ANY);
        let record = address.filter(|_| asks_a && rcode == Rcode::NoError);
        let mut reply = Vec::with_capacity(HEADER + self.question.len() + 16);
        reply.extend_from_slice(&self.id.to_be_bytes());
        reply.extend_from_slice(&reply_flags(self.flags, rcode != Rcode::Refused, rcode).to_be_bytes());
        reply.extend_from_slice(&[0, 1, 0, u8::from(record.is_some()), 0, 0, 0, 0]);
        reply.extend_from_slice(self.question);
        if let Some(address) = record {
            // The name as a pointer to the question's, at the header's end.
            reply.extend_from_slice(&[0xc0, HEADER as u8]);
            reply.extend_from_slice(&TYPE_A.to_be_bytes());
            reply.extend_from_slice(&CLASS_IN.to_be_bytes());
            reply.extend_from_slice(&0u32.to_be_bytes());
            reply.extend_from_slice(&4u16.to_be_bytes());
            reply.extend_from_slice(&address.octets());
        }
        reply
    }
}

#[cfg(test)]
mod tests;
