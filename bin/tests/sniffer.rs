//! The sniffer against real packets: two network namespaces joined by a veth pair, `openssl
//! s_server` as the decky, `openssl s_client` (several versions, ciphers, ALPN, SNI) and `curl`
//! (IPv4 and IPv6) as attackers, and a ClientHello forced over many segments by a small MSS.
//! `svc worker sniffer` captures live inside the decky's namespace while `tcpdump` records the same
//! interface; every JA3/JA3S is compared with tshark's, every JA4/JA4S/JA4L with FoxIO's `ja4plus`,
//! the TLS 1.2 sessions' certificate with `openssl x509`'s reading of it, and `svc worker sniffer
//! --read` of the recording must write the very same lines (and publish
//! them on the bus). The recording's split ClientHello, reordered and retransmitted, still gives
//! one fingerprint. `/health` follows a sniffer's interface coming and going, the sniffer embedded
//! in the API or in its own process (by its heartbeat). The
//! address → decky map follows deploys and teardowns in the fleet store (sqlite and MariaDB). An
//! embedded sniffer given no interface follows the fleet's network (podman): it waits while there
//! is none, and captures a fleet deployed after it started, torn down, and deployed elsewhere.
//!
//! Needs root, `ip`, `openssl`, `curl`, `tcpdump`, `tshark` (scripts/lib.sh installs them) and
//! `ja4plus` (PyPI, also installed there).

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{DEADLINE, Nats, Proc, eventually, svc};
use futures::StreamExt;
use rustix::process::Signal;
use svc::logline::LogLine;

const DECKY: &str = "decky-a";
const CLIENT_V4: &str = "10.213.0.1";
const SERVER_V4: &str = "10.213.0.2";
/// A second decky address, reached over a 128-byte path MTU: its ClientHellos come in many segments.
const SERVER_SPLIT: &str = "10.213.0.3";
const CLIENT_V6: &str = "fd00:5e::1";
const SERVER_V6: &str = "fd00:5e::2";
const PORT: &str = "4433";

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

/// Two namespaces (attacker, decky) joined by a veth pair; removed, with everything in them, on drop.
struct Lab {
    client: String,
    server: String,
    server_if: String,
    dir: tempfile::TempDir,
}

impl Lab {
    fn new(tag: &str) -> Lab {
        assert!(rustix::process::geteuid().is_root(), "the sniffer tests build network namespaces: run them as root");
        let id = format!("{tag}{}", std::process::id() % 100_000);
        let lab = Lab {
            client: format!("snc-{id}"),
            server: format!("sns-{id}"),
            server_if: format!("vs{id}"),
            dir: tempfile::tempdir().unwrap(),
        };
        let client_if = format!("vc{id}");
        ip(&["netns", "add", &lab.client]);
        ip(&["netns", "add", &lab.server]);
        ip(&["link", "add", &client_if, "type", "veth", "peer", "name", &lab.server_if]);
        ip(&["link", "set", &client_if, "netns", &lab.client]);
        ip(&["link", "set", &lab.server_if, "netns", &lab.server]);
        for (ns, iface, addrs) in [
            (&lab.client, &client_if, [format!("{CLIENT_V4}/24"), format!("{CLIENT_V6}/64")].to_vec()),
            (
                &lab.server,
                &lab.server_if,
                [format!("{SERVER_V4}/24"), format!("{SERVER_SPLIT}/24"), format!("{SERVER_V6}/64")].to_vec(),
            ),
        ] {
            for addr in addrs {
                ip(&["-n", ns, "addr", "add", &addr, "dev", iface, "nodad"]);
            }
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            // One segment per frame, as on a wire: no segmentation offload coalescing them.
            ip(&["-n", ns, "link", "set", iface, "gso_max_segs", "1", "up"]);
        }
        ip(&[
            "-n",
            &lab.client,
            "route",
            "add",
            &format!("{SERVER_SPLIT}/32"),
            "dev",
            &client_if,
            "mtu",
            "lock",
            "128",
        ]);
        run(Command::new("openssl").current_dir(lab.dir.path()).args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=decky.test/O=Decoy Works",
            "-addext",
            &format!("subjectAltName=DNS:decky.test,IP:{SERVER_V4},IP:{SERVER_V6}"),
        ]));
        lab
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `command` run inside namespace `ns`, with the same environment.
    fn inside(&self, ns: &str, command: &Command) -> Command {
        let mut wrapped = Command::new("ip");
        wrapped.args(["netns", "exec", ns]).arg(command.get_program()).args(command.get_args());
        wrapped.env_clear().current_dir(self.dir.path());
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                wrapped.env(key, value);
            }
        }
        wrapped
    }

    fn attacker(&self, program: &str, args: &[&str]) -> Output {
        let mut command = Command::new(program);
        command.args(args);
        let output = self.inside(&self.client, &command).stdin(std::process::Stdio::null()).output().unwrap();
        assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        output
    }

    /// `svc worker sniffer` (with `extra` arguments) configured for this lab's decky.
    fn sniffer(&self, extra: &[&str], log: &str) -> Command {
        let mut args = vec!["worker", "sniffer"];
        args.extend(extra);
        let mut command = svc(self.dir.path(), &args);
        command
            .env("SVC_SNIFFER_IFACE", &self.server_if)
            .env("SVC_SNIFFER_DECKIES", format!("{DECKY}={SERVER_V4},{DECKY}={SERVER_SPLIT},{DECKY}={SERVER_V6}"))
            .env("SVC_INGEST_LOG_FILE", self.path(log));
        command
    }

    fn tls_server(&self) -> Proc {
        let mut command = Command::new("openssl");
        command.args(["s_server", "-accept", PORT, "-cert", "cert.pem", "-key", "key.pem", "-www", "-quiet"]);
        Proc::spawn(self.inside(&self.server, &command))
    }

    fn tcpdump(&self, file: &str) -> Proc {
        let mut command = Command::new("tcpdump");
        // Every packet handed over and written as it comes, so none is pending when it stops.
        command
            .args(["-i", &self.server_if, "--immediate-mode", "-U", "-Z", "root", "-w"])
            .arg(self.path(file))
            .arg("tcp");
        Proc::spawn(self.inside(&self.server, &command))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting the namespaces deletes the veth pair and ends what listened in them.
        let _ = Command::new("ip").args(["netns", "del", &self.client]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.server]).status();
    }
}

