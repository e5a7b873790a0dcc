//! The prober against real peers in network namespaces of the test's own (`NetnsHost` 245 and
//! 246): `openssl s_server` with a test certificate, Debian's OpenSSH server on a non-standard
//! port and a plain TCP listener. `svc api` embeds the ingester, the profiler and the prober; an
//! attack line from the namespace's address makes it an attacker, the prober fingerprints it and
//! the fingerprints come back on `GET /attackers/{uuid}`. Each is checked against an independent
//! reading: JARM against the reference Python implementation (PyPI `pyjarm`) run against the same
//! server, HASSH-server against the MD5 of `ssh-audit`'s reading of the same server's KEXINIT, the
//! certificate against `openssl x509`, the SYN-ACK fingerprint against tshark's reading of a capture.
//! A private target with private probing off is never sent a packet (a capture on the test's link).
//! The ICMP stimuli go to a target one router away (namespaces 247r and 247, a 1280-byte link
//! behind the router) in both families, and the errors are checked against tshark's reading.
//!
//! Needs root, `ip`, `openssl`, `sshd`, `tcpdump`, `tshark`, pyjarm and ssh-audit
//! (`ensure_prober_test_tools` in scripts/lib.sh).

use svc_test_support::processes as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use chrono::Utc;
use common::netns::NetnsHost;
use common::{Proc, admin_token, api_call, api_command, start_api};
use serde_json::Value;
use svc::logline::{Entry, LogLine, Severity};

const TLS_PORT: u16 = 4443;
const SSH_PORT: u16 = 2022;
const PLAIN_PORT: u16 = 8081;
/// The whole pipeline (ingest, profile, probe, ingest, profile) takes a few polls.
const PIPELINE: Duration = Duration::from_secs(90);

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stdout(command: &mut Command) -> String {
    String::from_utf8(run(command).stdout).unwrap()
}

/// The Python of the project's venv, where pyjarm and ssh-audit are installed.
fn venv(program: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let candidate = repo.join(".svc/venv/bin").join(program);
    if candidate.exists() { candidate } else { PathBuf::from(program) }
}

/// Polls `check` until it gives a value, failing after `within`.
async fn until<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An attack line from `ip`, as a decky writes it.
fn attack_line(ip: &str) -> String {
    svc::logline::format(&Entry {
        severity: Severity::Warning,
        timestamp: Utc::now(),
        hostname: "decky-a".into(),
        app_name: "ssh".into(),
        msgid: "auth_attempt".into(),
        fields: vec![("src_ip".into(), ip.into()), ("username".into(), "root".into())],
        msg: None,
    }) + "\n"
}

fn lines(path: &Path) -> Vec<LogLine> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| svc::logline::parse(l).unwrap()).collect()
}

/// `svc api` with the profiler and the prober embedded, fast polls, on `dir`'s ingest file.
fn api(dir: &Path, allow_private: bool, ports: (&str, &str, &str)) -> (Command, u16) {
    let (mut command, port) = api_command(dir, None);
    command
        .env("SVC_INGEST_LOG_FILE", dir.join("ingest.log"))
        .env("SVC_EMBED_PROFILER", "true")
        .env("SVC_PROFILER_POLL_MS", "200")
        .env("SVC_EMBED_PROBER", "true")
        .env("SVC_PROBER_ALLOW_PRIVATE", allow_private.to_string())
        .env("SVC_PROBER_POLL_SECS", "0.3")
        .env("SVC_PROBER_TARGET_GAP_MS", "0")
        .env("SVC_PROBER_TIMEOUT_SECS", "3")
        .env("SVC_PROBER_TLS_PORTS", ports.0)
        .env("SVC_PROBER_SSH_PORTS", ports.1)
        .env("SVC_PROBER_TCPFP_PORTS", ports.2)
        .env("RUST_LOG", "info");
    (command, port)
}

fn tcpdump(host: &NetnsHost, file: &Path) -> Proc {
    let mut command = Command::new("tcpdump");
    command.args(["-i", &format!("svct{}m", host.address.octets()[2]), "--immediate-mode", "-U", "-n", "-w"]).arg(file);
    Proc::spawn(command)
}

async fn capturing(tcpdump: &Proc) {
    until("tcpdump listens", Duration::from_secs(10), || async {
        tcpdump.output().contains("listening on").then_some(())
    })
    .await;
}

