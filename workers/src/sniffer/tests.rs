//! The parser and the engine against a real handshake (recorded from `openssl s_client -tls1_2
//! -servername a.example` against `openssl s_server`; the expected values are tshark's JA3/JA3S and
//! FoxIO `ja4plus`'s JA4/JA4S of that recording), and against hostile input: truncated and mutated
//! records, hellos split over records and segments, random frames. Nothing panics and the flow
//! table never exceeds its bound.

use std::net::SocketAddr;
use std::sync::Arc;

use proptest::prelude::*;
use rcgen::{CertificateParams, DistinguishedName, DnType, Issuer, KeyPair, SanType, date_time_ymd};

use super::deckies::{Decky, DeckyMap};
use super::engine::{Limits, Sniffer};
use super::fingerprint;
use super::packet::{ACK, FIN, LinkType, SYN};
use super::samples::{client_hello, frame, server_hello};
use super::tls::{self, Progress};

#[test]
fn a_recorded_handshake_gives_the_reference_fingerprints() {
    let Progress::Done(hello) = tls::client_hello(&client_hello()) else { panic!("a ClientHello") };
    assert_eq!(hello.sni.as_deref(), Some("a.example"));
    assert_eq!(fingerprint::ja3(&hello), "871a754af286dfb70c1b53c6887c62e0");
    assert_eq!(fingerprint::ja4(&hello), "t12d280700_d943125447b4_e7e480e5a997");
    let Progress::Done(server) = tls::server_hello(&server_hello()) else { panic!("a ServerHello") };
    assert_eq!(fingerprint::ja3s(&server), "ec74a5c51106f0419184d0dd08fb05bc");
    assert_eq!(fingerprint::ja4s(&server), "t120400_c030_12a20535f9be");
    assert_eq!(tls::client_hello(&server_hello()), Progress::Not, "a ServerHello is no ClientHello");
}

/// The hello's handshake message re-framed into records of `size` bytes each.
fn in_records(record: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in record[5..].chunks(size) {
        out.extend_from_slice(&[0x16, 0x03, 0x01]);
        out.extend_from_slice(&(piece.len() as u16).to_be_bytes());
        out.extend_from_slice(piece);
    }
    out
}

#[test]
fn a_hello_split_over_records_reads_the_same() {
    let record = client_hello();
    let whole = tls::client_hello(&record);
    for size in [1, 7, 64, 150] {
        assert_eq!(tls::client_hello(&in_records(&record, size)), whole, "records of {size} bytes");
    }
}

proptest! {
    #[test]
    fn every_truncation_waits_for_more(len in 0usize..206) {
        let record = client_hello();
        prop_assert_eq!(tls::client_hello(&record[..len.min(record.len() - 1)]), Progress::Need);
    }

    #[test]
    fn mutated_hellos_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut record = client_hello();
        for (at, byte) in flips {
            let i = at.index(record.len());
            record[i] = byte;
        }
        if let Progress::Done(hello) = tls::client_hello(&record) {
            let _ = (fingerprint::ja3(&hello), fingerprint::ja4(&hello));
        }
        if let Progress::Done(hello) = tls::server_hello(&record) {
            let _ = (fingerprint::ja3s(&hello), fingerprint::ja4s(&hello));
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = tls::client_hello(&bytes);
        let _ = tls::server_hello(&bytes);
        let mut framed = vec![0x16, 0x03, 0x01, (bytes.len() >> 8) as u8, bytes.len() as u8];
        framed.extend_from_slice(&bytes);
        let _ = tls::client_hello(&framed);
    }
}

const CLIENT: &str = "198.51.100.7";
const DECKY_IP: &str = "10.0.0.2";

fn engine(max_flows: usize) -> Sniffer {
    let decky = Decky { name: "decky-a".into(), ip: DECKY_IP.parse().unwrap() };
    let limits = Limits { max_flows, flow_bytes: 4096, flow_idle_us: 60_000_000, dedup_window_us: 300_000_000 };
    Sniffer::new(limits, Arc::new(DeckyMap::new([decky])))
}