/// The lines of an ingest file, parsed.
fn lines(path: &Path) -> Vec<LogLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| svc::logline::parse(line).unwrap_or_else(|err| panic!("{line}: {err}")))
        .collect()
}

fn of_kind<'a>(lines: &'a [LogLine], kind: &str) -> Vec<&'a LogLine> {
    lines.iter().filter(|l| l.event_type == kind).collect()
}

/// The client end of a line's flow, as the reference tools key their output.
fn client_of(line: &LogLine) -> (String, String) {
    (line.field("src_ip").unwrap().to_string(), line.field("src_port").unwrap().to_string())
}

/// The certificate's validity as `openssl x509` reads it, in RFC 3339.
fn openssl_dates(cert: &Path) -> (String, String) {
    let out = run(Command::new("openssl").args(["x509", "-noout", "-startdate", "-enddate", "-in"]).arg(cert));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let date = |key: &str| {
        let value = text.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("{key} in {text}"));
        let at = chrono::NaiveDateTime::parse_from_str(value.trim(), "%b %e %H:%M:%S %Y GMT").unwrap();
        at.and_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    (date("notBefore="), date("notAfter="))
}

/// tshark's JA3 and JA3S per client endpoint.
fn tshark_ja3(pcap: &Path) -> BTreeMap<(String, String), (Option<String>, Option<String>)> {
    let out = run(Command::new("tshark").arg("-r").arg(pcap).args([
        "-Y",
        "tls.handshake.type == 1 || tls.handshake.type == 2",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-e",
        "ip.src",
        "-e",
        "ipv6.src",
        "-e",
        "tcp.srcport",
        "-e",
        "ip.dst",
        "-e",
        "ipv6.dst",
        "-e",
        "tcp.dstport",
        "-e",
        "tls.handshake.ja3",
        "-e",
        "tls.handshake.ja3s",
    ]));
    let mut flows: BTreeMap<(String, String), (Option<String>, Option<String>)> = BTreeMap::new();
    for row in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = row.split('|').collect();
        let (src, dst) = ([f[0], f[1]].concat(), [f[3], f[4]].concat());
        if !f[6].is_empty() {
            flows.entry((src, f[2].to_string())).or_default().0 = Some(f[6].to_string());
        }
        if !f[7].is_empty() {
            flows.entry((dst, f[5].to_string())).or_default().1 = Some(f[7].to_string());
        }
    }
    flows
}

/// FoxIO's `ja4plus`: per client endpoint, its JA4, JA4S, JA4L-S, and the first JA4L-C (measured
/// at the handshake's ACK; ja4plus reports a later one too).
#[derive(Debug, Default)]
struct FoxIo {
    ja4: Option<String>,
    ja4s: Option<String>,
    ja4l_s: Option<String>,
    ja4l_c: Option<String>,
}

