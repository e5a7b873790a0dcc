//! The swarm's wire between real processes over real TLS: `svc agent` answers the pinned master and
//! refuses, and logs, every other peer (a certificate of another CA, a wrong pin, plaintext,
//! TLS 1.1, an agent's certificate on a master-only route) with nothing deployed; self-destruct
//! removes its installed files; and an agent in a network namespace of its own heart-beats to a
//! real `svc api`, whose listener makes the host `active` and refuses forged heartbeats.

use svc_test_support::processes as common;

use std::process::Command;

use common::netns::NetnsHost;
use common::swarm::{agent_command, endpoint, enroll, listening, master_command, master_store};
use common::{Proc, eventually, free_port, start_api};
use serde_json::json;
use svc::db::HostStatus;
use svc::swarm::pki::{Ca, Leaf, MASTER_CN};
use svc::swarm::tls::PeerPin;
use uuid::Uuid;

const INI: &str = "[general]\nnet = 172.30.99.0/24\ngw = 172.30.99.1\n\n[decky-a]\narchetype = web-server\n";

fn count(proc: &Proc, text: &str) -> usize {
    proc.output().matches(text).count()
}

#[tokio::test]
async fn the_agent_answers_only_its_pinned_master_and_logs_every_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::load_or_create(&dir.path().join("ca")).unwrap();
    let stranger = Ca::load_or_create(&dir.path().join("stranger")).unwrap();
    let agent_leaf = ca.issue("worker-1", &["127.0.0.1".to_string()]).unwrap();
    let port = free_port();
    let agent = Proc::spawn(agent_command(dir.path(), &ca, &agent_leaf, "127.0.0.1", port));
    listening("127.0.0.1", port).await;

    let master_leaf = ca.issue(MASTER_CN, &[]).unwrap();
    let pinned = PeerPin::Fingerprint(Some(agent_leaf.fingerprint.clone()));
    let master = endpoint("127.0.0.1", port, ca.cert_pem(), &master_leaf, pinned.clone(), true);
    let health = master.get("/health").await.unwrap();
    assert_eq!((health.status.as_u16(), health.json()), (200, json!({"status": "ok"})));
    let dry = master.post("/deploy", &json!({"config": INI, "dry_run": true})).await.unwrap();
    assert_eq!((dry.status.as_u16(), dry.json()), (200, json!({"status": "dry_run", "deckies": ["decky-a"]})));
    let bad = master.post("/deploy", &json!({"config": 7})).await.unwrap();
    assert_eq!((bad.status.as_u16(), bad.json()), (422, json!({"detail": "invalid request body"})));

    // Another agent's certificate, signed by the same CA: it may read, never change.
    let other_leaf = ca.issue("worker-2", &[]).unwrap();
    let other = endpoint("127.0.0.1", port, ca.cert_pem(), &other_leaf, PeerPin::CaSigned, false);
    assert_eq!(other.get("/status").await.unwrap().status.as_u16(), 200);
    for (path, body) in [
        ("/deploy", json!({"config": INI})),
        ("/mutate", json!({"decky_id": "decky-a"})),
        ("/teardown", json!({})),
        ("/self-destruct", json!({})),
    ] {
        let answer = other.post(path, &body).await.unwrap();
        assert_eq!(
            (answer.status.as_u16(), answer.json()),
            (403, json!({"detail": "master certificate required"})),
            "{path}"
        );
    }
    eventually("each refusal is logged", || async { count(&agent, "Refused a master-only agent route") == 4 }).await;

    // A master certificate of another CA: the handshake fails, and the agent logs it.
    let before = count(&agent, "Swarm TLS handshake refused");
    let forged_leaf = stranger.issue(MASTER_CN, &[]).unwrap();
    let forged = endpoint("127.0.0.1", port, ca.cert_pem(), &forged_leaf, pinned.clone(), true);
    assert!(forged.post("/deploy", &json!({"config": INI})).await.is_err());
    eventually("the forged certificate is logged", || async { count(&agent, "Swarm TLS handshake refused") > before })
        .await;

    // The right CA and a valid certificate, but not the one pinned: the master walks away.
    let wrong_pin = PeerPin::Fingerprint(Some(other_leaf.fingerprint.clone()));
    let misled = endpoint("127.0.0.1", port, ca.cert_pem(), &master_leaf, wrong_pin, true);
    assert!(misled.get("/health").await.is_err());
    let nothing_stored = endpoint("127.0.0.1", port, ca.cert_pem(), &master_leaf, PeerPin::Fingerprint(None), true);
    assert!(nothing_stored.get("/health").await.is_err(), "a missing pin fails closed");

    // Plaintext HTTP gets no HTTP answer.
    let before = count(&agent, "Swarm TLS handshake refused");
    let plain = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/deploy")).body(INI).send().await;
    assert!(plain.is_err(), "plaintext was answered: {plain:?}");
    eventually("the plaintext client is logged", || async { count(&agent, "Swarm TLS handshake refused") > before })
        .await;

    // TLS 1.1, offered by OpenSSL with the master's own certificate (its security level lowered so
    // that OpenSSL itself offers 1.1).
    let before = count(&agent, "Swarm TLS handshake refused");
    std::fs::write(dir.path().join("master.crt"), &master_leaf.cert_pem).unwrap();
    std::fs::write(dir.path().join("master.key"), &master_leaf.key_pem).unwrap();
    let s_client = Command::new("openssl")
        .args(["s_client", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-cert", "master.crt", "-key", "master.key", "-CAfile", "certs/ca.crt"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl runs");
    assert!(!s_client.status.success(), "a TLS 1.1 handshake went through");
    eventually("the TLS 1.1 client is logged", || async { count(&agent, "Swarm TLS handshake refused") > before })
        .await;

    let status = master.get("/status").await.unwrap();
    assert_eq!(status.json()["deployed"], json!(false), "nothing was deployed");

    // Decommission: the installed files go, the logs stay, the agent stops.
    let root = dir.path().join("root");
    for file in [
        "usr/local/bin/svc",
        "etc/svc/agent/agent.key",
        "etc/systemd/system/svc-agent.service",
        "var/log/svc/agent.log",
    ] {
        std::fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
        std::fs::write(root.join(file), "x").unwrap();
    }
    let answer = master.post("/self-destruct", &json!({})).await.unwrap();
    assert_eq!(answer.json(), json!({"status": "self_destruct_scheduled"}));
    let mut agent = agent;
    assert!(agent.wait().success(), "the agent did not stop cleanly:\n{}", agent.output());
    for gone in ["usr/local/bin/svc", "etc/svc", "etc/systemd/system/svc-agent.service"] {
        assert!(!root.join(gone).exists(), "{gone} is still there");
    }
    assert!(root.join("var/log/svc/agent.log").exists(), "logs are kept");
}