/// One handshake with its ClientHello in `pieces` segments delivered in `order`.
fn handshake(
    sniffer: &mut Sniffer,
    port: u16,
    order: &[usize],
    pieces: usize,
    out: &mut Vec<super::events::SnifferEvent>,
) {
    let client: SocketAddr = format!("{CLIENT}:{port}").parse().unwrap();
    let server: SocketAddr = format!("{DECKY_IP}:443").parse().unwrap();
    let hello = client_hello();
    sniffer.on_frame(1_000, LinkType::Raw, &frame(client, server, SYN, 100, 0, &[]), out);
    sniffer.on_frame(1_100, LinkType::Raw, &frame(server, client, SYN | ACK, 500, 101, &[]), out);
    sniffer.on_frame(1_150, LinkType::Raw, &frame(client, server, ACK, 101, 501, &[]), out);
    let size = hello.len().div_ceil(pieces);
    for &i in order {
        let from = (i * size).min(hello.len());
        let piece = &hello[from..((i + 1) * size).min(hello.len())];
        sniffer.on_frame(2_000, LinkType::Raw, &frame(client, server, ACK, 101 + from as u32, 501, piece), out);
    }
}

#[test]
fn a_hello_in_reversed_repeated_segments_is_reported_once_with_ja4l() {
    let mut sniffer = engine(16);
    let mut out = Vec::new();
    handshake(&mut sniffer, 40_000, &[5, 4, 4, 3, 2, 1, 0, 0, 5], 6, &mut out);
    let hellos: Vec<_> = out.iter().filter(|e| e.kind == "tls_client_hello").collect();
    assert_eq!(hellos.len(), 1);
    assert_eq!(hellos[0].field("ja3"), Some("871a754af286dfb70c1b53c6887c62e0"));
    assert_eq!((hellos[0].field("ja4l_s"), hellos[0].field("ja4l_c")), (Some("50_64"), Some("25_64")));
    assert_eq!(hellos[0].decky, "decky-a");
    // The same attacker and fingerprint on another connection within the window: not again.
    out.clear();
    handshake(&mut sniffer, 40_001, &[0, 1], 2, &mut out);
    assert!(out.iter().all(|e| e.kind != "tls_client_hello"), "{out:?}");
}

#[test]
fn a_full_table_refuses_new_flows_and_counts_them() {
    let mut sniffer = engine(4);
    let mut out = Vec::new();
    for port in 0..10 {
        handshake(&mut sniffer, 50_000 + port, &[], 1, &mut out);
    }
    assert_eq!(sniffer.flows(), 4);
    assert_eq!(sniffer.stats().flows_refused, 6);
}

proptest! {
    /// Random segments between attackers and the decky: no panic, never more flows than allowed.
    #[test]
    fn random_traffic_stays_within_bounds(
        segments in proptest::collection::vec(
            (0u16..64, any::<bool>(), any::<u8>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..300)),
            1..200,
        ),
    ) {
        let mut sniffer = engine(8);
        let mut out = Vec::new();
        let decky: SocketAddr = format!("{DECKY_IP}:443").parse().unwrap();
        for (n, (port, inbound, flags, seq, mut payload)) in segments.into_iter().enumerate() {
            if n % 3 == 0 && payload.len() > 5 {
                payload[0] = 0x16; // looks like TLS, so the parser sees it
            }
            let peer: SocketAddr = format!("{CLIENT}:{}", 40_000 + port).parse().unwrap();
            let (src, dst) = if inbound { (peer, decky) } else { (decky, peer) };
            sniffer.on_frame(n as i64 * 1_000, LinkType::Raw, &frame(src, dst, flags, seq, 0, &payload), &mut out);
            prop_assert!(sniffer.flows() <= 8);
        }
    }
}

