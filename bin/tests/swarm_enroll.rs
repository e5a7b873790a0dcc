//! Enrollment end to end between real processes: `svc api` makes a bundle, its own script installs
//! it into a test root (units written, not started), the installed `svc` runs as an agent from the
//! installed settings and certificates, and its first heartbeat makes the host `active`. Killed,
//! the agent's host turns `unreachable` by itself within three heartbeats (and `/health` names
//! it); restarted, `active` again. Teardown and decommission reach the real agent over the pinned
//! client with the name checked; it removes what the bundle installed and stops.

use svc_test_support::processes as common;

use std::path::Path;
use std::process::Command;

use common::swarm::master_store;
use common::{Proc, admin_token, api_call, api_command, eventually, free_port, path, start_api};
use reqwest::Method;
use rustix::process::Signal;
use serde_json::{Value, json};
use svc::db::{DeckyShard, ShardState};

/// The installed agent as systemd would run it: the bundle's settings, on a loopback port, beating
/// every half second, with an engine socket that does not exist (nothing is deployed here).
fn installed_agent(root: &Path, data: &Path) -> Command {
    let mut command = Command::new(root.join("usr/local/bin/svc"));
    command.arg("agent").env_clear().env("PATH", path()).current_dir(root);
    let settings = std::fs::read_to_string(root.join("etc/svc/env")).unwrap();
    for line in settings.lines().filter(|l| !l.starts_with('#')) {
        let (key, value) = line.split_once('=').unwrap();
        command.env(key, value);
    }
    command
        .env("SVC_DATA_DIR", data)
        .env("SVC_AGENT_HOST", "127.0.0.1")
        .env("SVC_AGENT_HEARTBEAT_S", "0.5")
        .env("SVC_LOG_FORMAT", "text")
        .env("SVC_DOCKER_HOST", format!("unix://{}", data.join("no-engine.sock").display()));
    command
}

async fn host_status(port: u16, token: &str) -> String {
    let (status, hosts) = api_call(port, token, Method::GET, "/swarm/hosts", None).await;
    assert_eq!(status, 200, "{hosts}");
    hosts[0]["status"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_host_enrolled_by_its_bundle_runs_an_agent_the_master_hears_and_misses() {
    let dir = tempfile::tempdir().unwrap();
    let (swarm_port, agent_port) = (free_port(), free_port());
    let (mut api, port) = api_command(dir.path(), None);
    api.env("SVC_SWARM_ENABLED", "true")
        .env("SVC_SWARM_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_AGENT_PORT", agent_port.to_string())
        .env("SVC_AGENT_HEARTBEAT_S", "0.5");
    let api = start_api(api, port).await;
    let token = admin_token(port).await;

    let body = json!({"master_host": "127.0.0.1", "agent_name": "sensor-1"});
    let (status, created) = api_call(port, &token, Method::POST, "/swarm/enroll-bundle", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let command = created["command"].as_str().unwrap();
    let url = command.strip_prefix("curl -fsSL ").unwrap().strip_suffix(" | sudo bash").unwrap();
    let script = reqwest::get(url).await.unwrap().text().await.unwrap();
    let root = dir.path().join("root");
    let install = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("SVC_INSTALL_ROOT", &root)
        .env("SVC_NO_START", "1")
        .output()
        .await
        .unwrap();
    assert!(install.status.success(), "{}", String::from_utf8_lossy(&install.stderr));
    assert_eq!(host_status(port, &token).await, "enrolled");

    let data = dir.path().join("agent-data");
    std::fs::create_dir_all(&data).unwrap();
    let mut agent = Proc::spawn(installed_agent(&root, &data));
    eventually("the agent's first heartbeat makes the host active", || async {
        host_status(port, &token).await == "active"
    })
    .await;

    // Killed: nobody lists hosts, yet the host turns unreachable, and health says which.
    agent.signal(Signal::KILL);
    agent.wait();
    let health = format!("http://127.0.0.1:{port}/api/v1/health");
    eventually("the silent host is unreachable and health names it", || async {
        let body: Value = reqwest::get(&health).await.unwrap().json().await.unwrap();
        body["components"]["swarm_hosts"]["detail"] == "swarm hosts unreachable (no heartbeat): sensor-1"
    })
    .await;
    assert_eq!(host_status(port, &token).await, "unreachable");

    // Restarted: active again; the master reaches it (teardown of its no deckies is accepted).
    let mut agent = Proc::spawn(installed_agent(&root, &data));
    eventually("the restarted agent makes the host active again", || async {
        host_status(port, &token).await == "active"
    })
    .await;
    let (_, hosts) = api_call(port, &token, Method::GET, "/swarm/hosts", None).await;
    let uuid = hosts[0]["uuid"].as_str().unwrap().to_string();
    // A decky record the agent does not have: a teardown of the host's every decky succeeds at the
    // agent, and success removes the record.
    let store = master_store(&dir.path().join("data"));
    let stale = DeckyShard {
        decky_name: "gone-01".into(),
        host_uuid: uuid.parse().unwrap(),
        services: vec!["ssh".into()],
        decky_config: None,
        decky_ip: None,
        state: ShardState::Running,
        last_error: None,
        compose_hash: None,
        last_seen: None,
        updated_at: chrono::Utc::now(),
    };
    store.upsert_decky_shards(&[stale]).await.unwrap();
    let teardown = format!("/swarm/hosts/{uuid}/teardown");
    let (status, accepted) = api_call(port, &token, Method::POST, &teardown, Some(json!({}))).await;
    assert_eq!((status, &accepted["detail"]), (202, &json!("teardown queued")));
    eventually("the agent's teardown removed the record", || async {
        api_call(port, &token, Method::GET, "/swarm/deckies", None).await.1 == json!([])
    })
    .await;
    store.close().await;

    // Decommission: the agent wipes what the bundle installed; the master forgets the host.
    let (status, _) = api_call(port, &token, Method::DELETE, &format!("/swarm/hosts/{uuid}"), None).await;
    assert_eq!(status, 204, "master said:\n{}", api.output());
    assert!(agent.wait().success(), "the agent did not stop cleanly:\n{}", agent.output());
    assert!(agent.output().contains("Self-destruct requested by the master"), "{}", agent.output());
    for gone in ["usr/local/bin/svc", "etc/svc", "etc/systemd/system/svc-agent.service"] {
        assert!(!root.join(gone).exists(), "{gone} is still there");
    }
    let (_, hosts) = api_call(port, &token, Method::GET, "/swarm/hosts", None).await;
    assert_eq!(hosts, json!([]));
}
