//! JARM, the active TLS server fingerprint: ten ClientHellos that differ in version, cipher list
//! and order, GREASE, ALPN and supported versions; from each ServerHello the chosen cipher, its
//! version, the ALPN and the extension types; folded into the standard 62-character hash (30
//! characters of cipher and version codes, then the first 32 hex of a SHA-256 of the ALPNs and
//! extensions). The hellos and the reading of the answers are those of the reference
//! implementation (Salesforce's `jarm.py`, as packaged in PyPI `pyjarm`), byte for byte, so the
//! hash equals the reference's against the same server (tested).

use std::net::SocketAddr;
use std::time::Duration;
use svc::text::hex;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The hash of a server that answered no hello.
pub const EMPTY: &str = "00000000000000000000000000000000000000000000000000000000000000";
/// The reference reads one answer of at most this many bytes.
const READ_MAX: usize = 1484;
/// What one hello that got no ServerHello contributes.
const FAILED: &str = "|||";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    Tls11,
    Tls12,
    /// Record version 1.0, hello version 1.2, as TLS 1.3 clients send.
    Tls13,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Forward,
    Reverse,
    TopHalf,
    BottomHalf,
    MiddleOut,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Support {
    Tls12,
    Tls13,
    None,
}

/// One of the ten hellos.
struct Format {
    version: Version,
    /// Without the TLS 1.3 suites.
    no_tls13_ciphers: bool,
    cipher_order: Order,
    grease: bool,
    rare_alpn: bool,
    support: Support,
    extension_order: Order,
}

const fn format(
    version: Version,
    no_tls13_ciphers: bool,
    cipher_order: Order,
    grease: bool,
    rare_alpn: bool,
    support: Support,
    extension_order: Order,
) -> Format {
    Format { version, no_tls13_ciphers, cipher_order, grease, rare_alpn, support, extension_order }
}

/// JARM v1's hellos, in the order their answers are hashed.
const FORMATS: [Format; 10] = {
    use Order::*;
    use Version::*;
    [
        format(Tls12, false, Forward, false, false, Support::Tls12, Reverse),
        format(Tls12, false, Reverse, false, false, Support::Tls12, Forward),
        format(Tls12, false, TopHalf, false, false, Support::None, Forward),
        format(Tls12, false, BottomHalf, false, true, Support::None, Forward),
        format(Tls12, false, MiddleOut, true, true, Support::None, Reverse),
        format(Tls11, false, Forward, false, false, Support::None, Forward),
        format(Tls13, false, Forward, false, false, Support::Tls13, Reverse),
        format(Tls13, false, Reverse, false, false, Support::Tls13, Forward),
        format(Tls13, true, Forward, false, false, Support::Tls13, Forward),
        format(Tls13, false, MiddleOut, true, false, Support::Tls13, Reverse),
    ]
};

/// Every cipher suite the hellos offer, in the reference's order.
const ALL_CIPHERS: [u16; 69] = [
    0x0016, 0x0033, 0x0067, 0xc09e, 0xc0a2, 0x009e, 0x0039, 0x006b, 0xc09f, 0xc0a3, 0x009f, 0x0045, 0x00be, 0x0088,
    0x00c4, 0x009a, 0xc008, 0xc009, 0xc023, 0xc0ac, 0xc0ae, 0xc02b, 0xc00a, 0xc024, 0xc0ad, 0xc0af, 0xc02c, 0xc072,
    0xc073, 0xcca9, 0x1302, 0x1301, 0xcc14, 0xc007, 0xc012, 0xc013, 0xc027, 0xc02f, 0xc014, 0xc028, 0xc030, 0xc060,
    0xc061, 0xc076, 0xc077, 0xcca8, 0x1305, 0x1304, 0x1303, 0xcc13, 0xc011, 0x000a, 0x002f, 0x003c, 0xc09c, 0xc0a0,
    0x009c, 0x0035, 0x003d, 0xc09d, 0xc0a1, 0x009d, 0x0041, 0x00ba, 0x0084, 0x00c0, 0x0007, 0x0004, 0x0005,
];
const TLS13_CIPHERS: [u16; 5] = [0x1301, 0x1302, 0x1303, 0x1304, 0x1305];

