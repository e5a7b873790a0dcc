//! Enrollment end to end between real processes: `svc api` with the swarm on issues a bundle
//! (`POST /swarm/enroll-bundle`), its `.sh` installs the bundle into a test root (units written,
//! not started), the installed `svc agent`, run with the installed settings, makes the host
//! `active` with its first heartbeat, and decommission (`DELETE /swarm/hosts/{uuid}`) reaches it
//! over the pinned client with the name checked: the agent removes what the bundle installed and
//! stops.

use svc_test_support::processes as common;

use std::process::Command;

use common::{Proc, admin_token, api_call, api_command, eventually, free_port, path, start_api};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn an_enrolled_host_runs_the_installed_agent_goes_active_and_is_decommissioned() {
    let dir = tempfile::tempdir().unwrap();
    let (swarm_port, agent_port) = (free_port(), free_port());
    let (mut api, api_port) = api_command(dir.path(), None);
    api.env("SVC_SWARM_ENABLED", "true")
        .env("SVC_SWARM_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_AGENT_PORT", agent_port.to_string())
        .env("SVC_SWARM_DIR", dir.path().join("swarm"));
    let api = start_api(api, api_port).await;
    let token = admin_token(api_port).await;
    let body = json!({"master_host": "127.0.0.1", "agent_name": "sensor-1"});
    let (status, created) = api_call(api_port, &token, Method::POST, "/swarm/enroll-bundle", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let host_uuid = created["host_uuid"].as_str().unwrap().to_string();
    let script_url =
        format!("http://127.0.0.1:{api_port}/api/v1/swarm/enroll-bundle/{}.sh", created["token"].as_str().unwrap());
    let script = reqwest::get(&script_url).await.unwrap().text().await.unwrap();
    std::fs::write(dir.path().join("enroll.sh"), script).unwrap();
    let root = dir.path().join("root");
    let run = Command::new("sh")
        .arg(dir.path().join("enroll.sh"))
        .env_clear()
        .env("PATH", path())
        .env("SVC_INSTALL_ROOT", &root)
        .env("SVC_NO_START", "1")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    // The installed binary with the installed settings, on loopback, heart-beating fast.
    let settings = std::fs::read_to_string(root.join("etc/svc/env")).unwrap();
    let mut agent = Command::new(root.join("usr/local/bin/svc"));
    agent.arg("agent").current_dir(dir.path()).env_clear().env("PATH", path());
    for (key, value) in settings.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('=')) {
        agent.env(key, value);
    }
    agent
        .env("SVC_AGENT_HOST", "127.0.0.1")
        .env("SVC_AGENT_HEARTBEAT_S", "0.5")
        .env("SVC_DATA_DIR", root.join("var/lib/svc"))
        .env("SVC_LOG_FORMAT", "text")
        .env("SVC_DOCKER_HOST", format!("unix://{}", dir.path().join("no-engine.sock").display()));
    let mut agent = Proc::spawn(agent);
    let hosts = || async {
        let (_, hosts) = api_call(api_port, &token, Method::GET, "/swarm/hosts", None).await;
        hosts.as_array().cloned().unwrap_or_default()
    };
    eventually("the host's first heartbeat makes it active", || async {
        hosts().await.iter().any(|h| h["uuid"] == host_uuid.as_str() && h["status"] == "active")
    })
    .await;
    assert!(root.join("etc/systemd/system/svc-agent.service").is_file(), "the units are written");

    let (status, _) = api_call(api_port, &token, Method::DELETE, &format!("/swarm/hosts/{host_uuid}"), None).await;
    assert_eq!(status, 204);
    assert!(agent.wait().success(), "the agent did not stop cleanly:\n{}", agent.output());
    assert!(agent.output().contains("Self-destruct requested by the master"), "{}", agent.output());
    for gone in ["usr/local/bin/svc", "etc/svc", "etc/systemd/system/svc-agent.service"] {
        assert!(!root.join(gone).exists(), "{gone} is still there");
    }
    assert!(hosts().await.is_empty());
    drop(api);
}