/// Waits until whatever listens at `addr` takes connections.
async fn accepting(addr: &str) {
    until(&format!("{addr} accepts"), Duration::from_secs(20), || async {
        tokio::net::TcpStream::connect(addr).await.ok().map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fingerprints_equal_the_references_and_reach_the_attacker() {
    assert!(rustix::process::geteuid().is_root(), "the prober tests build network namespaces: run them as root");
    let host = NetnsHost::create(245);
    let target = host.address.to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);

    // The peers: a TLS server with a test certificate, OpenSSH, a plain listener.
    run(Command::new("openssl")
        .current_dir(dir.path())
        .args([
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
            "/CN=c2.attacker.test/O=Red Team",
            "-addext",
        ])
        .arg(format!("subjectAltName=DNS:c2.attacker.test,IP:{target}")));
    let mut tls = Command::new("openssl");
    tls.current_dir(dir.path()).args([
        "s_server",
        "-accept",
        &TLS_PORT.to_string(),
        "-cert",
        "cert.pem",
        "-key",
        "key.pem",
        "-www",
        "-quiet",
    ]);
    let mut tls = host.wrap(&tls);
    tls.current_dir(dir.path());
    let _tls = Proc::spawn(tls);
    run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(path("host_key")));
    std::fs::create_dir_all("/run/sshd").unwrap();
    let mut sshd = Command::new("/usr/sbin/sshd");
    sshd.args(["-D", "-e", "-f", "/dev/null", "-p", &SSH_PORT.to_string(), "-o", "PidFile=none", "-h"])
        .arg(path("host_key"));
    let _sshd = Proc::spawn(host.wrap(&sshd));
    let mut plain = Command::new("python3");
    plain.args(["-c", &format!(
        "import socket,time\ns=socket.socket()\ns.bind(('{target}',{PLAIN_PORT}))\ns.listen(64)\nwhile True:\n    c,_=s.accept()\n    time.sleep(0.05)\n    c.close()"
    )]);
    let _plain = Proc::spawn(host.wrap(&plain));
    for port in [TLS_PORT, SSH_PORT, PLAIN_PORT] {
        accepting(&format!("{target}:{port}")).await;
    }

    // The references, against the same servers.
    let jarm_reference = stdout(Command::new(venv("python")).args([
        "-c",
        &format!("from jarm.scanner.scanner import Scanner; print(Scanner.scan('{target}', {TLS_PORT})[0])"),
    ]))
    .trim()
    .to_string();
    assert_ne!(jarm_reference, "0".repeat(62), "pyjarm reached the server");
    // ssh-audit's exit status grades the server (weak algorithms fail); its JSON is what is read.
    let audit = Command::new(venv("ssh-audit")).args(["-j", &format!("{target}:{SSH_PORT}")]).output().unwrap();
    let audit: Value = serde_json::from_slice(&audit.stdout)
        .unwrap_or_else(|err| panic!("ssh-audit: {err}: {}", String::from_utf8_lossy(&audit.stderr)));
    let names = |key: &str| -> String {
        audit[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["algorithm"].as_str().unwrap_or_else(|| a.as_str().unwrap()).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let hassh_raw = format!("{};{};{};{}", names("kex"), names("enc"), names("mac"), names("compression"));
    let hassh_reference = md5_of(hassh_raw.as_bytes());

    // The prober, with a capture of the link to read the SYN-ACK independently.
    let capture = path("probe.pcap");
    let tcpdump = tcpdump(&host, &capture);
    capturing(&tcpdump).await;
    let ports = (TLS_PORT.to_string(), SSH_PORT.to_string(), format!("{PLAIN_PORT},{TLS_PORT}"));
    let (command, port) = api(dir.path(), true, (&ports.0, &ports.1, &ports.2));
    let api = start_api(command, port).await;
    std::fs::write(path("ingest.log"), attack_line(&target)).unwrap();

    let token = admin_token(port).await;
    let ingest = path("ingest.log");
    let kinds = ["jarm_fingerprint", "hassh_fingerprint", "tls_certificate", "tcpfp_fingerprint", "icmp_error"];
    let probed = until("the prober's lines are written", PIPELINE, || async {
        let prober: Vec<LogLine> = lines(&ingest).into_iter().filter(|l| l.service == "prober").collect();
        let tcpfp = prober.iter().filter(|l| l.event_type == "tcpfp_fingerprint").count();
        (kinds.iter().all(|k| prober.iter().any(|l| l.event_type == *k)) && tcpfp == 2).then_some(prober)
    })
    .await;
    for line in &probed {
        assert_eq!((line.decky.as_str(), line.attacker_ip.as_str()), ("decnet-prober", target.as_str()), "{line:?}");
    }
    let of = |kind: &str| probed.iter().find(|l| l.event_type == kind).unwrap();
    assert!(api.output().contains(&format!("target_ip={target}")), "every probe is logged with its target");

    // ICMP: Linux answers a datagram to a closed port with Port Unreachable quoting it (IP header,
    // UDP header and the 32 bytes sent). On one link no router answers the others: each of their
    // datagrams reaches the target and draws Port Unreachable too, which is not what they aim at.
    let icmp = of("icmp_error");
    let icmp_line_hash = icmp.field("fingerprint_hash").map(str::to_string);
    assert_eq!(icmp.field("matrix"), Some("P..."));
    assert_eq!(
        ["port_unreachable_code", "port_unreachable_echo_len", "port_unreachable_from"].map(|k| icmp.field(k)),
        [Some("3"), Some("60"), Some(target.as_str())]
    );
    assert_eq!(icmp.field("time_exceeded_code"), Some("3"), "TTL 1 still reaches a target on the link");
    // JARM: the reference's hash.
    assert_eq!(of("jarm_fingerprint").field("jarm_hash"), Some(jarm_reference.as_str()));
    // HASSH: the MD5 of ssh-audit's reading of the KEXINIT.
    let hassh = of("hassh_fingerprint");
    assert_eq!(hassh.field("hassh_server_hash"), Some(hassh_reference.as_str()), "{hassh_raw}");
    assert!(hassh.field("ssh_banner").unwrap().starts_with("SSH-2.0-OpenSSH_"));
    // The certificate: openssl x509's reading.
    let cert = of("tls_certificate");
    let x509 = |args: &[&str]| stdout(Command::new("openssl").arg("x509").args(args).arg("-in").arg(path("cert.pem")));
    assert_eq!(cert.field("subject_cn"), Some("c2.attacker.test"));
    let issuer = x509(&["-noout", "-issuer", "-nameopt", "sep_comma_plus_space,RFC2253"]);
    assert!(issuer.contains("CN=c2.attacker.test") && issuer.contains("O=Red Team"), "{issuer}");
    assert_eq!(cert.field("issuer"), Some("CN=c2.attacker.test, O=Red Team"));
    assert_eq!(cert.field("self_signed"), Some("true"));
    let fingerprint = x509(&["-noout", "-fingerprint", "-sha256"]);
    let fingerprint = fingerprint.trim().rsplit('=').next().unwrap().replace(':', "").to_ascii_lowercase();
    assert_eq!(cert.field("cert_sha256"), Some(fingerprint.as_str()));
    let dates = x509(&["-noout", "-startdate", "-enddate"]);
    let date = |key: &str| {
        let value = dates.lines().find_map(|l| l.strip_prefix(key)).unwrap();
        let at = chrono::NaiveDateTime::parse_from_str(value.trim(), "%b %e %H:%M:%S %Y GMT").unwrap();
        at.and_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    assert_eq!(
        (cert.field("not_before"), cert.field("not_after")),
        (Some(date("notBefore=").as_str()), Some(date("notAfter=").as_str()))
    );
    assert_eq!(cert.field("sans"), Some(format!("c2.attacker.test,{target}").as_str()));

    // The SYN-ACK: tshark's reading of the same packet.
    drop(tcpdump);
    let tcpfp = probed
        .iter()
        .find(|l| l.event_type == "tcpfp_fingerprint" && l.field("target_port") == Some(&*PLAIN_PORT.to_string()))
        .unwrap();
    let synack = stdout(Command::new("tshark").args(["-r"]).arg(&capture).args([
        "-Y",
        &format!("ip.src=={target} && tcp.srcport=={PLAIN_PORT} && tcp.flags.syn==1 && tcp.flags.ack==1"),
        "-T",
        "fields",
        "-e",
        "ip.ttl",
        "-e",
        "tcp.window_size_value",
        "-e",
        "tcp.options.mss_val",
        "-e",
        "tcp.options.wscale.shift",
    ]));
    let first: Vec<&str> = synack.lines().next().expect("a SYN-ACK in the capture").split('\t').collect();
    let ttl: u8 = first[0].parse().unwrap();
    // The capture is on this side of the link: the prober saw the packet after the same hop.
    assert_eq!(tcpfp.field("ttl"), Some(ttl.to_string().as_str()));
    assert_eq!(tcpfp.field("window_size"), Some(first[1]));
    assert_eq!(tcpfp.field("mss"), Some(first[2]));
    assert_eq!(tcpfp.field("window_scale"), Some(first[3]));
    assert!(
        tcpfp.field("p0f_signature").unwrap().starts_with(&format!("4:64+0:0:{}:{},{}:", first[2], first[1], first[3]))
    );

    // The attacker's profile lists them, as DECNET's dashboard reads them.
    let fingerprints = until("the fingerprints reach the attacker", PIPELINE, || async {
        let (_, page) =
            api_call(port, &token, reqwest::Method::GET, &format!("/attackers?search={target}"), None).await;
        let uuid = page["data"].as_array()?.first()?["uuid"].as_str()?.to_string();
        let (status, attacker) =
            api_call(port, &token, reqwest::Method::GET, &format!("/attackers/{uuid}"), None).await;
        assert_eq!(status, 200);
        let list = attacker["fingerprints"].as_array()?.clone();
        let types: Vec<&str> = list.iter().filter_map(|f| f["fingerprint_type"].as_str()).collect();
        ["jarm", "hassh_server", "tls_certificate", "tcpfp", "icmp_error"]
            .iter()
            .all(|t| types.contains(t))
            .then_some(list)
    })
    .await;
    let jarm = fingerprints.iter().find(|f| f["fingerprint_type"] == "jarm").unwrap();
    assert_eq!((jarm["hash"].as_str(), jarm["target_port"].as_str()), (Some(jarm_reference.as_str()), Some("4443")));
    let hassh = fingerprints.iter().find(|f| f["fingerprint_type"] == "hassh_server").unwrap();
    assert_eq!(hassh["hash"].as_str(), Some(hassh_reference.as_str()));
    let icmp = fingerprints.iter().find(|f| f["fingerprint_type"] == "icmp_error").unwrap();
    assert_eq!(icmp["errors"]["port_unreachable"]["returned"], true, "{icmp}");
    assert_eq!(icmp["fp_hash"].as_str(), icmp_line_hash.as_deref());
}

/// MD5 through openssl, the reference computation of HASSH's digest.
fn md5_of(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child =
        Command::new("openssl").args(["md5", "-r"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_target_is_never_sent_a_packet_unless_allowed() {
    assert!(rustix::process::geteuid().is_root(), "the prober tests build network namespaces: run them as root");
    let host = NetnsHost::create(246);
    let target = host.address.to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut plain = Command::new("python3");
    plain.args(["-c", &format!(
        "import socket\ns=socket.socket()\ns.bind(('{target}',{PLAIN_PORT}))\ns.listen(64)\nwhile True:\n    s.accept()[0].close()"
    )]);
    let _plain = Proc::spawn(host.wrap(&plain));
    accepting(&format!("{target}:{PLAIN_PORT}")).await;

    let capture = dir.path().join("refused.pcap");
    let tcpdump = tcpdump(&host, &capture);
    capturing(&tcpdump).await;
    let ports = PLAIN_PORT.to_string();
    let (command, port) = api(dir.path(), false, ("", "", &ports));
    let api = start_api(command, port).await;
    std::fs::write(dir.path().join("ingest.log"), attack_line(&target)).unwrap();
    until("the prober refuses the target", PIPELINE, || async {
        api.output().contains(&format!("Target not probed target_ip={target} reason=Private")).then_some(())
    })
    .await;
    // Two more polls: a probe sent by mistake would be in the capture by now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(tcpdump);
    let sent = stdout(Command::new("tshark").args(["-r"]).arg(&capture).args([
        "-Y",
        // What starts a probe (a SYN, a UDP datagram, an ICMP echo); the late FIN/ACK of the
        // test's own readiness connection is not one.
        &format!("ip.dst=={target} && (tcp.flags.syn==1 || udp || icmp)"),
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]));
    assert_eq!(sent.lines().count(), 0, "packets reached the refused target: {sent}");
}

/// A target one router away, in both families: this namespace ↔ router (`svc-t-<n>r`, MTU 1500)
/// ↔ target (`svc-t-<n>`, MTU 1280 on its link), with the addresses `10.236.<n>.1/.2` and
/// `10.237.<n>.1/.2`, `fd00:236:<n>::1/::2` and `fd00:237:<n>::1/::2`. Removed on drop.
struct Routed {
    n: u8,
}

impl Routed {
    const ROUTER_V4: &str = "10.236.247.2";
    const TARGET_V4: &str = "10.237.247.2";
    const ROUTER_V6: &str = "fd00:236:247::2";
    const TARGET_V6: &str = "fd00:237:247::2";

    fn create() -> Routed {
        let routed = Routed { n: 247 };
        routed.remove();
        let (router, target) = ("svc-t-247r", "svc-t-247");
        let sh = |script: &str| run(Command::new("sh").args(["-ec", script]));
        sh(&format!(
            "ip netns add {router}; ip netns add {target}
             ip link add svct247m type veth peer name svct247r; ip link set svct247r netns {router}
             ip -n {router} link add svct247t type veth peer name svct247h; ip -n {router} link set svct247h netns {target}
             ip -n {router} link set svct247t mtu 1280; ip -n {target} link set svct247h mtu 1280
             ip addr add 10.236.247.1/30 dev svct247m; ip -6 addr add fd00:236:247::1/64 dev svct247m nodad
             ip link set svct247m up
             ip -n {router} addr add 10.236.247.2/30 dev svct247r; ip -n {router} -6 addr add fd00:236:247::2/64 dev svct247r nodad
             ip -n {router} addr add 10.237.247.1/30 dev svct247t; ip -n {router} -6 addr add fd00:237:247::1/64 dev svct247t nodad
             ip -n {router} link set svct247r up; ip -n {router} link set svct247t up; ip -n {router} link set lo up
             ip netns exec {router} sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
             ip -n {target} addr add 10.237.247.2/30 dev svct247h; ip -n {target} -6 addr add fd00:237:247::2/64 dev svct247h nodad
             ip -n {target} link set svct247h up; ip -n {target} link set lo up
             ip -n {target} route add default via 10.237.247.1; ip -n {target} -6 route add default via fd00:237:247::1
             ip route add 10.237.247.0/30 via 10.236.247.2; ip -6 route add fd00:237:247::/64 via fd00:236:247::2"
        ));
        routed
    }

    fn remove(&self) {
        let n = self.n;
        let _ = Command::new("sh")
            .args(["-c", &format!("ip netns del svc-t-{n}r; ip netns del svc-t-{n}; ip link del svct{n}m")])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Routed {
    fn drop(&mut self) {
        self.remove();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn icmp_errors_from_the_target_and_the_path_to_it_in_both_families() {
    assert!(rustix::process::geteuid().is_root(), "the prober tests build network namespaces: run them as root");
    let _routed = Routed::create();
    // Neighbour discovery and duplicate address detection must be done on every link first, or
    // the target's errors wait behind them past the prober's wait.
    for target in [Routed::TARGET_V4, Routed::TARGET_V6] {
        until(&format!("{target} answers a ping"), Duration::from_secs(20), || async {
            let ping = Command::new("ping").args(["-c", "1", "-W", "1", target]).output().unwrap();
            ping.status.success().then_some(())
        })
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("icmp.pcap");
    let mut command = Command::new("tcpdump");
    command.args(["-i", "svct247m", "--immediate-mode", "-U", "-n", "-w"]).arg(&capture);
    let tcpdump = Proc::spawn(command);
    capturing(&tcpdump).await;
    let (command, port) = api(dir.path(), true, ("", "", ""));
    let api = start_api(command, port).await;
    let ingest = dir.path().join("ingest.log");
    std::fs::write(&ingest, attack_line(Routed::TARGET_V4) + &attack_line(Routed::TARGET_V6)).unwrap();
    let (v4, v6) = until("both ICMP lines are written", PIPELINE, || async {
        let prober: Vec<LogLine> = lines(&ingest).into_iter().filter(|l| l.service == "prober").collect();
        let of = |kind: &str| prober.iter().find(|l| l.event_type == kind).cloned();
        Some((of("icmp_error")?, of("icmp6_error")?))
    })
    .await;
    drop(tcpdump);
    assert!(api.output().contains("probe=\"icmp6_error\""), "the probe is logged with its target");

    // IPv4: the target's Port Unreachable; the router's Time Exceeded for TTL 1 and Fragmentation
    // Needed for 1500 bytes with DF (its link to the target takes 1280); Linux ignores the bad
    // option, so that datagram only draws another Port Unreachable.
    assert_eq!(v4.attacker_ip, Routed::TARGET_V4);
    assert_eq!(v4.field("matrix"), Some("PTF."), "{v4:?}");
    let from_code = |line: &LogLine, name: &str| {
        (
            line.field(&format!("{name}_from")).map(str::to_string),
            line.field(&format!("{name}_code")).map(str::to_string),
        )
    };
    let answered = |from: &str, code: &str| (Some(from.to_string()), Some(code.to_string()));
    assert_eq!(from_code(&v4, "port_unreachable"), answered(Routed::TARGET_V4, "3"));
    assert_eq!(from_code(&v4, "time_exceeded"), answered(Routed::ROUTER_V4, "0"));
    assert_eq!(from_code(&v4, "frag_needed"), answered(Routed::ROUTER_V4, "4"));
    assert_eq!(from_code(&v4, "param_problem"), answered(Routed::TARGET_V4, "3"));
    // IPv6: all four answered, the target's three and the router's Hop Limit Exceeded.
    assert_eq!(v6.field("matrix"), Some("UHNB"), "{v6:?}");
    assert_eq!(from_code(&v6, "port_unreachable_v6"), answered(Routed::TARGET_V6, "4"));
    assert_eq!(from_code(&v6, "hop_limit_exceeded"), answered(Routed::ROUTER_V6, "0"));
    assert_eq!(from_code(&v6, "unknown_next_header"), answered(Routed::TARGET_V6, "1"));
    assert_eq!(from_code(&v6, "bad_dest_option"), answered(Routed::TARGET_V6, "2"));

    // tshark's reading of the link: the same errors, from the same senders; the router's
    // Fragmentation Needed names the 1280-byte hop.
    let errors = stdout(Command::new("tshark").args(["-r"]).arg(&capture).args([
        "-Y",
        "icmp.type==3 || icmp.type==11 || icmp.type==12 || icmpv6.type==1 || icmpv6.type==3 || icmpv6.type==4",
        "-T",
        "fields",
        "-E",
        "occurrence=f",
        "-e",
        "ip.src",
        "-e",
        "ipv6.src",
        "-e",
        "icmp.type",
        "-e",
        "icmpv6.type",
        "-e",
        "icmp.code",
        "-e",
        "icmpv6.code",
        "-e",
        "icmp.mtu",
    ]));
    let seen: Vec<String> =
        errors.lines().map(|l| l.split('\t').filter(|f| !f.is_empty()).collect::<Vec<_>>().join(" ")).collect();
    for expected in [
        format!("{} 11 0", Routed::ROUTER_V4),
        format!("{} 3 4 1280", Routed::ROUTER_V4),
        format!("{} 3 3", Routed::TARGET_V4),
        format!("{} 3 0", Routed::ROUTER_V6),
        format!("{} 1 4", Routed::TARGET_V6),
        format!("{} 4 1", Routed::TARGET_V6),
        format!("{} 4 2", Routed::TARGET_V6),
    ] {
        assert!(seen.contains(&expected), "tshark saw no {expected}: {seen:?}");
    }

    // The IPv6 attacker's profile carries them in DECNET's shape: who answered each stimulus.
    let token = admin_token(port).await;
    let icmp6 = until("the ICMPv6 fingerprint reaches the attacker", PIPELINE, || async {
        let search = format!("/attackers?search={}", Routed::TARGET_V6);
        let (_, page) = api_call(port, &token, reqwest::Method::GET, &search, None).await;
        let uuid = page["data"].as_array()?.first()?["uuid"].as_str()?.to_string();
        let (_, attacker) = api_call(port, &token, reqwest::Method::GET, &format!("/attackers/{uuid}"), None).await;
        attacker["fingerprints"].as_array()?.iter().find(|f| f["fingerprint_type"] == "icmp6_error").cloned()
    })
    .await;
    assert_eq!((icmp6["matrix"].as_str(), icmp6["fp_hash"].as_str()), (Some("UHNB"), v6.field("fingerprint_hash")));
    let hop = &icmp6["errors"]["hop_limit_exceeded"];
    assert_eq!((&hop["returned"], hop["src_ip"].as_str()), (&Value::Bool(true), Some(Routed::ROUTER_V6)), "{icmp6}");
}
