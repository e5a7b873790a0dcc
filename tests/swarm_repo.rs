//! The swarm's store on every backend under test: hosts unique by name and listed by name, the
//! heartbeat and the silence sweep that move a host's status, shards upserted, filtered, moved and
//! deleted with their host, and an enrollment bundle that can be claimed exactly once before it
//! expires.

use svc_test_support::in_process as common;

use chrono::{DateTime, Duration, Utc};
use common::TestDb;
use svc::db::{DbError, DeckyShard, Enrollment, HostStatus, ShardFilter, ShardState, SwarmHost};
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_800_000_000_123).unwrap()
}

fn host(name: &str) -> SwarmHost {
    SwarmHost {
        uuid: Uuid::new_v4(),
        name: name.into(),
        address: String::new(),
        agent_port: 8765,
        status: HostStatus::Enrolled,
        last_heartbeat: None,
        client_cert_fingerprint: None,
        updater_cert_fingerprint: None,
        enrolled_at: t0(),
        notes: Some("enrolled via UI bundle".into()),
        use_ipvlan: false,
    }
}

fn shard(name: &str, host: Uuid, state: ShardState) -> DeckyShard {
    DeckyShard {
        decky_name: name.into(),
        host_uuid: host,
        services: vec!["ssh".into(), "http".into()],
        decky_config: None,
        decky_ip: Some("10.0.0.5".into()),
        state,
        last_error: None,
        compose_hash: None,
        last_seen: Some(t0()),
        updated_at: t0(),
    }
}

fn enrollment(host: Uuid, token_hash: &str) -> Enrollment {
    Enrollment {
        token_hash: token_hash.into(),
        host_uuid: host,
        master_host: "master.example".into(),
        with_updater: true,
        services_ini: None,
        created_at: t0(),
        expires_at: t0() + Duration::minutes(5),
    }
}

#[tokio::test]
async fn hosts_are_unique_by_name_and_move_by_heartbeat_and_silence() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let (b, a) = (host("worker-b"), host("worker-a"));
        db.add_swarm_host(&b).await.unwrap();
        db.add_swarm_host(&a).await.unwrap();
        assert!(matches!(db.add_swarm_host(&host("worker-a")).await, Err(DbError::Conflict)), "{}", backend.name);
        let names: Vec<_> = db.swarm_hosts(None).await.unwrap().into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["worker-a", "worker-b"]);
        assert_eq!(db.swarm_host_by_name("worker-b").await.unwrap(), b);
        assert!(matches!(db.swarm_host_by_name("WORKER-B").await, Err(DbError::NotFound)));
        assert!(matches!(db.swarm_host(Uuid::new_v4()).await, Err(DbError::NotFound)));

        db.set_swarm_host_address(a.uuid, "10.9.0.2").await.unwrap();
        db.set_swarm_host_fingerprints(a.uuid, &"ab".repeat(32), Some(&"cd".repeat(32))).await.unwrap();
        assert!(matches!(db.set_swarm_host_address(Uuid::new_v4(), "x").await, Err(DbError::NotFound)));
        let stored = db.swarm_host(a.uuid).await.unwrap();
        assert_eq!(stored.address, "10.9.0.2");
        assert_eq!(stored.client_cert_fingerprint.as_deref(), Some("ab".repeat(32).as_str()));
        assert_eq!(stored.updater_cert_fingerprint.as_deref(), Some("cd".repeat(32).as_str()));
        // An address is not enough: deckies go to a host once it has been heard from.
        assert!(!stored.is_usable());

        // Heard from: active. Silent past the cutoff: unreachable, once, and only that one.
        db.record_swarm_heartbeat(a.uuid, t0()).await.unwrap();
        assert!(db.swarm_host(a.uuid).await.unwrap().is_usable(), "active with an address");
        db.record_swarm_heartbeat(b.uuid, t0() + Duration::seconds(60)).await.unwrap();
        assert_eq!(db.swarm_hosts(Some(HostStatus::Active)).await.unwrap().len(), 2);
        let silent = db.mark_silent_swarm_hosts(t0() + Duration::seconds(30)).await.unwrap();
        assert_eq!(silent.iter().map(|h| (h.uuid, h.status)).collect::<Vec<_>>(), [(a.uuid, HostStatus::Unreachable)]);
        assert_eq!(silent[0].last_heartbeat, Some(t0()));
        assert!(db.mark_silent_swarm_hosts(t0() + Duration::seconds(30)).await.unwrap().is_empty());
        let unreachable = db.swarm_hosts(Some(HostStatus::Unreachable)).await.unwrap();
        assert!(!unreachable[0].is_usable(), "an unreachable host gets no deckies");
        assert_eq!(unreachable.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["worker-a"]);
        // Heard from again: active again.
        db.record_swarm_heartbeat(a.uuid, t0() + Duration::seconds(90)).await.unwrap();
        assert_eq!(db.swarm_host(a.uuid).await.unwrap().status, HostStatus::Active);

        db.delete_swarm_host(b.uuid).await.unwrap();
        assert!(matches!(db.delete_swarm_host(b.uuid).await, Err(DbError::NotFound)));
        assert_eq!(db.swarm_hosts(None).await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn shards_are_upserted_filtered_moved_and_go_with_their_host() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let (one, two) = (host("one"), host("two"));
        db.add_swarm_host(&one).await.unwrap();
        db.add_swarm_host(&two).await.unwrap();
        db.upsert_decky_shards(&[
            shard("web-02", one.uuid, ShardState::Running),
            shard("web-01", one.uuid, ShardState::Degraded),
            shard("db-01", two.uuid, ShardState::Running),
        ])
        .await
        .unwrap();
        let all = db.decky_shards(&ShardFilter::default()).await.unwrap();
        assert_eq!(all.iter().map(|s| s.decky_name.as_str()).collect::<Vec<_>>(), ["db-01", "web-01", "web-02"]);
        assert_eq!(all[1], shard("web-01", one.uuid, ShardState::Degraded), "{}", backend.name);

        let on_one = ShardFilter { host_uuid: Some(one.uuid), ..ShardFilter::default() };
        assert_eq!(db.decky_shards(&on_one).await.unwrap().len(), 2);
        let running = ShardFilter { state: Some(ShardState::Running), ..ShardFilter::default() };
        let names: Vec<_> = db.decky_shards(&running).await.unwrap().into_iter().map(|s| s.decky_name).collect();
        assert_eq!(names, ["db-01", "web-02"]);

        // Replaced by name, even onto another host.
        let mut moved = shard("web-02", two.uuid, ShardState::Pending);
        moved.services = vec!["ftp".into()];
        db.upsert_decky_shards(std::slice::from_ref(&moved)).await.unwrap();
        let web02 = ShardFilter { decky_name: Some("web-02".into()), ..ShardFilter::default() };
        assert_eq!(db.decky_shards(&web02).await.unwrap(), [moved]);

        // Tearing down one host's deckies; a long error is cut.
        let at = t0() + Duration::seconds(5);
        assert_eq!(db.set_decky_shard_state(&on_one, ShardState::TearingDown, None, at).await.unwrap(), 1);
        let error = "x".repeat(2000);
        assert_eq!(db.set_decky_shard_state(&on_one, ShardState::TeardownFailed, Some(&error), at).await.unwrap(), 1);
        let failed = &db.decky_shards(&on_one).await.unwrap()[0];
        assert_eq!(
            (failed.state, failed.last_error.as_ref().map(String::len)),
            (ShardState::TeardownFailed, Some(512))
        );
        assert_eq!(failed.updated_at, at);
        assert_eq!(db.delete_decky_shards(&web02).await.unwrap(), 1);

        // A deleted host takes its shards with it.
        db.delete_swarm_host(two.uuid).await.unwrap();
        let left: Vec<_> =
            db.decky_shards(&ShardFilter::default()).await.unwrap().into_iter().map(|s| s.decky_name).collect();
        assert_eq!(left, ["web-01"]);
    }
}