#[test]
fn an_ssh_client_banner_and_a_syn_fingerprint_are_reported() {
    let mut sniffer = engine(16);
    let mut out = Vec::new();
    let client: SocketAddr = format!("{CLIENT}:41000").parse().unwrap();
    let server: SocketAddr = format!("{DECKY_IP}:22").parse().unwrap();
    sniffer.on_frame(1_000, LinkType::Raw, &frame(client, server, SYN, 10, 0, &[]), &mut out);
    sniffer.on_frame(1_100, LinkType::Raw, &frame(server, client, SYN | ACK, 90, 11, &[]), &mut out);
    // The server speaks first; only the client's banner is the attacker's.
    sniffer.on_frame(1_200, LinkType::Raw, &frame(server, client, ACK, 91, 11, b"SSH-2.0-OpenSSH_9.2\r\n"), &mut out);
    sniffer.on_frame(1_300, LinkType::Raw, &frame(client, server, ACK, 11, 112, b"SSH-2.0-libs"), &mut out);
    sniffer.on_frame(1_400, LinkType::Raw, &frame(client, server, ACK, 23, 112, b"sh_0.10.5\r\n"), &mut out);
    let kinds: Vec<&str> = out.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["tcp_syn_fingerprint", "ssh_client_banner"]);
    assert_eq!(out[1].field("ssh_version"), Some("SSH-2.0-libssh_0.10.5"));
    assert_eq!(
        (out[0].field("ttl"), out[0].field("initial_ttl"), out[0].field("os_guess")),
        (Some("64"), Some("64"), Some("unix"))
    );
}

/// A certificate for `decky.test` (names and addresses in its SAN), signed by a CA made with it
/// unless `self_signed`; its DER and its CA's.
fn certificate(self_signed: bool) -> (Vec<u8>, Vec<u8>) {
    let name = |cn: &str| {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        dn.push(DnType::OrganizationName, "Decoy Works");
        dn
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name = name("Decoy Root CA");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["decky.test".to_string(), "www.decky.test".to_string()]).unwrap();
    leaf.subject_alt_names.push(SanType::IpAddress("10.0.0.2".parse().unwrap()));
    leaf.subject_alt_names.push(SanType::IpAddress("fd00::2".parse().unwrap()));
    leaf.distinguished_name = name("decky.test");
    leaf.not_before = date_time_ymd(2026, 1, 2);
    leaf.not_after = date_time_ymd(2027, 3, 4);
    let leaf = if self_signed {
        leaf.self_signed(&key).unwrap()
    } else {
        leaf.signed_by(&key, &Issuer::from_params(&ca, &ca_key)).unwrap()
    };
    (leaf.der().to_vec(), ca_cert.der().to_vec())
}

/// A Certificate handshake record carrying `chain`.
fn certificate_record(chain: &[&[u8]]) -> Vec<u8> {
    let u24 = |n: usize| [(n >> 16) as u8, (n >> 8) as u8, n as u8];
    let mut entries = Vec::new();
    for cert in chain {
        entries.extend_from_slice(&u24(cert.len()));
        entries.extend_from_slice(cert);
    }
    let mut body = u24(entries.len()).to_vec();
    body.extend_from_slice(&entries);
    let mut message = vec![11];
    message.extend_from_slice(&u24(body.len()));
    message.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x03];
    record.extend_from_slice(&(message.len() as u16).to_be_bytes());
    record.extend_from_slice(&message);
    record
}

