//! The attacker repository: profiles, commands and observations as the profiler commits them and
//! the attacker views read them, on every backend under test.

use svc_test_support::in_process as common;

use chrono::{Duration, Utc};
use common::TestDb;
use common::logs::{LogWriter, at, bounty};
use serde_json::json;
use sqlx::Connection;
use svc::db::{
    AttackerCommand, AttackerEvidence, AttackerFilter, AttackerProfile, AttackerSort, Db, DbError, IngestBatch,
    NewCredential, ObservationsStored, PROFILER_LEASE_SOURCE, ProfilerBatch,
};
use svc::observation::{Observation, Window};
use uuid::Uuid;

const HOLDER: &str = "profiler-test";
const TTL: std::time::Duration = std::time::Duration::from_secs(3600);

async fn hold_profiler_lease(db: &Db) {
    assert!(db.acquire_worker_lease(PROFILER_LEASE_SOURCE, HOLDER, Utc::now(), TTL).await.unwrap());
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A profile of `ip`, last seen `minutes` after the test epoch.
fn profile(ip: &str, minutes: i64, event_count: i64, services: &[&str], deckies: &[&str]) -> AttackerProfile {
    AttackerProfile {
        last_seen: at(minutes),
        event_count,
        services: strings(services),
        deckies: strings(deckies),
        ..AttackerProfile::new(ip, at(0), at(minutes))
    }
}

fn command(log_id: i64, minutes: i64, service: &str, text: &str) -> AttackerCommand {
    AttackerCommand {
        log_id,
        timestamp: at(minutes),
        service: service.into(),
        decky: "ssh-01".into(),
        command: text.into(),
    }
}

fn observation(primitive: &str, end_ts: f64) -> Observation {
    Observation {
        primitive: primitive.into(),
        value: json!(1.5),
        confidence: 0.5,
        window: Window { start_ts: end_ts - 10.0, end_ts },
        source: "tests/attackers_repo.rs".into(),
        id: None,
        identity_ref: None,
        evidence_ref: None,
        ts: None,
        v: 1,
    }
}

/// Commits `batch` as the next profiler step; returns the cursor after it.
async fn commit(db: &Db, batch: ProfilerBatch) -> i64 {
    let expected = db.profiler_cursor().await.unwrap();
    db.commit_profiles(HOLDER, expected, &batch).await.unwrap();
    assert_eq!(db.profiler_cursor().await.unwrap(), batch.last_log_id);
    batch.last_log_id
}

async fn commit_profiles(db: &Db, last_log_id: i64, profiles: Vec<AttackerProfile>) {
    commit(db, ProfilerBatch { last_log_id, profiles, ..ProfilerBatch::default() }).await;
}

fn filter(search: Option<&str>, service: Option<&str>, sort: AttackerSort) -> AttackerFilter {
    AttackerFilter { search: search.map(str::to_string), service: service.map(str::to_string), sort }
}

async fn listed_ips(db: &Db, filter: &AttackerFilter, limit: u32, offset: u64) -> (u64, Vec<String>) {
    let page = db.attackers(filter, limit, offset).await.unwrap();
    (page.total, page.rows.into_iter().map(|p| p.ip).collect())
}

#[tokio::test]
async fn profiles_round_trip_and_a_recommit_replaces_all_but_the_uuid() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        hold_profiler_lease(&db).await;
        assert_eq!(db.profiler_cursor().await.unwrap(), 0, "{name}");

        let mut first = profile("203.0.113.7", 30, 12, &["http", "ssh", "télnet \"quoted\""], &[]);
        first.deckies = strings(&["décor-01", "web \"02\"", "decnet-gw", "ssh-\\03"]);
        first.first_seen = at(-5) + Duration::milliseconds(123);
        first.bounty_count = 3;
        first.credential_count = 2;
        first.fingerprints = r#"[{"ja3":"abc","note":"ü \"q\""}]"#.into();
        first.command_count = 0;
        first.behavior = r#"{"behavior_class":"brute_force","beacon_interval_s":null}"#.into();
        first.fold_state = r#"{"iat_sum":12.5,"n":12}"#.into();
        let other = profile("198.51.100.1", 10, 1, &["ftp"], &["ftp-01"]);
        commit_profiles(&db, 42, vec![first.clone(), other.clone()]).await;

        assert_eq!(db.attacker(first.uuid).await.unwrap(), first, "{name}: every field reads back");
        assert_eq!(db.attacker(other.uuid).await.unwrap(), other, "{name}");
        let by_ip = db.attackers_by_ip(&strings(&["203.0.113.7", "192.0.2.99"])).await.unwrap();
        assert_eq!(by_ip, vec![first.clone()], "{name}: addresses without a profile are left out");
        assert!(db.attackers_by_ip(&[]).await.unwrap().is_empty(), "{name}");
        let listed = db.attackers(&AttackerFilter::default(), 10, 0).await.unwrap();
        assert_eq!(listed.total, 2, "{name}");
        assert_eq!(listed.rows, vec![first.clone(), other.clone()], "{name}: most recently seen first");
        // The derived values are what the type says.
        assert_eq!(first.traversal_path(), "décor-01 → web \"02\" → decnet-gw → ssh-\\03");
        assert!(first.is_traversal());

        // The next fold replaces the profile whole, under the same uuid.
        let mut second = first.clone();
        second.last_seen = at(90);
        second.event_count = 40;
        second.services = strings(&["smtp"]);
        second.deckies = strings(&["decnet-gw"]);
        second.bounty_count = 0;
        second.fingerprints = "[]".into();
        second.behavior = r#"{"behavior_class":"scanning"}"#.into();
        second.fold_state = "{}".into();
        second.updated_at = at(91);
        commit_profiles(&db, 50, vec![second.clone()]).await;
        assert_eq!(db.attacker(first.uuid).await.unwrap(), second, "{name}");
        assert!(!second.is_traversal());
        let page = db.attackers(&filter(None, None, AttackerSort::Traversals), 10, 0).await.unwrap();
        assert_eq!(page.total, 2, "{name}: still one profile per address");
        assert_eq!(page.rows, vec![second, other], "{name}: neither is a traversal now; most recent first");

        // An empty step still moves the cursor.
        commit_profiles(&db, 60, vec![]).await;
    }
}