/// The ciphers the hash codes: a server's choice is written as its 1-based place here (70 when
/// absent).
const HASHED_CIPHERS: [u16; 69] = [
    0x0004, 0x0005, 0x0007, 0x000a, 0x0016, 0x002f, 0x0033, 0x0035, 0x0039, 0x003c, 0x003d, 0x0041, 0x0045, 0x0067,
    0x006b, 0x0084, 0x0088, 0x009a, 0x009c, 0x009d, 0x009e, 0x009f, 0x00ba, 0x00be, 0x00c0, 0x00c4, 0xc007, 0xc008,
    0xc009, 0xc00a, 0xc011, 0xc012, 0xc013, 0xc014, 0xc023, 0xc024, 0xc027, 0xc028, 0xc02b, 0xc02c, 0xc02f, 0xc030,
    0xc060, 0xc061, 0xc072, 0xc073, 0xc076, 0xc077, 0xc09c, 0xc09d, 0xc09e, 0xc09f, 0xc0a0, 0xc0a1, 0xc0a2, 0xc0a3,
    0xc0ac, 0xc0ad, 0xc0ae, 0xc0af, 0xcc13, 0xcc14, 0xcca8, 0xcca9, 0x1301, 0x1302, 0x1303, 0x1304, 0x1305,
];

/// The ALPN lists, each entry length-prefixed. The reference joins `spdy/3` and `h2` into one
/// entry, which matters when the list is reversed: kept so, or the hellos would differ.
const ALPNS: [&[u8]; 8] = [
    b"\x08http/0.9",
    b"\x08http/1.0",
    b"\x08http/1.1",
    b"\x06spdy/1",
    b"\x06spdy/2",
    b"\x06spdy/3\x02h2",
    b"\x03h2c",
    b"\x02hq",
];
const RARE_ALPNS: [&[u8]; 7] =
    [b"\x08http/0.9", b"\x08http/1.0", b"\x06spdy/1", b"\x06spdy/2", b"\x06spdy/3", b"\x03h2c", b"\x02hq"];

const GREASE: [u16; 16] = [
    0x0a0a, 0x1a1a, 0x2a2a, 0x3a3a, 0x4a4a, 0x5a5a, 0x6a6a, 0x7a7a, 0x8a8a, 0x9a9a, 0xaaaa, 0xbaba, 0xcaca, 0xdada,
    0xeaea, 0xfafa,
];

const EXTENDED_MASTER_SECRET: &[u8] = b"\x00\x17\x00\x00";
const MAX_FRAGMENT_LENGTH: &[u8] = b"\x00\x01\x00\x01\x01";
const RENEGOTIATION_INFO: &[u8] = b"\xff\x01\x00\x01\x00";
const SUPPORTED_GROUPS: &[u8] = b"\x00\x0a\x00\x0a\x00\x08\x00\x1d\x00\x17\x00\x18\x00\x19";
const EC_POINT_FORMATS: &[u8] = b"\x00\x0b\x00\x02\x01\x00";
const SESSION_TICKET: &[u8] = b"\x00\x23\x00\x00";
const SIGNATURE_ALGORITHMS: &[u8] =
    b"\x00\x0d\x00\x14\x00\x12\x04\x03\x08\x04\x04\x01\x05\x03\x08\x05\x05\x01\x08\x06\x06\x01\x02\x01";
const PSK_KEY_EXCHANGE_MODES: &[u8] = b"\x00\x2d\x00\x02\x01\x01";

/// The list in `order`, as the reference reorders it.
fn reorder<T: Copy>(list: &[T], order: Order) -> Vec<T> {
    let len = list.len();
    match order {
        Order::Forward => list.to_vec(),
        Order::Reverse => list.iter().rev().copied().collect(),
        Order::BottomHalf => list[len / 2 + len % 2..].to_vec(),
        Order::TopHalf => {
            // The middle one (odd lengths) first, then the bottom half of the reversed list.
            let mut out = if len % 2 == 1 { vec![list[len / 2]] } else { Vec::new() };
            out.extend(reorder(&reorder(list, Order::Reverse), Order::BottomHalf));
            out
        }
        Order::MiddleOut => {
            let middle = len / 2;
            let mut out = Vec::with_capacity(len);
            if len % 2 == 1 {
                out.push(list[middle]);
                for i in 1..=middle {
                    out.push(list[middle + i]);
                    out.push(list[middle - i]);
                }
            } else {
                for i in 1..=middle {
                    out.push(list[middle - 1 + i]);
                    out.push(list[middle - i]);
                }
            }
            out
        }
    }
}

