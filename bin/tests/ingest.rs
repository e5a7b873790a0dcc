//! The ingest worker against real files and real databases: lines appended while it runs become
//! rows with their bounties; rotation, truncation, restarts, `kill -9` mid-batch and a second
//! ingester on the same file neither lose nor repeat a line; hostile lines are counted, not fatal;
//! `svc ingest-replay` back-fills once.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{Proc, eventually, svc};
use rustix::process::Signal;
use store::TestDb;
use svc::bus::{Bus, Counters};
use svc::config::Config;
use svc::db::{Db, LogFilter, LogRecord};
use svc::worker::WorkerContext;
use tokio_util::sync::CancellationToken;

/// An auth attempt numbered `seq` (the number is in the `seq` field).
fn line(seq: usize) -> String {
    format!(
        "<134>1 2026-05-02T06:00:25.453826+00:00 decky-{} ssh - auth_attempt [relay@55555 src_ip=\"192.0.2.{}\" seq=\"{seq}\"]\n",
        seq % 3,
        seq % 200
    )
}

fn lines(range: std::ops::Range<usize>) -> String {
    range.map(line).collect()
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// Every stored row, oldest first.
async fn stored(db: &Db) -> Vec<LogRecord> {
    let mut rows = Vec::new();
    loop {
        let page = db.logs(&LogFilter::default(), 1000, rows.len() as u64).await.unwrap();
        let done = page.rows.len() < 1000;
        rows.extend(page.rows);
        if done {
            rows.sort_by_key(|r| r.id);
            return rows;
        }
    }
}

async fn count(db: &Db) -> u64 {
    db.logs(&LogFilter::default(), 1, 0).await.unwrap().total
}

/// The `seq` of every stored row, sorted: each line exactly once means exactly `0..n`.
async fn seqs(db: &Db) -> Vec<usize> {
    let mut seqs: Vec<usize> = stored(db)
        .await
        .iter()
        .map(|r| {
            let fields: serde_json::Value = serde_json::from_str(&r.fields).unwrap();
            fields["seq"].as_str().unwrap().parse().unwrap()
        })
        .collect();
    seqs.sort_unstable();
    seqs
}

async fn wait_for_rows(db: &Db, n: u64) {
    eventually(&format!("{n} rows are stored"), || async { count(db).await >= n }).await;
}

/// The ingest worker running in this process, as the API embeds it.
struct Ingest {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    counters: Counters,
}

impl Ingest {
    fn start(config: &Config, db: &Db) -> Ingest {
        let cancel = CancellationToken::new();
        let ctx = WorkerContext::new(Arc::new(config.clone()), db.clone(), Bus::absent(), cancel.clone());
        let counters = ctx.counters.clone();
        let body = svc_workers::ingest::body();
        Ingest { cancel, task: tokio::spawn((body.run)(ctx)), counters }
    }

    fn counter(&self, name: &str) -> u64 {
        self.counters.snapshot().get(name).copied().unwrap_or(0)
    }

    /// Stops it as SIGTERM would: it stores what it has read, then returns.
    async fn stop(self) -> Counters {
        self.cancel.cancel();
        self.task.await.unwrap().unwrap();
        self.counters
    }
}

fn config(backend: &TestDb, file: &Path) -> Config {
    backend.api_config(&[
        ("SVC_INGEST_LOG_FILE", file.to_str().unwrap()),
        ("SVC_INGEST_BATCH_MAX_WAIT_MS", "20"),
        ("SVC_INGEST_LEASE_SECS", "1"),
    ])
}

#[tokio::test]
async fn appended_lines_become_rows_with_their_bounties_and_credentials() {
    for backend in TestDb::all() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ingest.log");
        let db = backend.open().await;
        let config = config(&backend, &file);
        // Started before the file exists: it waits for it.
        let ingest = Ingest::start(&config, &db);
        let credential = "<134>1 2026-05-02T06:22:48.089309+00:00 omega-decky auth-helper - auth_attempt \
            [relay@55555 username=\"root\" principal=\"root\" secret_printable=\"toor\" secret_b64=\"dG9vcg==\" src_ip=\"192.0.2.5\"]\n";
        let ja3 = "<134>1 2026-05-02T06:30:00+00:00 omega-decky sniffer - tls_client_hello \
            [relay@55555 src_ip=\"192.0.2.9:51234\" ja3=\"771,4865-4866,0-23,29,0\" ja3_hash=\"aa\" sni=\"example.org\"]\n";
        append(&file, credential);
        append(&file, "this is not a syslog line\n");
        append(&file, ja3);
        append(&file, "\u{1}\u{2}\u{3}\u{fffd}\u{0}garbage\n");
        append(&file, credential);
        wait_for_rows(&db, 3).await;
        eventually("the malformed lines are counted", || async { ingest.counter("lines_malformed") == 2 }).await;

        let rows = stored(&db).await;
        assert_eq!(rows.len(), 3, "{}", backend.name);
        assert_eq!(
            (rows[0].decky.as_str(), rows[0].service.as_str(), rows[0].event_type.as_str()),
            ("omega-decky", "auth-helper", "auth_attempt")
        );
        assert_eq!(rows[0].attacker_ip, "192.0.2.5");
        assert_eq!(rows[0].raw_line, credential.trim_end());
        assert_eq!(rows[1].attacker_ip, "192.0.2.9");
        let fields: serde_json::Value = serde_json::from_str(&rows[1].fields).unwrap();
        assert_eq!(fields["remote_port"], "51234");
        assert_eq!(rows[1].timestamp.to_rfc3339(), "2026-05-02T06:30:00+00:00");

        // The same secret twice from one address is one credential with two attempts.
        let credentials = db.credentials(&Default::default(), 10, 0).await.unwrap().rows;
        assert_eq!(credentials.len(), 1, "{}", backend.name);
        assert_eq!((credentials[0].attempt_count, credentials[0].principal.as_deref()), (2, Some("root")));
        let bounties = db.bounties(&Default::default(), 50, 0).await.unwrap();
        let fingerprint =
            bounties.rows.iter().find(|b| b.bounty_type == "fingerprint").expect("a ja3 fingerprint bounty");
        let payload: serde_json::Value = serde_json::from_str(&fingerprint.payload).unwrap();
        assert_eq!(payload["fingerprint_type"], "ja3");
        assert_eq!(bounties.rows.iter().filter(|b| b.bounty_type == "credential").count(), 1);

        // A restart goes on where the last one stopped.
        ingest.stop().await;
        append(&file, &line(7));
        let ingest = Ingest::start(&config, &db);
        wait_for_rows(&db, 4).await;
        ingest.stop().await;
        assert_eq!(count(&db).await, 4, "{}", backend.name);
    }
}