#[tokio::test]
async fn a_commit_needs_the_lease_and_the_cursor_it_read() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        let batch = ProfilerBatch {
            last_log_id: 10,
            profiles: vec![profile("192.0.2.1", 1, 1, &["ssh"], &["ssh-01"])],
            commands: vec![],
            observations: vec![],
        };
        let uuid = batch.profiles[0].uuid;
        let mut with_command = batch.clone();
        with_command.commands = vec![(uuid, command(3, 1, "ssh", "id"))];
        let mut evidence = observation("motor.keystroke_cadence", 100.0);
        evidence.evidence_ref = Some("shard:ssh-01/ssh/a.cast#1".into());
        with_command.observations = vec![evidence];

        // No lease at all.
        let refused = db.commit_profiles(HOLDER, 0, &with_command).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");
        // Another holder's lease.
        assert!(db.acquire_worker_lease(PROFILER_LEASE_SOURCE, "other", Utc::now(), TTL).await.unwrap());
        let refused = db.commit_profiles(HOLDER, 0, &with_command).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");
        db.release_worker_lease(PROFILER_LEASE_SOURCE, "other").await.unwrap();
        // Our lease, but expired.
        let long_ago = Utc::now() - Duration::hours(2);
        assert!(db.acquire_worker_lease(PROFILER_LEASE_SOURCE, HOLDER, long_ago, TTL).await.unwrap());
        let refused = db.commit_profiles(HOLDER, 0, &with_command).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");
        // The lease of an ingest source is not the profiler's.
        assert!(db.acquire_worker_lease("ingest", HOLDER, Utc::now(), TTL).await.unwrap());
        let refused = db.commit_profiles(HOLDER, 0, &with_command).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");

        hold_profiler_lease(&db).await;
        // A cursor other than the stored one (0, none stored yet).
        let refused = db.commit_profiles(HOLDER, 5, &with_command).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");
        assert_eq!(db.profiler_cursor().await.unwrap(), 0, "{name}: nothing stored");
        assert!(matches!(db.attacker(uuid).await, Err(DbError::NotFound)), "{name}");
        assert_eq!(db.attacker_commands(uuid, None, 10, 0).await.unwrap().total, 0, "{name}");
        assert!(db.attacker_observations(uuid, 10).await.unwrap().is_empty(), "{name}");
        assert!(db.attackers_by_ip(&strings(&["192.0.2.1"])).await.unwrap().is_empty(), "{name}");

        db.commit_profiles(HOLDER, 0, &batch).await.unwrap();
        assert_eq!(db.profiler_cursor().await.unwrap(), 10, "{name}");
        // The same step again: the cursor moved on.
        let refused = db.commit_profiles(HOLDER, 0, &with_command).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");
        assert_eq!(db.attacker_commands(uuid, None, 10, 0).await.unwrap().total, 0, "{name}: nothing stored");

        // An address stored under another uuid: someone else profiled it meanwhile.
        let mut stranger = profile("192.0.2.1", 2, 2, &["ssh"], &["ssh-01"]);
        stranger.uuid = Uuid::new_v4();
        let next = ProfilerBatch { last_log_id: 11, profiles: vec![stranger.clone()], ..ProfilerBatch::default() };
        let refused = db.commit_profiles(HOLDER, 10, &next).await;
        assert!(matches!(refused, Err(DbError::Conflict)), "{name}: {refused:?}");
        assert!(matches!(db.attacker(stranger.uuid).await, Err(DbError::NotFound)), "{name}");
        assert_eq!(db.profiler_cursor().await.unwrap(), 10, "{name}");

        // Two profiles of one address in one batch are the caller's mistake.
        let twice = ProfilerBatch {
            last_log_id: 11,
            profiles: vec![profile("192.0.2.2", 1, 1, &[], &[]), profile("192.0.2.2", 1, 1, &[], &[])],
            ..ProfilerBatch::default()
        };
        let refused = db.commit_profiles(HOLDER, 10, &twice).await;
        assert!(matches!(refused, Err(DbError::Other(_))), "{name}: {refused:?}");
        assert_eq!(db.profiler_cursor().await.unwrap(), 10, "{name}");
    }
}

