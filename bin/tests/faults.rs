//! Honest under faults (issue 21), the store side: the API with its ingester embedded, its sqlite
//! file on a small tmpfs the test fills to the last byte, made read-only, or removed. During each
//! fault the operator sees it (health 503, the failing component, the reason in the log); after
//! it, everything recovers by itself and each line appended meanwhile is stored exactly once.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::eventually;
use reqwest::StatusCode;
use serde_json::Value;
use store::proxy::DbProxy;
use store::{LogCapture, TestApi, TestDb};
use svc::db::{Db, LogFilter};

/// An auth attempt numbered `seq` (the number is in the `seq` field).
fn lines(range: std::ops::Range<usize>) -> String {
    range
        .map(|seq| {
            format!(
                "<134>1 2026-05-02T06:00:25.453826+00:00 decky-1 ssh - auth_attempt [relay@55555 src_ip=\"192.0.2.7\" seq=\"{seq}\"]\n"
            )
        })
        .collect()
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// The `seq` of every stored row, sorted: each line exactly once means exactly `0..n`.
async fn seqs(db: &Db) -> Vec<usize> {
    let page = db.logs(&LogFilter::default(), 100_000, 0).await.unwrap();
    let mut seqs: Vec<usize> = page
        .rows
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.fields).unwrap()["seq"].as_str().unwrap().parse().unwrap())
        .collect();
    seqs.sort_unstable();
    seqs
}

async fn stored(db: &Db) -> u64 {
    db.logs(&LogFilter::default(), 1, 0).await.map_or(0, |page| page.total)
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}: {status}");
}

/// A tmpfs of `size` mounted for the test, unmounted when it ends.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&path).unwrap();
        run("mount", &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", path.to_str().unwrap()]);
        Tmpfs { path }
    }

    /// Writes a filler file until the file system has no byte left; returns its path.
    fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        let mut size = block.len();
        // Halving at the end leaves no byte over.
        while size > 0 {
            if file.write_all(&block[..size]).is_err() {
                size /= 2;
            }
        }
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(self.path.join("svc.db")).status();
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// The API with its ingester, on a database at `data/svc.db`, following `file`.
async fn api(backend: &TestDb, data: &Path, file: &Path) -> TestApi {
    let database = data.join("svc.db");
    api_with(backend, file, &[("SVC_DB_PATH", database.to_str().unwrap()), ("SVC_DATA_DIR", data.to_str().unwrap())])
        .await
}

/// The API with its ingester following `file`, on `backend` with `vars` on top.
async fn api_with(backend: &TestDb, file: &Path, vars: &[(&str, &str)]) -> TestApi {
    let mut vars = vars.to_vec();
    vars.extend([
        ("SVC_INGEST_LOG_FILE", file.to_str().unwrap()),
        ("SVC_INGEST_BATCH_MAX_WAIT_MS", "20"),
        ("SVC_INGEST_LEASE_SECS", "1"),
    ]);
    // These disks are small on purpose: the watermark is off unless a test sets it.
    if !vars.iter().any(|(name, _)| *name == "SVC_DISK_MIN_FREE_MB") {
        vars.push(("SVC_DISK_MIN_FREE_MB", "0"));
    }
    TestApi::start_with(backend.api_config(&vars), vec![svc_workers::ingest::body()]).await
}

/// Health's status code and body.
async fn health(api: &TestApi) -> (StatusCode, Value) {
    let reply = api.get("/health", None, &[]).await;
    (reply.status, reply.body)
}

async fn wait_for_rows(api: &TestApi, n: u64) {
    eventually(&format!("{n} rows are stored"), || async { stored(&api.state.db).await == n }).await;
}

/// Waits until health answers 503 with `component` failing for one of `details`, and returns the
/// body.
async fn wait_unhealthy(api: &TestApi, component: &str, details: &[&str]) -> Value {
    eventually(&format!("health says {component} is failing"), || async {
        let (status, body) = health(api).await;
        let detail = body["components"][component]["detail"].as_str().unwrap_or_default().to_string();
        status == StatusCode::SERVICE_UNAVAILABLE && details.contains(&detail.as_str())
    })
    .await;
    health(api).await.1
}

async fn wait_healthy(api: &TestApi) {
    eventually("health is back to healthy", || async { health(api).await.0 == StatusCode::OK }).await;
}

#[tokio::test]
async fn a_full_disk_pauses_ingestion_reports_it_and_resumes_by_itself_losing_nothing() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(dir.path().join("data"), "8m");
    let file = dir.path().join("ingest.log");
    let api = api(&backend, &tmpfs.path, &file).await;
    append(&file, &lines(0..200));
    wait_for_rows(&api, 200).await;
    wait_healthy(&api).await;

    let filler = tmpfs.fill();
    append(&file, &lines(200..1200));
    let body = wait_unhealthy(&api, "ingestion_worker", &["cannot store: database unavailable"]).await;
    assert_eq!(body["status"], "unhealthy");
    assert_eq!(stored(&api.state.db).await, 200, "nothing of the failed batches is half-stored");

    std::fs::remove_file(filler).unwrap();
    wait_for_rows(&api, 1200).await;
    wait_healthy(&api).await;
    append(&file, &lines(1200..1300));
    wait_for_rows(&api, 1300).await;
    assert_eq!(seqs(&api.state.db).await, (0..1300).collect::<Vec<_>>(), "each line exactly once");
    api.stop().await;
}