fn push_u16(out: &mut Vec<u8>, value: usize) {
    out.extend_from_slice(&(value as u16).to_be_bytes());
}

/// Random bytes for the hello's random, session id and key share (what they hold does not matter
/// to the server's choice; they are random as the reference's are).
fn random<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; N];
    ring::rand::SystemRandom::new().fill(&mut bytes).expect("the system's random source");
    bytes
}

fn grease() -> u16 {
    GREASE[usize::from(random::<1>()[0]) % GREASE.len()]
}

/// The `index`th hello to `host` (the SNI is the target as written, an address here) as a record.
fn client_hello(index: usize, host: &str) -> Vec<u8> {
    let format = &FORMATS[index];
    let (record_version, hello_version): (&[u8], &[u8]) = match format.version {
        Version::Tls11 => (b"\x03\x02", b"\x03\x02"),
        Version::Tls12 => (b"\x03\x03", b"\x03\x03"),
        Version::Tls13 => (b"\x03\x01", b"\x03\x03"),
    };
    let mut hello = hello_version.to_vec();
    hello.extend_from_slice(&random::<32>());
    hello.push(32);
    hello.extend_from_slice(&random::<32>());

    let base: Vec<u16> = if format.no_tls13_ciphers {
        ALL_CIPHERS.iter().copied().filter(|c| !TLS13_CIPHERS.contains(c)).collect()
    } else {
        ALL_CIPHERS.to_vec()
    };
    let mut ciphers = reorder(&base, format.cipher_order);
    if format.grease {
        ciphers.insert(0, grease());
    }
    push_u16(&mut hello, ciphers.len() * 2);
    for cipher in ciphers {
        hello.extend_from_slice(&cipher.to_be_bytes());
    }
    hello.extend_from_slice(b"\x01\x00");
    hello.extend_from_slice(&extensions(format, host));

    let mut handshake = vec![0x01, 0x00];
    push_u16(&mut handshake, hello.len());
    handshake.extend_from_slice(&hello);
    let mut record = vec![0x16];
    record.extend_from_slice(record_version);
    push_u16(&mut record, handshake.len());
    record.extend_from_slice(&handshake);
    record
}

fn extensions(format: &Format, host: &str) -> Vec<u8> {
    let mut all = Vec::new();
    if format.grease {
        all.extend_from_slice(&grease().to_be_bytes());
        all.extend_from_slice(b"\x00\x00");
    }
    all.extend_from_slice(b"\x00\x00");
    push_u16(&mut all, host.len() + 5);
    push_u16(&mut all, host.len() + 3);
    all.push(0);
    push_u16(&mut all, host.len());
    all.extend_from_slice(host.as_bytes());
    for fixed in [
        EXTENDED_MASTER_SECRET,
        MAX_FRAGMENT_LENGTH,
        RENEGOTIATION_INFO,
        SUPPORTED_GROUPS,
        EC_POINT_FORMATS,
        SESSION_TICKET,
    ] {
        all.extend_from_slice(fixed);
    }

    let alpns: &[&[u8]] = if format.rare_alpn { &RARE_ALPNS } else { &ALPNS };
    let alpns = reorder(alpns, format.extension_order).concat();
    all.extend_from_slice(b"\x00\x10");
    push_u16(&mut all, alpns.len() + 2);
    push_u16(&mut all, alpns.len());
    all.extend_from_slice(&alpns);
    all.extend_from_slice(SIGNATURE_ALGORITHMS);

    let mut share = Vec::new();
    if format.grease {
        share.extend_from_slice(&grease().to_be_bytes());
        share.extend_from_slice(b"\x00\x01\x00");
    }
    share.extend_from_slice(b"\x00\x1d\x00\x20");
    share.extend_from_slice(&random::<32>());
    all.extend_from_slice(b"\x00\x33");
    push_u16(&mut all, share.len() + 2);
    push_u16(&mut all, share.len());
    all.extend_from_slice(&share);
    all.extend_from_slice(PSK_KEY_EXCHANGE_MODES);

    if format.version == Version::Tls13 || format.support == Support::Tls12 {
        let offered: &[u16] = if format.support == Support::Tls12 {
            &[0x0301, 0x0302, 0x0303]
        } else {
            &[0x0301, 0x0302, 0x0303, 0x0304]
        };
        let mut versions = Vec::new();
        if format.grease {
            versions.extend_from_slice(&grease().to_be_bytes());
        }
        for version in reorder(offered, format.extension_order) {
            versions.extend_from_slice(&version.to_be_bytes());
        }
        all.extend_from_slice(b"\x00\x2b");
        push_u16(&mut all, versions.len() + 1);
        all.push(versions.len() as u8);
        all.extend_from_slice(&versions);
    }

    let mut out = Vec::with_capacity(all.len() + 2);
    push_u16(&mut out, all.len());
    out.extend_from_slice(&all);
    out
}