/// A refused commit lets go of its locks before it returns: another writer, on a connection and a
/// thread of its own (this test's runtime is not polled meanwhile), takes the rows it read at once.
#[tokio::test]
async fn a_refused_commit_holds_no_locks_once_it_returns() {
    let Some(backend) = TestDb::mysql() else { return };
    let db = backend.open().await;
    // No lease: each commit's locking read of the empty lease table locks the gap a new lease needs.
    let refused = db.commit_profiles(HOLDER, 0, &ProfilerBatch::default()).await;
    assert!(matches!(refused, Err(DbError::Conflict)), "{refused:?}");
    let refused = db.commit_ingest("ingest", HOLDER, None, &IngestBatch::default()).await;
    assert!(matches!(refused, Err(DbError::Conflict)), "{refused:?}");

    let url = backend.mysql_url().unwrap().to_string();
    let taken = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let mut other = sqlx::MySqlConnection::connect(&url).await?;
            sqlx::query("set session innodb_lock_wait_timeout = 2").execute(&mut other).await?;
            sqlx::query("insert into ingest_leases (source, holder, expires_at) values ('profiler', 'other', 0)")
                .execute(&mut other)
                .await?;
            Ok::<_, sqlx::Error>(())
        })
    })
    .join()
    .unwrap();
    taken.expect("a new lease waited for the locks of a refused commit");
}

