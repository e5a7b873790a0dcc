//! The TLS fingerprints: JA3 and JA3S exactly as the reference implementation (salesforce/ja3:
//! decimal values joined by `-`, GREASE dropped from every list, the legacy version, MD5 of the
//! string), and JA4 and JA4S as FoxIO specifies them (hex values, ciphers and extensions sorted for
//! JA4, SNI and ALPN out of its extension hash, signature algorithms in wire order, SHA-256 cut to
//! 12 hex digits), plus JA4L from the SYN/SYN-ACK/ACK times. DECNET's own JA4 variant (decimal,
//! SNI and ALPN hashed, signature algorithms sorted) is deliberately not reproduced.

use md5::{Digest as _, Md5};
use sha2::Sha256;

use super::tls::{ClientHello, ServerHello, is_grease};

fn non_grease<T: Copy + Into<u16>>(values: &[T]) -> impl Iterator<Item = T> + '_ {
    values.iter().copied().filter(|v| !is_grease((*v).into()))
}

/// Values as JA3 writes them: decimal, GREASE dropped, joined by `-`.
pub fn ja3_list<T: Copy + Into<u16>>(values: &[T]) -> String {
    non_grease(values).map(|v| v.into().to_string()).collect::<Vec<_>>().join("-")
}

fn hex_list(values: impl IntoIterator<Item = u16>) -> String {
    values.into_iter().map(|v| format!("{v:04x}")).collect::<Vec<_>>().join(",")
}

fn md5_hex(text: &str) -> String {
    format!("{:x}", Md5::digest(text.as_bytes()))
}

/// The first 12 hex digits of the SHA-256 of `text`.
fn sha256_12(text: &str) -> String {
    let mut hex = format!("{:x}", Sha256::digest(text.as_bytes()));
    hex.truncate(12);
    hex
}

const ZERO_HASH: &str = "000000000000";

/// `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`.
pub fn ja3_string(hello: &ClientHello) -> String {
    format!(
        "{},{},{},{},{}",
        hello.version,
        ja3_list(&hello.ciphers),
        ja3_list(&hello.extensions),
        ja3_list(&hello.groups),
        ja3_list(&hello.point_formats.iter().map(|&p| u16::from(p)).collect::<Vec<_>>()),
    )
}

pub fn ja3(hello: &ClientHello) -> String {
    md5_hex(&ja3_string(hello))
}

/// `SSLVersion,Cipher,Extensions`.
pub fn ja3s_string(hello: &ServerHello) -> String {
    format!("{},{},{}", hello.version, hello.cipher, ja3_list(&hello.extensions))
}

pub fn ja3s(hello: &ServerHello) -> String {
    md5_hex(&ja3s_string(hello))
}

/// JA4's two-character version (`13`, `12`, … `s3`, `s2`, `00` for anything else).
fn ja4_version(version: u16) -> &'static str {
    match version {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// The first and last character of the first ALPN value: printable ASCII as itself, a byte from
/// 0x80 as `9`, `99` when either end is a control byte, `00` when there is none.
fn ja4_alpn(first: Option<&[u8]>) -> String {
    let Some(value) = first.filter(|v| !v.is_empty()) else { return "00".into() };
    let end = |b: u8| match b {
        0x20..=0x7e => Some(char::from(b)),
        0x80.. => Some('9'),
        _ => None,
    };
    match (end(value[0]), end(value[value.len() - 1])) {
        (Some(a), Some(b)) => format!("{a}{b}"),
        _ => "99".into(),
    }
}

fn count2(n: usize) -> String {
    format!("{:02}", n.min(99))
}

/// JA4 (TCP): `t<ver><d|i><ciphers><extensions><alpn>_<cipher hash>_<extension hash>`.
pub fn ja4(hello: &ClientHello) -> String {
    let version = hello.offered_version();
    let sni = if hello.extensions.contains(&0x0000) { 'd' } else { 'i' };
    let mut ciphers: Vec<u16> = non_grease(&hello.ciphers).collect();
    let extensions: Vec<u16> = non_grease(&hello.extensions).collect();
    let part_a = format!(
        "t{}{sni}{}{}{}",
        ja4_version(version),
        count2(ciphers.len()),
        count2(extensions.len()),
        ja4_alpn(hello.alpn.first().map(Vec::as_slice)),
    );
    ciphers.sort_unstable();
    let cipher_hash = if ciphers.is_empty() { ZERO_HASH.into() } else { sha256_12(&hex_list(ciphers)) };
    let mut hashed: Vec<u16> = extensions.into_iter().filter(|&e| e != 0x0000 && e != 0x0010).collect();
    hashed.sort_unstable();
    let mut ext_text = hex_list(hashed);
    let sigalgs: Vec<u16> = non_grease(&hello.signature_algorithms).collect();
    if !sigalgs.is_empty() {
        ext_text = format!("{ext_text}_{}", hex_list(sigalgs));
    }
    let ext_hash = if ext_text.is_empty() { ZERO_HASH.into() } else { sha256_12(&ext_text) };
    format!("{part_a}_{cipher_hash}_{ext_hash}")
}

/// JA4S (TCP): `t<ver><extensions><alpn>_<cipher>_<extension hash>`, extensions in wire order.
pub fn ja4s(hello: &ServerHello) -> String {
    let part_a = format!(
        "t{}{}{}",
        ja4_version(hello.negotiated_version()),
        count2(hello.extensions.len()),
        ja4_alpn(hello.alpn.as_deref())
    );
    let ext_hash =
        if hello.extensions.is_empty() { ZERO_HASH.into() } else { sha256_12(&hex_list(hello.extensions.clone())) };
    format!("{part_a}_{:04x}_{ext_hash}", hello.cipher)
}

/// JA4L for one TCP handshake: `JA4L-S` is half the SYN → SYN-ACK time in microseconds and the
/// server's TTL, `JA4L-C` half the SYN-ACK → ACK time and the client's TTL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ja4l {
    pub client: Option<String>,
    pub server: String,
}

