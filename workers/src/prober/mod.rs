//! The prober worker: fingerprints the machines attacks came from. Its targets are the attackers
//! svc has stored (a new one within a poll, every one again each interval); for each it tries the
//! configured ports one after another: a plain connection first (its SYN-ACK gives the TCP/IP
//! fingerprint, `tcpfp`), then on an SSH port the server's KEXINIT (`hassh`), on a TLS port JARM's
//! ten hellos (`jarm`) and the leaf certificate (`cert`); and, before the ports, the ICMP errors
//! four stimuli draw from the target or the path to it, in its family (`icmp`). Each fingerprint is one RFC 5424 line
//! (`events`) appended to the ingest file through the same writer as the sniffer's lines, once per
//! target and fingerprint within the de-duplication window, and the ingester makes it a fingerprint
//! of the attacker.
//!
//! An active prober is a liability if it can be aimed: `policy` refuses loopback, link-local,
//! multicast, the fleet's and this host's own addresses always, private ranges unless allowed;
//! `pace` holds a global packets-per-second ceiling and a pause between connections to one target;
//! every connection has a time limit and every target a budget; every probe is logged with its
//! target. Refused targets, probes skipped for want of CAP_NET_RAW (TCP/IP, ICMP) and the work done are counters
//! of the heartbeat (`/workers`), and a prober that cannot read the attackers reports a fault.

pub mod cert;
pub mod events;
pub mod hassh;
pub mod icmp;
pub mod jarm;
pub mod pace;
pub mod policy;
pub mod tcpfp;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use svc::bus::Counters;
use svc::config::ProberConfig;
use svc::db::{AttackerWindow, ChangePosition, Db};
use svc::roster::counters::prober as counter;
use svc::worker::{WorkerBody, WorkerContext};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::sniffer::events::Dedup;
use events::ProberEvent;
use pace::Pacer;
use policy::Policy;

/// The worker's name.
pub const NAME: &str = "prober";
/// Profiles read per page while looking for new attackers.
const PAGE: u32 = 1_000;
/// Remembered (target, fingerprint) keys at most (16 bytes each).
const MAX_DEDUP: usize = 1_000_000;
/// Lines waiting for the writer at most; probes wait beyond that.
const LINE_QUEUE: usize = 256;
/// The longest wait for an ICMP error (DECNET's).
const ICMP_WAIT: Duration = Duration::from_secs(2);
/// The fault text while the attackers cannot be read.
const NO_ATTACKERS: &str = "cannot read the attackers";

/// The worker `svc worker prober` runs, and `svc api` embeds with `SVC_EMBED_PROBER`.
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, run)
}

/// What every probe task shares.
struct Probing {
    config: ProberConfig,
    pacer: Pacer,
    dedup: Mutex<Dedup>,
    counters: Counters,
    /// Whether raw sockets can be opened (CAP_NET_RAW): the SYN-ACK and the ICMP errors need one.
    raw: bool,
    lines: mpsc::Sender<ProberEvent>,
    cancel: CancellationToken,
}