#[tokio::test]
async fn commands_are_stored_once_counted_exactly_and_paged_newest_first() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        hold_profiler_lease(&db).await;
        let mut attacker = profile("192.0.2.10", 5, 9, &["ftp", "ssh"], &["ssh-01"]);
        let uuid = attacker.uuid;
        let bystander = profile("192.0.2.11", 5, 1, &["ssh"], &["ssh-01"]);

        // Log ids 1..=5: ssh at minutes 1, 2, 2, 3; ftp at minute 2. Ties on the minute go by log id.
        let first = vec![
            (uuid, command(1, 1, "ssh", "uname -a")),
            (uuid, command(2, 2, "ssh", "cat /etc/passwd; echo 'ü \"x\"'")),
            (uuid, command(3, 2, "ftp", "RETR secrets.txt")),
            (uuid, command(4, 2, "ssh", &"A".repeat(70_000))),
            (uuid, command(5, 3, "ssh", "exit")),
            (bystander.uuid, command(6, 4, "ssh", "id")),
        ];
        attacker.command_count = 5;
        commit(
            &db,
            ProfilerBatch {
                last_log_id: 6,
                profiles: vec![attacker.clone(), bystander.clone()],
                commands: first.clone(),
                observations: vec![],
            },
        )
        .await;
        assert_eq!(db.attacker(uuid).await.unwrap().command_count, 5, "{name}");

        let page = db.attacker_commands(uuid, None, 10, 0).await.unwrap();
        assert_eq!(page.total, 5, "{name}");
        let ids: Vec<i64> = page.rows.iter().map(|c| c.log_id).collect();
        assert_eq!(ids, [5, 4, 3, 2, 1], "{name}: timestamp, then log id, descending");
        assert_eq!(page.rows[1], first[3].1, "{name}: a long command reads back whole");
        assert_eq!(page.rows[3], first[1].1, "{name}");

        let page = db.attacker_commands(uuid, None, 2, 2).await.unwrap();
        assert_eq!(page.total, 5, "{name}");
        assert_eq!(page.rows.iter().map(|c| c.log_id).collect::<Vec<_>>(), [3, 2], "{name}");
        let ssh = db.attacker_commands(uuid, Some("ssh"), 3, 0).await.unwrap();
        assert_eq!(ssh.total, 4, "{name}");
        assert_eq!(ssh.rows.iter().map(|c| c.log_id).collect::<Vec<_>>(), [5, 4, 2], "{name}");
        let ssh = db.attacker_commands(uuid, Some("ssh"), 3, 3).await.unwrap();
        assert_eq!(ssh.rows.iter().map(|c| c.log_id).collect::<Vec<_>>(), [1], "{name}");
        assert_eq!(db.attacker_commands(uuid, Some("ss"), 3, 0).await.unwrap().total, 0, "{name}");
        assert_eq!(db.attacker_commands(Uuid::new_v4(), None, 3, 0).await.unwrap().total, 0, "{name}");
        let ran = db.services_with_commands(uuid, &strings(&["http", "ssh", "ftp", "ss"])).await.unwrap();
        assert_eq!(ran, strings(&["ssh", "ftp"]), "{name}: in the order given, exact names only");
        let ran = db.services_with_commands(bystander.uuid, &strings(&["ftp", "ssh"])).await.unwrap();
        assert_eq!(ran, strings(&["ssh"]), "{name}");

        // The profiler folds rows 4..=8 again after a restart (its tally counts them twice): the
        // stored rows are kept, the new ones added, and the count is the rows'.
        attacker.command_count = 12;
        let again = vec![
            (uuid, command(4, 9, "ssh", "not stored: log 4 holds a command already")),
            (uuid, command(5, 3, "ssh", "exit")),
            (uuid, command(7, 5, "ssh", "wget http://x/y")),
            (uuid, command(8, 5, "ftp", "QUIT")),
        ];
        commit(
            &db,
            ProfilerBatch { last_log_id: 8, profiles: vec![attacker.clone()], commands: again, observations: vec![] },
        )
        .await;
        assert_eq!(db.attacker(uuid).await.unwrap().command_count, 7, "{name}: recounted from the rows");
        assert_eq!(db.attacker(bystander.uuid).await.unwrap().command_count, 1, "{name}");
        let page = db.attacker_commands(uuid, None, 10, 0).await.unwrap();
        assert_eq!(page.total, 7, "{name}");
        assert_eq!(page.rows.iter().map(|c| c.log_id).collect::<Vec<_>>(), [8, 7, 5, 4, 3, 2, 1], "{name}");
        assert_eq!(page.rows[3], first[3].1, "{name}: the stored command of log 4 is kept");

        // Thousands of commands in one step: several statements, one transaction.
        let many: Vec<(Uuid, AttackerCommand)> =
            (0..5000).map(|i| (bystander.uuid, command(1000 + i, 10 + i, "ssh", &format!("echo {i}")))).collect();
        commit(&db, ProfilerBatch { last_log_id: 7000, commands: many, ..ProfilerBatch::default() }).await;
        assert_eq!(db.attacker(bystander.uuid).await.unwrap().command_count, 5001, "{name}");
        let page = db.attacker_commands(bystander.uuid, Some("ssh"), 2, 0).await.unwrap();
        assert_eq!(page.total, 5001, "{name}");
        assert_eq!(page.rows[0].command, "echo 4999", "{name}");
    }
}

