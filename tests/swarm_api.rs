//! The swarm's dashboard routes through the real server on every backend under test: DECNET's
//! shapes and texts, the role matrix, the limits (10 enrollments, 20 host deletions a minute),
//! the enrollment bundle installed by its own script into a test root (files, modes, the
//! certificate issued for the fetching address and pinned on the host, the `.tgz` served once,
//! expiry), teardown and decommission against an agent that does not answer (generic failure,
//! no hang), the silence sweep that makes a quiet host `unreachable` (and `/health` and `/workers`
//! say so), and hostile input refused with nothing stored.

use svc_test_support::in_process as common;
use svc_test_support::processes::eventually;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use chrono::Utc;
use common::{LogCapture, RoleTokens, TestApi, TestDb, user_token};
use reqwest::{Method, StatusCode};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use svc::db::{DeckyConfig, DeckyShard, HostStatus, Role, ShardFilter, ShardState, SwarmHost};
use uuid::Uuid;

struct Reply {
    status: StatusCode,
    body: Value,
}

async fn call(api: &TestApi, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Reply {
    let mut request = api.client.request(method, api.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    Reply { status, body: serde_json::from_str(&text).unwrap_or(Value::String(text)) }
}

fn host(name: &str, address: &str) -> SwarmHost {
    SwarmHost {
        uuid: Uuid::new_v4(),
        name: name.into(),
        address: address.into(),
        agent_port: 8765,
        status: HostStatus::Enrolled,
        last_heartbeat: None,
        client_cert_fingerprint: Some("ab".repeat(32)),
        updater_cert_fingerprint: None,
        enrolled_at: Utc::now(),
        notes: Some("enrolled via UI bundle".into()),
        use_ipvlan: false,
    }
}

fn config(name: &str) -> DeckyConfig {
    DeckyConfig {
        hostname: format!("{name}.corp"),
        archetype: Some("linux-server".into()),
        mutate_interval: Some(30),
        ..common::decky_config(name, "10.0.0.7")
    }
}

fn shard(name: &str, host: Uuid, state: ShardState) -> DeckyShard {
    DeckyShard {
        decky_name: name.into(),
        host_uuid: host,
        services: vec!["ssh".into()],
        decky_config: Some(config(name)),
        decky_ip: None,
        state,
        last_error: None,
        compose_hash: None,
        last_seen: Some(Utc::now()),
        updated_at: Utc::now(),
    }
}

/// A loopback port nothing listens on (until someone binds it): an agent that is down, or a port
/// for the swarm listener.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn hosts_deckies_and_the_deployment_mode_in_decnets_shapes() {
    for backend in TestDb::all() {
        // The listener on a loopback port of its own, as a swarm master runs it.
        let port = free_port().to_string();
        let swarm = [("SVC_SWARM_ENABLED", "true"), ("SVC_SWARM_HOST", "127.0.0.1"), ("SVC_SWARM_PORT", port.as_str())];
        let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(backend.api_config(&swarm)).await;
        let mode = api.ok("/system/deployment-mode", &viewer, &[]).await;
        assert_eq!(mode, json!({"mode": "unihost", "role": "master", "swarm_host_count": 0}), "{}", backend.name);

        let (beta, alpha) = (host("beta", ""), host("alpha", "10.9.0.2"));
        api.state.db.add_swarm_host(&beta).await.unwrap();
        api.state.db.add_swarm_host(&alpha).await.unwrap();
        api.state.db.record_swarm_heartbeat(alpha.uuid, Utc::now()).await.unwrap();
        let shards =
            [shard("web-02", alpha.uuid, ShardState::Running), shard("web-01", alpha.uuid, ShardState::Degraded)];
        api.state.db.upsert_decky_shards(&shards).await.unwrap();

        // Only a host with an address counts: alpha.
        let mode = api.ok("/system/deployment-mode", &viewer, &[]).await;
        assert_eq!(mode, json!({"mode": "swarm", "role": "master", "swarm_host_count": 1}));

        let hosts = api.ok("/swarm/hosts", &admin, &[]).await;
        let names: Vec<&str> = hosts.as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        let first = hosts[0].as_object().unwrap();
        let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "address",
                "agent_port",
                "client_cert_fingerprint",
                "enrolled_at",
                "last_heartbeat",
                "name",
                "notes",
                "status",
                "updater_cert_fingerprint",
                "use_ipvlan",
                "uuid"
            ]
        );
        assert_eq!((hosts[0]["status"].as_str(), hosts[0]["agent_port"].as_u64()), (Some("active"), Some(8765)));
        assert!(hosts[0]["last_heartbeat"].is_string() && hosts[1]["last_heartbeat"].is_null());
        let active = api.ok("/swarm/hosts", &admin, &[("host_status", "active")]).await;
        assert_eq!(active.as_array().unwrap().len(), 1);
        assert_eq!(api.ok("/swarm/hosts", &admin, &[("host_status", "online")]).await, json!([]));
        assert_eq!(api.ok("/swarm/hosts", &admin, &[("host_status", "null")]).await.as_array().unwrap().len(), 2);

        let deckies = api.ok("/swarm/deckies", &admin, &[]).await;
        assert_eq!(deckies[0]["decky_name"], "web-01");
        assert_eq!(deckies[0]["host_name"], "alpha");
        assert_eq!(deckies[0]["host_address"], "10.9.0.2");
        assert_eq!(deckies[0]["host_status"], "active");
        assert_eq!(deckies[0]["state"], "degraded");
        // Lifted from the stored config: the address, hostname, archetype, interval.
        assert_eq!(deckies[0]["decky_ip"], "10.0.0.7");
        assert_eq!(deckies[0]["hostname"], "web-01.corp");
        assert_eq!(deckies[0]["archetype"], "linux-server");
        assert_eq!(deckies[0]["mutate_interval"], 30);
        assert_eq!(deckies[0]["last_mutated"], 0.0);
        let running = api.ok("/swarm/deckies", &admin, &[("state", "running")]).await;
        assert_eq!(running.as_array().unwrap().len(), 1);
        let on_beta = api.ok("/swarm/deckies", &admin, &[("host_uuid", &beta.uuid.to_string())]).await;
        assert_eq!(on_beta, json!([]));
        assert_eq!(api.get("/swarm/deckies", Some(&admin), &[("host_uuid", "nope")]).await.status, 422);
        assert_eq!(api.get("/swarm/hosts", Some(&admin), &[("host_status", &"x".repeat(100))]).await.status, 422);

        // Admin only; no token, no answer.
        for path in ["/swarm/hosts", "/swarm/deckies"] {
            assert_eq!(api.get(path, Some(&viewer), &[]).await.status, 403, "{path}");
            assert_eq!(api.get(path, None, &[]).await.status, 401, "{path}");
        }
        let refused = call(&api, Method::DELETE, &format!("/swarm/hosts/{}", alpha.uuid), Some(&viewer), None).await;
        assert_eq!(refused.status, 403);
        let refused = call(&api, Method::POST, "/swarm/enroll-bundle", Some(&viewer), Some(json!({}))).await;
        assert_eq!(refused.status, 403);
        api.stop().await;
    }
}

