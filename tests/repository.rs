//! The repository's verbs, as one story per area, on every backend under test.

mod common;

use chrono::{Duration, Utc};
use common::{TestDb, lifecycle};
use svc::db::{DbError, LifecycleStatus, NewUser, RevokedToken, Role, STRANDED_LIFECYCLE_ERROR};
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
        db.add_sse_ticket("live", user, now + Duration::seconds(60)).await.unwrap();
        db.add_sse_ticket("stale", user, now - Duration::seconds(1)).await.unwrap();
        assert_eq!(db.take_sse_ticket("live", now).await.unwrap(), Some(user), "{}", backend.name);
        assert_eq!(db.take_sse_ticket("live", now).await.unwrap(), None, "a ticket opens one stream");
        assert_eq!(db.take_sse_ticket("stale", now).await.unwrap(), None);
        assert_eq!(db.take_sse_ticket("unknown", now).await.unwrap(), None);

        // Of many concurrent redemptions of one ticket, exactly one succeeds.
        db.add_sse_ticket("raced", user, now + Duration::seconds(60)).await.unwrap();
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
