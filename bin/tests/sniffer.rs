//! The sniffer against real packets: two network namespaces joined by a veth pair, `openssl
//! s_server` as the decky, `openssl s_client` (several versions, ciphers, ALPN, SNI) and `curl`
//! (IPv4 and IPv6) as attackers, and a ClientHello forced over many segments by a small MSS.
//! `svc worker sniffer` captures live inside the decky's namespace while `tcpdump` records the same
//! interface; every JA3/JA3S is compared with tshark's, every JA4/JA4S/JA4L with FoxIO's `ja4plus`,
//! the TLS 1.2 sessions' certificate with `openssl x509`'s reading of it, and `svc worker sniffer
//! --read` of the recording must write the very same lines (and publish
//! them on the bus). The recording's split ClientHello, reordered and retransmitted, still gives
//! one fingerprint. Which interface it captures on is `sniffer_interface.rs`'s.
//!
//! Needs root, `ip`, `openssl`, `curl`, `tcpdump`, `tshark` (scripts/lib.sh installs them) and
//! `ja4plus` (PyPI, also installed there).

use svc_test_support::processes as common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{DEADLINE, Nats, Proc, eventually, ip, svc};
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