/// `bytes[from..to]` as Python slices it: clipped to the data, empty past its end.
fn slice(bytes: &[u8], from: usize, to: usize) -> &[u8] {
    let end = to.min(bytes.len());
    if from >= end { &[] } else { &bytes[from..end] }
}

fn be(bytes: &[u8]) -> usize {
    bytes.iter().fold(0, |n, b| (n << 8) | usize::from(*b))
}

/// What one answer contributes, `cipher|version|alpn|extensions`, read at the reference's fixed
/// offsets (it assumes the ServerHello starts the answer).
pub fn answer_entry(answer: &[u8]) -> String {
    server_hello(answer).unwrap_or_else(|| FAILED.to_string())
}

fn server_hello(hello: &[u8]) -> Option<String> {
    if *hello.first()? == 21 || *hello.first()? != 22 || *hello.get(5)? != 2 {
        return None;
    }
    let counter = usize::from(*hello.get(43)?);
    let cipher = hex(slice(hello, counter + 44, counter + 46));
    let version = hex(slice(hello, 9, 11));
    Some(format!("{cipher}|{version}|{}", extension_info(hello, counter)?))
}

/// `alpn|type-type-…`; `|` when the answer is too short; `None` where the reference's parse
/// raises (its whole answer then counts as failed).
fn extension_info(hello: &[u8], counter: usize) -> Option<String> {
    let Some(&first) = hello.get(counter + 47) else { return Some("|".into()) };
    if first == 11
        || slice(hello, counter + 50, counter + 53) == b"\x0e\xac\x0b"
        || slice(hello, 82, 85) == b"\x0f\xf0\x0b"
    {
        return Some(FAILED.into());
    }
    let mut count = 49 + counter;
    let length = be(slice(hello, counter + 47, counter + 49));
    let maximum = (length + count).saturating_sub(1);
    let mut types: Vec<&[u8]> = Vec::new();
    // `None` for an extension of length 0 (the reference stores a text there, not bytes).
    let mut values: Vec<Option<&[u8]>> = Vec::new();
    while count < maximum {
        types.push(slice(hello, count, count + 2));
        let ext_length = be(slice(hello, count + 2, count + 4));
        if ext_length == 0 {
            count += 4;
            values.push(None);
        } else {
            values.push(Some(slice(hello, count + 4, count + 4 + ext_length)));
            count += ext_length + 4;
        }
    }
    let mut alpn = String::new();
    if let Some(at) = types.iter().position(|t| *t == b"\x00\x10") {
        let value = values[at]?;
        alpn = std::str::from_utf8(slice(value, 3, value.len())).ok()?.to_string();
    }
    let types: Vec<String> = types.iter().map(|t| hex(t)).collect();
    Some(format!("{alpn}|{}", types.join("-")))
}