/// Probes the stored attackers until the worker is stopped.
pub async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let config = ctx.config.prober.clone();
    if config.allow_private {
        tracing::warn!("SVC_PROBER_ALLOW_PRIVATE is on: attackers at private addresses are probed");
    }
    let raw = match tcpfp::Capture::open() {
        Ok(_) => true,
        Err(err) => {
            tracing::warn!(error = %err, "No raw socket (CAP_NET_RAW): the TCP/IP fingerprint and the ICMP probe are skipped");
            false
        }
    };
    let (lines, queue) = mpsc::channel(LINE_QUEUE);
    let writer = tokio::spawn(write_lines(queue, ctx.config.ingest.log_file.clone()));
    let probing = Arc::new(Probing {
        pacer: Pacer::new(config.max_pps),
        dedup: Mutex::new(Dedup::new(config.dedup_window.as_micros() as i64, MAX_DEDUP)),
        counters: ctx.counters.clone(),
        raw,
        lines,
        cancel: ctx.cancel.clone(),
        config,
    });
    let mut targets = Targets::default();
    let mut policy = Policy { allow_private: probing.config.allow_private, own: HashSet::new() };
    let mut running: JoinSet<IpAddr> = JoinSet::new();
    let mut next_poll = Instant::now();
    loop {
        if Instant::now() >= next_poll {
            poll(&ctx, &mut targets, &mut policy).await;
            ctx.counters.set(counter::TARGETS_KNOWN, targets.due.len() as u64);
            next_poll = Instant::now() + probing.config.poll;
        }
        while running.len() < probing.config.concurrency {
            let Some(ip) = targets.next_due(Instant::now()) else { break };
            match policy.judge(ip) {
                Ok(()) => {
                    targets.running.insert(ip);
                    running.spawn(probe_target(probing.clone(), ip));
                }
                Err(refusal) => {
                    tracing::info!(target_ip = %ip, reason = ?refusal, "Target not probed");
                    ctx.counters.add(refusal.counter(), 1);
                    targets.schedule(ip, Instant::now() + probing.config.interval);
                }
            }
        }
        // A due target wakes the loop only when there is room to start it; at full concurrency a
        // due time already past would make this loop spin until a probe ends.
        let room = running.len() < probing.config.concurrency;
        let wake = targets.next_time().filter(|_| room).map_or(next_poll, |due| due.min(next_poll));
        tokio::select! {
            () = ctx.cancel.cancelled() => break,
            () = tokio::time::sleep_until(wake) => {}
            Some(done) = running.join_next() => {
                if let Ok(ip) = done {
                    targets.running.remove(&ip);
                    targets.schedule(ip, Instant::now() + probing.config.interval);
                    ctx.counters.add(counter::TARGETS_PROBED, 1);
                }
            }
        }
    }
    // Probes see the cancellation and end within their current connection's time limit.
    while running.join_next().await.is_some() {}
    drop(probing);
    writer.await.context("the line writer panicked")?;
    Ok(())
}

/// The known attackers and when each is due.
#[derive(Default)]
struct Targets {
    /// Where the walk of the attackers in change order stands.
    cursor: Option<ChangePosition>,
    /// Every known address and when it is due next (one entry each in `queue`).
    due: HashMap<IpAddr, Instant>,
    queue: BinaryHeap<Reverse<(Instant, IpAddr)>>,
    running: HashSet<IpAddr>,
}

impl Targets {
    /// A new address is due now; a known one keeps its time.
    fn learn(&mut self, ip: IpAddr) -> bool {
        if self.due.contains_key(&ip) {
            return false;
        }
        self.schedule(ip, Instant::now());
        true
    }

    fn schedule(&mut self, ip: IpAddr, at: Instant) {
        self.due.insert(ip, at);
        self.queue.push(Reverse((at, ip)));
    }

    fn next_due(&mut self, now: Instant) -> Option<IpAddr> {
        while let Some(Reverse((at, ip))) = self.queue.peek().copied() {
            if at > now {
                return None;
            }
            self.queue.pop();
            if self.due.get(&ip) == Some(&at) && !self.running.contains(&ip) {
                return Some(ip);
            }
        }
        None
    }

    fn next_time(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((at, _))| *at)
    }
}

/// Reads the fleet's own addresses and the attackers stored since the last poll.
async fn poll(ctx: &WorkerContext, targets: &mut Targets, policy: &mut Policy) {
    match own_addresses(&ctx.db, &ctx.config).await {
        Ok(own) => policy.own = own,
        Err(err) => tracing::warn!(error = %format!("{err:#}"), "Cannot read the fleet's addresses; keeping the last"),
    }
    let mut learned = 0u64;
    loop {
        let page = match ctx.db.attackers_changed(&AttackerWindow::default(), targets.cursor, PAGE).await {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "Cannot read the attackers");
                ctx.fault.set(NO_ATTACKERS);
                return;
            }
        };
        for profile in &page {
            match profile.ip.parse::<IpAddr>() {
                Ok(ip) => learned += u64::from(targets.learn(policy::canonical(ip))),
                Err(_) => ctx.counters.add(counter::SKIPPED_UNPARSABLE, 1),
            }
        }
        if let Some(last) = page.last() {
            targets.cursor = Some(ChangePosition::of(last));
        }
        if page.len() < PAGE as usize {
            break;
        }
    }
    if learned > 0 {
        tracing::info!(new = learned, known = targets.due.len(), "New attackers to probe");
    }
    // A poll is this worker's unit of work: past three polls without one, it is not progressing.
    ctx.fault.worked(ctx.config.prober.poll * 3 + Duration::from_secs(30));
}