#[tokio::test]
async fn rotation_by_rename_and_by_truncation_loses_nothing() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ingest.log");
    let db = backend.open().await;
    let config = config(&backend, &file);
    let ingest = Ingest::start(&config, &db);

    let mut writer = std::fs::OpenOptions::new().create(true).append(true).open(&file).unwrap();
    writer.write_all(lines(0..100).as_bytes()).unwrap();
    wait_for_rows(&db, 100).await;
    // Rename rotation: the writer keeps appending to the renamed file before it reopens.
    std::fs::rename(&file, dir.path().join("ingest.log.1")).unwrap();
    writer.write_all(lines(100..150).as_bytes()).unwrap();
    drop(writer);
    append(&file, &lines(150..200));
    wait_for_rows(&db, 200).await;
    // copytruncate: the file is emptied in place, then written again.
    std::fs::OpenOptions::new().write(true).truncate(true).open(&file).unwrap();
    append(&file, &lines(200..230));
    wait_for_rows(&db, 230).await;

    // Rotated while stopped: the rest of the old file is finished after the restart.
    ingest.stop().await;
    append(&file, &lines(230..240));
    std::fs::rename(&file, dir.path().join("ingest.log.2")).unwrap();
    append(&file, &lines(240..250));
    let ingest = Ingest::start(&config, &db);
    wait_for_rows(&db, 250).await;
    ingest.stop().await;
    assert_eq!(seqs(&db).await, (0..250).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_10_mb_line_and_binary_garbage_are_counted_and_ingestion_goes_on() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ingest.log");
    let db = backend.open().await;
    let ingest = Ingest::start(&config(&backend, &file), &db);
    append(&file, &line(0));
    let mut bytes = Vec::new();
    bytes.extend(std::iter::repeat_n(b'A', 10 * 1024 * 1024));
    bytes.push(b'\n');
    // Invalid UTF-8, NULs, a lone carriage return, a syslog-looking prefix with nothing after it.
    bytes.extend_from_slice(b"\xff\xfe\x00\x01\x80garbage\r\n<134>1\n<999>1 x y z - w\n\xc3\x28\n");
    std::fs::OpenOptions::new().append(true).open(&file).unwrap().write_all(&bytes).unwrap();
    append(&file, &line(1));
    wait_for_rows(&db, 2).await;
    eventually("the hostile lines are counted", || async {
        ingest.counter("lines_oversized") == 1 && ingest.counter("lines_malformed") == 4
    })
    .await;
    ingest.stop().await;
    assert_eq!(seqs(&db).await, [0, 1]);
}

