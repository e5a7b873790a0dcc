//! The sniffer's engine, fed one captured frame at a time (live or replayed, the same way): it
//! keeps a bounded table of the TCP flows that touch a decky, reassembles each direction's first
//! bytes, and turns what they start with into events: a ClientHello (`tls_client_hello`), a
//! ServerHello (`tls_session`, oriented client → server and carrying the client's fingerprints)
//! and, up to TLS 1.2, the server's certificate after it (`tls_certificate`), an SSH client banner (`ssh_client_banner`); a client SYN to a decky gives
//! `tcp_syn_fingerprint`. A direction is read once: after its hello (or once it is plainly not one)
//! its bytes are released, so an idle open flow costs a few hundred bytes. Flows expire when idle;
//! when the table is full a new flow is refused and counted, never an old one's state corrupted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use svc::logline::Severity;

use super::deckies::DeckyMap;
use super::events::{Dedup, SnifferEvent};
use super::fingerprint;
use super::packet::{self, ACK, FIN, LinkType, RST, SYN, Segment};
use super::reassembly::Stream;
use super::syn::SynHistory;
use super::tls::{self, Certificate, ClientHello, Progress, ServerHello};

/// The bounds of the engine's memory and its windows.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Flows tracked at once.
    pub max_flows: usize,
    /// Bytes kept from the start of each direction.
    pub flow_bytes: usize,
    /// A flow with no packet for this long is forgotten.
    pub flow_idle_us: i64,
    /// One event per attacker and fingerprint within this window.
    pub dedup_window_us: i64,
}

/// What the engine has done, for the heartbeat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub frames: u64,
    /// New flows not tracked because the table was full.
    pub flows_refused: u64,
    pub handshakes: u64,
    pub events: u64,
}

/// Remembered dedup keys at most (a bound, not a window): 16 bytes each.
const MAX_DEDUP: usize = 1_000_000;
/// Source addresses whose SYNs are remembered at most.
const MAX_SYN_SOURCES: usize = 100_000;
/// The longest SSH banner line read (RFC 4253 allows 255 bytes).
const MAX_BANNER: usize = 255;
/// Expired flows are looked for this often (capture time).
const SWEEP_EVERY_US: i64 = 1_000_000;

pub struct Sniffer {
    limits: Limits,
    deckies: Arc<DeckyMap>,
    flows: HashMap<FlowKey, Flow>,
    dedup: Dedup,
    syns: SynHistory,
    stats: Stats,
    next_sweep_us: i64,
}

/// A flow's two endpoints, the lower first, so both directions find it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct FlowKey(SocketAddr, SocketAddr);

impl FlowKey {
    /// The key and which direction (0: from the lower endpoint) `seg` travels.
    fn of(seg: &Segment<'_>) -> (FlowKey, usize) {
        if seg.src <= seg.dst { (FlowKey(seg.src, seg.dst), 0) } else { (FlowKey(seg.dst, seg.src), 1) }
    }
}

#[derive(Default)]
struct Direction {
    stream: Stream,
    reading: Reading,
    fin: bool,
}

/// What a direction's bytes are read for next.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Reading {
    /// Its first message: a hello or a banner.
    #[default]
    Start,
    /// The Certificate after a TLS ≤ 1.2 ServerHello.
    Certificate,
    /// Nothing more: its bytes are let go.
    Done,
}

/// The client's fingerprints, kept for the `tls_session` that follows.
struct HelloFields {
    ja3: String,
    ja4: String,
    /// sni, alpn, raw_ciphers, raw_extensions, resumption.
    fields: Vec<(String, String)>,
}

#[derive(Default)]
struct Flow {
    /// The endpoint that sent the SYN, or the ClientHello when the SYN was not seen.
    client: Option<SocketAddr>,
    dirs: [Direction; 2],
    syn: Option<(i64, u8, u32)>,
    syn_ack: Option<(i64, u8, u32)>,
    ack_us: Option<i64>,
    hello: Option<Box<HelloFields>>,
    /// The client's SNI, kept from the session until the server's certificate is read.
    sni: Option<Box<str>>,
    last_us: i64,
}

/// What a direction's first bytes turned out to hold.
enum Found {
    ClientHello(ClientHello),
    ServerHello(ServerHello),
    Certificate(Certificate),
    SshBanner(String),
}

impl Sniffer {
    pub fn new(limits: Limits, deckies: Arc<DeckyMap>) -> Sniffer {
        Sniffer {
            limits,
            deckies,
            flows: HashMap::new(),
            dedup: Dedup::new(limits.dedup_window_us, MAX_DEDUP),
            syns: SynHistory::new(MAX_SYN_SOURCES),
            stats: Stats::default(),
            next_sweep_us: i64::MIN,
        }
    }