#[tokio::test]
async fn below_the_disk_watermark_connections_and_requests_are_shed_credentials_and_commands_kept() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(dir.path().join("data"), "8m");
    let file = dir.path().join("ingest.log");
    let database = tmpfs.path.join("svc.db");
    let vars = [
        ("SVC_DB_PATH", database.to_str().unwrap()),
        ("SVC_DATA_DIR", tmpfs.path.to_str().unwrap()),
        // More than the whole 8 MiB disk: below the watermark from the start.
        ("SVC_DISK_MIN_FREE_MB", "16"),
    ];
    let api = api_with(&backend, &file, &vars).await;
    let event = |event: &str, n: usize| {
        format!("<134>1 2026-05-02T06:00:25Z decky-1 ssh - {event} [relay@55555 src_ip=\"192.0.2.7\" seq=\"{n}\"]\n")
    };
    let mut text = String::new();
    for n in 0..100 {
        for kind in ["connect", "request", "auth_attempt", "command", "file_captured", "disconnect"] {
            text.push_str(&event(kind, n));
        }
    }
    append(&file, &text);
    wait_for_rows(&api, 300).await;
    // A marker after everything: once it is in, every line before it was read.
    append(&file, &event("command", 1000));
    wait_for_rows(&api, 301).await;
    let page = api.state.db.logs(&LogFilter::default(), 1000, 0).await.unwrap();
    let mut kinds: Vec<&str> = page.rows.iter().map(|r| r.event_type.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(kinds, ["auth_attempt", "command", "file_captured"], "only the high-value events are stored");
    let (status, body) = health(&api).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    let detail = body["components"]["disk"]["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("disk low (") && detail.contains("shedding connect"), "{body}");
    api.stop().await;
}

#[tokio::test]
async fn a_read_only_database_file_is_reported_and_writes_resume_when_it_is_writable_again() {
    let (log, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(dir.path().join("data"), "64m");
    let file = dir.path().join("ingest.log");
    let api = api(&backend, &tmpfs.path, &file).await;
    append(&file, &lines(0..100));
    wait_for_rows(&api, 100).await;

    // Immutable: even root cannot open it for writing, as a changed owner or mode does to svc's user.
    let database = tmpfs.path.join("svc.db");
    run("chattr", &["+i", database.to_str().unwrap()]);
    append(&file, &lines(100..600));
    let body = wait_unhealthy(&api, "database", &["database unavailable"]).await;
    assert_eq!(body["status"], "unhealthy");
    assert!(log.text().contains("cannot be opened for writing"), "the reason is in the server log:\n{}", log.text());

    run("chattr", &["-i", database.to_str().unwrap()]);
    wait_for_rows(&api, 600).await;
    wait_healthy(&api).await;
    assert_eq!(seqs(&api.state.db).await, (0..600).collect::<Vec<_>>(), "each line exactly once");
    api.stop().await;
}

#[tokio::test]
async fn a_removed_data_directory_is_noticed_ingestion_pauses_and_a_restart_stores_every_line() {
    let (log, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("ingest.log");
    let api = api(&backend, &data, &file).await;
    append(&file, &lines(0..100));
    wait_for_rows(&api, 100).await;

    std::fs::remove_dir_all(&data).unwrap();
    let body = wait_unhealthy(&api, "database", &["database unavailable"]).await;
    assert_eq!(body["status"], "unhealthy");
    append(&file, &lines(100..400));
    wait_unhealthy(&api, "ingestion_worker", &["cannot store: database unavailable"]).await;
    assert!(log.text().contains("was removed or replaced while in use"), "the log says what happened:\n{}", log.text());
    assert!(log.text().contains("restart svc to begin a new, empty database"), "and what to do");
    api.stop().await;

    // The operator restarts it: a new database, and every line of the file, those appended while
    // the directory was gone included, stored once.
    let api = self::api(&backend, &data, &file).await;
    wait_for_rows(&api, 400).await;
    assert_eq!(seqs(&api.state.db).await, (0..400).collect::<Vec<_>>());
    wait_healthy(&api).await;
    api.stop().await;
}

#[tokio::test]
async fn an_ingester_stuck_on_a_hung_database_is_not_ok_and_recovers_when_it_answers() {
    let Some(backend) = TestDb::mysql() else {
        eprintln!("SVC_TEST_MYSQL_URL unset: a hung server needs MariaDB behind a proxy");
        return;
    };
    backend.open().await.close().await;
    let (proxy, via_proxy) = DbProxy::start(backend.mysql_url().unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ingest.log");
    let api = api_with(&backend, &file, &[("SVC_DB_URL", &via_proxy)]).await;
    append(&file, &lines(0..100));
    wait_for_rows(&api, 100).await;
    wait_healthy(&api).await;

    // The server keeps every connection open and answers nothing: the ingester's task lives on,
    // stuck in a commit (no progress within its window) or failing to get a connection. Health
    // says so from what the worker did, not from its task existing.
    proxy.pause();
    append(&file, &lines(100..300));
    wait_unhealthy(&api, "ingestion_worker", &["not making progress", "cannot store: database unavailable"]).await;

    proxy.resume();
    eventually("the ingester stores again", || async { stored(&api.state.db).await == 300 }).await;
    wait_healthy(&api).await;
    assert_eq!(seqs(&api.state.db).await, (0..300).collect::<Vec<_>>(), "each line exactly once");
    api.stop().await;
}