#[tokio::test]
async fn the_attacker_list_searches_literally_filters_by_exact_service_sorts_and_pages() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        hold_profiler_lease(&db).await;
        let profiles = vec![
            // ip, last seen, events, services, deckies
            profile("10.0.0.1", 50, 5, &["ssh"], &["ssh-01"]),
            profile("10.0.0.10", 40, 50, &["ssh-alt", "http"], &["web-01", "ssh-01"]),
            profile("10.0.0.2", 30, 50, &["ss"], &["decnet-gw", "ssh-01"]),
            profile("fe80::1%eth0", 20, 7, &["a\"ssh", "ftp"], &["web-01", "ftp-01", "db-01"]),
            profile("host_a", 60, 1, &["http", "ssh"], &["web-01"]),
            profile("hostXa", 10, 2, &["SSH", "ssh\\"], &["ssh-01", "ssh-02"]),
        ];
        commit_profiles(&db, 1, profiles.clone()).await;
        let uuid_of = |ip: &str| profiles.iter().find(|p| p.ip == ip).unwrap().uuid;

        let recent = filter(None, None, AttackerSort::Recent);
        let (total, ips) = listed_ips(&db, &recent, 100, 0).await;
        assert_eq!(total, 6, "{name}");
        assert_eq!(ips, ["host_a", "10.0.0.1", "10.0.0.10", "10.0.0.2", "fe80::1%eth0", "hostXa"], "{name}");

        // Equal event counts fall back to the uuid, descending.
        let (_, ips) = listed_ips(&db, &filter(None, None, AttackerSort::Active), 100, 0).await;
        let (a, b) = if uuid_of("10.0.0.10") > uuid_of("10.0.0.2") {
            ("10.0.0.10", "10.0.0.2")
        } else {
            ("10.0.0.2", "10.0.0.10")
        };
        assert_eq!(ips, [a, b, "fe80::1%eth0", "10.0.0.1", "hostXa", "host_a"], "{name}");

        // Traversals first (decnet- hosts do not count), each group most recent first.
        let (_, ips) = listed_ips(&db, &filter(None, None, AttackerSort::Traversals), 100, 0).await;
        assert_eq!(ips, ["10.0.0.10", "fe80::1%eth0", "hostXa", "host_a", "10.0.0.1", "10.0.0.2"], "{name}");

        // Pages of the same order, with the total of all.
        let (total, ips) = listed_ips(&db, &recent, 2, 2).await;
        assert_eq!((total, ips), (6, strings(&["10.0.0.10", "10.0.0.2"])), "{name}");
        let (total, ips) = listed_ips(&db, &recent, 2, 6).await;
        assert_eq!((total, ips), (6, vec![]), "{name}");

        // Search is a literal substring of the address.
        let search = |text: &str| filter(Some(text), None, AttackerSort::Recent);
        let (total, ips) = listed_ips(&db, &search("0.0.1"), 100, 0).await;
        assert_eq!((total, ips), (2, strings(&["10.0.0.1", "10.0.0.10"])), "{name}");
        let (total, ips) = listed_ips(&db, &search("_"), 100, 0).await;
        assert_eq!((total, ips), (1, strings(&["host_a"])), "{name}: `_` is not a wildcard");
        let (total, ips) = listed_ips(&db, &search("%"), 100, 0).await;
        assert_eq!((total, ips), (1, strings(&["fe80::1%eth0"])), "{name}: `%` is not a wildcard");
        let (total, _) = listed_ips(&db, &search("192."), 100, 0).await;
        assert_eq!(total, 0, "{name}");

        // The service filter matches one element exactly: not a prefix, a suffix or another case.
        let service = |s: &str| filter(None, Some(s), AttackerSort::Recent);
        let (total, ips) = listed_ips(&db, &service("ssh"), 100, 0).await;
        assert_eq!((total, ips), (2, strings(&["host_a", "10.0.0.1"])), "{name}");
        let (_, ips) = listed_ips(&db, &service("ss"), 100, 0).await;
        assert_eq!(ips, ["10.0.0.2"], "{name}");
        let (_, ips) = listed_ips(&db, &service("SSH"), 100, 0).await;
        assert_eq!(ips, ["hostXa"], "{name}");
        let (_, ips) = listed_ips(&db, &service("a\"ssh"), 100, 0).await;
        assert_eq!(ips, ["fe80::1%eth0"], "{name}");
        let (_, ips) = listed_ips(&db, &service("ssh\\"), 100, 0).await;
        assert_eq!(ips, ["hostXa"], "{name}");
        let (_, ips) = listed_ips(&db, &service("http"), 100, 0).await;
        assert_eq!(ips, ["host_a", "10.0.0.10"], "{name}");
        let (total, _) = listed_ips(&db, &service("%"), 100, 0).await;
        assert_eq!(total, 0, "{name}");

        // Both, with a sort and a page.
        let both = filter(Some("10."), Some("ssh-alt"), AttackerSort::Active);
        let (total, ips) = listed_ips(&db, &both, 1, 0).await;
        assert_eq!((total, ips), (1, strings(&["10.0.0.10"])), "{name}");
    }
}

fn credential(ip: &str, secret: &str) -> NewCredential {
    NewCredential {
        seen_at: at(1),
        attacker_ip: ip.into(),
        decky: "ssh-01".into(),
        service: "ssh".into(),
        secret_kind: "plaintext".into(),
        secret_sha256: format!("{secret:0>64}"),
        principal: Some("root".into()),
        secret_printable: secret.into(),
        secret_b64: "eA==".into(),
        outcome: None,
    }
}

