//! The profiler end to end: `SVC_BENCH_ROWS` log rows (default 200,000) from 1,000 addresses are
//! stored first (as the ingester stores them), then the profiler worker is started and timed until
//! its cursor reaches the last row: rows folded into stored profiles per second, reads, folds and
//! commits included. sqlite in a temporary directory, or MySQL when `SVC_BENCH_MYSQL_URL` names a
//! database (it is dropped and created). Without `--bench` (as under `cargo test --benches`) it
//! runs a small smoke load.
//!
//!     cargo bench -p svc-workers --bench profiler_catch_up
//!     SVC_BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/svc_bench cargo bench -p svc-workers --bench profiler_catch_up
//!
//! Measured on the 2-core build machine (quiet): 200,000 rows in 3.2–3.4 s, 59–62k rows/s on sqlite;
//! 7.4–7.9 s, 25–27k rows/s on the local MariaDB (stock settings, 128 MiB buffer pool). The fold
//! itself is a small part (see `profiler_fold`). On sqlite reading pages (about 40%) and committing
//! (about 45%) dominate; on MariaDB committing is four fifths, half of it the upsert of the
//! batch's observations.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use svc::bus::Bus;
use svc::config::Config;
use svc::db::{self, IngestBatch, IngestCursor, NewLog};
use svc::worker::WorkerContext;
use tokio_util::sync::CancellationToken;

const ADDRESSES: usize = 1_000;
const COMMANDS: [&str; 5] =
    ["ls -la /root", "cat /etc/passwd | grep sh | wc -l", "uname -a; id; w", "history -c", "tmux new -s x"];

fn row(i: usize) -> NewLog {
    // Bursts of 20 rows per address, as scans and brute force come.
    let a = (i / 20) % ADDRESSES;
    let ip = format!("10.1.{}.{}", a / 256, a % 256);
    let (event_type, service, fields, msg) = match i % 4 {
        0 => (
            "command",
            "bash",
            "{}".to_string(),
            Some(format!("CMD uid=0 user=root src={ip} pwd=/root cmd={}", COMMANDS[i % 5])),
        ),
        1 => ("login_attempt", "ssh", r#"{"username":"root","password":"hunter2"}"#.to_string(), None),
        2 => ("request", "http", format!(r#"{{"method":"GET","path":"/x{i}"}}"#), None),
        _ => ("connection", "ftp", "{}".to_string(), None),
    };
    let decky = format!("decky-{}", i % 7);
    NewLog {
        timestamp: Utc.timestamp_opt(1_800_000_000, 0).unwrap() + chrono::Duration::milliseconds(i as i64 * 50),
        raw_line: format!("<134>1 2027-01-15T08:00:00Z {decky} {service} - {event_type} - x"),
        decky,
        service: service.into(),
        event_type: event_type.into(),
        attacker_ip: ip,
        fields,
        msg,
        trace: None,
    }
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let total: usize = if full {
        std::env::var("SVC_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000)
    } else {
        10_000
    };
    let dir = tempfile::tempdir().unwrap();
    let mut vars = vec![
        ("SVC_DATA_DIR".to_string(), dir.path().display().to_string()),
        ("SVC_PROFILER_POLL_MS".to_string(), "10".to_string()),
    ];
    if let Ok(url) = std::env::var("SVC_BENCH_MYSQL_URL") {
        use sqlx::migrate::MigrateDatabase;
        let _ = sqlx::MySql::drop_database(&url).await;
        vars.push(("SVC_DB_TYPE".into(), "mysql".into()));
        vars.push(("SVC_DB_URL".into(), url));
    }
    let config = Config::from_vars(vars).unwrap();
    let db = db::connect(&config.db).unwrap();
    db.migrate().await.unwrap();

    let started = Instant::now();
    assert!(db.acquire_worker_lease("bench", "bench", Utc::now(), Duration::from_secs(3600)).await.unwrap());
    let mut cursor: Option<IngestCursor> = None;
    for (n, chunk) in (0..total).collect::<Vec<_>>().chunks(20_000).enumerate() {
        let next = IngestCursor { file_id: "1:1".into(), offset: n as u64 + 1, ..Default::default() };
        let batch = IngestBatch {
            logs: chunk.iter().map(|&i| row(i)).collect(),
            cursor: Some(next.clone()),
            ..IngestBatch::default()
        };
        db.commit_ingest("bench", "bench", cursor.as_ref(), &batch).await.unwrap();
        cursor = Some(next);
    }
    let last = db.last_log_id().await.unwrap();
    println!("stored {total} rows from {ADDRESSES} addresses in {:.1} s", started.elapsed().as_secs_f64());

    let cancel = CancellationToken::new();
    let ctx = WorkerContext::new(Arc::new(config), db.clone(), Bus::absent(), cancel.clone());
    let started = Instant::now();
    let task = tokio::spawn((svc_workers::profiler::body().run)(ctx));
    while db.profiler_cursor().await.unwrap() < last {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed().as_secs_f64();
    cancel.cancel();
    task.await.unwrap().unwrap();
    let profiles = db.attackers(&Default::default(), 1, 0).await.unwrap().total;
    println!(
        "profiler caught up on {total} rows ({profiles} profiles) in {took:.2} s: {:.0} rows/s",
        total as f64 / took
    );
    db.close().await;
}