/// The deckies', the fleet network's gateway, the swarm hosts' and the master's addresses.
async fn own_addresses(db: &Db, config: &svc::config::Config) -> anyhow::Result<HashSet<IpAddr>> {
    let fleet = db.fleet().await.context("reading the fleet")?;
    let mut texts: Vec<String> = fleet.deckies.into_iter().map(|d| d.config.ip).collect();
    if let Some(network) = fleet.network {
        texts.push(network.gateway);
    }
    let hosts = db.swarm_hosts(None).await.context("reading the swarm hosts")?;
    texts.extend(hosts.into_iter().map(|h| h.address));
    texts.extend(config.swarm.agent.master_host.clone());
    texts.push(config.api.host.clone());
    Ok(texts.iter().filter_map(|t| t.parse::<IpAddr>().ok()).map(policy::canonical).collect())
}

/// Every port a probe of `config` tries, each once, in the order of the lists.
fn ports(config: &ProberConfig) -> Vec<u16> {
    let mut ports: Vec<u16> = Vec::new();
    for port in config.tcpfp_ports.iter().chain(&config.ssh_ports).chain(&config.tls_ports) {
        if !ports.contains(port) {
            ports.push(*port);
        }
    }
    ports
}

/// All the probes of one target within its budget; returns the target.
async fn probe_target(probing: Arc<Probing>, ip: IpAddr) -> IpAddr {
    let budget = probing.config.target_budget;
    let cancel = probing.cancel.clone();
    tokio::select! {
        () = cancel.cancelled() => {}
        done = tokio::time::timeout(budget, probe_ports(&probing, ip)) => {
            if done.is_err() {
                tracing::info!(target_ip = %ip, "Target's probe budget spent");
                probing.counters.add(counter::TARGETS_OVER_BUDGET, 1);
            }
        }
    }
    ip
}

async fn probe_ports(probing: &Probing, ip: IpAddr) {
    let config = &probing.config;
    probe_icmp(probing, ip).await;
    let mut first = true;
    for port in ports(config) {
        let addr = SocketAddr::new(ip, port);
        if !first {
            tokio::time::sleep(config.target_gap).await;
        }
        first = false;
        probing.pacer.connection().await;
        let Some(mut stream) = connect(probing, addr).await else { continue };
        if config.ssh_ports.contains(&port) {
            tracing::info!(target_ip = %ip, target_port = port, probe = "hassh", "Probing");
            if let Some(banner) = hassh::read_banner(&mut stream, config.timeout).await {
                if let Some(kex) = hassh::read_kexinit(&mut stream, banner, config.timeout).await {
                    report(probing, hassh_event(addr, &kex)).await;
                }
                // An SSH server speaks no TLS: the TLS probes would only cost it ten connections.
                continue;
            }
        }
        drop(stream);
        if config.tls_ports.contains(&port) {
            tracing::info!(target_ip = %ip, target_port = port, probe = "jarm", "Probing");
            let mut entries = Vec::with_capacity(10);
            for hello in jarm::hellos(addr) {
                tokio::time::sleep(config.target_gap).await;
                probing.pacer.connection().await;
                entries.push(jarm::answer_entry(&jarm::exchange(addr, &hello, config.timeout).await));
            }
            let hash = jarm::hash(&entries);
            if hash == jarm::EMPTY {
                continue;
            }
            let event = ProberEvent::new("jarm_fingerprint", addr, hash.clone(), format!("JARM {addr} = {hash}"))
                .with("jarm_hash", &hash);
            report(probing, event).await;
            tracing::info!(target_ip = %ip, target_port = port, probe = "tls_certificate", "Probing");
            tokio::time::sleep(config.target_gap).await;
            probing.pacer.connection().await;
            if let Some(leaf) = cert::fetch(addr, config.timeout).await {
                report(probing, certificate_event(addr, &leaf)).await;
            }
        }
    }
}