    /// Follows a deploy or teardown: addresses are looked up in `deckies` from now on.
    pub fn set_deckies(&mut self, deckies: Arc<DeckyMap>) {
        self.deckies = deckies;
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Flows tracked now.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Reads one frame captured at `at_us` (microseconds since the epoch); events go to `out`.
    pub fn on_frame(&mut self, at_us: i64, link: LinkType, frame: &[u8], out: &mut Vec<SnifferEvent>) {
        self.stats.frames += 1;
        if at_us >= self.next_sweep_us {
            self.sweep(at_us);
        }
        let Some(seg) = packet::decode(link, frame) else { return };
        if self.deckies.decky(&seg.src.ip()).is_none() && self.deckies.decky(&seg.dst.ip()).is_none() {
            return;
        }
        let is_syn = seg.has(SYN) && !seg.has(ACK);
        if is_syn && self.deckies.decky(&seg.dst.ip()).is_some() {
            let (mut fields, identity) = self.syns.fingerprint(&seg, at_us);
            let mut all = tuple(seg.src, seg.dst);
            all.append(&mut fields);
            self.emit(at_us, seg.src, seg.dst, "tcp_syn_fingerprint", Severity::Info, &identity, all, out);
        }
        let (key, dir) = FlowKey::of(&seg);
        if !self.flows.contains_key(&key) {
            if !is_syn && seg.payload.is_empty() {
                return;
            }
            if self.flows.len() >= self.limits.max_flows {
                self.sweep(at_us);
                if self.flows.len() >= self.limits.max_flows {
                    self.stats.flows_refused += 1;
                    return;
                }
            }
        }
        if seg.has(RST) {
            self.flows.remove(&key);
            return;
        }
        let flow = self.flows.entry(key).or_default();
        flow.last_us = at_us;
        flow.track_handshake(&seg, dir, at_us);
        let found = flow.read(&seg, dir, self.limits.flow_bytes);
        if seg.has(FIN) {
            flow.dirs[dir].fin = true;
        }
        let closed = flow.dirs.iter().all(|d| d.fin);
        for found in found {
            self.report(key, &seg, found, at_us, out);
        }
        if closed {
            self.flows.remove(&key);
        }
    }

    /// Turns what a direction held into its event.
    fn report(&mut self, key: FlowKey, seg: &Segment<'_>, found: Found, at_us: i64, out: &mut Vec<SnifferEvent>) {
        let Some(flow) = self.flows.get_mut(&key) else { return };
        let ja4l = ja4l_fields(flow);
        match found {
            Found::ClientHello(hello) => {
                flow.client.get_or_insert(seg.src);
                let (ja3, ja4) = (fingerprint::ja3(&hello), fingerprint::ja4(&hello));
                let offered = hello.offered_version();
                let kept = hello_fields(&hello);
                let mut fields = tuple(seg.src, seg.dst);
                fields.push(("ja3".into(), ja3.clone()));
                fields.push(("ja4".into(), ja4.clone()));
                fields.push(("tls_version".into(), tls::version_label(offered)));
                fields.extend(kept.iter().cloned());
                fields.extend(ja4l);
                flow.hello = Some(Box::new(HelloFields { ja3: ja3.clone(), ja4: ja4.clone(), fields: kept }));
                self.stats.handshakes += 1;
                let identity = format!("{ja3}|{ja4}");
                self.emit(at_us, seg.src, seg.dst, "tls_client_hello", Severity::Info, &identity, fields, out);
            }
            Found::ServerHello(hello) => {
                let client = flow.client.unwrap_or(seg.dst);
                let (ja3s, ja4s) = (fingerprint::ja3s(&hello), fingerprint::ja4s(&hello));
                let mut fields = tuple(client, seg.src);
                fields.push(("ja3s".into(), ja3s.clone()));
                fields.push(("ja4s".into(), ja4s.clone()));
                fields.push(("tls_version".into(), tls::version_label(hello.negotiated_version())));
                // The session is the last thing a flow reports but the certificate: the client's
                // fields are let go, its SNI kept while a certificate may follow.
                let (ja3, ja4) = match flow.hello.take() {
                    Some(h) => {
                        if hello.certificate_follows() {
                            flow.sni = h
                                .fields
                                .iter()
                                .find(|(k, v)| k == "sni" && !v.is_empty())
                                .map(|(_, v)| v.as_str().into());
                        }
                        fields.push(("ja3".into(), h.ja3.clone()));
                        fields.push(("ja4".into(), h.ja4.clone()));
                        fields.extend(h.fields);
                        (h.ja3, h.ja4)
                    }
                    None => (String::new(), String::new()),
                };
                fields.extend(ja4l);
                let identity = format!("{ja3}|{ja3s}|{ja4}|{ja4s}");
                self.emit(at_us, client, seg.src, "tls_session", Severity::Warning, &identity, fields, out);
            }
            Found::Certificate(cert) => {
                let client = flow.client.unwrap_or(seg.dst);
                let mut fields = tuple(client, seg.src);
                let identity = format!("{}|{}", cert.subject_cn, cert.issuer);
                fields.push(("subject_cn".into(), cert.subject_cn));
                fields.push(("issuer".into(), cert.issuer));
                fields.push(("self_signed".into(), cert.self_signed.to_string()));
                fields.push(("not_before".into(), cert.not_before));
                fields.push(("not_after".into(), cert.not_after));
                if !cert.sans.is_empty() {
                    fields.push(("sans".into(), cert.sans.join(",")));
                }
                if let Some(sni) = flow.sni.take() {
                    fields.push(("sni".into(), sni.into()));
                }
                self.emit(at_us, client, seg.src, "tls_certificate", Severity::Info, &identity, fields, out);
            }
            Found::SshBanner(banner) => {
                let from_client = match flow.client {
                    Some(client) => client == seg.src,
                    None => self.deckies.decky(&seg.src.ip()).is_none(),
                };
                if from_client {
                    let mut fields = tuple(seg.src, seg.dst);
                    fields.push(("ssh_version".into(), banner.clone()));
                    self.emit(at_us, seg.src, seg.dst, "ssh_client_banner", Severity::Info, &banner, fields, out);
                }
            }
        }
    }

    /// Emits an event about `client` → `server` unless its attacker sent the same fingerprint
    /// within the window. The decky is the server's, or the client's when the server is none.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        at_us: i64,
        client: SocketAddr,
        server: SocketAddr,
        kind: &'static str,
        severity: Severity,
        identity: &str,
        fields: Vec<(String, String)>,
        out: &mut Vec<SnifferEvent>,
    ) {
        let (decky, attacker) = match self.deckies.decky(&server.ip()) {
            Some(decky) => (decky, client.ip()),
            None => match self.deckies.decky(&client.ip()) {
                Some(decky) => (decky, server.ip()),
                None => return,
            },
        };
        if !self.dedup.first(&attacker.to_string(), kind, identity, at_us) {
            return;
        }
        self.stats.events += 1;
        out.push(SnifferEvent { at_us, decky: decky.to_string(), kind, severity, fields });
    }