#[tokio::test]
async fn teardown_and_decommission_against_an_agent_that_does_not_answer() {
    let (logs, _guard) = LogCapture::start();
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[("SVC_AGENT_CONNECT_TIMEOUT_S", "2")])).await;
        let admin = user_token(&api.state, "root", Role::Admin).await;
        let mut down = host("down", "127.0.0.1");
        down.agent_port = free_port();
        api.state.db.add_swarm_host(&down).await.unwrap();
        let shards = [shard("db-01", down.uuid, ShardState::Running), shard("web-01", down.uuid, ShardState::Running)];
        api.state.db.upsert_decky_shards(&shards).await.unwrap();
        let teardown = format!("/swarm/hosts/{}/teardown", down.uuid);

        // Refused before anything changes: a name that is not a decky's, an unknown host, and a
        // body that is an array (serde alone would read `[]` as "every decky", by position).
        let bad = call(&api, Method::POST, &teardown, Some(&admin), Some(json!({"decky_id": "../x"}))).await;
        assert_eq!(bad.status, 422, "{}: {}", backend.name, bad.body);
        for array in [json!([]), json!(["web-01"])] {
            let refused = call(&api, Method::POST, &teardown, Some(&admin), Some(array)).await;
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}: {}", backend.name, refused.body);
        }
        let unknown = format!("/swarm/hosts/{}/teardown", Uuid::new_v4());
        let missing = call(&api, Method::POST, &unknown, Some(&admin), Some(json!({}))).await;
        assert_eq!((missing.status, missing.body), (StatusCode::NOT_FOUND, json!({"detail": "host not found"})));
        let all = ShardFilter::default();
        assert!(api.state.db.decky_shards(&all).await.unwrap().iter().all(|s| s.state == ShardState::Running));

        let accepted = call(&api, Method::POST, &teardown, Some(&admin), Some(json!({"decky_id": "web-01"}))).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED);
        assert_eq!(
            accepted.body,
            json!({"host_uuid": down.uuid, "host_name": "down", "decky_id": "web-01", "accepted": true,
                   "detail": "teardown queued"})
        );
        // The agent is down: the decky's record fails with the generic reason; the other is untouched.
        let db = api.state.db.clone();
        eventually("the teardown fails", || {
            let db = db.clone();
            async move {
                let shards = db.decky_shards(&ShardFilter::default()).await.unwrap();
                shards[1].state == ShardState::TeardownFailed
            }
        })
        .await;
        let shards = api.state.db.decky_shards(&all).await.unwrap();
        assert_eq!(shards[1].last_error.as_deref(), Some("agent teardown failed"));
        assert_eq!(shards[0].state, ShardState::Running);
        assert!(!logs.lines_containing("Agent teardown failed").is_empty());

        // Decommission forgets the host and its deckies even though its agent cannot be told.
        let path = format!("/swarm/hosts/{}", down.uuid);
        let gone = call(&api, Method::DELETE, &path, Some(&admin), None).await;
        assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
        assert!(api.state.db.swarm_hosts(None).await.unwrap().is_empty());
        assert!(api.state.db.decky_shards(&all).await.unwrap().is_empty());
        let again = call(&api, Method::DELETE, &path, Some(&admin), None).await;
        assert_eq!((again.status, again.body), (StatusCode::NOT_FOUND, json!({"detail": "host not found"})));
        assert_eq!(call(&api, Method::DELETE, "/swarm/hosts/nope", Some(&admin), None).await.status, 422);
        api.stop().await;
    }
}

