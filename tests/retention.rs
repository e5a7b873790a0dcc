//! Log retention through the real server, on every backend under test: rows past
//! `SVC_RETENTION_DAYS` or beyond `SVC_RETENTION_MAX_ROWS` pruned in the background and younger
//! rows kept, the counters behind `/logs` totals, `/logs/histogram` and `/stats` agreeing with the
//! rows left, nothing pruned with the settings off, and `/logs` and ingest answering while many
//! rows are pruned.

use svc_test_support::in_process as common;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::logs::{LogWriter, bounty, log};
use common::{TestApi, TestDb, user_token};
use serde_json::{Value, json};
use svc::db::{NewLog, Role};
use svc::retention::{Pruned, Retention};
use tokio_util::sync::CancellationToken;

/// `n` rows of `ip` at `at` plus one minute per row, on two services.
fn rows(ip: &str, at: DateTime<Utc>, n: usize) -> Vec<NewLog> {
    (0..n)
        .map(|i| {
            let (decky, service) = if i % 2 == 0 { ("ssh-01", "ssh") } else { ("web-01", "http") };
            log(
                decky,
                service,
                "login_attempt",
                ip,
                json!({"n": i.to_string()}),
                at + chrono::Duration::minutes(i as i64),
            )
        })
        .collect()
}

/// What the views say, each from its own counters, and the rows counted one by one (a time range
/// makes `/logs` count the rows instead of reading the counters).
async fn views(api: &TestApi, token: &str, search: &str) -> Value {
    let logs = api.ok("/logs", token, &[("limit", "1")]).await;
    let counted = api.ok("/logs", token, &[("limit", "1"), ("start_time", "2000-01-01 00:00:00")]).await;
    let searched = api.ok("/logs", token, &[("limit", "1"), ("search", search)]).await;
    let searched_rows =
        api.ok("/logs", token, &[("limit", "1"), ("search", search), ("start_time", "2000-01-01 00:00:00")]).await;
    let stats = api.ok("/stats", token, &[]).await;
    let histogram = api.ok("/logs/histogram", token, &[("interval_minutes", "60")]).await;
    let buckets = histogram.as_array().unwrap();
    json!({
        "total": logs["total"],
        "counted": counted["total"],
        "searched": searched["total"],
        "searched_counted": searched_rows["total"],
        "stats_total": stats["total_logs"],
        "stats_attackers": stats["unique_attackers"],
        "histogram_total": buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum::<u64>(),
        "empty_buckets": buckets.iter().filter(|b| b["count"] == 0).count(),
    })
}

/// What [`views`] says of `total` rows from `attackers` addresses, `searched` of them matching.
fn agreeing(total: u64, searched: u64, attackers: u64) -> Value {
    json!({
        "total": total, "counted": total, "searched": searched, "searched_counted": searched,
        "stats_total": total, "stats_attackers": attackers, "histogram_total": total, "empty_buckets": 0,
    })
}

