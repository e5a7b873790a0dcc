//! The webhook worker against real databases, a real bus and a receiver this test runs on
//! 127.0.0.1 (with `SVC_WEBHOOK_ALLOW_PRIVATE=true`, for that receiver): events reach the webhooks
//! that select them, signed, once; a receiver that fails and recovers gets the event once; a
//! webhook that keeps failing is turned off with the reason and gets its waiting events once enabled
//! again; a worker restarted with events in the outbox loses and repeats none; the ingester's
//! `credential.captured` reaches a webhook once per new credential.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use chrono::Utc;
use common::{Nats, Proc, eventually, svc};
use hmac::{Hmac, Mac};
use rustix::process::Signal;
use serde_json::{Value, json};
use sha2::Sha256;
use store::TestDb;
use store::receiver::{Hit, Receiver};
use svc::bus::{Bus, Event};
use svc::config::Config;
use svc::db::{Db, Webhook, WebhookChange};
use svc::secret::Secret;
use svc::worker::WorkerContext;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A worker body running in this process, as the API embeds it.
struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    async fn start(body: svc::worker::WorkerBody, config: &Config, db: &Db, nats: &Nats) -> Running {
        let bus = Bus::connect(Some(&nats.url()), "test-worker").await;
        let cancel = CancellationToken::new();
        let ctx = WorkerContext::new(Arc::new(config.clone()), db.clone(), bus, cancel.clone());
        Running { cancel, task: tokio::spawn((body.run)(ctx)) }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap().unwrap();
    }
}