    /// Forgets idle flows and expired windows.
    fn sweep(&mut self, now_us: i64) {
        let idle = self.limits.flow_idle_us;
        self.flows.retain(|_, flow| now_us - flow.last_us < idle);
        self.dedup.sweep(now_us);
        self.syns.forget_before(now_us.saturating_sub(3_600_000_000));
        self.next_sweep_us = now_us.saturating_add(SWEEP_EVERY_US);
    }
}

impl Flow {
    /// Notes the SYN, SYN-ACK and the client's ACK that completes the handshake, for JA4L and
    /// for where each direction's bytes start.
    fn track_handshake(&mut self, seg: &Segment<'_>, dir: usize, at_us: i64) {
        if seg.has(SYN) && !seg.has(ACK) && self.syn.is_none() {
            self.client = Some(seg.src);
            self.syn = Some((at_us, seg.ttl, seg.seq));
            self.dirs[dir].stream.syn(seg.seq);
        } else if seg.has(SYN) && seg.has(ACK) && self.syn_ack.is_none() {
            self.syn_ack = Some((at_us, seg.ttl, seg.seq));
            self.dirs[dir].stream.syn(seg.seq);
        } else if !seg.has(SYN)
            && seg.has(ACK)
            && self.ack_us.is_none()
            && self.client == Some(seg.src)
            && let (Some((_, _, client_isn)), Some((_, _, server_isn))) = (self.syn, self.syn_ack)
            && seg.seq == client_isn.wrapping_add(1)
            && seg.ack == server_isn.wrapping_add(1)
        {
            self.ack_us = Some(at_us);
        }
    }

