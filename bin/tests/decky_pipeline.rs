//! A decky's output through the whole pipeline: a real `svc decky` process is attacked over
//! telnet and HTTP, its stdout is ingested by `svc ingest-replay`, and the profiler folds the rows;
//! the store then holds the credentials tried, and the attacker's profile holds the commands run.

mod common;
#[path = "../../tests/common/mod.rs"]
mod store;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Proc, eventually, free_port, svc};
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

    let credentials = db.credentials(10).await.unwrap();
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
