//! Reading a TLS ClientHello or ServerHello (and, up to TLS 1.2, the server's Certificate after
//! it) out of the first bytes of a reassembled stream, with `tls-parser` doing the parsing and
//! `x509-parser` reading the certificate: records are unwrapped and their handshake fragments
//! joined (a message may span records as well as segments), then the message and each of its
//! extensions are parsed. Extensions are listed in wire order by their type numbers even when one's content is
//! malformed, because the fingerprints count and hash types, not contents.

use std::net::IpAddr;

use chrono::{DateTime, SecondsFormat};
use tls_parser::{
    TlsExtension, TlsMessage, TlsMessageHandshake, TlsRecordType, parse_tls_client_hello_extension,
    parse_tls_message_handshake, parse_tls_raw_record, parse_tls_server_hello_extension,
};
use x509_parser::prelude::{ASN1Time, AttributeTypeAndValue, FromDer, GeneralName, X509Certificate, X509Name};

/// What a stream's first bytes say so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress<T> {
    /// Could still become a hello: wait for more bytes.
    Need,
    Done(T),
    /// Not the hello we look for (not TLS, another message first, or malformed).
    Not,
}

/// The GREASE values (RFC 8701): `0x0a0a`, `0x1a1a` … `0xfafa`.
pub fn is_grease(value: u16) -> bool {
    value & 0x0f0f == 0x0a0a && value >> 8 == value & 0xff
}

/// A ClientHello as the fingerprints read it. Lists keep GREASE values; each fingerprint drops
/// them as its specification says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// The legacy `client_version`.
    pub version: u16,
    pub ciphers: Vec<u16>,
    /// Extension types in wire order.
    pub extensions: Vec<u16>,
    pub groups: Vec<u16>,
    pub point_formats: Vec<u8>,
    pub signature_algorithms: Vec<u16>,
    pub supported_versions: Vec<u16>,
    /// The first host name of the server_name extension.
    pub sni: Option<String>,
    pub alpn: Vec<Vec<u8>>,
    pub session_id: bool,
    pub session_ticket: bool,
    pub psk: bool,
    pub early_data: bool,
}

/// A ServerHello as the fingerprints read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerHello {
    /// The legacy `server_version`.
    pub version: u16,
    pub cipher: u16,
    pub extensions: Vec<u16>,
    /// The `supported_versions` selection (TLS 1.3).
    pub selected_version: Option<u16>,
    pub alpn: Option<Vec<u8>>,
}

impl ServerHello {
    /// The version the session runs: the selected one for TLS 1.3, else the legacy field.
    pub fn negotiated_version(&self) -> u16 {
        self.selected_version.unwrap_or(self.version)
    }

    /// Whether the server's certificate follows in the clear: up to TLS 1.2 it does (unless the
    /// session resumes or the suite is anonymous, which the next message tells); from 1.3 it is
    /// encrypted.
    pub fn certificate_follows(&self) -> bool {
        self.negotiated_version() <= 0x0303
    }
}

/// The server's own (leaf) certificate, as `tls_certificate` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Certificate {
    /// The subject's first common name.
    pub subject_cn: String,
    /// The issuer's name, `CN=…, O=…` in the certificate's order.
    pub issuer: String,
    /// Issued by itself: the issuer's name is the subject's.
    pub self_signed: bool,
    /// RFC 3339, UTC.
    pub not_before: String,
    pub not_after: String,
    /// DNS names and IP addresses of the subjectAltName extension, in order.
    pub sans: Vec<String>,
}

const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const CERTIFICATE: u8 = 11;
/// A hello larger than this is not one we wait for (real ones are a few kB at most).
const MAX_HELLO: usize = 16 * 1024;
/// Nor a certificate chain larger than this (real ones are a few kB; the stream's cap bounds it too).
const MAX_CERTIFICATES: usize = 64 * 1024;

/// The ClientHello at the start of `stream`.
pub fn client_hello(stream: &[u8]) -> Progress<ClientHello> {
    handshake(stream, &[CLIENT_HELLO], MAX_HELLO).and_then(|message| match parse_tls_message_handshake(&message) {
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello)))) => {
            let mut out = ClientHello {
                version: hello.version.0,
                ciphers: hello.ciphers.iter().map(|c| c.0).collect(),
                session_id: hello.session_id.is_some_and(|id| !id.is_empty()),
                ..ClientHello::default()
            };
            for (kind, raw) in extensions(hello.ext.unwrap_or_default()) {
                out.extensions.push(kind);
                if let Ok((_, ext)) = parse_tls_client_hello_extension(raw) {
                    out.read(ext);
                }
            }
            Progress::Done(out)
        }
        _ => Progress::Not,
    })
}