    /// Adds the segment to its direction and, when the bytes grew, looks at what they hold: the
    /// first message and, after a TLS ≤ 1.2 ServerHello, the certificate (both may be in one segment).
    fn read(&mut self, seg: &Segment<'_>, dir: usize, cap: usize) -> Vec<Found> {
        let direction = &mut self.dirs[dir];
        let mut found = Vec::new();
        if direction.reading == Reading::Done || !direction.stream.push(seg.seq, seg.payload, cap) {
            return found;
        }
        loop {
            let bytes = direction.stream.bytes();
            let progress = match direction.reading {
                Reading::Start => inspect(bytes),
                Reading::Certificate => match tls::certificate(bytes) {
                    Progress::Done(cert) => Progress::Done(Found::Certificate(cert)),
                    Progress::Need => Progress::Need,
                    Progress::Not => Progress::Not,
                },
                Reading::Done => Progress::Not,
            };
            // A message that never completes within the kept bytes is given up.
            if matches!(progress, Progress::Need) && bytes.len() < cap {
                return found;
            }
            let next = match &progress {
                Progress::Done(Found::ServerHello(hello)) if hello.certificate_follows() => Reading::Certificate,
                _ => Reading::Done,
            };
            if let Progress::Done(message) = progress {
                found.push(message);
            }
            direction.reading = next;
            if next == Reading::Done {
                direction.stream.release();
                return found;
            }
        }
    }
}

/// What a direction's first bytes hold: a TLS hello, an SSH banner, or nothing we read.
fn inspect(bytes: &[u8]) -> Progress<Found> {
    match bytes.first() {
        None => Progress::Need,
        Some(0x16) => match tls::client_hello(bytes) {
            Progress::Done(hello) => Progress::Done(Found::ClientHello(hello)),
            Progress::Need => Progress::Need,
            Progress::Not => match tls::server_hello(bytes) {
                Progress::Done(hello) => Progress::Done(Found::ServerHello(hello)),
                Progress::Need => Progress::Need,
                Progress::Not => Progress::Not,
            },
        },
        Some(b'S') => ssh_banner(bytes),
        Some(_) => Progress::Not,
    }
}

fn ssh_banner(bytes: &[u8]) -> Progress<Found> {
    let head = &bytes[..bytes.len().min(4)];
    if !b"SSH-".starts_with(head) {
        return Progress::Not;
    }
    let window = &bytes[..bytes.len().min(MAX_BANNER)];
    match window.iter().position(|&b| b == b'\n') {
        Some(end) if head == b"SSH-" => {
            let line = String::from_utf8_lossy(&window[..end]);
            Progress::Done(Found::SshBanner(line.trim_end_matches('\r').to_string()))
        }
        Some(_) => Progress::Not,
        None if bytes.len() < MAX_BANNER => Progress::Need,
        None => Progress::Not,
    }
}

fn tuple(client: SocketAddr, server: SocketAddr) -> Vec<(String, String)> {
    vec![
        ("src_ip".into(), client.ip().to_string()),
        ("src_port".into(), client.port().to_string()),
        ("dst_ip".into(), server.ip().to_string()),
        ("dst_port".into(), server.port().to_string()),
    ]
}

/// The ClientHello fields a `tls_session` repeats: sni, alpn, raw_ciphers, raw_extensions and,
/// when the client tried to resume, resumption.
fn hello_fields(hello: &ClientHello) -> Vec<(String, String)> {
    let alpn: Vec<String> = hello.alpn.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let mut fields = vec![
        ("sni".into(), hello.sni.clone().unwrap_or_default()),
        ("alpn".into(), alpn.join(",")),
        ("raw_ciphers".into(), fingerprint::ja3_list(&hello.ciphers)),
        ("raw_extensions".into(), fingerprint::ja3_list(&hello.extensions)),
    ];
    let resumption: Vec<&str> = [
        (hello.session_ticket, "session_ticket"),
        (hello.psk, "psk"),
        (hello.early_data, "early_data_0rtt"),
        (hello.session_id, "session_id"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if !resumption.is_empty() {
        fields.push(("resumption".into(), resumption.join(",")));
    }
    fields
}

/// JA4L once the SYN and SYN-ACK were seen, with DECNET's names for the same measure beside it.
fn ja4l_fields(flow: &Flow) -> Vec<(String, String)> {
    let (Some((syn_us, client_ttl, _)), Some((syn_ack_us, server_ttl, _))) = (flow.syn, flow.syn_ack) else {
        return Vec::new();
    };
    let ja4l = fingerprint::ja4l(syn_us, syn_ack_us, flow.ack_us, client_ttl, server_ttl);
    let mut fields = vec![("ja4l_s".into(), ja4l.server)];
    if let Some(client) = ja4l.client {
        fields.push(("ja4l_c".into(), client));
    }
    fields.push(("ja4l_rtt_ms".into(), format!("{:.2}", (syn_ack_us - syn_us) as f64 / 1000.0)));
    fields.push(("ja4l_client_ttl".into(), client_ttl.to_string()));
    fields
}