/// `svc ARGS` on `backend`'s database, following `file`, with small batches and a short lease.
fn ingest_command(dir: &Path, backend: &TestDb, file: &Path, args: &[&str]) -> std::process::Command {
    let mut command = svc(dir, args);
    command.envs(backend.vars()).env("SVC_INGEST_LOG_FILE", file).env("SVC_INGEST_LEASE_SECS", "1");
    command
}

#[tokio::test]
async fn kill_9_mid_batch_neither_loses_nor_repeats_a_line() {
    const LINES: usize = 30_000;
    for backend in TestDb::all() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ingest.log");
        let db = backend.open().await;
        append(&file, &lines(0..LINES));
        let mut command = ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]);
        command.env("SVC_INGEST_BATCH_SIZE", "500");
        let first = Proc::spawn(command);
        eventually("some batches are stored", || async { count(&db).await > 0 }).await;
        first.signal(Signal::KILL);
        drop(first);
        let stored_at_kill = count(&db).await;
        assert!(stored_at_kill < LINES as u64, "the worker finished before it was killed; make the file longer");

        let mut command = ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]);
        command.env("SVC_INGEST_BATCH_SIZE", "500");
        let second = Proc::spawn(command);
        wait_for_rows(&db, LINES as u64).await;
        second.signal(Signal::TERM);
        drop(second);
        assert_eq!(seqs(&db).await, (0..LINES).collect::<Vec<_>>(), "{}", backend.name);
    }
}

#[tokio::test]
async fn truncated_and_grown_back_while_the_ingester_is_killed_stopped_or_paused_loses_and_repeats_nothing() {
    const LINES: usize = 500;
    for signal in [Signal::KILL, Signal::TERM, Signal::STOP] {
        for backend in TestDb::all() {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("ingest.log");
            let db = backend.open().await;
            append(&file, &lines(0..LINES));
            let mut ingester = Proc::spawn(ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]));
            wait_for_rows(&db, LINES as u64).await;
            ingester.signal(signal);
            if signal != Signal::STOP {
                ingester.wait();
            }
            // copytruncate while it is away, and the file grows back well past the stored offset.
            std::fs::OpenOptions::new().write(true).truncate(true).open(&file).unwrap();
            append(&file, &lines(LINES..4 * LINES));
            let _back = if signal == Signal::STOP {
                ingester.signal(Signal::CONT);
                ingester
            } else {
                drop(ingester);
                Proc::spawn(ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]))
            };
            wait_for_rows(&db, 4 * LINES as u64).await;
            let seqs = seqs(&db).await;
            assert_eq!(seqs, (0..4 * LINES).collect::<Vec<_>>(), "{} after {signal:?}", backend.name);
        }
    }
}

