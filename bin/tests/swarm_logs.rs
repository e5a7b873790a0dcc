//! The swarm's log shipping between real processes over real TLS: two worker hosts in network
//! namespaces of their own write numbered lines while their forwarders are killed -9 twenty times,
//! the listener is killed and restarted, one host's link is cut for 10 s, and the master API is
//! killed and restarted; at the end every line of every host is in `/logs` exactly once, tagged
//! with its host. And every peer but an enrolled host (no certificate, an empty or unparseable
//! common name, another CA, a decommissioned host, TLS 1.1, a malformed frame length) is refused,
//! with nothing of it reaching `/logs`.

use svc_test_support::processes as common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::netns::NetnsHost;
use common::swarm::{enroll, forwarder_command, master_store};
use common::{Proc, admin_token, api_call, api_command, eventually, free_port, start_api, svc};
use rcgen::DnValue;
use rcgen::string::BmpString;
use svc::swarm::pki::{Ca, Leaf};
use svc::swarm::shipping::{self, Control, MAX_FRAME_BYTES};
use svc::swarm::tls::{Identity, PeerPin, client_config, peer_common_name};
use tokio::io::{AsyncWriteExt, BufReader};
use uuid::Uuid;

fn line(host: &str, seq: u64) -> String {
    format!(
        "<134>1 2026-11-25T10:00:00.000Z {host}-decky ssh - login_attempt [relay@55555 src_ip=\"10.9.9.9\" seq=\"{seq}\"] {host} line {seq}"
    )
}

/// Every row of `/logs`, as the admin, page by page.
async fn all_logs(port: u16) -> Vec<serde_json::Value> {
    let token = admin_token(port).await;
    let mut rows = Vec::new();
    loop {
        let path = format!("/logs?limit=1000&offset={}", rows.len());
        let (status, body) = api_call(port, &token, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{body}");
        let page = body["data"].as_array().unwrap().clone();
        if page.is_empty() {
            return rows;
        }
        rows.extend(page);
    }
}

/// Rows whose decky is `<host>-decky`, counted through the API.
async fn count_of(port: u16, host: &str) -> u64 {
    let token = admin_token(port).await;
    let path = format!("/logs?limit=1&search=decky:{host}-decky");
    let (status, body) = api_call(port, &token, reqwest::Method::GET, &path, None).await;
    if status != 200 {
        return 0;
    }
    body["total"].as_u64().unwrap_or(0)
}

/// A host's deckies writing numbered lines into its ingest file, in a thread of its own; it
/// rotates the file by rename or by copy and truncate when asked (logrotate's two ways).
struct Writer {
    written: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(host: &'static str, path: PathBuf, per_second: u64) -> Writer {
        let (written, stop, pause) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)), Arc::default());
        let thread = {
            let (written, stop, pause): (_, _, Arc<AtomicBool>) = (written.clone(), stop.clone(), Arc::clone(&pause));
            std::thread::spawn(move || {
                let tick = Duration::from_millis(20);
                let per_tick = (per_second / 50).max(1);
                while !stop.load(Ordering::SeqCst) {
                    if !pause.load(Ordering::SeqCst) {
                        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
                        let mut chunk = String::new();
                        for _ in 0..per_tick {
                            let seq = written.load(Ordering::SeqCst);
                            chunk.push_str(&line(host, seq));
                            chunk.push('\n');
                            written.store(seq + 1, Ordering::SeqCst);
                        }
                        file.write_all(chunk.as_bytes()).unwrap();
                    }
                    std::thread::sleep(tick);
                }
            })
        };
        Writer { written, stop, pause, thread: Some(thread) }
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    fn finish(&mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.written()
    }
}

struct Host {
    name: &'static str,
    net: NetnsHost,
    uuid: Uuid,
    dir: PathBuf,
    leaf: Leaf,
    log: PathBuf,
}

impl Host {
    fn forwarder(&self, ca: &Ca, syslog_port: u16) -> Proc {
        let command =
            forwarder_command(&self.dir, ca, &self.leaf, &self.net.master_side.to_string(), syslog_port, &self.log);
        Proc::spawn(self.net.wrap(&command))
    }
}

/// Nanoseconds of the clock: enough randomness for when to kill.
fn random_below(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    u64::from(nanos.wrapping_mul(2_654_435_761)) % n
}