/// Polls `/stats` until it counts `total` rows (the background pruner's pass is done).
async fn until_stats_total(api: &TestApi, token: &str, total: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if api.ok("/stats", token, &[]).await["total_logs"] == total {
            return;
        }
        assert!(Instant::now() < deadline, "the pruner never got /stats to {total} rows");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn rows_past_the_age_are_pruned_and_the_counters_agree_with_the_rows_left() {
    for backend in TestDb::all() {
        let api =
            TestApi::start(backend.api_config(&[("SVC_RETENTION_DAYS", "30"), ("SVC_RETENTION_INTERVAL_S", "0.2")]))
                .await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let (old, young) = (Utc::now() - chrono::Duration::days(40), Utc::now() - chrono::Duration::days(2));
        let mut writer = LogWriter::new(&api.state.db).await;
        // 10.0.0.1 only long ago, 10.0.0.2 then and lately, 10.0.0.3 only lately.
        writer.commit(rows("10.0.0.1", old, 30), vec![bounty("artifact", "10.0.0.1", "{\"sha\":\"1\"}", old)]).await;
        writer.logs(rows("10.0.0.2", old + chrono::Duration::hours(1), 20)).await;
        writer.logs(rows("10.0.0.2", young, 7)).await;
        writer.logs(rows("10.0.0.3", young + chrono::Duration::hours(1), 5)).await;

        until_stats_total(&api, &token, 12).await;
        assert_eq!(views(&api, &token, "attacker:10.0.0.2").await, agreeing(12, 7, 2), "{}", backend.name);
        assert_eq!(views(&api, &token, "attacker:10.0.0.1").await["searched"], 0, "{}", backend.name);
        assert_eq!(views(&api, &token, "service:ssh").await["searched"], 4 + 3, "{}", backend.name);
        let kept = api.ok("/logs", &token, &[("limit", "1000")]).await;
        assert!(
            kept["data"].as_array().unwrap().iter().all(|row| row["attacker_ip"] != "10.0.0.1"),
            "{}: only young rows are left",
            backend.name
        );
        // Bounties (and credentials, and profiles) are not log rows: kept.
        assert_eq!(api.ok("/bounty", &token, &[]).await["total"], 1, "{}", backend.name);

        // Ingest goes on as before, and the counters follow.
        writer.logs(rows("10.0.0.4", young, 3)).await;
        assert_eq!(views(&api, &token, "attacker:10.0.0.4").await, agreeing(15, 3, 3), "{}", backend.name);
        api.stop().await;
    }
}

#[tokio::test]
async fn the_oldest_rows_beyond_the_row_limit_are_pruned() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let start = Utc::now() - chrono::Duration::days(3);
        let mut writer = LogWriter::new(&api.state.db).await;
        writer.logs(rows("10.0.0.1", start, 2_500)).await;
        writer.logs(rows("10.0.0.2", start + chrono::Duration::days(2), 100)).await;

        let retention = Retention { max_age: None, max_rows: Some(1_000), interval: Duration::from_secs(60) };
        let pruned =
            svc::retention::prune(&api.state.db, &retention, "test-pruner", &CancellationToken::new()).await.unwrap();
        assert_eq!(pruned, Pruned { aged: 0, over_limit: 1_600 }, "{}", backend.name);
        assert_eq!(views(&api, &token, "attacker:10.0.0.2").await, agreeing(1_000, 100, 2), "{}", backend.name);
        let oldest = api.ok("/logs", &token, &[("limit", "1"), ("offset", "999")]).await;
        let expected = svc::time::format_utc(start + chrono::Duration::minutes(1_600));
        assert_eq!(oldest["data"][0]["timestamp"], expected, "{}: the newest are kept", backend.name);
        api.stop().await;
    }
}

#[tokio::test]
async fn with_the_settings_off_nothing_is_pruned() {
    for backend in TestDb::all() {
        let config = backend.api_config(&[("SVC_RETENTION_INTERVAL_S", "0.05")]);
        let retention = config.retention();
        assert!(retention.is_off(), "retention is off by default: {retention:?}");
        let api = TestApi::start(config).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        writer.logs(rows("10.0.0.1", Utc::now() - chrono::Duration::days(3_000), 40)).await;

        // The pruner returns at once, having touched nothing.
        tokio::time::timeout(
            Duration::from_secs(5),
            svc::retention::run(api.state.db.clone(), retention.clone(), CancellationToken::new()),
        )
        .await
        .expect("an idle pruner returns");
        let pruned =
            svc::retention::prune(&api.state.db, &retention, "test-pruner", &CancellationToken::new()).await.unwrap();
        assert_eq!(pruned, Pruned::default());
        assert_eq!(views(&api, &token, "attacker:10.0.0.1").await, agreeing(40, 40, 1), "{}", backend.name);
        api.stop().await;
    }
}

/// Rows per commit when filling the database.
const FILL_BATCH: usize = 20_000;