#[tokio::test]
async fn an_ingest_worker_on_a_fresh_database_migrates_it() {
    for backend in TestDb::all() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ingest.log");
        append(&file, &lines(0..50));
        let worker = Proc::spawn(ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]));
        // Only the worker has run: no API, no migration of the test's own.
        let db = svc::db::connect(&Config::from_vars(backend.vars()).unwrap().db).unwrap();
        eventually("the worker's rows are stored", || async {
            db.logs(&LogFilter::default(), 1, 0).await.is_ok_and(|page| page.total == 50)
        })
        .await;
        assert!(!worker.output().contains("ERROR"), "{}: {}", backend.name, worker.output());
        worker.signal(Signal::TERM);
    }
}

#[tokio::test]
async fn two_ingesters_on_one_file_store_each_line_once() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ingest.log");
    let db = backend.open().await;
    let a = Proc::spawn(ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]));
    let b = Proc::spawn(ingest_command(dir.path(), &backend, &file, &["worker", "ingest"]));
    for chunk in 0..20 {
        append(&file, &lines(chunk * 100..(chunk + 1) * 100));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for_rows(&db, 2000).await;
    // The one holding the lease dies; the other takes over once the lease expires.
    let (holder, standby) = if a.output().contains("Holding the ingest lease") { (a, b) } else { (b, a) };
    assert!(standby.output().contains("standing by"), "{}", standby.output());
    holder.signal(Signal::KILL);
    drop(holder);
    append(&file, &lines(2000..2500));
    wait_for_rows(&db, 2500).await;
    standby.signal(Signal::TERM);
    drop(standby);
    assert_eq!(seqs(&db).await, (0..2500).collect::<Vec<_>>());
}

#[tokio::test]
async fn ingest_replay_backfills_a_file_once() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.log");
    append(&history, &lines(0..1000));
    append(&history, "not syslog\n");
    // The last line of a finished file counts even without its newline.
    append(&history, line(1000).trim_end());
    // Run under a deadline: an ingester that loses its lease must fail, not spin.
    let replay = |dir: &Path| {
        let mut command = svc(dir, &["ingest-replay", history.to_str().unwrap()]);
        // Small batches and a lease far shorter than the replay: it must renew the lease as it goes.
        command.envs(backend.vars()).env("SVC_INGEST_BATCH_SIZE", "10").env("SVC_INGEST_LEASE_SECS", "0.05");
        let mut replay = Proc::spawn(command);
        let status = replay.wait();
        (status, replay.output())
    };
    let (status, said) = replay(dir.path());
    assert!(status.success(), "{said}");
    assert!(said.contains("stored 1001 lines; skipped 1 malformed"), "{said}");
    let (_, said) = replay(dir.path());
    assert!(said.contains("stored 0 lines"), "{said}");
    let db = backend.open().await;
    assert_eq!(seqs(&db).await, (0..=1000).collect::<Vec<_>>());

    let missing = svc(dir.path(), &["ingest-replay", "/nonexistent/file.log"]).envs(backend.vars()).output().unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("is not a file"));
}

#[tokio::test]
async fn a_line_appended_to_the_file_reaches_an_open_stream() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ingest.log");
    let nats = common::Nats::start();
    let (mut command, port) = common::api_command(dir.path(), Some(&nats));
    command.env("SVC_INGEST_LOG_FILE", &file);
    let _api = common::start_api(command, port).await;
    let token = common::admin_token(port).await;
    let mut stream = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/stream"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // The stream is open once its first frames (stats, histogram) arrive.
    let mut body = String::new();
    while !body.contains("\"histogram\"") {
        body.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().unwrap()));
    }
    append(&file, &line(42));
    let arrived = tokio::time::timeout(common::DEADLINE, async {
        loop {
            let chunk = stream.chunk().await.unwrap().expect("the stream stays open");
            body.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(frame) = body.split("\n\n").find(|frame| frame.contains("seq=\\\"42\\\"")) {
                return frame.to_string();
            }
        }
    })
    .await
    .expect("the appended line reaches the stream");
    assert!(arrived.contains("\"type\":\"logs\""), "{arrived}");
    assert!(arrived.lines().any(|l| l.starts_with("id: ")), "{arrived}");
}