#[tokio::test]
async fn every_line_of_every_host_arrives_once_through_kills_cuts_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (swarm_port, syslog_port) = (free_port(), free_port());
    // First the API without its listener and the listener as a process of its own, so the
    // listener can be killed alone; later the API with the listener embedded, killed whole.
    let api_with = |syslog: u16| {
        let (mut api, port) = api_command(dir.path(), None);
        api.env("SVC_SWARM_ENABLED", "true")
            .env("SVC_SWARM_HOST", "0.0.0.0")
            .env("SVC_SWARM_PORT", swarm_port.to_string())
            .env("SVC_SWARM_SYSLOG_PORT", syslog.to_string())
            .env("SVC_SWARM_DIR", dir.path().join("swarm"));
        (api, port)
    };
    let (command, api_port) = api_with(0);
    let mut api = start_api(command, api_port).await;
    let listener_command = || {
        let mut listener = svc(dir.path(), &["worker", "listener"]);
        listener
            .env("SVC_SWARM_ENABLED", "true")
            .env("SVC_SWARM_HOST", "0.0.0.0")
            .env("SVC_SWARM_SYSLOG_PORT", syslog_port.to_string())
            .env("SVC_SWARM_DIR", dir.path().join("swarm"));
        listener
    };
    let mut listener = Proc::spawn(listener_command());

    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));
    let mut hosts = Vec::new();
    for (name, n) in [("h1", 210), ("h2", 211)] {
        let net = NetnsHost::create(n);
        let leaf = ca.issue(name, &[net.address.to_string()]).unwrap();
        let enrolled = enroll(&db, name, &net.address.to_string(), 8765, &leaf.fingerprint).await;
        let host_dir = dir.path().join(name);
        std::fs::create_dir_all(&host_dir).unwrap();
        let log = host_dir.join("ingest.log");
        hosts.push(Host { name, net, uuid: enrolled.uuid, dir: host_dir, leaf, log });
    }
    let mut writers: Vec<Writer> = hosts.iter().map(|h| Writer::start(h.name, h.log.clone(), 300)).collect();
    let mut forwarders: Vec<Proc> = hosts.iter().map(|h| h.forwarder(&ca, syslog_port)).collect();
    eventually("both hosts' first lines arrive", || async {
        count_of(api_port, "h1").await > 0 && count_of(api_port, "h2").await > 0
    })
    .await;

    // Twenty kills -9 of a forwarder at random moments, each restarted at once.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100 + random_below(600))).await;
        let i = random_below(2) as usize;
        drop(std::mem::replace(&mut forwarders[i], hosts[i].forwarder(&ca, syslog_port)));
    }

    // Rotation on the hosts, both ways, once everything written so far is stored (copytruncate
    // loses what the copy took and the follower had not read, for any follower).
    for (i, host) in hosts.iter().enumerate() {
        writers[i].pause.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let written = writers[i].written();
        eventually("a host's lines are stored before it rotates", || async {
            count_of(api_port, host.name).await >= written
        })
        .await;
        let rotated = host.dir.join("ingest.log.1");
        if i == 0 {
            std::fs::rename(&host.log, &rotated).unwrap();
        } else {
            std::fs::copy(&host.log, &rotated).unwrap();
            std::fs::OpenOptions::new().write(true).truncate(true).open(&host.log).unwrap();
        }
        writers[i].pause.store(false, Ordering::SeqCst);
    }

    // The listener killed and restarted.
    drop(listener);
    tokio::time::sleep(Duration::from_secs(2)).await;
    listener = Proc::spawn(listener_command());

    // h1's link cut for 10 s; h2 ships on meanwhile.
    let before = count_of(api_port, "h2").await;
    hosts[0].net.set_link(false);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(count_of(api_port, "h2").await > before, "the other host shipped on while h1 was cut off");
    hosts[0].net.set_link(true);

    // The master restarts: the API, now with the listener embedded, killed -9 and started again.
    drop(listener);
    drop(api);
    let (command, port) = api_with(syslog_port);
    let api_port = port;
    api = start_api(command, api_port).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    api.signal(rustix::process::Signal::KILL);
    let _ = api.wait();
    let (command, port) = api_with(syslog_port);
    let api_port_2 = port;
    let _api = start_api(command, api_port_2).await;

    let written: Vec<u64> = writers.iter_mut().map(Writer::finish).collect();
    for (host, &total) in hosts.iter().zip(&written) {
        eventually("every line written is stored", || async { count_of(api_port_2, host.name).await >= total }).await;
    }
    // A moment for anything repeated to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(forwarders);

    let rows = all_logs(api_port_2).await;
    for (host, &total) in hosts.iter().zip(&written) {
        let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
        for row in rows.iter().filter(|row| row["decky"] == format!("{}-decky", host.name)) {
            assert_eq!(
                row["host_uuid"],
                host.uuid.to_string(),
                "a row of {} tagged with another host: {row}",
                host.name
            );
            let fields: serde_json::Value = serde_json::from_str(row["fields"].as_str().unwrap()).unwrap();
            *seen.entry(fields["seq"].as_str().unwrap().parse().unwrap()).or_default() += 1;
        }
        let repeated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).map(|(seq, _)| *seq).collect();
        assert!(
            repeated.is_empty(),
            "{}: {} lines stored twice, first {:?}",
            host.name,
            repeated.len(),
            &repeated[..repeated.len().min(10)]
        );
        let missing: Vec<u64> = (0..total).filter(|seq| !seen.contains_key(seq)).collect();
        assert!(
            missing.is_empty(),
            "{}: lines lost: {} of {total}, first {:?}",
            host.name,
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        assert_eq!(seen.len() as u64, total);
    }
    assert!(written.iter().all(|&n| n > 1000), "the hosts wrote {written:?} lines");
    db.close().await;
}