impl ClientHello {
    /// The highest version offered: from `supported_versions` (GREASE aside), else the legacy field.
    pub fn offered_version(&self) -> u16 {
        self.supported_versions.iter().copied().filter(|&v| !is_grease(v)).max().unwrap_or(self.version)
    }

    fn read(&mut self, ext: TlsExtension<'_>) {
        match ext {
            TlsExtension::SNI(names) => {
                self.sni = names.first().map(|(_, name)| String::from_utf8_lossy(name).into_owned());
            }
            TlsExtension::EllipticCurves(groups) => self.groups = groups.iter().map(|g| g.0).collect(),
            TlsExtension::EcPointFormats(formats) => self.point_formats = formats.to_vec(),
            TlsExtension::SignatureAlgorithms(algs) => self.signature_algorithms = algs,
            TlsExtension::SupportedVersions(versions) => {
                self.supported_versions = versions.iter().map(|v| v.0).collect();
            }
            TlsExtension::ALPN(names) => self.alpn = names.iter().map(|n| n.to_vec()).collect(),
            TlsExtension::SessionTicket(ticket) => self.session_ticket = !ticket.is_empty(),
            TlsExtension::PreSharedKey(_) => self.psk = true,
            TlsExtension::EarlyData(_) => self.early_data = true,
            _ => {}
        }
    }
}

/// The ServerHello at the start of `stream`.
pub fn server_hello(stream: &[u8]) -> Progress<ServerHello> {
    handshake(stream, &[SERVER_HELLO], MAX_HELLO).and_then(|message| match parse_tls_message_handshake(&message) {
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ServerHello(hello)))) => {
            let mut out = ServerHello { version: hello.version.0, cipher: hello.cipher.0, ..ServerHello::default() };
            for (kind, raw) in extensions(hello.ext.unwrap_or_default()) {
                out.extensions.push(kind);
                match parse_tls_server_hello_extension(raw) {
                    Ok((_, TlsExtension::SupportedVersions(v))) => out.selected_version = v.first().map(|v| v.0),
                    Ok((_, TlsExtension::ALPN(names))) => out.alpn = names.first().map(|n| n.to_vec()),
                    _ => {}
                }
            }
            Progress::Done(out)
        }
        _ => Progress::Not,
    })
}

/// The Certificate that follows the ServerHello at the start of `stream` (TLS ≤ 1.2): its first
/// entry, the server's own certificate, read as X.509.
pub fn certificate(stream: &[u8]) -> Progress<Certificate> {
    handshake(stream, &[SERVER_HELLO, CERTIFICATE], MAX_CERTIFICATES).and_then(|message| {
        match parse_tls_message_handshake(&message) {
            Ok((_, TlsMessage::Handshake(TlsMessageHandshake::Certificate(chain)))) => {
                match chain.cert_chain.first().map(|leaf| X509Certificate::from_der(leaf.data)) {
                    Some(Ok((_, leaf))) => Progress::Done(certificate_fields(&leaf)),
                    _ => Progress::Not,
                }
            }
            _ => Progress::Not,
        }
    })
}

/// A certificate's fields from its DER, as `tls_certificate` reports them (the prober's too).
pub fn certificate_from_der(der: &[u8]) -> Option<Certificate> {
    X509Certificate::from_der(der).ok().map(|(_, cert)| certificate_fields(&cert))
}

fn certificate_fields(cert: &X509Certificate<'_>) -> Certificate {
    let subject_cn = cert.subject().iter_common_name().next().map(attribute_text).unwrap_or_default();
    let sans = match cert.subject_alternative_name() {
        Ok(Some(ext)) => ext.value.general_names.iter().filter_map(general_name_text).collect(),
        _ => Vec::new(),
    };
    Certificate {
        subject_cn,
        issuer: name_text(cert.issuer()),
        self_signed: cert.issuer().as_raw() == cert.subject().as_raw(),
        not_before: time_text(cert.validity().not_before),
        not_after: time_text(cert.validity().not_after),
        sans,
    }
}