#[tokio::test]
async fn host_deletion_is_limited_to_twenty_a_minute() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let admin = user_token(&api.state, "root", Role::Admin).await;
    for _ in 0..20 {
        let path = format!("/swarm/hosts/{}", Uuid::new_v4());
        assert_eq!(call(&api, Method::DELETE, &path, Some(&admin), None).await.status, 404);
    }
    let path = format!("/swarm/hosts/{}", Uuid::new_v4());
    assert_eq!(call(&api, Method::DELETE, &path, Some(&admin), None).await.status, 429);
    api.stop().await;
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn a_bundle_installs_an_agent_of_this_master_once() {
    let (logs, _guard) = LogCapture::start();
    let work = tempfile::tempdir().unwrap();
    let binary = work.path().join("svc");
    std::fs::write(&binary, "#!/bin/sh\necho svc\n").unwrap();
    for backend in TestDb::all() {
        let bin = binary.display().to_string();
        let api = TestApi::start(backend.api_config(&[("SVC_SWARM_BUNDLE_BIN", &bin)])).await;
        let admin = user_token(&api.state, "root", Role::Admin).await;
        let enroll = |body: Value| call(&api, Method::POST, "/swarm/enroll-bundle", Some(&admin), Some(body));

        // Hostile or malformed input: refused, nothing stored.
        for (body, status) in [
            (json!({"master_host": "127.0.0.1", "agent_name": "Bad_Name"}), 422),
            (json!({"master_host": "127.0.0.1", "agent_name": "-lead"}), 422),
            (json!({"master_host": "127.0.0.1", "agent_name": "x".repeat(64)}), 422),
            (json!({"master_host": "x; rm -rf /", "agent_name": "ok"}), 422),
            (json!({"master_host": "a".repeat(254), "agent_name": "ok"}), 422),
            (json!({"master_host": "", "agent_name": "ok"}), 400),
            (json!({"agent_name": "ok"}), 400),
            (json!({"master_host": "127.0.0.1", "agent_name": "ok", "services_ini": "x".repeat(600_000)}), 422),
        ] {
            let reply = enroll(body.clone()).await;
            assert_eq!(reply.status.as_u16(), status, "{}: {body:.80}: {}", backend.name, reply.body);
        }
        assert!(api.state.db.swarm_hosts(None).await.unwrap().is_empty());

        let created = enroll(json!({"master_host": "127.0.0.1", "agent_name": "sensor-1"})).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let token = created.body["token"].as_str().unwrap().to_string();
        let host_uuid: Uuid = created.body["host_uuid"].as_str().unwrap().parse().unwrap();
        let port = api.base.split(':').nth(2).unwrap().split('/').next().unwrap().to_string();
        let script_url = format!("http://127.0.0.1:{port}/api/v1/swarm/enroll-bundle/{token}.sh");
        assert_eq!(created.body["command"], format!("curl -fsSL {script_url} | sudo bash"));
        let expires = chrono::DateTime::parse_from_rfc3339(created.body["expires_at"].as_str().unwrap()).unwrap();
        let left = expires.with_timezone(&Utc) - Utc::now();
        assert!(left > chrono::Duration::minutes(4) && left <= chrono::Duration::minutes(5), "{left}");
        let taken = enroll(json!({"master_host": "127.0.0.1", "agent_name": "sensor-1"})).await;
        assert_eq!(
            (taken.status, taken.body),
            (StatusCode::CONFLICT, json!({"detail": "Worker 'sensor-1' is already enrolled"}))
        );
        let stored = api.state.db.swarm_host(host_uuid).await.unwrap();
        assert_eq!(
            (stored.status, stored.address.as_str(), stored.client_cert_fingerprint),
            (HostStatus::Enrolled, "", None)
        );

        // The script needs no login, and can be fetched again until the bundle is.
        let script = api.client.get(&script_url).send().await.unwrap();
        assert_eq!(script.status(), 200);
        assert_eq!(script.headers()["content-type"], "text/x-shellscript");
        let script = script.text().await.unwrap();
        assert_eq!(api.client.get(&script_url).send().await.unwrap().status(), 200);
        let script_path = work.path().join(format!("enroll-{}.sh", backend.name));
        std::fs::write(&script_path, &script).unwrap();
        let root = work.path().join(format!("root-{}", backend.name));
        let run = tokio::process::Command::new("sh")
            .arg(&script_path)
            .env("SVC_INSTALL_ROOT", &root)
            .env("SVC_NO_START", "1")
            .output()
            .await
            .unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

        // What a worker host needs, with keys readable by root alone.
        assert_eq!(std::fs::read_to_string(root.join("usr/local/bin/svc")).unwrap(), "#!/bin/sh\necho svc\n");
        assert_eq!(mode(&root.join("usr/local/bin/svc")), 0o755);
        for key in ["etc/svc/agent/agent.key", "etc/svc/updater/updater.key", "etc/svc/env"] {
            assert_eq!(mode(&root.join(key)), 0o600, "{key}");
        }
        let settings = std::fs::read_to_string(root.join("etc/svc/env")).unwrap();
        for line in [
            "SVC_MODE=agent".to_string(),
            format!("SVC_HOST_UUID={host_uuid}"),
            "SVC_MASTER_HOST=127.0.0.1".to_string(),
            "SVC_SWARM_PORT=8770".to_string(),
            "SVC_SWARM_SYSLOG_PORT=6514".to_string(),
            format!("SVC_AGENT_KEY={}/etc/svc/agent/agent.key", root.display()),
        ] {
            assert!(settings.lines().any(|l| l == line), "{line} in {settings}");
        }
        let unit = std::fs::read_to_string(root.join("etc/systemd/system/svc-agent.service")).unwrap();
        assert!(unit.contains(&format!("ExecStart={}/usr/local/bin/svc agent", root.display())), "{unit}");
        assert!(root.join("etc/systemd/system/svc-collector.service").exists());
        let forwarder = std::fs::read_to_string(root.join("etc/systemd/system/svc-forwarder.service")).unwrap();
        assert!(
            forwarder.contains(&format!("ExecStart={}/usr/local/bin/svc worker forwarder", root.display())),
            "{forwarder}"
        );

        // The certificate was issued for the address that fetched the bundle, and is pinned.
        let host = api.state.db.swarm_host(host_uuid).await.unwrap();
        assert_eq!(host.address, "127.0.0.1");
        let cert = std::fs::read(root.join("etc/svc/agent/agent.crt")).unwrap();
        let der = CertificateDer::from_pem_slice(&cert).unwrap();
        assert_eq!(host.client_cert_fingerprint, Some(svc::swarm::pki::fingerprint(&der)));
        assert!(host.updater_cert_fingerprint.is_some());
        let parsed = rustls::server::ParsedCertificate::try_from(&der).unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        rustls::client::verify_server_name(&parsed, &name).unwrap();
        let viewed = api.ok("/swarm/hosts", &admin, &[]).await;
        assert_eq!(viewed[0]["client_cert_fingerprint"], host.client_cert_fingerprint.unwrap());

        // Served once: the bundle and its script are gone.
        let tgz_url = script_url.replace(".sh", ".tgz");
        for url in [&tgz_url, &script_url] {
            let again = api.client.get(url.as_str()).send().await.unwrap();
            assert_eq!(again.status(), 404, "{url}");
            assert_eq!(again.json::<Value>().await.unwrap(), json!({"detail": "bundle not found or expired"}));
        }
        for path in ["nothex.sh", "x.tgz", &format!("{token}.zip"), &format!("{}.sh", "0".repeat(64))] {
            assert_eq!(api.get(&format!("/swarm/enroll-bundle/{path}"), None, &[]).await.status, 404, "{path}");
        }
        // Two fetches at once: one gets the bundle, the other nothing.
        let second = enroll(json!({"master_host": "127.0.0.1", "agent_name": "sensor-2", "with_updater": false})).await;
        let tgz_url = format!(
            "http://127.0.0.1:{port}/api/v1/swarm/enroll-bundle/{}.tgz",
            second.body["token"].as_str().unwrap()
        );
        let (a, b) = tokio::join!(api.client.get(&tgz_url).send(), api.client.get(&tgz_url).send());
        let mut statuses = [a.unwrap().status().as_u16(), b.unwrap().status().as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 404]);
        let sensor2 = api.state.db.swarm_host_by_name("sensor-2").await.unwrap();
        assert!(sensor2.client_cert_fingerprint.is_some() && sensor2.updater_cert_fingerprint.is_none());

        let key = std::fs::read_to_string(root.join("etc/svc/agent/agent.key")).unwrap();
        assert!(!logs.text().contains(&key) && !logs.text().contains(&token), "a key or token was logged");
        api.stop().await;
    }
}