#[tokio::test]
async fn evidence_tallies_the_bounties_and_credentials_of_each_address() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        let mut writer = LogWriter::new(&db).await;
        writer
            .commit(
                vec![],
                vec![
                    bounty("fingerprint", "192.0.2.1", r#"{"ja3":"first"}"#, at(1)),
                    bounty("credential", "192.0.2.1", r#"{"user":"root"}"#, at(2)),
                    bounty("fingerprint", "192.0.2.1", r#"{"ja3":"second","ü":"\"q\""}"#, at(0)),
                    bounty("artifact", "192.0.2.2", r#"{"sha256":"ab"}"#, at(3)),
                    bounty("fingerprint", "192.0.2.3", r#"{"ja3":"other"}"#, at(3)),
                ],
            )
            .await;
        // Credentials as the ingester stores them; a second attempt is the same credential.
        let credentials =
            vec![credential("192.0.2.1", "a"), credential("192.0.2.1", "b"), credential("192.0.2.1", "a")];
        writer.commit_with_credentials(vec![], vec![], credentials).await;

        let asked = strings(&["192.0.2.1", "192.0.2.2", "198.51.100.9"]);
        let evidence = db.attacker_evidence(&asked).await.unwrap();
        assert_eq!(
            evidence,
            vec![
                AttackerEvidence {
                    ip: "192.0.2.1".into(),
                    fingerprints: strings(&[r#"{"ja3":"first"}"#, r#"{"ja3":"second","ü":"\"q\""}"#]),
                    bounty_count: 3,
                    credential_count: 2,
                },
                AttackerEvidence { ip: "192.0.2.2".into(), fingerprints: vec![], bounty_count: 1, credential_count: 0 },
                AttackerEvidence { ip: "198.51.100.9".into(), ..AttackerEvidence::default() },
            ],
            "{name}: fingerprints in the order stored, one entry per address asked"
        );
        assert!(db.attacker_evidence(&[]).await.unwrap().is_empty(), "{name}");

        // Many addresses at once (more than one `in` list).
        let many: Vec<String> =
            (0..2500).map(|i| format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)).collect();
        let mut asked = many.clone();
        asked.push("192.0.2.3".into());
        let evidence = db.attacker_evidence(&asked).await.unwrap();
        assert_eq!(evidence.len(), 2501, "{name}");
        assert_eq!(evidence[2500].fingerprints, strings(&[r#"{"ja3":"other"}"#]), "{name}");
        assert!(evidence[..2500].iter().all(|e| e.bounty_count == 0), "{name}");

        // An address that varies what it sends has a fingerprint per request: the profile keeps
        // the first few, and counts them all.
        let cap = svc::db::MAX_PROFILE_FINGERPRINTS as usize;
        let varied: Vec<_> = (0..cap + 20)
            .map(|i| bounty("fingerprint", "203.0.113.7", &json!({"user_agent": format!("ua-{i}")}).to_string(), at(1)))
            .collect();
        writer.commit(vec![], varied).await;
        let evidence = db.attacker_evidence(&strings(&["203.0.113.7", "192.0.2.1"])).await.unwrap();
        assert_eq!((evidence[0].fingerprints.len(), evidence[0].bounty_count), (cap, cap as i64 + 20), "{name}");
        assert!(evidence[0].fingerprints[0].contains("\"ua-0\""), "{name}: the oldest first");
        assert!(evidence[0].fingerprints[cap - 1].contains(&format!("\"ua-{}\"", cap - 1)), "{name}");
        assert_eq!(evidence[1].fingerprints.len(), 2, "{name}: other addresses are not cut");
    }
}

#[tokio::test]
async fn observations_are_stored_once_by_id_or_by_evidence() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        let attacker = Uuid::new_v4();
        let with_id = |id: &str, primitive: &str| Observation {
            id: Some(id.into()),
            identity_ref: Some(attacker.to_string()),
            ..observation(primitive, 100.0)
        };
        let with_evidence = |evidence: &str, primitive: &str| Observation {
            identity_ref: Some(attacker.to_string()),
            evidence_ref: Some(evidence.into()),
            ..observation(primitive, 200.0)
        };
        let id_a = Uuid::new_v4().to_string();
        let id_b = Uuid::new_v4().to_string();

        let offered = vec![
            with_id(&id_a, "motor.keystroke_cadence"),
            // The same id again in the same call, another primitive: a duplicate.
            with_id(&id_a, "motor.other"),
            with_evidence("shard:ssh-01/ssh/a.cast#1", "motor.keystroke_cadence"),
            // The same evidence and primitive, no id: a duplicate.
            with_evidence("shard:ssh-01/ssh/a.cast#1", "motor.keystroke_cadence"),
            // The same evidence, another primitive: new.
            with_evidence("shard:ssh-01/ssh/a.cast#1", "cognitive.pause"),
            // No evidence: never a duplicate of each other.
            observation("temporal.x", 1.0),
            observation("temporal.x", 1.0),
        ];
        let stored = db.add_observations(&offered).await.unwrap();
        assert_eq!(stored, ObservationsStored { stored: 5, duplicates: 2 }, "{name}");

        let again = vec![
            with_id(&id_a, "motor.keystroke_cadence"),
            with_id(&id_b, "motor.keystroke_cadence"),
            // A new id, but evidence held already.
            Observation { id: Some(Uuid::new_v4().to_string()), ..offered[4].clone() },
            observation("temporal.x", 1.0),
        ];
        let stored = db.add_observations(&again).await.unwrap();
        assert_eq!(stored, ObservationsStored { stored: 2, duplicates: 2 }, "{name}");
        assert_eq!(db.add_observations(&[]).await.unwrap(), ObservationsStored::default(), "{name}");

        // Only the records attributed to the attacker are its own; ids given on arrival are UUIDs.
        let held = db.attacker_observations(attacker, 100).await.unwrap();
        assert_eq!(held.len(), 4, "{name}: {held:?}");
        assert!(held.iter().all(|o| o.id.as_deref().unwrap().parse::<Uuid>().is_ok()), "{name}");
        let first = held.iter().find(|o| o.id.as_deref() == Some(id_a.as_str())).unwrap();
        assert_eq!(first, &offered[0], "{name}: the first record with an id wins");
    }
}

#[tokio::test]
async fn attacker_observations_read_back_whole_newest_first() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        let attacker = Uuid::new_v4();
        let mine = |primitive: &str, end_ts: f64, ts: Option<f64>| Observation {
            id: Some(Uuid::new_v4().to_string()),
            identity_ref: Some(attacker.to_string()),
            ts,
            ..observation(primitive, end_ts)
        };
        let full = Observation {
            primitive: "cognitive.command_vocabulary".into(),
            value: json!({"tokens": ["ls", "cat \"x\"", "ü"], "n": 3, "ratio": 0.125, "ok": true, "none": null}),
            confidence: 0.875,
            window: Window { start_ts: 1_763_733_600.25, end_ts: 1_763_733_700.5 },
            source: "workers/src/profiler/shell.rs".into(),
            id: Some(Uuid::new_v4().to_string()),
            identity_ref: Some(attacker.to_string().to_uppercase()),
            evidence_ref: Some(format!("shard:ssh-01/ssh/{}.cast#7", "x".repeat(3000))),
            ts: Some(1_763_733_800.75),
            v: 1,
        };
        let offered = vec![
            mine("a.first", 100.0, Some(5.0)),
            full.clone(),
            mine("a.tie_late", 300.0, Some(9.0)),
            mine("a.tie_early", 300.0, Some(8.0)),
            mine("a.tie_none", 300.0, None),
            Observation { value: json!(["x", "y"]), ..mine("a.list", 50.0, None) },
            Observation { value: json!("text"), ..mine("a.text", 60.0, None) },
            // Attributed to someone else, or to no one (not a UUID).
            Observation { identity_ref: Some(Uuid::new_v4().to_string()), ..observation("b.other", 1e12) },
            Observation { identity_ref: Some("not-a-uuid".into()), ..observation("b.unattributed", 1e12) },
        ];
        assert_eq!(db.add_observations(&offered).await.unwrap().stored, 9, "{name}");

        let held = db.attacker_observations(attacker, 100).await.unwrap();
        let order: Vec<&str> = held.iter().map(|o| o.primitive.as_str()).collect();
        assert_eq!(
            order,
            ["cognitive.command_vocabulary", "a.tie_late", "a.tie_early", "a.tie_none", "a.first", "a.text", "a.list"],
            "{name}: window end, then ts, descending"
        );
        assert_eq!(held[0], full, "{name}: every field reads back");
        assert_eq!(held[5].value, json!("text"), "{name}");
        assert_eq!(held[6].value, json!(["x", "y"]), "{name}");
        let limited = db.attacker_observations(attacker, 2).await.unwrap();
        assert_eq!(limited, held[..2], "{name}");
        assert!(db.attacker_observations(Uuid::new_v4(), 10).await.unwrap().is_empty(), "{name}");
    }
}

#[tokio::test]
async fn the_profilers_observations_replace_their_evidence_and_keep_the_id() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        hold_profiler_lease(&db).await;
        let attacker = profile("192.0.2.50", 1, 3, &["ssh"], &["ssh-01"]);
        let measured = |value: f64, end_ts: f64| Observation {
            value: json!(value),
            identity_ref: Some(attacker.uuid.to_string()),
            evidence_ref: Some("shard:ssh-01/ssh/s.cast#1".into()),
            ts: Some(end_ts + 1.0),
            ..observation("motor.keystroke_cadence", end_ts)
        };
        // A sensor sent this one earlier, with its own id.
        let sent = Observation { id: Some(Uuid::new_v4().to_string()), ..measured(1.0, 100.0) };
        db.add_observations(std::slice::from_ref(&sent)).await.unwrap();

        let mut replacement = measured(2.0, 150.0);
        replacement.confidence = 0.9;
        replacement.source = "workers/src/profiler/shell.rs".into();
        let fresh = Observation { evidence_ref: Some("shard:ssh-01/ssh/s.cast#2".into()), ..measured(3.0, 120.0) };
        commit(
            &db,
            ProfilerBatch {
                last_log_id: 5,
                profiles: vec![attacker.clone()],
                commands: vec![],
                observations: vec![replacement.clone(), fresh.clone()],
            },
        )
        .await;

        let held = db.attacker_observations(attacker.uuid, 10).await.unwrap();
        assert_eq!(held.len(), 2, "{name}: {held:?}");
        assert_eq!(held[0], Observation { id: sent.id.clone(), ..replacement.clone() }, "{name}: the stored id");
        assert!(held[1].id.as_deref().unwrap().parse::<Uuid>().is_ok(), "{name}: a new record gets a UUID");
        assert_eq!(held[1], Observation { id: held[1].id.clone(), ..fresh }, "{name}");

        // Folding the same evidence again replaces it again, still under the same id.
        let later = measured(4.0, 160.0);
        commit(&db, ProfilerBatch { last_log_id: 6, observations: vec![later.clone()], ..ProfilerBatch::default() })
            .await;
        let held = db.attacker_observations(attacker.uuid, 10).await.unwrap();
        assert_eq!(held.len(), 2, "{name}");
        assert_eq!(held[0], Observation { id: sent.id.clone(), ..later }, "{name}");
        // A sensor's copy of that evidence is a duplicate now.
        assert_eq!(db.add_observations(&[measured(9.0, 1.0)]).await.unwrap().duplicates, 1, "{name}");
    }
}

#[tokio::test]
async fn an_unknown_attacker_is_not_found() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let missing = db.attacker(Uuid::new_v4()).await;
        assert!(matches!(missing, Err(DbError::NotFound)), "{}: {missing:?}", backend.name);
        assert_eq!(db.profiler_cursor().await.unwrap(), 0, "{}", backend.name);
    }
}