/// A distinguished name as `CN=…, O=…`, attributes in the certificate's order; types without a
/// short name are written as their dotted OID.
fn name_text(name: &X509Name<'_>) -> String {
    let attributes = name.iter_rdn().flat_map(|rdn| rdn.iter()).map(|attr| {
        let kind = match attr.attr_type().to_id_string().as_str() {
            "2.5.4.3" => "CN".to_string(),
            "2.5.4.6" => "C".to_string(),
            "2.5.4.7" => "L".to_string(),
            "2.5.4.8" => "ST".to_string(),
            "2.5.4.10" => "O".to_string(),
            "2.5.4.11" => "OU".to_string(),
            other => other.to_string(),
        };
        format!("{kind}={}", attribute_text(attr))
    });
    attributes.collect::<Vec<_>>().join(", ")
}

fn attribute_text(attr: &AttributeTypeAndValue<'_>) -> String {
    match attr.as_str() {
        Ok(text) => text.to_string(),
        Err(_) => String::from_utf8_lossy(attr.attr_value().data).into_owned(),
    }
}

fn general_name_text(name: &GeneralName<'_>) -> Option<String> {
    match name {
        GeneralName::DNSName(dns) => Some((*dns).to_string()),
        GeneralName::IPAddress(bytes) => match bytes.len() {
            4 => <[u8; 4]>::try_from(*bytes).ok().map(|b| IpAddr::from(b).to_string()),
            16 => <[u8; 16]>::try_from(*bytes).ok().map(|b| IpAddr::from(b).to_string()),
            _ => None,
        },
        _ => None,
    }
}

fn time_text(time: ASN1Time) -> String {
    DateTime::from_timestamp(time.timestamp(), 0)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}

impl<T> Progress<T> {
    fn and_then<U>(self, f: impl FnOnce(T) -> Progress<U>) -> Progress<U> {
        match self {
            Progress::Done(value) => f(value),
            Progress::Need => Progress::Need,
            Progress::Not => Progress::Not,
        }
    }
}

/// The last of the handshake messages at the start of the stream whose types are `kinds`, in
/// that order, header included: handshake records are unwrapped and their contents joined (a
/// message may span records, and a record hold several messages) until that message is whole.
/// Another message type, or anything but a handshake record before it (a ChangeCipherSpec,
/// encrypted data), means it is not there.
fn handshake(mut stream: &[u8], kinds: &[u8], max: usize) -> Progress<Vec<u8>> {
    let mut joined = Vec::new();
    let (mut start, mut seen) = (0, 0);
    loop {
        if joined.get(start).is_some_and(|&kind| kind != kinds[seen]) {
            return Progress::Not;
        }
        if let Some(header) = joined.get(start..start + 4) {
            let len = 4 + (usize::from(header[1]) << 16 | usize::from(header[2]) << 8 | usize::from(header[3]));
            if len > max {
                return Progress::Not;
            }
            if joined.len() - start >= len {
                if seen + 1 == kinds.len() {
                    return Progress::Done(joined[start..start + len].to_vec());
                }
                (start, seen) = (start + len, seen + 1);
                continue;
            }
        }
        if stream.is_empty() {
            return Progress::Need;
        }
        let record = match parse_tls_raw_record(stream) {
            Ok((rest, record)) => {
                stream = rest;
                record
            }
            Err(nom::Err::Incomplete(_)) => return Progress::Need,
            Err(_) => return Progress::Not,
        };
        if record.hdr.record_type != TlsRecordType::Handshake || record.hdr.version.0 >> 8 != 3 {
            return Progress::Not;
        }
        joined.extend_from_slice(record.data);
    }
}

/// Each extension's type and its whole bytes (type and length included), in wire order, up to the
/// first one that does not fit.
fn extensions(mut block: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while block.len() >= 4 {
        let kind = u16::from_be_bytes([block[0], block[1]]);
        let len = 4 + usize::from(u16::from_be_bytes([block[2], block[3]]));
        let Some(raw) = block.get(..len) else { break };
        out.push((kind, raw));
        block = &block[len..];
    }
    out
}

/// A version's name as DECNET writes it (`TLS 1.3`, `SSL 3.0`).
pub fn version_label(version: u16) -> String {
    match version {
        0x0304 => "TLS 1.3".into(),
        0x0303 => "TLS 1.2".into(),
        0x0302 => "TLS 1.1".into(),
        0x0301 => "TLS 1.0".into(),
        0x0300 => "SSL 3.0".into(),
        0x0002 => "SSL 2.0".into(),
        other => format!("0x{other:04x}"),
    }
}