#[tokio::test]
async fn bundles_expire_and_enrollment_is_limited_to_ten_a_minute() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[("SVC_SWARM_ENROLL_TTL_S", "1")])).await;
    let admin = user_token(&api.state, "root", Role::Admin).await;
    let enroll = |name: String| {
        call(
            &api,
            Method::POST,
            "/swarm/enroll-bundle",
            Some(&admin),
            Some(json!({"master_host": "m", "agent_name": name})),
        )
    };
    let created = enroll("late".into()).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let token = created.body["token"].as_str().unwrap().to_string();
    let script = format!("/swarm/enroll-bundle/{token}.sh");
    assert_eq!(api.get(&script, None, &[]).await.status, 200);
    eventually("the bundle expires", || async { api.get(&script, None, &[]).await.status == 404 }).await;
    let tgz = api.get(&format!("/swarm/enroll-bundle/{token}.tgz"), None, &[]).await;
    assert_eq!(tgz.status, 404);
    // Expired, the bundle is also forgotten (the sweep's other job): not even a clock from before
    // its expiry finds it.
    let hash = svc::auth::ticket::ticket_hash(&token);
    let db = api.state.db.clone();
    eventually("the expired bundle is forgotten", || {
        let (db, hash) = (db.clone(), hash.clone());
        async move { db.enrollment(&hash, chrono::DateTime::UNIX_EPOCH).await.is_err() }
    })
    .await;
    let host = api.state.db.swarm_host_by_name("late").await.unwrap();
    assert_eq!((host.address.as_str(), host.client_cert_fingerprint), ("", None), "an expired bundle issues nothing");

    // The limit counts in windows of the clock's minutes: the burst goes into a fresh one, so it
    // cannot straddle two (a slow machine reached the next minute mid-burst once).
    let into_minute = chrono::Utc::now().timestamp_millis().rem_euclid(60_000) as u64;
    tokio::time::sleep(std::time::Duration::from_millis(60_000 - into_minute + 100)).await;
    for i in 1..=10 {
        assert_eq!(enroll(format!("host-{i}")).await.status, StatusCode::CREATED);
    }
    assert_eq!(enroll("host-11".into()).await.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(api.state.db.swarm_host_by_name("host-11").await.is_err());
    api.stop().await;
}