#[tokio::test]
async fn a_large_step_commits_whole_and_of_two_racing_steps_one_wins() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let name = backend.name;
        hold_profiler_lease(&db).await;
        // More profiles than one statement, or one `in` list, takes.
        let profiles: Vec<AttackerProfile> = (0..2100)
            .map(|i| profile(&format!("10.1.{}.{}", i / 256, i % 256), i, i, &["ssh"], &["ssh-01", "web-01"]))
            .collect();
        let ips: Vec<String> = profiles.iter().map(|p| p.ip.clone()).collect();
        let commands: Vec<(Uuid, AttackerCommand)> =
            profiles.iter().enumerate().map(|(i, p)| (p.uuid, command(i as i64 + 1, 1, "ssh", "id"))).collect();
        let observations: Vec<Observation> = profiles
            .iter()
            .map(|p| Observation {
                identity_ref: Some(p.uuid.to_string()),
                evidence_ref: Some(format!("shard:ssh-01/ssh/{}.cast#1", p.ip)),
                ..observation("motor.keystroke_cadence", 10.0)
            })
            .collect();
        commit(&db, ProfilerBatch { last_log_id: 2100, profiles: profiles.clone(), commands, observations }).await;
        let mut stored = db.attackers_by_ip(&ips).await.unwrap();
        assert_eq!(stored.len(), 2100, "{name}");
        stored.sort_by_key(|p| p.event_count);
        let with_counts: Vec<AttackerProfile> =
            profiles.iter().map(|p| AttackerProfile { command_count: 1, ..p.clone() }).collect();
        assert_eq!(stored, with_counts, "{name}");
        let page = db.attackers(&filter(None, Some("ssh"), AttackerSort::Active), 3, 0).await.unwrap();
        assert_eq!(page.total, 2100, "{name}");
        assert_eq!(page.rows[0].ip, "10.1.8.51", "{name}");
        assert_eq!(db.attacker_observations(profiles[7].uuid, 10).await.unwrap().len(), 1, "{name}");

        // The same step from the same cursor, twice at once: one moves the cursor, the other
        // finds it moved and stores nothing.
        let step = |n: i64| {
            let db = db.clone();
            let extra = profile(&format!("192.0.2.{n}"), 1, 1, &[], &[]);
            async move {
                let batch = ProfilerBatch { last_log_id: 2100 + n, profiles: vec![extra], ..ProfilerBatch::default() };
                db.commit_profiles(HOLDER, 2100, &batch).await
            }
        };
        let (a, b) = tokio::join!(tokio::spawn(step(1)), tokio::spawn(step(2)));
        let results = [a.unwrap(), b.unwrap()];
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{name}: {results:?}");
        assert!(results.iter().any(|r| matches!(r, Err(DbError::Conflict))), "{name}: {results:?}");
        let winner = if results[0].is_ok() { 1 } else { 2 };
        assert_eq!(db.profiler_cursor().await.unwrap(), 2100 + winner, "{name}");
        let extras = db.attackers_by_ip(&strings(&["192.0.2.1", "192.0.2.2"])).await.unwrap();
        assert_eq!(extras.iter().map(|p| p.ip.clone()).collect::<Vec<_>>(), [format!("192.0.2.{winner}")], "{name}");
    }
}