#[tokio::test]
async fn an_agent_in_its_own_namespace_heart_beats_its_host_active_and_forgeries_are_refused() {
    let net = NetnsHost::create(205);
    let dir = tempfile::tempdir().unwrap();
    let (mut api, api_port, swarm_port) = master_command(dir.path(), &net.master_side.to_string());
    api.env("SVC_AGENT_HEARTBEAT_S", "0.5");
    let api = start_api(api, api_port).await;

    // Enrol the host as the enrollment route does: a certificate from the master's own CA naming
    // the host's address, its fingerprint stored with the host.
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let leaf = ca.issue("worker-1", &[net.address.to_string()]).unwrap();
    let db = master_store(&dir.path().join("data"));
    let host = enroll(&db, "worker-1", &net.address.to_string(), 8765, &leaf.fingerprint).await;

    let agent_dir = dir.path().join("agent");
    let mut command = agent_command(&agent_dir, &ca, &leaf, &net.address.to_string(), 8765);
    command
        .env("SVC_MASTER_HOST", net.master_side.to_string())
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_HOST_UUID", host.uuid.to_string())
        .env("SVC_AGENT_HEARTBEAT_S", "0.5");
    let agent = Proc::spawn(net.wrap(&command));
    eventually("the host's first heartbeat makes it active", || async {
        db.swarm_host(host.uuid).await.is_ok_and(|h| h.status == HostStatus::Active && h.last_heartbeat.is_some())
    })
    .await;

    // The master reaches the agent at the address its certificate names, checking that name.
    let master_leaf = ca.master_leaf(&dir.path().join("swarm/master")).unwrap();
    let pin = PeerPin::Fingerprint(host.client_cert_fingerprint.clone());
    let to_agent = endpoint(&net.address.to_string(), 8765, ca.cert_pem(), &master_leaf, pin, true);
    assert_eq!(to_agent.get("/health").await.unwrap().status.as_u16(), 200, "agent said:\n{}", agent.output());

    // Forged heartbeats to the listener.
    let beat = |uuid: Uuid| json!({"host_uuid": uuid, "agent_version": "x", "status": {"deployed": false}});
    let master_side = net.master_side.to_string();
    let as_leaf = |leaf: &Leaf| endpoint(&master_side, swarm_port, ca.cert_pem(), leaf, PeerPin::CaSigned, false);
    let unknown = as_leaf(&leaf).post("/swarm/heartbeat", &beat(Uuid::new_v4())).await.unwrap();
    assert_eq!((unknown.status.as_u16(), unknown.json()), (404, json!({"detail": "unknown host"})));
    let impostor = ca.issue("worker-1", &[]).unwrap();
    let forged = as_leaf(&impostor).post("/swarm/heartbeat", &beat(host.uuid)).await.unwrap();
    assert_eq!((forged.status.as_u16(), forged.json()), (403, json!({"detail": "cert fingerprint mismatch"})));
    let stranger = Ca::load_or_create(&dir.path().join("stranger")).unwrap();
    let foreign = stranger.issue("worker-1", &[]).unwrap();
    assert!(as_leaf(&foreign).post("/swarm/heartbeat", &beat(host.uuid)).await.is_err());
    eventually("the master logs the refusals", || async {
        let said = api.output();
        said.contains("Heartbeat refused") && said.contains("Swarm TLS handshake refused")
    })
    .await;

    // (A killed agent's host going unreachable, and active again on restart, is swarm_enroll's.)
    drop(agent);
    db.close().await;
}