fn ja4plus(pcap: &Path) -> BTreeMap<(String, String), FoxIo> {
    let out = run(Command::new("ja4plus").args(["--format", "json", "--types", "ja4,ja4s,ja4l", "analyze"]).arg(pcap));
    let mut flows: BTreeMap<(String, String), FoxIo> = BTreeMap::new();
    for row in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(row).unwrap();
        let text = |k: &str| v[k].as_str().map(str::to_string).unwrap_or_else(|| v[k].to_string());
        let fingerprint = text("fingerprint");
        let (src, dst) = ((text("src_ip"), text("src_port")), (text("dst_ip"), text("dst_port")));
        match (text("type").as_str(), fingerprint.split_once('=')) {
            ("ja4", _) => flows.entry(src).or_default().ja4 = Some(fingerprint),
            ("ja4s", _) => flows.entry(dst).or_default().ja4s = Some(fingerprint),
            ("ja4l", Some(("JA4L-S", value))) => flows.entry(dst).or_default().ja4l_s = Some(value.to_string()),
            ("ja4l", Some(("JA4L-C", value))) => {
                flows.entry(src).or_default().ja4l_c.get_or_insert(value.to_string());
            }
            _ => {}
        }
    }
    flows
}

/// Waits for tcpdump to say it listens, so no packet of the test is missed.
async fn listening(tcpdump: &Proc) {
    eventually("tcpdump listens", || async { tcpdump.output().contains("listening on") }).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_capture_agrees_with_tshark_and_ja4plus_and_replay_writes_the_same_lines() {
    let lab = Lab::new("a");
    let mut tcpdump = lab.tcpdump("live.pcap");
    listening(&tcpdump).await;
    let mut sniffer = Proc::spawn(lab.inside(&lab.server, &lab.sniffer(&[], "live.log")));
    eventually("the sniffer captures", || async { sniffer.output().contains("Capturing") }).await;
    let _server = lab.tls_server();
    // The server is ready once a first handshake goes through.
    eventually("s_server accepts", || async {
        let mut probe = Command::new("openssl");
        probe.args(["s_client", "-connect", &format!("{SERVER_V4}:{PORT}"), "-tls1_2", "-servername", "probe.test"]);
        lab.inside(&lab.client, &probe).stdin(std::process::Stdio::null()).output().unwrap().status.success()
    })
    .await;

    let long_sni = format!("{}.{}.example", "b".repeat(60), "c".repeat(60));
    let v4 = format!("{SERVER_V4}:{PORT}");
    let split = format!("{SERVER_SPLIT}:{PORT}");
    let first = vec![
        "s_client",
        "-connect",
        &v4,
        "-tls1_2",
        "-cipher",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "-servername",
        "one.test",
    ];
    let clients: Vec<Vec<&str>> = vec![
        first.clone(),
        vec![
            "s_client",
            "-connect",
            &v4,
            "-tls1_3",
            "-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256",
            "-alpn",
            "h2,http/1.1",
        ],
        vec!["s_client", "-connect", &v4, "-tls1_2", "-cipher", "AES256-SHA", "-no_ticket", "-noservername"],
        vec!["s_client", "-connect", &split, "-servername", &long_sni, "-alpn", "http/1.1"],
        // The first client again: the same attacker and fingerprint within the window, not reported again.
        first,
    ];
    for args in &clients {
        lab.attacker("openssl", args);
    }
    let resolve = format!("decky.test:{PORT}:{SERVER_V4}");
    lab.attacker("curl", &["-sk", "--resolve", &resolve, &format!("https://decky.test:{PORT}/"), "-o", "/dev/null"]);
    let v6_url = format!("https://[{SERVER_V6}]:{PORT}/");
    lab.attacker("curl", &["-sk", "--http1.1", &v6_url, "-o", "/dev/null"]);
    lab.attacker("curl", &["-sk", "--http1.1", "--tls-max", "1.2", &v6_url, "-o", "/dev/null"]);

    // probe + 4 distinct openssl clients + 3 curls; the repeat is deduplicated.
    let live = lab.path("live.log");
    eventually("the sniffer reported every session", || async { of_kind(&lines(&live), "tls_session").len() >= 8 })
        .await;
    sniffer.signal(Signal::TERM);
    assert!(sniffer.wait().success(), "{}", sniffer.output());
    tcpdump.signal(Signal::TERM);
    assert!(tcpdump.wait().success(), "{}", tcpdump.output());
    let live_lines = lines(&live);

    let hellos = of_kind(&live_lines, "tls_client_hello");
    let sessions = of_kind(&live_lines, "tls_session");
    assert_eq!((hellos.len(), sessions.len()), (8, 8), "{live_lines:#?}");
    assert!(!of_kind(&live_lines, "tcp_syn_fingerprint").is_empty());
    assert!(live_lines.iter().all(|l| l.decky == DECKY && l.service == "sniffer"));
    assert!(sessions.iter().all(|l| l.pri == 132), "tls_session is a warning");
    let split_hello = hellos.iter().find(|l| l.field("dst_ip") == Some(SERVER_SPLIT)).expect("the split hello");
    assert_eq!(split_hello.field("sni"), Some(long_sni.as_str()));
    assert!(sessions.iter().any(|l| l.field("src_ip") == Some(CLIENT_V6)), "IPv6 is fingerprinted");
    assert!(hellos.iter().all(|l| [CLIENT_V4, CLIENT_V6].contains(&l.attacker_ip.as_str())));

    // The server's certificate, read from the TLS 1.2 sessions (1.3 encrypts it): once per attacker,
    // as openssl reads the same certificate.
    let certificates = of_kind(&live_lines, "tls_certificate");
    let attackers: Vec<&str> = certificates.iter().map(|l| l.attacker_ip.as_str()).collect();
    assert_eq!(attackers, [CLIENT_V4, CLIENT_V6], "{certificates:#?}");
    let (not_before, not_after) = openssl_dates(&lab.path("cert.pem"));
    for cert in &certificates {
        assert_eq!(cert.field("subject_cn"), Some("decky.test"));
        assert_eq!(cert.field("issuer"), Some("CN=decky.test, O=Decoy Works"));
        assert_eq!(cert.field("self_signed"), Some("true"));
        assert_eq!((cert.field("not_before"), cert.field("not_after")), (Some(&*not_before), Some(&*not_after)));
        assert_eq!(cert.field("sans"), Some(format!("decky.test,{SERVER_V4},{SERVER_V6}").as_str()));
        assert_eq!(cert.field("dst_port"), Some(PORT));
    }
    assert_eq!(certificates[0].field("sni"), Some("probe.test"), "the first TLS 1.2 client's SNI");

    // The reference implementations, on the same packets.
    let pcap = lab.path("live.pcap");
    let tshark = tshark_ja3(&pcap);
    let foxio = ja4plus(&pcap);
    let segments = run(Command::new("tshark").arg("-r").arg(&pcap).args([
        "-Y",
        &format!("ip.dst == {SERVER_SPLIT} && tcp.len > 0 && !tls.handshake.type == 16"),
        "-T",
        "fields",
        "-e",
        "tcp.len",
    ]));
    let segments = String::from_utf8_lossy(&segments.stdout).lines().count();
    assert!(segments > 3, "the long ClientHello came in {segments} segments");
    for session in &sessions {
        let client = client_of(session);
        let (ja3, ja3s) = tshark.get(&client).unwrap_or_else(|| panic!("tshark saw {client:?}"));
        assert_eq!(session.field("ja3"), ja3.as_deref(), "JA3 of {client:?}");
        assert_eq!(session.field("ja3s"), ja3s.as_deref(), "JA3S of {client:?}");
        let fox = foxio.get(&client).unwrap_or_else(|| panic!("ja4plus saw {client:?}: {foxio:#?}"));
        assert_eq!(session.field("ja4"), fox.ja4.as_deref(), "JA4 of {client:?}");
        assert_eq!(session.field("ja4s"), fox.ja4s.as_deref(), "JA4S of {client:?}");
    }
    let distinct: BTreeSet<&str> = hellos.iter().filter_map(|l| l.field("ja3")).collect();
    let reference: BTreeSet<&str> = tshark.values().filter_map(|(ja3, _)| ja3.as_deref()).collect();
    assert_eq!(distinct, reference, "every distinct JA3 tshark saw, and no other");

    // Replay through the same engine: the same lines, and each published on the decky's subject.
    let nats = Nats::start();
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let mut traffic = bus.subscribe("decky.*.traffic").await.unwrap();
    bus.flush().await.unwrap();
    let mut replay = lab.sniffer(&["--read", pcap.to_str().unwrap()], "replay.log");
    replay.env("SVC_NATS_URL", nats.url());
    let mut replay = Proc::spawn(replay);
    assert!(replay.wait().success(), "{}", replay.output());
    // tcpdump's socket stamps each packet a few microseconds apart from the sniffer's, so the
    // capture times (the line's timestamp, JA4L) are compared with FoxIO on the same file instead.
    let replay_lines = lines(&lab.path("replay.log"));
    let timeless = |l: &LogLine| {
        let fields: Vec<(String, String)> = l.fields.iter().filter(|(k, _)| !k.starts_with("ja4l")).cloned().collect();
        (l.pri, l.decky.clone(), l.event_type.clone(), fields)
    };
    assert_eq!(
        replay_lines.iter().map(timeless).collect::<Vec<_>>(),
        live_lines.iter().map(timeless).collect::<Vec<_>>(),
        "replay writes what the live capture wrote"
    );
    for session in of_kind(&replay_lines, "tls_session") {
        let client = client_of(session);
        let fox = &foxio[&client];
        assert_eq!(session.field("ja4l_s"), fox.ja4l_s.as_deref(), "JA4L-S of {client:?}");
        assert_eq!(session.field("ja4l_c"), fox.ja4l_c.as_deref(), "JA4L-C of {client:?}");
        assert!(session.field("ja4l_rtt_ms").is_some() && session.field("ja4l_client_ttl") == Some("64"));
    }
    for line in &live_lines {
        let message = tokio::time::timeout(DEADLINE, traffic.next()).await.unwrap().unwrap();
        assert_eq!(message.subject.as_str(), format!("decky.{DECKY}.traffic"));
        let event: serde_json::Value = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(event["type"], line.event_type);
        assert_eq!(event["payload"]["src_ip"], line.field("src_ip").unwrap());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_split_hello_reordered_and_retransmitted_is_fingerprinted_once() {
    let lab = Lab::new("b");
    let tcpdump = lab.tcpdump("split.pcap");
    listening(&tcpdump).await;
    let _server = lab.tls_server();
    let long_sni = format!("{}.example", "s".repeat(200));
    let split = format!("{SERVER_SPLIT}:{PORT}");
    eventually("a split handshake completes", || async {
        let mut client = Command::new("openssl");
        client.args(["s_client", "-connect", &split, "-servername", &long_sni]);
        lab.inside(&lab.client, &client).stdin(std::process::Stdio::null()).output().unwrap().status.success()
    })
    .await;
    // tcpdump writes each packet as it comes (-U): wait until the server's hello is in the file.
    let pcap = lab.path("split.pcap");
    eventually("tcpdump recorded the handshake", || async {
        let out = Command::new("tshark").arg("-r").arg(&pcap).args(["-Y", "tls.handshake.type == 2"]).output();
        out.is_ok_and(|o| !o.stdout.is_empty())
    })
    .await;
    tcpdump.signal(Signal::TERM);

    // The client's data segments of the first flow, in reverse order and each sent twice.
    let shuffled = lab.path("shuffled.pcap");
    let mut source = pcap::Capture::from_file(&pcap).unwrap();
    let mut frames: Vec<(pcap::PacketHeader, Vec<u8>)> = Vec::new();
    while let Ok(packet) = source.next_packet() {
        frames.push((*packet.header, packet.data.to_vec()));
    }
    // Ethernet + IPv4: the source address at 26, the TCP header after the IP header.
    let carries_data_from = |frame: &[u8], from: [u8; 4]| {
        let ihl = usize::from(frame[14] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
        let tcp_header = usize::from(frame[14 + ihl + 12] >> 4) * 4;
        frame[26..30] == from && total > ihl + tcp_header
    };
    // The ClientHello's segments: the client's data before the server's first data (its hello).
    let server_hello = (0..frames.len()).find(|&i| carries_data_from(&frames[i].1, [10, 213, 0, 3])).unwrap();
    let data: Vec<usize> = (0..server_hello).filter(|&i| carries_data_from(&frames[i].1, [10, 213, 0, 1])).collect();
    assert!(data.len() > 3, "the hello spans {} segments", data.len());
    let first = data[0];
    let hello_segments: Vec<(pcap::PacketHeader, Vec<u8>)> =
        data.iter().rev().flat_map(|&i| [frames[i].clone(), frames[i].clone()]).collect();
    let mut out = source_savefile(&shuffled);
    for (i, (header, bytes)) in frames.iter().enumerate() {
        if i == first {
            for (h, b) in &hello_segments {
                out.write(&pcap::Packet::new(h, b));
            }
        } else if !data.contains(&i) {
            out.write(&pcap::Packet::new(header, bytes));
        }
    }
    out.flush().unwrap();
    drop(out);

    let mut replay = Proc::spawn(lab.sniffer(&["--read", shuffled.to_str().unwrap()], "shuffled.log"));
    assert!(replay.wait().success(), "{}", replay.output());
    let mut straight = Proc::spawn(lab.sniffer(&["--read", pcap.to_str().unwrap()], "straight.log"));
    assert!(straight.wait().success(), "{}", straight.output());
    let (shuffled, straight) = (lines(&lab.path("shuffled.log")), lines(&lab.path("straight.log")));
    let hellos = of_kind(&shuffled, "tls_client_hello");
    assert_eq!(hellos.len(), 1, "{shuffled:#?}");
    assert_eq!(hellos[0].field("sni"), Some(long_sni.as_str()));
    let straight_hello = of_kind(&straight, "tls_client_hello")[0];
    for key in ["ja3", "ja4", "raw_ciphers", "raw_extensions"] {
        assert_eq!(hellos[0].field(key), straight_hello.field(key), "{key}");
    }
    let tshark = tshark_ja3(&pcap);
    assert_eq!(hellos[0].field("ja3"), tshark.values().find_map(|(ja3, _)| ja3.as_deref()));
}

fn source_savefile(path: &Path) -> pcap::Savefile {
    pcap::Capture::dead(pcap::Linktype::ETHERNET).unwrap().savefile(path).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn health_follows_an_embedded_sniffers_interface() {
    let dir = tempfile::tempdir().unwrap();
    let iface = format!("svcsn{}", std::process::id() % 100_000);
    let (mut command, port) = common::api_command(dir.path(), None);
    command.env("SVC_EMBED_SNIFFER", "true").env("SVC_SNIFFER_IFACE", &iface);
    // No such interface yet: the API starts anyway and says why the sniffer fails.
    let api = common::start_api(command, port).await;
    health_follows_the_interface(port, &iface).await;
    assert!(api.output().contains("Cannot capture"), "the raw reason is in the server log");
}

/// The same for a sniffer in its own process (a capture host's), known to the API by its heartbeat.
#[tokio::test(flavor = "multi_thread")]
async fn health_follows_a_separate_sniffers_interface_by_its_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let iface = format!("svchb{}", std::process::id() % 100_000);
    let nats = Nats::start();
    let (command, port) = common::api_command(dir.path(), Some(&nats));
    let _api = common::start_api(command, port).await;
    let mut worker = svc(dir.path(), &["worker", "sniffer"]);
    worker
        .env("SVC_NATS_URL", nats.url())
        .env("SVC_SNIFFER_IFACE", &iface)
        .env("SVC_SNIFFER_DECKIES", format!("{DECKY}={SERVER_V4}"))
        .env("SVC_INGEST_LOG_FILE", dir.path().join("sniffer.log"));
    let sniffer = Proc::spawn(worker);
    health_follows_the_interface(port, &iface).await;
    assert!(sniffer.output().contains("Cannot capture"), "the raw reason is in the worker's log");
}

/// `/health`'s sniffer component while `iface` is missing (failing, a generic reason), then
/// present (ok), then gone again (failing).
async fn health_follows_the_interface(port: u16, iface: &str) {
    assert!(rustix::process::geteuid().is_root(), "the sniffer tests create interfaces: run them as root");
    let url = format!("http://127.0.0.1:{port}/api/v1/health");
    let sniffer = || async {
        let body: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        body["components"]["sniffer_worker"].clone()
    };
    eventually("the sniffer reports its missing interface", || async {
        sniffer().await == serde_json::json!({"status": "failing", "detail": "capture interface unavailable"})
    })
    .await;
    let _cleanup = DummyInterface::add(iface);
    eventually("the sniffer captures once the interface exists", || async { sniffer().await["status"] == "ok" }).await;
    ip(&["link", "del", iface]);
    eventually("the sniffer fails when the interface is gone", || async {
        sniffer().await["detail"] == "capture interface unavailable"
    })
    .await;
}

/// An interface of the test's own (one end of a veth pair, no traffic), removed on drop if still there.
struct DummyInterface(String);

impl DummyInterface {
    fn add(name: &str) -> DummyInterface {
        ip(&["link", "add", name, "type", "veth", "peer", "name", &format!("{name}p")]);
        ip(&["link", "set", name, "up"]);
        DummyInterface(name.to_string())
    }
}

impl Drop for DummyInterface {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).stderr(std::process::Stdio::null()).status();
    }
}

/// A decky as a deploy stores it.
fn stored_decky(name: &str, ip: &str) -> svc::db::DeckyConfig {
    svc::db::DeckyConfig {
        name: name.into(),
        ip: ip.into(),
        services: vec!["ssh".into()],
        distro: "debian".into(),
        base_image: "svc-decky".into(),
        build_base: "svc-decky".into(),
        hostname: name.into(),
        archetype: None,
        service_config: Default::default(),
        nmap_os: "linux".into(),
        mutate_interval: None,
        last_mutated: 0.0,
        last_login_attempt: 0.0,
        host_uuid: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_decky_map_follows_deploys_and_teardowns_in_the_fleet_store() {
    use std::sync::Arc;
    use svc::db::{Deployment, FleetNetwork};
    use svc_workers::sniffer::deckies::{self, DeckyMap, FleetDeckies};

    for db in store::TestDb::all() {
        let repo = db.open().await;
        let network = FleetNetwork { subnet: "10.9.0.0/24".into(), gateway: "10.9.0.1".into(), interface: None };
        let deploy = |deckies: Vec<svc::db::DeckyConfig>| {
            let (repo, network) = (repo.clone(), network.clone());
            async move {
                let at = chrono::Utc::now();
                let deployment =
                    Deployment { network: &network, deckies: &deckies, replace: false, lifecycles: &[], at };
                repo.commit_deployment(deployment).await.unwrap();
            }
        };
        deploy(vec![stored_decky("web-1", "10.9.0.5")]).await;
        let (maps_tx, maps) = tokio::sync::watch::channel(Arc::new(DeckyMap::default()));
        let cancel = tokio_util::sync::CancellationToken::new();
        let follower = tokio::spawn(deckies::follow(
            Arc::new(FleetDeckies(repo.clone())),
            std::time::Duration::from_millis(50),
            Arc::new(tokio::sync::Notify::new()),
            maps_tx,
            cancel.clone(),
        ));
        let decky_of = |ip: &str| maps.borrow().decky(&ip.parse().unwrap()).map(str::to_string);
        eventually("the first decky is mapped", || async { decky_of("10.9.0.5").as_deref() == Some("web-1") }).await;
        deploy(vec![stored_decky("db-1", "10.9.0.6")]).await;
        eventually("a deployed decky is mapped", || async { decky_of("10.9.0.6").as_deref() == Some("db-1") }).await;
        assert!(repo.remove_decky("web-1").await.unwrap());
        eventually("a torn down decky is no longer mapped", || async { decky_of("10.9.0.5").is_none() }).await;
        assert_eq!(decky_of("10.9.0.6").as_deref(), Some("db-1"));
        cancel.cancel();
        follower.await.unwrap();
    }
}

/// `/health`'s sniffer component on the API at `port`.
async fn sniffer_health(port: u16) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/api/v1/health");
    let body: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    body["components"]["sniffer_worker"].clone()
}

/// Deploys one HTTPS decky `name` on `10.213.<octet>.0/24` through the API and waits until it
/// runs; its address.
async fn deploy_https_decky(port: u16, token: &str, octet: u8, name: &str) -> String {
    let ini = format!("[general]\nnet = 10.213.{octet}.0/24\ngw = 10.213.{octet}.1\n\n[{name}]\nservices = https\n");
    let deploy = serde_json::json!({"ini_content": ini, "replace_fleet": false});
    let (status, body) = common::api_call(port, token, reqwest::Method::POST, "/deckies/deploy", Some(deploy)).await;
    assert_eq!(status, 202, "{body}");
    let id = body["lifecycle_ids"][0].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let lifecycle = format!("/deckies/lifecycle?ids={id}");
        let (_, body) = common::api_call(port, token, reqwest::Method::GET, &lifecycle, None).await;
        match body["rows"][0]["status"].as_str() {
            Some("succeeded") => break,
            Some("failed") => panic!("the deploy failed: {body}"),
            _ => assert!(std::time::Instant::now() < deadline, "the deploy did not finish: {body}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let (_, deckies) = common::api_call(port, token, reqwest::Method::GET, "/deckies", None).await;
    let decky = deckies.as_array().unwrap().iter().find(|d| d["name"] == name).unwrap();
    decky["ip"].as_str().unwrap().to_string()
}

/// The embedded sniffer with no interface given, started before any fleet exists (as a new user
/// starts it): its health says it waits for a fleet network; a fleet deployed afterwards is
/// captured (a TLS handshake to a decky becomes a `tls_client_hello` row), its teardown sends the
/// sniffer back to waiting, and a fleet deployed again on another network is captured there.
#[tokio::test(flavor = "multi_thread")]
async fn an_embedded_sniffer_captures_a_fleet_deployed_after_it_started() {
    let podman = common::podman::Podman::start("snf-follow", 210);
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = common::api_command(dir.path(), None);
    podman.configure(&mut command, &dir.path().join("ingest.log")).env("SVC_EMBED_SNIFFER", "true");
    let api = common::start_api(command, port).await;
    let token = common::admin_token(port).await;
    let waiting = serde_json::json!({"status": "failing", "detail": "waiting for a fleet network: none deployed"});
    eventually("the sniffer says it waits for a fleet", || async { sniffer_health(port).await == waiting }).await;

    for (octet, decky) in [(210, "front"), (211, "back")] {
        let ip = deploy_https_decky(port, &token, octet, decky).await;
        eventually("the sniffer captures the fleet's network", || async {
            sniffer_health(port).await["status"] == "ok"
        })
        .await;
        // The test's own handshakes to its own decky, until one is a stored row (the decky's TLS
        // decoy may take a moment to listen; repeats are one event within the dedup window).
        let search = format!("/logs?search=event:tls_client_hello%20decky:{decky}");
        eventually(&format!("a handshake to {decky} ({ip}) is a tls_client_hello row"), || async {
            let _ = Command::new("curl")
                .args(["-sk", "--max-time", "5", "-o", "/dev/null", &format!("https://{ip}/")])
                .status();
            let (_, body) = common::api_call(port, &token, reqwest::Method::GET, &search, None).await;
            body["data"].as_array().is_some_and(|rows| {
                rows.iter().any(|r| {
                    (&r["event_type"], &r["decky"], &r["service"])
                        == (&"tls_client_hello".into(), &decky.into(), &"sniffer".into())
                        && r["fields"].as_str().is_some_and(|fields| fields.contains(&ip))
                })
            })
        })
        .await;
        let (status, body) =
            common::api_call(port, &token, reqwest::Method::DELETE, &format!("/deckies/{decky}"), None).await;
        assert!((200..300).contains(&status), "{status} {body}");
        eventually("a torn down fleet sends the sniffer back to waiting", || async {
            sniffer_health(port).await == waiting
        })
        .await;
    }
    assert!(api.output().contains("The capture interface changed"), "{}", api.output());
}

/// `svc worker sniffer` on its own, given no interface, follows the fleet store as the embedded one
/// does, and its heartbeat says what it waits for: no fleet network, then a stored bridge network
/// whose bridge does not exist yet; it captures once a host interface holds the network's gateway
/// (as the engine's bridge does), and waits again when the last decky and its bridge are gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_separate_sniffer_follows_the_fleet_network_in_the_store_and_says_what_it_waits_for() {
    assert!(rustix::process::geteuid().is_root(), "the sniffer tests create interfaces: run them as root");
    let db = store::TestDb::sqlite();
    let repo = db.open().await;
    let nats = Nats::start();
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let mut beats = bus.subscribe("system.sniffer.health").await.unwrap();
    bus.flush().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut worker = svc(dir.path(), &["worker", "sniffer"]);
    worker.envs(db.vars()).env("SVC_NATS_URL", nats.url()).env("SVC_INGEST_LOG_FILE", dir.path().join("sniffer.log"));
    let sniffer = Proc::spawn(worker);
    heartbeat_fault(&mut beats, "no fleet network", Some("waiting for a fleet network: none deployed")).await;

    let network =
        svc::db::FleetNetwork { subnet: "10.213.212.0/24".into(), gateway: "10.213.212.1".into(), interface: None };
    let deckies = [stored_decky("web-1", "10.213.212.2")];
    let at = chrono::Utc::now();
    let deployment = svc::db::Deployment { network: &network, deckies: &deckies, replace: false, lifecycles: &[], at };
    repo.commit_deployment(deployment).await.unwrap();
    heartbeat_fault(
        &mut beats,
        "a stored network without its bridge",
        Some("waiting for the bridge of fleet network 10.213.212.0/24"),
    )
    .await;

    let bridge = DummyInterface::add(&format!("svcbr{}", std::process::id() % 100_000));
    ip(&["addr", "add", "10.213.212.1/24", "dev", &bridge.0]);
    heartbeat_fault(&mut beats, "the bridge holding the gateway", None).await;
    assert!(sniffer.output().contains(&format!("Capturing iface={}", bridge.0)), "{}", sniffer.output());

    // A teardown: the last decky leaves the store, and the engine removes the bridge with the network.
    assert!(repo.remove_decky("web-1").await.unwrap());
    drop(bridge);
    heartbeat_fault(&mut beats, "the last decky torn down", Some("waiting for a fleet network: none deployed")).await;
}

/// Waits until a heartbeat on `beats` carries the fault `wanted` (`None`: the worker works).
async fn heartbeat_fault(beats: &mut async_nats::Subscriber, what: &str, wanted: Option<&str>) {
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut last = None;
    while std::time::Instant::now() < deadline {
        let beat = tokio::time::timeout(DEADLINE, beats.next()).await.expect("a heartbeat").unwrap();
        let event: serde_json::Value = serde_json::from_slice(&beat.payload).unwrap();
        last = event["payload"]["fault"].as_str().map(str::to_string);
        if last.as_deref() == wanted {
            return;
        }
    }
    panic!("{what}: the sniffer's fault is still {last:?}");
}