/// The ICMP errors four stimuli draw from `ip` or the path to it (`icmp_error` for IPv4,
/// `icmp6_error` for IPv6); reported skipped without a raw socket.
async fn probe_icmp(probing: &Probing, ip: IpAddr) {
    let kind = if ip.is_ipv4() { "icmp_error" } else { "icmp6_error" };
    if !probing.raw {
        probing.counters.add(counter::ICMP_SKIPPED, 1);
        return;
    }
    tracing::info!(target_ip = %ip, probe = kind, "Probing");
    probing.pacer.take(4.0).await;
    // Silence is common (stacks rate-limit ICMP errors): it is not waited for long.
    let wait = probing.config.timeout.min(ICMP_WAIT);
    match icmp::elicit(ip, wait).await {
        Ok((port, elicited)) if elicited.any_sent() => {
            report(probing, icmp_event(kind, SocketAddr::new(ip, port), &elicited)).await;
        }
        Ok(_) => probing.counters.add(counter::ICMP_SKIPPED, 1),
        Err(err) => {
            tracing::info!(target_ip = %ip, probe = kind, error = %err, "Probe skipped");
            probing.counters.add(counter::ICMP_SKIPPED, 1);
        }
    }
}

/// A plain connection to `addr`, with the TCP/IP fingerprint of its SYN-ACK reported when the
/// port is one of those and a raw socket can be had; `None` when closed or silent.
async fn connect(probing: &Probing, addr: SocketAddr) -> Option<TcpStream> {
    let wants_fp = probing.config.tcpfp_ports.contains(&addr.port());
    tracing::info!(target_ip = %addr.ip(), target_port = addr.port(), probe = "connect", "Probing");
    let capture = if wants_fp && probing.raw && addr.is_ipv4() { tcpfp::Capture::open().ok() } else { None };
    if wants_fp && capture.is_none() {
        probing.counters.add(counter::TCPFP_SKIPPED, 1);
    }
    let stream = tokio::time::timeout(probing.config.timeout, TcpStream::connect(addr)).await.ok()?.ok()?;
    probing.counters.add(counter::CONNECTIONS, 1);
    if let Some(capture) = capture {
        let local = stream.local_addr().ok()?.port();
        if let Some(found) = capture.syn_ack(addr, local) {
            report(probing, tcpfp_event(addr, &found)).await;
        }
    }
    Some(stream)
}

fn hassh_event(addr: SocketAddr, kex: &hassh::ServerKex) -> ProberEvent {
    let hash = kex.hassh_server();
    ProberEvent::new("hassh_fingerprint", addr, hash.clone(), format!("HASSH {addr} = {hash}"))
        .with("hassh_server_hash", &hash)
        .with("ssh_banner", &kex.banner)
        .with("kex_algorithms", &kex.kex_algorithms)
        .with("encryption_s2c", &kex.encryption_s2c)
        .with("mac_s2c", &kex.mac_s2c)
        .with("compression_s2c", &kex.compression_s2c)
}