/// Connects to the listener at `port` with `tls`, sends `bytes`, and returns the control frames
/// the listener sent back before it closed the connection (or 5 s passed); an error when the
/// handshake itself failed.
async fn speak(port: u16, tls: Arc<rustls::ClientConfig>, bytes: &[u8]) -> std::io::Result<Vec<Control>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await?;
    let (reader, mut writer) = tokio::io::split(stream);
    let mut reader = BufReader::new(reader);
    let _ = writer.write_all(bytes).await;
    let _ = writer.flush().await;
    let mut frames = Vec::new();
    let mut frame = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(true)) =
        tokio::time::timeout_at(deadline, shipping::read_frame(&mut reader, &mut frame, MAX_FRAME_BYTES)).await
    {
        if let Some(Ok(control)) = shipping::control(&frame) {
            let done = matches!(control, Control::Ack { .. });
            frames.push(control);
            if done {
                break;
            }
        }
    }
    Ok(frames)
}

/// One line of `host` and the end of its batch, as a forwarder sends them.
fn batch(host: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    shipping::encode(line(host, 0).as_bytes(), &mut bytes);
    let cursor = svc::db::IngestCursor { file_id: "1:1".into(), offset: 1000, fingerprint: String::new() };
    shipping::encode_control(&Control::Batch { cursor }, &mut bytes);
    bytes
}

fn tls_of(ca: &Ca, leaf: &Leaf) -> Arc<rustls::ClientConfig> {
    client_config(&Identity::from_pem(&leaf.cert_pem, &leaf.key_pem).unwrap(), ca.cert_pem(), PeerPin::CaSigned, false)
        .unwrap()
}

