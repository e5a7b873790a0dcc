//! Reading a TLS ClientHello or ServerHello out of the first bytes of a reassembled stream, with
//! `tls-parser` doing the parsing: records are unwrapped and their handshake fragments joined (a
//! hello may span records as well as segments), then the hello and each of its extensions are
//! parsed. Extensions are listed in wire order by their type numbers even when one's content is
//! malformed, because the fingerprints count and hash types, not contents.

use tls_parser::{
    TlsExtension, TlsMessage, TlsMessageHandshake, TlsRecordType, parse_tls_client_hello_extension,
    parse_tls_message_handshake, parse_tls_raw_record, parse_tls_server_hello_extension,
};

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
}

const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
/// A hello larger than this is not one we wait for (real ones are a few kB at most).
const MAX_HELLO: usize = 16 * 1024;

/// The ClientHello at the start of `stream`.
pub fn client_hello(stream: &[u8]) -> Progress<ClientHello> {
    first_handshake(stream, CLIENT_HELLO).and_then(|message| match parse_tls_message_handshake(&message) {
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
    first_handshake(stream, SERVER_HELLO).and_then(|message| match parse_tls_message_handshake(&message) {
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

impl<T> Progress<T> {
    fn and_then<U>(self, f: impl FnOnce(T) -> Progress<U>) -> Progress<U> {
        match self {
            Progress::Done(value) => f(value),
            Progress::Need => Progress::Need,
            Progress::Not => Progress::Not,
        }
    }
}

/// The first handshake message of the stream, header included, when it is of type `wanted`:
/// handshake records are unwrapped and their contents joined until the message is whole.
fn first_handshake(mut stream: &[u8], wanted: u8) -> Progress<Vec<u8>> {
    let mut message = Vec::new();
    loop {
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
        message.extend_from_slice(record.data);
        if message.first().is_some_and(|&kind| kind != wanted) {
            return Progress::Not;
        }
        if message.len() >= 4 {
            let len = 4 + (usize::from(message[1]) << 16 | usize::from(message[2]) << 8 | usize::from(message[3]));
            if len > MAX_HELLO {
                return Progress::Not;
            }
            if message.len() >= len {
                message.truncate(len);
                return Progress::Done(message);
            }
        }
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