pub fn ja4l(syn_us: i64, syn_ack_us: i64, ack_us: Option<i64>, client_ttl: u8, server_ttl: u8) -> Ja4l {
    Ja4l {
        server: format!("{}_{server_ttl}", (syn_ack_us - syn_us) / 2),
        client: ack_us.map(|ack| format!("{}_{client_ttl}", (ack - syn_ack_us) / 2)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chrome-like hello with GREASE everywhere it may appear.
    fn hello() -> ClientHello {
        ClientHello {
            version: 0x0303,
            ciphers: vec![0x2a2a, 0x1301, 0x1302, 0xc02b],
            extensions: vec![0x1a1a, 0x0000, 0x0017, 0x0010, 0x000a, 0x000b, 0x000d, 0x002b, 0xfafa],
            groups: vec![0x3a3a, 0x001d, 0x0017],
            point_formats: vec![0],
            signature_algorithms: vec![0x0403, 0x0804],
            supported_versions: vec![0x4a4a, 0x0304, 0x0303],
            sni: Some("example.com".into()),
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            ..ClientHello::default()
        }
    }

    #[test]
    fn grease_is_recognised() {
        assert!(is_grease(0x0a0a) && is_grease(0xfafa) && is_grease(0x3a3a));
        assert!(!is_grease(0x0a1a) && !is_grease(0x1301) && !is_grease(0x0000));
    }

    #[test]
    fn ja3_drops_grease_and_keeps_wire_order() {
        assert_eq!(ja3_string(&hello()), "771,4865-4866-49195,0-23-16-10-11-13-43,29-23,0");
        assert_eq!(ja3(&hello()), md5_hex("771,4865-4866-49195,0-23-16-10-11-13-43,29-23,0"));
        let empty = ClientHello { version: 0x0301, ciphers: vec![47], ..ClientHello::default() };
        assert_eq!(ja3_string(&empty), "769,47,,,");
    }

    #[test]
    fn ja4_follows_the_foxio_layout() {
        let ja4 = ja4(&hello());
        // 3 ciphers, 7 extensions (GREASE out, SNI and ALPN counted), TLS 1.3 from supported_versions.
        assert!(ja4.starts_with("t13d0307h2_"), "{ja4}");
        let ciphers = sha256_12("1301,1302,c02b");
        let exts = sha256_12("000a,000b,000d,0017,002b_0403,0804");
        assert_eq!(ja4, format!("t13d0307h2_{ciphers}_{exts}"));
    }

    #[test]
    fn ja4_alpn_ends_follow_the_specification() {
        assert_eq!(ja4_alpn(None), "00");
        assert_eq!(ja4_alpn(Some(b"h")), "hh");
        assert_eq!(ja4_alpn(Some(b"http/1.1")), "h1");
        assert_eq!(ja4_alpn(Some(&[0xba, 0xad])), "99");
        assert_eq!(ja4_alpn(Some(&[b'h', 0x1f])), "99");
    }

    #[test]
    fn ja4_without_anything_hashes_to_zeros() {
        let bare = ClientHello { version: 0x0300, ..ClientHello::default() };
        assert_eq!(ja4(&bare), "ts3i000000_000000000000_000000000000");
    }

    #[test]
    fn ja3s_and_ja4s_read_the_server_choice() {
        let server = ServerHello {
            version: 0x0303,
            cipher: 0x1301,
            extensions: vec![0x002b, 0x0033],
            selected_version: Some(0x0304),
            alpn: None,
        };
        assert_eq!(ja3s_string(&server), "771,4865,43-51");
        assert_eq!(ja4s(&server), format!("t130200_1301_{}", sha256_12("002b,0033")));
    }

    #[test]
    fn ja4l_halves_the_round_trips() {
        let l = ja4l(1_000, 1_500, Some(2_100), 64, 128);
        assert_eq!((l.server.as_str(), l.client.as_deref()), ("250_128", Some("300_64")));
    }
}