#[tokio::test]
async fn every_peer_but_an_enrolled_host_is_refused_before_a_frame_and_nothing_of_it_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let syslog_port = free_port();
    let (mut command, api_port) = api_command(dir.path(), None);
    command
        .env("SVC_SWARM_ENABLED", "true")
        .env("SVC_SWARM_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", free_port().to_string())
        .env("SVC_SWARM_SYSLOG_PORT", syslog_port.to_string())
        .env("SVC_SWARM_DIR", dir.path().join("swarm"));
    let api = start_api(command, api_port).await;
    common::swarm::listening("127.0.0.1", syslog_port).await;
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));
    let refusals = || api.output().matches("Log shipping refused").count();
    let handshakes = || api.output().matches("Log shipping TLS handshake refused").count();

    // No client certificate: the handshake fails.
    let roots = {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    };
    use rustls::pki_types::pem::PemObject;
    let anonymous = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let said = speak(syslog_port, Arc::new(anonymous), &batch("anonymous")).await;
    assert!(said.is_err() || said.as_ref().unwrap().is_empty(), "{said:?}");
    eventually("the anonymous peer is logged", || async { handshakes() >= 1 }).await;

    // Another CA's certificate: the handshake fails.
    let stranger = Ca::load_or_create(&dir.path().join("stranger")).unwrap();
    let foreign = stranger.issue("h1", &[]).unwrap();
    let said = speak(syslog_port, tls_of(&stranger, &foreign), &batch("foreign")).await;
    assert!(said.is_err() || said.as_ref().unwrap().is_empty(), "{said:?}");
    eventually("the foreign peer is logged", || async { handshakes() >= 2 }).await;

    // The CA's certificates whose common name is empty, or unparseable (a BMP string, which is no
    // text this side reads), each enrolled for a host so that only the name refuses them.
    let empty = ca.issue_with_common_name(DnValue::Utf8String(String::new()), &["empty.test"]).unwrap();
    let bmp = BmpString::try_from("h1").unwrap();
    let garbled = ca.issue_with_common_name(DnValue::BmpString(bmp), &["garbled.test"]).unwrap();
    for (name, leaf) in [("empty", &empty), ("garbled", &garbled)] {
        let der = rustls::pki_types::CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
        assert_eq!(peer_common_name(&der), None, "{name}'s common name reads as a name");
        enroll(&db, name, "127.0.0.1", 8765, &leaf.fingerprint).await;
        let said = speak(syslog_port, tls_of(&ca, leaf), &batch(name)).await.unwrap();
        assert!(said.is_empty(), "{name}: {said:?}");
    }
    eventually("both nameless peers are logged", || async { refusals() >= 2 }).await;

    // A decommissioned host (its row deleted) and a certificate never enrolled.
    let gone = ca.issue("gone", &[]).unwrap();
    let host = enroll(&db, "gone", "127.0.0.1", 8765, &gone.fingerprint).await;
    db.delete_swarm_host(host.uuid).await.unwrap();
    let said = speak(syslog_port, tls_of(&ca, &gone), &batch("gone")).await.unwrap();
    assert!(said.is_empty(), "{said:?}");
    let stray = ca.issue("stray", &[]).unwrap();
    let said = speak(syslog_port, tls_of(&ca, &stray), &batch("stray")).await.unwrap();
    assert!(said.is_empty(), "{said:?}");
    eventually("the unenrolled peers are logged", || async { refusals() >= 4 }).await;

    // TLS 1.1, offered by OpenSSL with an enrolled host's own certificate.
    let h1 = ca.issue("h1", &[]).unwrap();
    let enrolled = enroll(&db, "h1", "127.0.0.1", 8765, &h1.fingerprint).await;
    std::fs::write(dir.path().join("h1.crt"), &h1.cert_pem).unwrap();
    std::fs::write(dir.path().join("h1.key"), &h1.key_pem).unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.cert_pem()).unwrap();
    let before = handshakes();
    let s_client = std::process::Command::new("openssl")
        .args(["s_client", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0", "-connect", &format!("127.0.0.1:{syslog_port}")])
        .args(["-cert", "h1.crt", "-key", "h1.key", "-CAfile", "ca.crt"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl runs");
    assert!(!s_client.status.success(), "a TLS 1.1 handshake went through");
    eventually("the TLS 1.1 peer is logged", || async { handshakes() > before }).await;

    // The enrolled host itself, with a malformed frame length inside its batch: dropped, the batch
    // not stored.
    let mut bytes = Vec::new();
    shipping::encode(line("malformed", 0).as_bytes(), &mut bytes);
    bytes.extend_from_slice(b"12x4 <134>1 oops\n");
    bytes.extend_from_slice(&batch("malformed"));
    let said = speak(syslog_port, tls_of(&ca, &h1), &bytes).await.unwrap();
    assert!(matches!(said.as_slice(), [Control::Resume { .. }]), "{said:?}");
    eventually("the malformed frame is logged", || async { api.output().contains("malformed frame length") }).await;

    // And then the same host, speaking properly: its line is stored, tagged with it.
    let said = speak(syslog_port, tls_of(&ca, &h1), &batch("h1")).await.unwrap();
    assert!(matches!(said.as_slice(), [Control::Resume { cursor: None }, Control::Ack { .. }]), "{said:?}");
    let rows = all_logs(api_port).await;
    assert_eq!(rows.len(), 1, "only the enrolled host's proper batch is stored: {rows:?}");
    assert_eq!(rows[0]["decky"], "h1-decky");
    assert_eq!(rows[0]["host_uuid"], enrolled.uuid.to_string());
    db.close().await;
}
