//! Repository throughput for the log pipeline: commits `SVC_BENCH_LOGS` log rows (default 1,000,000)
//! through `commit_ingest` in batches of `SVC_BENCH_BATCH` (5,000), then times the dashboard's views
//! on the result. sqlite in a temporary directory, or MySQL when `SVC_BENCH_MYSQL_URL` names a
//! database (it is dropped and created).
//!
//!     cargo bench --bench ingest_commit
//!     SVC_BENCH_SPREAD=1 cargo bench --bench ingest_commit     # every row from a new address
//!
//! Attackers come in bursts of 40 rows from one of 20,000 addresses, as scans and brute force do;
//! `SVC_BENCH_SPREAD` makes consecutive rows come from different addresses, the worst case for the
//! attacker index. Without `--bench` (as under `cargo test --benches`) it runs a small smoke batch.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use svc::config::Config;
use svc::db::{self, IngestBatch, IngestCursor, LogFilter, NewLog, parse_search};

const DECKIES: [&str; 8] = ["ssh-01", "ssh-02", "web-01", "web-02", "ftp-01", "smtp-01", "rdp-01", "mysql-01"];
const SERVICES: [&str; 6] = ["ssh", "http", "ftp", "smtp", "rdp", "mysql"];
const EVENTS: [&str; 5] = ["login", "command", "request", "connect", "disconnect"];

fn var(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn line(k: usize, start: DateTime<Utc>, spread: bool) -> NewLog {
    let attacker = if spread { k } else { (k / 40) % 20_000 };
    let h = attacker.wrapping_mul(2_654_435_761) % (1 << 24);
    let (decky, service, event) = (DECKIES[k % 8], SERVICES[k % 6], EVENTS[k % 5]);
    let (user, password) = (k % 1000, k % 77);
    NewLog {
        timestamp: start + chrono::Duration::milliseconds(k as i64 * 2),
        decky: decky.into(),
        service: service.into(),
        event_type: event.into(),
        attacker_ip: format!("10.{}.{}.{}", h >> 16, (h >> 8) & 255, h & 255),
        raw_line: format!(
            "<134>1 2026-11-21T14:00:00.000Z {decky} {service} - {event} [relay@55555 username=\"root{user}\" \
             password=\"hunter{password}\"] connection attempt {k} from a scanner"
        ),
        fields: format!(r#"{{"username":"root{user}","password":"hunter{password}"}}"#),
        msg: Some(format!("connection attempt {k} from a scanner")),
        trace: None,
    }
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let total = if full { var("SVC_BENCH_LOGS", 1_000_000) } else { 10_000 };
    let batch_size = var("SVC_BENCH_BATCH", 5_000).max(1);
    let spread = std::env::var_os("SVC_BENCH_SPREAD").is_some();
    let dir = tempfile::tempdir().unwrap();
    let mut vars = vec![("SVC_DATA_DIR".to_string(), dir.path().display().to_string())];
    match std::env::var("SVC_BENCH_MYSQL_URL") {
        Ok(url) => {
            use sqlx::migrate::MigrateDatabase;
            let _ = sqlx::MySql::drop_database(&url).await;
            vars.push(("SVC_DB_TYPE".into(), "mysql".into()));
            vars.push(("SVC_DB_URL".into(), url));
        }
        Err(_) => {
            vars.push(("SVC_DB_TYPE".into(), "sqlite".into()));
            vars.push(("SVC_DB_PATH".into(), dir.path().join("svc.db").display().to_string()));
        }
    }
    let db = db::connect(&Config::from_vars(vars).unwrap().db).unwrap();
    db.migrate().await.unwrap();
    println!("{} backend, {total} rows in batches of {batch_size}, spread attackers: {spread}", db.backend());

    assert!(db.acquire_worker_lease("bench", "bench", Utc::now(), Duration::from_secs(3600)).await.unwrap());
    let start = Utc::now() - chrono::Duration::days(1);
    let mut expected: Option<IngestCursor> = None;
    let mut committing = Duration::ZERO;
    for first in (0..total).step_by(batch_size) {
        let logs: Vec<NewLog> = (first..(first + batch_size).min(total)).map(|k| line(k, start, spread)).collect();
        let cursor =
            IngestCursor { file_id: "1:1".into(), offset: (first + logs.len()) as u64 * 250, ..Default::default() };
        let batch = IngestBatch { logs, cursor: Some(cursor.clone()), ..IngestBatch::default() };
        let began = Instant::now();
        db.commit_ingest("bench", "bench", expected.as_ref(), &batch).await.unwrap();
        committing += began.elapsed();
        expected = Some(cursor);
    }
    println!("commit_ingest: {:.0} rows/s ({committing:.2?} in all)", total as f64 / committing.as_secs_f64());

    for search in [
        "",
        "decky:web-01",
        "event:login",
        "attacker:10.0.0.1",
        "decky:web-01 event:login",
        "username:root5",
        "hunter7",
    ] {
        let filter = LogFilter { terms: parse_search(search), ..LogFilter::default() };
        let began = Instant::now();
        let page = db.logs(&filter, 50, 0).await.unwrap();
        let listed = began.elapsed();
        let began = Instant::now();
        db.log_histogram(&filter, 15).await.unwrap();
        let bucketed = began.elapsed();
        println!(
            "{search:>26}: page of {} of {} in {listed:.2?}, histogram in {bucketed:.2?}",
            page.rows.len(),
            page.total
        );
    }
    let began = Instant::now();
    let stats = db.log_stats().await.unwrap();
    println!("stats {stats:?} in {:.2?}", began.elapsed());
    db.close().await;
}