#[tokio::test]
async fn logs_and_ingest_keep_answering_while_many_rows_are_pruned() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let old = Utc::now() - chrono::Duration::days(400);
        let mut writer = LogWriter::new(&api.state.db).await;
        let total = 200_000;
        for batch in 0..total / FILL_BATCH {
            let at = old + chrono::Duration::minutes((batch * FILL_BATCH) as i64);
            writer.logs(rows(&format!("10.1.{}.1", batch % 50), at, FILL_BATCH)).await;
        }
        until_stats_total(&api, &token, total as u64).await;

        let retention =
            Retention { max_age: Some(chrono::Duration::days(30)), max_rows: None, interval: Duration::from_secs(60) };
        let db = api.state.db.clone();
        let started = Instant::now();
        let pruning = tokio::spawn(async move {
            svc::retention::prune(&db, &retention, "test-pruner", &CancellationToken::new()).await.unwrap()
        });
        // Reads and an ingest commit while the prune runs: each answers, none waits for the prune.
        let (mut reads, mut slowest) = (0, Duration::ZERO);
        let mut ingested = false;
        while !pruning.is_finished() {
            let asked = Instant::now();
            let page = api.ok("/logs", &token, &[("limit", "50")]).await;
            assert!(page["data"].as_array().is_some_and(|rows| rows.len() <= 50), "{}: {page}", backend.name);
            api.ok("/stats", &token, &[]).await;
            slowest = slowest.max(asked.elapsed());
            reads += 1;
            if !ingested {
                writer.logs(rows("10.9.9.9", Utc::now(), 10)).await;
                ingested = true;
            }
        }
        let pruned = pruning.await.unwrap();
        let took = started.elapsed();
        eprintln!("{}: pruned {pruned:?} in {took:?}; {reads} reads meanwhile, the slowest {slowest:?}", backend.name);
        assert_eq!(pruned.aged, total as u64, "{}", backend.name);
        assert!(reads >= 3, "{}: only {reads} reads during a prune of {took:?}", backend.name);
        assert!(slowest < Duration::from_secs(2), "{}: a read took {slowest:?} during the prune", backend.name);
        assert_eq!(views(&api, &token, "attacker:10.9.9.9").await, agreeing(10, 10, 1), "{}", backend.name);
        api.stop().await;
    }
}

/// How many times a test retries a transaction the database rolled back before it calls that a
/// failure rather than a lost lock race.
const RETRIES: u32 = 50;

#[tokio::test]
async fn an_ingest_racing_a_prune_of_the_same_attacker_and_deckies_leaves_the_counters_agreeing() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let old = Utc::now() - chrono::Duration::days(400);
        let mut writer = LogWriter::new(&api.state.db).await;
        let total = 2 * FILL_BATCH;
        for batch in 0..total / FILL_BATCH {
            let at = old + chrono::Duration::minutes((batch * FILL_BATCH) as i64);
            writer.logs(rows("10.1.0.1", at, FILL_BATCH)).await;
        }
        until_stats_total(&api, &token, total as u64).await;

        // The pruner and the ingester both touch the attacker's and the deckies' counters. A
        // transaction that loses a lock race (MySQL's deadlock) is rolled back whole and done again,
        // as the pruner's next pass and the ingester's next try do.
        let retention =
            Retention { max_age: Some(chrono::Duration::days(30)), max_rows: None, interval: Duration::from_secs(60) };
        let db = api.state.db.clone();
        let pruning = tokio::spawn(async move {
            for failed in 0..RETRIES {
                match svc::retention::prune(&db, &retention, "test-pruner", &CancellationToken::new()).await {
                    Ok(_) => return failed,
                    Err(err) => eprintln!("a prune pass failed, done again: {err}"),
                }
            }
            panic!("the prune failed {RETRIES} times");
        });
        let (mut fresh, mut retried) = (0, 0);
        while fresh == 0 || !pruning.is_finished() {
            let batch = svc::db::IngestBatch { logs: rows("10.1.0.1", Utc::now(), 10), ..Default::default() };
            while let Err(err) = writer.try_commit(batch.clone()).await {
                retried += 1;
                assert!(retried < RETRIES, "{}: an ingest failed {retried} times: {err}", backend.name);
            }
            fresh += 10;
        }
        let prune_retried = pruning.await.unwrap();
        eprintln!(
            "{}: {fresh} rows ingested during the prune; retried: ingest {retried}, prune {prune_retried}",
            backend.name
        );
        until_stats_total(&api, &token, fresh).await;
        assert_eq!(views(&api, &token, "attacker:10.1.0.1").await, agreeing(fresh, fresh, 1), "{}", backend.name);
        api.stop().await;
    }
}