#[tokio::test]
async fn an_enrollment_is_claimed_once_before_it_expires() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let worker = host("worker");
        db.enroll_swarm_host(&worker, &enrollment(worker.uuid, &"1".repeat(64))).await.unwrap();
        // A taken name stores neither the host nor its bundle.
        let twin = host("worker");
        assert!(matches!(
            db.enroll_swarm_host(&twin, &enrollment(twin.uuid, &"2".repeat(64))).await,
            Err(DbError::Conflict)
        ));
        assert!(matches!(db.enrollment(&"2".repeat(64), t0()).await, Err(DbError::NotFound)), "{}", backend.name);

        let now = t0() + Duration::minutes(1);
        assert_eq!(db.enrollment(&"1".repeat(64), now).await.unwrap(), enrollment(worker.uuid, &"1".repeat(64)));
        assert_eq!(db.claim_enrollment(&"1".repeat(64), now).await.unwrap().host_uuid, worker.uuid);
        assert!(matches!(db.claim_enrollment(&"1".repeat(64), now).await, Err(DbError::NotFound)));
        assert!(matches!(db.enrollment(&"1".repeat(64), now).await, Err(DbError::NotFound)));

        // Expired: neither readable nor claimable, then forgotten.
        let other = host("other");
        db.enroll_swarm_host(&other, &enrollment(other.uuid, &"3".repeat(64))).await.unwrap();
        let late = t0() + Duration::minutes(5);
        assert!(matches!(db.enrollment(&"3".repeat(64), late).await, Err(DbError::NotFound)));
        assert!(matches!(db.claim_enrollment(&"3".repeat(64), late).await, Err(DbError::NotFound)));
        assert_eq!(db.forget_expired_enrollments(late).await.unwrap(), 1);
        assert!(matches!(db.enrollment(&"3".repeat(64), t0()).await, Err(DbError::NotFound)));
    }
}
