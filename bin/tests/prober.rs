//! The prober against real peers in network namespaces of the test's own (`NetnsHost` 245 and
//! 246): `openssl s_server` with a test certificate, Debian's OpenSSH server on a non-standard
//! port and a plain TCP listener. `svc api` embeds the ingester, the profiler and the prober; an
//! attack line from the namespace's address makes it an attacker, the prober fingerprints it and
//! the fingerprints come back on `GET /attackers/{uuid}`. Each is checked against an independent
//! reading: JARM against the reference Python implementation (PyPI `pyjarm`) run against the same
//! server, HASSH-server against the MD5 of `ssh-audit`'s reading of the same server's KEXINIT, the
//! certificate against `openssl x509`, the SYN-ACK fingerprint against tshark's reading of a capture.
//! A private target with private probing off is never sent a packet (a capture on the test's link).
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
    // UDP header and the 32 bytes sent).
    let icmp = of("icmp_error");
    let icmp_line_hash = icmp.field("fingerprint_hash").map(str::to_string);
    assert_eq!(
        (icmp.field("icmp_code"), icmp.field("echo_len"), icmp.field("ttl")),
        (Some("3"), Some("60"), Some("64"))
    );
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