/// The hash of the ten entries, in order.
pub fn hash(entries: &[String]) -> String {
    if entries.iter().all(|e| e == FAILED) {
        return EMPTY.to_string();
    }
    let mut fuzzy = String::with_capacity(62);
    let mut alpns_and_extensions = String::new();
    for entry in entries {
        let parts: Vec<&str> = entry.split('|').collect();
        let part = |i: usize| parts.get(i).copied().unwrap_or("");
        fuzzy.push_str(&cipher_code(part(0)));
        fuzzy.push(version_code(part(1)));
        alpns_and_extensions.push_str(part(2));
        alpns_and_extensions.push_str(part(3));
    }
    let digest = hex(&Sha256::digest(alpns_and_extensions.as_bytes()));
    fuzzy.push_str(&digest[..32]);
    fuzzy
}

fn cipher_code(cipher: &str) -> String {
    if cipher.is_empty() {
        return "00".into();
    }
    let place =
        HASHED_CIPHERS.iter().position(|c| format!("{c:04x}") == cipher).map_or(HASHED_CIPHERS.len(), |i| i) + 1;
    format!("{place:02x}")
}

/// The fourth hex digit of the legacy version: 0303 → `d`.
fn version_code(version: &str) -> char {
    match version.chars().nth(3).and_then(|c| c.to_digit(10)) {
        Some(digit @ 0..=5) => b"abcdef"[digit as usize] as char,
        _ => '0',
    }
}

/// One hello's answer: its first bytes, up to the reference's read size; empty when the server
/// closed, refused or timed out.
pub async fn exchange(addr: SocketAddr, hello: &[u8], timeout: Duration) -> Vec<u8> {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(hello).await?;
        let mut answer = Vec::with_capacity(READ_MAX);
        let mut chunk = [0u8; READ_MAX];
        // The reference takes one read; a ServerHello split over segments is read whole here.
        while answer.len() < READ_MAX {
            let n = stream.read(&mut chunk[..READ_MAX - answer.len()]).await?;
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..n]);
            if answer.len() >= 5 && answer.len() >= 5 + be(&answer[3..5]) {
                break;
            }
        }
        Ok::<_, std::io::Error>(answer)
    };
    tokio::time::timeout(timeout, attempt).await.ok().and_then(Result::ok).unwrap_or_default()
}

/// The ten hellos for `addr`, each sent after `pace` allows a connection.
pub fn hellos(addr: SocketAddr) -> Vec<Vec<u8>> {
    let host = addr.ip().to_string();
    (0..FORMATS.len()).map(|i| client_hello(i, &host)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_as_the_reference() {
        let odd = [1, 2, 3, 4, 5];
        assert_eq!(reorder(&odd, Order::BottomHalf), [4, 5]);
        assert_eq!(reorder(&odd, Order::TopHalf), [3, 2, 1]);
        assert_eq!(reorder(&odd, Order::MiddleOut), [3, 4, 2, 5, 1]);
        let even = [1, 2, 3, 4];
        assert_eq!(reorder(&even, Order::BottomHalf), [3, 4]);
        assert_eq!(reorder(&even, Order::TopHalf), [2, 1]);
        assert_eq!(reorder(&even, Order::MiddleOut), [3, 2, 4, 1]);
    }

    #[test]
    fn a_server_that_answers_nothing_hashes_to_zeros() {
        let entries = vec![FAILED.to_string(); 10];
        assert_eq!(hash(&entries), EMPTY);
        assert_eq!(answer_entry(b""), FAILED);
        assert_eq!(answer_entry(b"\x15\x03\x03\x00\x02\x02\x28"), FAILED, "an alert");
    }

    #[test]
    fn hellos_are_well_formed_records() {
        let addr: SocketAddr = "192.0.2.1:443".parse().unwrap();
        for hello in hellos(addr) {
            assert_eq!(hello[0], 0x16);
            assert_eq!(be(&hello[3..5]), hello.len() - 5);
            assert_eq!(hello[5], 1);
            assert_eq!(be(&hello[6..9]), hello.len() - 9);
            assert!(hello.windows(9).any(|w| w == b"192.0.2.1"), "the SNI is the address");
        }
    }

    #[test]
    fn cipher_and_version_codes() {
        assert_eq!(cipher_code("c02f"), "29");
        assert_eq!(cipher_code("1301"), "41");
        assert_eq!(cipher_code("ffff"), "46");
        assert_eq!(version_code("0303"), 'd');
        assert_eq!(version_code("0301"), 'b');
        assert_eq!(version_code(""), '0');
    }
}