#[tokio::test]
async fn a_silent_host_becomes_unreachable_by_itself_and_health_says_which() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[("SVC_AGENT_HEARTBEAT_S", "0.2")])).await;
        let admin = user_token(&api.state, "root", Role::Admin).await;
        let (quiet, enrolled) = (host("quiet", "10.9.0.3"), host("fresh", ""));
        api.state.db.add_swarm_host(&quiet).await.unwrap();
        api.state.db.add_swarm_host(&enrolled).await.unwrap();
        api.state.db.record_swarm_heartbeat(quiet.uuid, Utc::now()).await.unwrap();
        let health = api.get("/health", None, &[]).await.body;
        assert_eq!(health["components"]["swarm_hosts"]["status"], "ok", "{}: {health}", backend.name);
        // A usable host, but the swarm is off: deploys stay here, and the mode says so.
        let mode = api.ok("/system/deployment-mode", &admin, &[]).await;
        assert_eq!(mode, json!({"mode": "unihost", "role": "master", "swarm_host_count": 0}));

        // Nobody lists hosts: the sweep alone marks it.
        let db = api.state.db.clone();
        eventually("the silent host is unreachable", || {
            let db = db.clone();
            async move { db.swarm_host(quiet.uuid).await.unwrap().status == HostStatus::Unreachable }
        })
        .await;
        assert_eq!(api.state.db.swarm_host(enrolled.uuid).await.unwrap().status, HostStatus::Enrolled);
        let health = api.get("/health", None, &[]).await;
        assert_eq!(health.status, 200, "an unreachable host degrades, it does not fail, the master");
        assert_eq!(health.body["status"], "degraded");
        assert_eq!(
            health.body["components"]["swarm_hosts"],
            json!({"status": "failing", "detail": "swarm hosts unreachable (no heartbeat): quiet"})
        );
        let workers = api.ok("/workers", &admin, &[]).await;
        let row = |name: &str| workers["workers"].as_array().unwrap().iter().find(|w| w["name"] == name).cloned();
        assert_eq!(row("agent@quiet").unwrap()["status"], "stale");
        assert_eq!(row("agent@quiet").unwrap()["extra"]["host_status"], "unreachable");
        assert_eq!(row("agent@fresh").unwrap()["status"], "unknown");

        // Heard from again: active, and health is whole.
        api.state.db.record_swarm_heartbeat(quiet.uuid, Utc::now()).await.unwrap();
        let health = api.get("/health", None, &[]).await.body;
        assert_eq!(health["components"]["swarm_hosts"]["status"], "ok");
        let workers = api.ok("/workers", &admin, &[]).await;
        let status =
            workers["workers"].as_array().unwrap().iter().find(|w| w["name"] == "agent@quiet").unwrap()["status"]
                .clone();
        assert_eq!(status, "ok");
        api.stop().await;
    }
}
