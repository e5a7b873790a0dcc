//! The tarpit's store on every backend under test: one rule per decky (upserted, a new id each
//! time), how it stands recorded only for the rule it was applied for, and the watcher's sessions
//! opened and closed exactly once even when two watchers race.

use svc_test_support::in_process as common;

use chrono::{DateTime, Duration, Utc};
use common::TestDb;
use svc::db::{DbError, Enforced, Enforcement, TarpitRule, TarpitSession};
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_800_000_000_123).unwrap()
}

fn rule(decky: &str, ports: &[u16], delay_ms: u32) -> TarpitRule {
    TarpitRule {
        id: Uuid::new_v4(),
        decky_name: decky.into(),
        ports: ports.to_vec(),
        delay_ms,
        created_at: t0(),
        created_by: Uuid::new_v4().to_string(),
    }
}

fn enforced(enforcement: Enforcement, namespace: Option<&str>) -> Enforced {
    Enforced { enforcement, namespace: namespace.map(str::to_string), at: t0() + Duration::seconds(1) }
}

fn session(decky: &str, ip: &str, port: u16, at: DateTime<Utc>) -> TarpitSession {
    TarpitSession { decky_name: decky.into(), attacker_ip: ip.into(), port, entered_at: at }
}

#[tokio::test]
async fn one_rule_per_decky_and_its_standing() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        assert!(matches!(db.tarpit_rule("web-01").await, Err(DbError::NotFound)));
        let first = rule("web-01", &[22, 80], 500);
        db.put_tarpit_rule(&first, &enforced(Enforcement::Delay, Some("boot/1"))).await.unwrap();
        db.put_tarpit_rule(&rule("mail", &[25], 100), &enforced(Enforcement::Pending, None)).await.unwrap();
        let stored = db.tarpit_rule("web-01").await.unwrap();
        assert_eq!(stored.rule, first, "{}", backend.name);
        assert_eq!((stored.enforcement, stored.enforced_in.as_deref()), (Enforcement::Delay, Some("boot/1")));
        assert_eq!(stored.enforced_at, Some(t0() + Duration::seconds(1)));

        // Replaced: one rule, the new one.
        let second = rule("web-01", &[2222], 300_000);
        db.put_tarpit_rule(&second, &enforced(Enforcement::Throttle, Some("boot/2"))).await.unwrap();
        let names: Vec<_> = db.tarpit_rules().await.unwrap().into_iter().map(|r| r.rule.decky_name).collect();
        assert_eq!(names, ["mail", "web-01"]);
        assert_eq!(db.tarpit_rule("web-01").await.unwrap().rule, second);

        // Standing is recorded for the rule it was applied for, never for a replaced one.
        db.set_tarpit_enforcement("web-01", first.id, &enforced(Enforcement::Failed, None)).await.unwrap();
        assert_eq!(db.tarpit_rule("web-01").await.unwrap().enforcement, Enforcement::Throttle);
        db.set_tarpit_enforcement("web-01", second.id, &enforced(Enforcement::Failed, None)).await.unwrap();
        let stored = db.tarpit_rule("web-01").await.unwrap();
        assert_eq!((stored.enforcement, stored.enforced_in), (Enforcement::Failed, None));

        db.delete_tarpit_rule("web-01").await.unwrap();
        assert!(matches!(db.delete_tarpit_rule("web-01").await, Err(DbError::NotFound)));
        assert_eq!(db.tarpit_rules().await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn sessions_open_and_close_once() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let (a, b) = (session("web-01", "10.0.0.9", 22, t0()), session("web-01", "fd7a::9", 22, t0()));
        let opened = db.open_tarpit_sessions(&[a.clone(), b.clone()]).await.unwrap();
        assert_eq!(opened, [a.clone(), b.clone()], "{}", backend.name);
        // A second watcher that saw the same connection opens nothing: no second enter.
        let later = session("web-01", "10.0.0.9", 22, t0() + Duration::seconds(15));
        assert_eq!(db.open_tarpit_sessions(std::slice::from_ref(&later)).await.unwrap(), []);
        assert_eq!(db.tarpit_sessions().await.unwrap(), [a.clone(), b.clone()]);

        // Closed once: the second close finds nothing, so no second exit.
        assert_eq!(db.close_tarpit_sessions(std::slice::from_ref(&a)).await.unwrap(), std::slice::from_ref(&a));
        assert_eq!(db.close_tarpit_sessions(std::slice::from_ref(&a)).await.unwrap(), []);
        // A session reopened since is not closed by a watcher that read the old one.
        db.open_tarpit_sessions(std::slice::from_ref(&later)).await.unwrap();
        assert_eq!(db.close_tarpit_sessions(std::slice::from_ref(&a)).await.unwrap(), []);
        assert_eq!(db.tarpit_sessions().await.unwrap(), [later, b]);
        assert_eq!(db.open_tarpit_sessions(&[]).await.unwrap(), []);
        assert_eq!(db.close_tarpit_sessions(&[]).await.unwrap(), []);
    }
}