fn config(backend: &TestDb, extra: &[(&str, &str)]) -> Config {
    let mut vars = vec![
        ("SVC_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("SVC_WEBHOOK_RETRY_BASE_MS", "50"),
        ("SVC_INGEST_LEASE_SECS", "1"),
    ];
    vars.extend_from_slice(extra);
    backend.api_config(&vars)
}

async fn add_webhook(db: &Db, name: &str, url: &str, patterns: &[&str]) -> Webhook {
    let now = Utc::now();
    let webhook = Webhook {
        uuid: Uuid::new_v4(),
        name: name.into(),
        url: url.into(),
        secret: Secret::new(format!("secret of {name}, long enough")),
        topic_patterns: patterns.iter().map(|p| p.to_string()).collect(),
        enabled: true,
        consecutive_failures: 0,
        last_success_at: None,
        last_failure_at: None,
        last_error: None,
        auto_disabled_at: None,
        created_at: now,
        updated_at: now,
    };
    db.add_webhook(&webhook).await.unwrap();
    webhook
}

/// A publisher on the test's bus.
async fn publisher(nats: &Nats) -> Bus {
    let bus = Bus::connect(Some(&nats.url()), "test-publisher").await;
    assert!(bus.is_connected());
    bus
}

async fn publish(bus: &Bus, topic: &str, kind: &str, payload: Value) {
    bus.publish_confirmed(&Event::new(topic, kind, payload)).await.unwrap();
}

/// Publishes a marker event every webhook of `patterns` selects until one `receiver` accepted
/// arrives: the worker is listening, and everything published before it has been taken in.
async fn barrier(bus: &Bus, receiver: &Receiver, topic: &str) {
    let marker = Uuid::new_v4().to_string();
    let arrived = || receiver.hits().iter().any(|h| h.answered == 200 && h.json()["payload"]["marker"] == marker);
    eventually("a marker event is delivered", || async {
        if !arrived() {
            publish(bus, topic, "marker", json!({"marker": marker})).await;
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        arrived()
    })
    .await;
}

fn signed_by(hit: &Hit, secret: &Secret) -> bool {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()).unwrap();
    mac.update(&hit.body);
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    hit.header("x-decnet-signature") == format!("sha256={hex}")
}

/// Accepted deliveries of each event id, counted.
fn accepted_per_event(hits: &[Hit]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for hit in hits.iter().filter(|h| h.answered == 200) {
        *counts.entry(hit.header("x-decnet-event-id").to_string()).or_default() += 1;
    }
    counts
}

#[tokio::test]
async fn events_reach_the_webhooks_that_select_them_signed_and_once() {
    let nats = Nats::start();
    let bus = publisher(&nats).await;
    for backend in TestDb::all() {
        let db = backend.open().await;
        let receiver = Receiver::start().await;
        let attackers = add_webhook(&db, "attackers", &receiver.url("/attackers"), &["attacker.>"]).await;
        let fleet = add_webhook(&db, "fleet", &receiver.url("/fleet"), &["decky.*.state", "attacker.scored"]).await;
        let worker = Running::start(svc_workers::webhook::body(), &config(&backend, &[]), &db, &nats).await;
        barrier(&bus, &receiver, "attacker.marker").await;

        publish(&bus, "attacker.scored", "scored", json!({"attacker_ip": "192.0.2.7", "event_count": 3})).await;
        publish(&bus, "decky.web-01.state", "state", json!({"name": "web-01", "state": "running"})).await;
        publish(&bus, "system.log", "batch_committed", json!({"flushed": 1})).await;
        barrier(&bus, &receiver, "attacker.marker").await;
        worker.stop().await;

        let hits: Vec<Hit> =
            receiver.hits().into_iter().filter(|h| h.json()["payload"].get("marker").is_none()).collect();
        let seen: Vec<(String, String)> =
            hits.iter().map(|h| (h.path.clone(), h.header("x-decnet-event-topic").to_string())).collect();
        assert_eq!(seen.len(), 3, "{}: {seen:?}", backend.name);
        for expected in
            [("/attackers", "attacker.scored"), ("/fleet", "attacker.scored"), ("/fleet", "decky.web-01.state")]
        {
            assert!(
                seen.contains(&(expected.0.into(), expected.1.into())),
                "{}: {expected:?} in {seen:?}",
                backend.name
            );
        }
        for hit in &hits {
            let secret = if hit.path == "/attackers" { &attackers.secret } else { &fleet.secret };
            assert!(signed_by(hit, secret), "{}: a bad signature on {}", backend.name, hit.path);
            let body = hit.json();
            assert_eq!(hit.header("x-decnet-event-id"), body["id"].as_str().unwrap());
            assert_eq!(body["topic"], hit.header("x-decnet-event-topic"));
            assert_eq!(body["v"], 1);
            assert_eq!(hit.header("user-agent"), "svc-webhook/1.0");
        }
        let scored: Vec<&Hit> = hits.iter().filter(|h| h.header("x-decnet-event-topic") == "attacker.scored").collect();
        assert_eq!(scored[0].header("x-decnet-event-id"), scored[1].header("x-decnet-event-id"), "one event, one id");
        assert_eq!(scored[0].json()["payload"], json!({"attacker_ip": "192.0.2.7", "event_count": 3}));
        assert_eq!(scored[0].json()["type"], "scored");
        let state = hits.iter().find(|h| h.header("x-decnet-event-topic") == "decky.web-01.state").unwrap();
        assert_eq!(state.json()["payload"]["state"], "running");
        assert_eq!(db.pending_deliveries().await.unwrap(), 0);
        let fleet = db.webhook(fleet.uuid).await.unwrap();
        assert!(fleet.last_success_at.is_some() && fleet.consecutive_failures == 0);
    }
}

#[tokio::test]
async fn a_failing_receiver_gets_the_event_once_it_recovers_and_one_that_keeps_failing_is_turned_off() {
    let nats = Nats::start();
    let bus = publisher(&nats).await;
    for backend in TestDb::all() {
        let db = backend.open().await;
        let flaky = Receiver::start().await;
        let dead = Receiver::start().await;
        let recovering = add_webhook(&db, "recovering", &flaky.url("/"), &["credential.captured"]).await;
        let failing = add_webhook(&db, "failing", &dead.url("/"), &["credential.captured"]).await;
        let worker = Running::start(
            svc_workers::webhook::body(),
            &config(&backend, &[("SVC_WEBHOOK_FAILURE_LIMIT", "4")]),
            &db,
            &nats,
        )
        .await;
        barrier(&bus, &flaky, "credential.captured").await;
        barrier(&bus, &dead, "credential.captured").await;
        flaky.answer(&[503, 500, 429]);
        dead.answer_always(502);

        publish(&bus, "credential.captured", "captured", json!({"secret_sha256": "ab", "attacker_ip": "192.0.2.1"}))
            .await;
        let event_hits = |receiver: &Receiver| -> Vec<Hit> {
            receiver.hits().into_iter().filter(|h| h.json()["payload"].get("secret_sha256").is_some()).collect()
        };
        eventually("the flaky receiver takes the event", || async {
            event_hits(&flaky).iter().any(|h| h.answered == 200)
        })
        .await;
        let tries: Vec<u16> = event_hits(&flaky).iter().map(|h| h.answered).collect();
        assert_eq!(tries, [503, 500, 429, 200], "{}", backend.name);
        assert_eq!(accepted_per_event(&event_hits(&flaky)).values().copied().collect::<Vec<_>>(), [1]);
        let ids: Vec<String> = event_hits(&flaky).iter().map(|h| h.header("x-decnet-event-id").to_string()).collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "every retry carries the event's id");
        let recovered = db.webhook(recovering.uuid).await.unwrap();
        assert_eq!((recovered.enabled, recovered.consecutive_failures), (true, 0));

        eventually("the failing webhook is turned off", || async { !db.webhook(failing.uuid).await.unwrap().enabled })
            .await;
        let off = db.webhook(failing.uuid).await.unwrap();
        assert_eq!(off.consecutive_failures, 4);
        assert!(off.auto_disabled_at.is_some());
        assert_eq!(off.last_error.as_deref(), Some("auto-disabled after 4 consecutive failures: http 502"));
        assert_eq!(event_hits(&dead).len(), 4, "no attempt after it was turned off");
        assert_eq!(db.pending_deliveries().await.unwrap(), 1, "its event waits for it");

        // Enabled again (what PATCH does), the receiver back: the event arrives, once.
        dead.answer_always(200);
        let change = WebhookChange { enabled: Some(true), ..WebhookChange::default() };
        db.update_webhook(failing.uuid, &change, Utc::now()).await.unwrap();
        eventually("the waiting event is delivered", || async { event_hits(&dead).iter().any(|h| h.answered == 200) })
            .await;
        barrier(&bus, &dead, "credential.captured").await;
        worker.stop().await;
        assert_eq!(accepted_per_event(&event_hits(&dead)).values().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(event_hits(&dead)[0].header("x-decnet-event-id"), ids[0], "the same event as the other webhook got");
        assert_eq!(db.pending_deliveries().await.unwrap(), 0);
    }
}

#[tokio::test]
async fn a_worker_restarted_with_events_in_the_outbox_loses_and_repeats_none() {
    let nats = Nats::start();
    let bus = publisher(&nats).await;
    for backend in TestDb::all() {
        let db = backend.open().await;
        let receiver = Receiver::start().await;
        add_webhook(&db, "siem", &receiver.url("/in"), &["attacker.>"]).await;
        let dir = tempfile::tempdir().unwrap();
        let command = || {
            let mut command = svc(dir.path(), &["worker", "webhook"]);
            command
                .envs(backend.vars())
                .env("SVC_NATS_URL", nats.url())
                .env("SVC_WEBHOOK_ALLOW_PRIVATE", "true")
                .env("SVC_WEBHOOK_RETRY_BASE_MS", "100")
                .env("SVC_WEBHOOK_FAILURE_LIMIT", "1000")
                .env("SVC_INGEST_LEASE_SECS", "1");
            command
        };
        let mut first = Proc::spawn(command());
        barrier(&bus, &receiver, "attacker.marker").await;
        assert!(first.output().contains("SVC_WEBHOOK_ALLOW_PRIVATE is on"), "a warning at start");

        // The receiver is down: everything published waits in the outbox.
        receiver.answer_always(503);
        for n in 0..5 {
            publish(&bus, "attacker.observed", "observed", json!({"n": n})).await;
        }
        eventually("five events wait in the outbox", || async { db.pending_deliveries().await.unwrap() == 5 }).await;
        first.signal(Signal::TERM);
        // Not `wait`: a delivery may be in flight, and blocking this runtime would hold the
        // receiver's answer until the worker had given up on it.
        assert!(first.exited().await.success());

        receiver.answer_always(200);
        let second = Proc::spawn(command());
        eventually("the outbox empties", || async { db.pending_deliveries().await.unwrap() == 0 }).await;
        barrier(&bus, &receiver, "attacker.marker").await;
        drop(second);

        let numbered: Vec<Hit> =
            receiver.hits().into_iter().filter(|h| h.json()["payload"].get("n").is_some()).collect();
        let accepted = accepted_per_event(&numbered);
        assert_eq!(accepted.len(), 5, "{}: every event arrived", backend.name);
        assert!(accepted.values().all(|n| *n == 1), "{}: one delivery each: {accepted:?}", backend.name);
        let mut payloads: Vec<i64> =
            numbered.iter().filter(|h| h.answered == 200).map(|h| h.json()["payload"]["n"].as_i64().unwrap()).collect();
        payloads.sort();
        assert_eq!(payloads, [0, 1, 2, 3, 4]);
    }
}

#[tokio::test]
async fn the_ingester_announces_each_new_credential_and_webhooks_forward_it_once() {
    let nats = Nats::start();
    let bus = publisher(&nats).await;
    for backend in TestDb::all() {
        let db = backend.open().await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ingest.log");
        let path = file.display().to_string();
        let config =
            config(&backend, &[("SVC_INGEST_LOG_FILE", path.as_str()), ("SVC_INGEST_BATCH_MAX_WAIT_MS", "20")]);
        let receiver = Receiver::start().await;
        add_webhook(&db, "creds", &receiver.url("/"), &["credential.*"]).await;
        let webhook = Running::start(svc_workers::webhook::body(), &config, &db, &nats).await;
        barrier(&bus, &receiver, "credential.marker").await;
        let ingest = Running::start(svc_workers::ingest::body(), &config, &db, &nats).await;

        let line = |password_b64: &str| {
            format!(
                "<134>1 2026-05-02T06:22:48.089309+00:00 omega-decky ssh - auth_attempt [relay@55555 \
                 username=\"root\" principal=\"root\" secret_printable=\"x\" secret_b64=\"{password_b64}\" \
                 src_ip=\"192.0.2.5\"]\n"
            )
        };
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&file).unwrap();
        // The same credential twice (a repeat only counts an attempt), then another one.
        log.write_all(line("dG9vcg==").as_bytes()).unwrap();
        log.write_all(line("dG9vcg==").as_bytes()).unwrap();
        let captured = || -> Vec<Hit> {
            receiver.hits().into_iter().filter(|h| h.header("x-decnet-event-topic") == "credential.captured").collect()
        };
        eventually("the first credential is announced", || async { captured().len() == 1 }).await;
        log.write_all(line("aHVudGVyMg==").as_bytes()).unwrap();
        eventually("the second credential is announced", || async { captured().len() == 2 }).await;
        barrier(&bus, &receiver, "credential.marker").await;
        ingest.stop().await;
        webhook.stop().await;

        let hits = captured();
        assert_eq!(hits.len(), 2, "{}: one announcement per new credential", backend.name);
        let payload = hits[0].json()["payload"].clone();
        assert_eq!(payload["attacker_ip"], "192.0.2.5");
        assert_eq!((payload["decky"].clone(), payload["service"].clone()), (json!("omega-decky"), json!("ssh")));
        assert_eq!(payload["secret_kind"], "plaintext");
        // SHA-256 of "toor": the hash, never the secret.
        use sha2::Digest;
        assert_eq!(payload["secret_sha256"], format!("{:x}", Sha256::digest(b"toor")));
        let body = String::from_utf8_lossy(&hits[0].body);
        assert!(!body.contains("toor") && !body.contains("dG9vcg=="), "the secret itself is never sent");
    }
}