/// One line for the four stimuli: DECNET's `matrix` and hash, and for each stimulus (its
/// `errors` key) whether it drew its error, and what came back: code, sender, bytes quoted, time.
fn icmp_event(kind: &'static str, addr: SocketAddr, elicited: &icmp::Elicited) -> ProberEvent {
    let (matrix, hash) = (elicited.matrix(), elicited.hash());
    let mut event = ProberEvent::new(kind, addr, hash.clone(), format!("ICMP {} matrix={matrix} = {hash}", addr.ip()))
        .with("matrix", &matrix)
        .with("fingerprint_hash", &hash);
    for (stimulus, answer) in elicited.pairs() {
        let name = stimulus.name;
        event = event.with(&format!("{name}_sent"), answer.sent).with(name, stimulus.returned(answer));
        if let Some(reply) = &answer.reply {
            event = event
                .with(&format!("{name}_code"), reply.icmp_code)
                .with(&format!("{name}_from"), reply.from)
                .with(&format!("{name}_echo_len"), reply.echo_len)
                .with(&format!("{name}_rtt_ms"), reply.rtt_ms);
        }
    }
    event
}

fn tcpfp_event(addr: SocketAddr, found: &tcpfp::SynAck) -> ProberEvent {
    let hash = found.hash();
    ProberEvent::new("tcpfp_fingerprint", addr, hash.clone(), format!("TCPFP {addr} = {hash}"))
        .with("tcpfp_hash", &hash)
        .with("tcpfp_raw", found.raw())
        .with("ttl", found.ttl)
        .with("window_size", found.window_size)
        .with("df_bit", u8::from(found.df))
        .with("mss", found.mss)
        .with("window_scale", found.window_scale)
        .with("sack_ok", u8::from(found.sack_ok))
        .with("timestamp", u8::from(found.timestamp))
        .with("options_order", &found.options_order)
        .with("p0f_signature", found.p0f())
}

fn certificate_event(addr: SocketAddr, leaf: &cert::Leaf) -> ProberEvent {
    let cert = &leaf.fields;
    let mut event = ProberEvent::new(
        "tls_certificate",
        addr,
        leaf.sha256.clone(),
        format!("TLS cert {addr} CN={} sha256={}", cert.subject_cn, leaf.sha256),
    )
    .with("subject_cn", &cert.subject_cn)
    .with("issuer", &cert.issuer)
    .with("self_signed", cert.self_signed)
    .with("not_before", &cert.not_before)
    .with("not_after", &cert.not_after);
    if !cert.sans.is_empty() {
        event = event.with("sans", cert.sans.join(","));
    }
    event.with("cert_sha256", &leaf.sha256)
}

/// Hands `event` to the writer unless the same target, port and fingerprint was written within the
/// window.
async fn report(probing: &Probing, event: ProberEvent) {
    let target = format!("{}:{}", event.field("target_ip").unwrap_or(""), event.field("target_port").unwrap_or(""));
    let first = probing.dedup.lock().expect("dedup lock").first(
        &target,
        event.kind,
        &event.identity,
        event.at.timestamp_micros(),
    );
    if !first {
        probing.counters.add(counter::DUPLICATES, 1);
        return;
    }
    let (ip, port) = (event.field("target_ip").unwrap_or(""), event.field("target_port").unwrap_or(""));
    tracing::info!(target_ip = ip, target_port = port, kind = event.kind, fingerprint = %event.identity, "Fingerprint");
    probing.counters.add(counter::FINGERPRINTS, 1);
    let _ = probing.lines.send(event).await;
}

/// Appends each line to the ingest file (the sniffer's writer, `svc::logline::append`), until every
/// probe has ended.
async fn write_lines(mut queue: mpsc::Receiver<ProberEvent>, log_file: Option<PathBuf>) {
    let Some(path) = log_file else {
        tracing::warn!("SVC_INGEST_LOG_FILE is empty: the prober's fingerprints are logged only");
        while queue.recv().await.is_some() {}
        return;
    };
    while let Some(event) = queue.recv().await {
        let mut text = event.line() + "\n";
        while let Ok(more) = queue.try_recv() {
            text.push_str(&(more.line() + "\n"));
        }
        if let Err(err) = svc::logline::append(&path, text.as_bytes()).await {
            tracing::error!(path = %path.display(), error = %err, "Cannot write prober lines to the ingest file");
        }
    }
}