#[test]
fn the_certificate_after_a_tls12_server_hello_is_read_as_x509() {
    let (leaf, ca) = certificate(false);
    let mut flight = server_hello();
    flight.extend_from_slice(&certificate_record(&[&leaf, &ca]));
    let Progress::Done(cert) = tls::certificate(&flight) else { panic!("a certificate") };
    assert_eq!(cert.subject_cn, "decky.test");
    assert_eq!(cert.issuer, "CN=Decoy Root CA, O=Decoy Works");
    assert!(!cert.self_signed);
    assert_eq!((cert.not_before.as_str(), cert.not_after.as_str()), ("2026-01-02T00:00:00Z", "2027-03-04T00:00:00Z"));
    assert_eq!(cert.sans, ["decky.test", "www.decky.test", "10.0.0.2", "fd00::2"]);

    let (own, _) = certificate(true);
    let mut flight = server_hello();
    flight.extend_from_slice(&certificate_record(&[&own]));
    let Progress::Done(cert) = tls::certificate(&flight) else { panic!("a certificate") };
    assert!(cert.self_signed);
    assert_eq!(cert.issuer, "CN=decky.test, O=Decoy Works");

    // Each truncation waits; re-framed into small records it reads the same.
    for len in [0, 10, flight.len() / 2, flight.len() - 1] {
        assert_eq!(tls::certificate(&flight[..len]), Progress::Need, "{len} bytes");
    }
    let hello_len = server_hello().len();
    let mut reframed = server_hello();
    reframed.extend_from_slice(&in_records(&flight[hello_len..], 100));
    assert_eq!(tls::certificate(&reframed), tls::certificate(&flight));

    // A resumed session's ChangeCipherSpec, or another message, where the certificate would be.
    let mut resumed = server_hello();
    resumed.extend_from_slice(&[0x14, 0x03, 0x03, 0x00, 0x01, 0x01]);
    assert_eq!(tls::certificate(&resumed), Progress::Not);
    assert_eq!(tls::certificate(&client_hello()), Progress::Not);
}

#[test]
fn a_server_flight_over_segments_reports_the_certificate_once_with_the_sni() {
    let mut sniffer = engine(16);
    let mut out = Vec::new();
    handshake(&mut sniffer, 42_000, &[0], 1, &mut out);
    let client: SocketAddr = format!("{CLIENT}:42000").parse().unwrap();
    let server: SocketAddr = format!("{DECKY_IP}:443").parse().unwrap();
    let (leaf, ca) = certificate(false);
    let mut flight = server_hello();
    flight.extend_from_slice(&certificate_record(&[&leaf, &ca]));
    // In segments of 300 bytes, the last first; the ServerHello is whole in the first segment.
    let pieces: Vec<(usize, &[u8])> = flight.chunks(300).enumerate().map(|(i, p)| (i * 300, p)).collect();
    for &(at, piece) in pieces.iter().rev().chain(pieces.iter()) {
        sniffer.on_frame(3_000, LinkType::Raw, &frame(server, client, ACK, 501 + at as u32, 102, piece), &mut out);
    }
    let kinds: Vec<&str> = out.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["tcp_syn_fingerprint", "tls_client_hello", "tls_session", "tls_certificate"]);
    let cert = &out[3];
    assert_eq!((cert.field("src_ip"), cert.field("dst_port")), (Some(CLIENT), Some("443")));
    assert_eq!(cert.field("subject_cn"), Some("decky.test"));
    assert_eq!(cert.field("self_signed"), Some("false"));
    assert_eq!(cert.field("sans"), Some("decky.test,www.decky.test,10.0.0.2,fd00::2"));
    assert_eq!(cert.field("sni"), Some("a.example"), "the client's SNI");

    // The same certificate to the same attacker on another connection: not again; the flow closes.
    out.clear();
    handshake(&mut sniffer, 42_001, &[0], 1, &mut out);
    let client: SocketAddr = format!("{CLIENT}:42001").parse().unwrap();
    sniffer.on_frame(4_000, LinkType::Raw, &frame(server, client, ACK, 501, 102, &flight), &mut out);
    assert!(out.iter().all(|e| e.kind != "tls_certificate"), "{out:?}");
    sniffer.on_frame(
        5_000,
        LinkType::Raw,
        &frame(server, client, FIN | ACK, 501 + flight.len() as u32, 102, &[]),
        &mut out,
    );
    sniffer.on_frame(5_001, LinkType::Raw, &frame(client, server, FIN | ACK, 102, 502, &[]), &mut out);
    assert_eq!(sniffer.flows(), 1, "the closed flow is forgotten, the open one kept");
}

proptest! {
    #[test]
    fn mutated_certificates_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16)) {
        let (leaf, _) = certificate(true);
        let mut flight = server_hello();
        let hello_len = flight.len();
        flight.extend_from_slice(&certificate_record(&[&leaf]));
        for (at, byte) in flips {
            let i = hello_len + at.index(flight.len() - hello_len);
            flight[i] = byte;
        }
        let _ = tls::certificate(&flight);
    }
}
