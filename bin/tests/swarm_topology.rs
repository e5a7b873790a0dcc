//! A topology targeted at a swarm host runs whole on that host: a real `svc agent` in a network
//! namespace of its own with its own container engine (podman's API service), and a master with no
//! engine at all. The topology is refused at create for a host the master does not know; targeted
//! at the agent's host it deploys there (its decky a container of the agent's fleet, the topology
//! `active` and its decky `running` in the master's API), follows the host's heartbeats (degraded
//! and active again as the host has it; degraded when the host no longer keeps it), takes no
//! mutation (the host applies it whole), and its teardown removes the container and the LAN's network. Once the agent is gone, a
//! deploy fails with a generic reason instead of hanging.

use svc_test_support::processes as common;

use std::time::{Duration, Instant};

use chrono::Utc;
use common::netns::NetnsHost;
use common::podman::Podman;
use common::swarm::{agent_command, enroll, master_command, master_store};
use common::{Proc, admin_token, api_call, eventually, start_api};
use reqwest::Method;
use serde_json::{Value, json};
use svc::db::{HostStatus, TopologyStatus};
use svc::swarm::pki::Ca;

/// Building the decky image from a debug binary on a shared machine takes longer than an API call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(300);
const AGENT_PORT: u16 = 8765;

struct Master {
    api: Proc,
    port: u16,
    token: String,
}

impl Master {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        api_call(self.port, &self.token, method, path, body).await
    }

    async fn post(&self, path: &str, body: Value, want: u16) -> Value {
        let (status, answer) = self.call(Method::POST, path, Some(body)).await;
        assert_eq!(status, want, "POST {path}: {answer}\n{}", self.api.output());
        answer
    }

    async fn topology(&self, id: &str) -> Value {
        let (status, body) = self.call(Method::GET, &format!("/topologies/{id}"), None).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Waits until the topology is `want`; its detail.
    async fn reaches(&self, id: &str, want: &str) -> Value {
        let deadline = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let detail = self.topology(id).await;
            if detail["topology"]["status"] == want {
                return detail;
            }
            let events = self.call(Method::GET, &format!("/topologies/{id}/status-events"), None).await.1;
            assert!(Instant::now() < deadline, "not {want}: {detail}\n{events}\n{}", self.api.output());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn a_topology_targeted_at_a_swarm_host_is_deployed_and_torn_down_by_its_agent() {
    let dir = tempfile::tempdir().unwrap();
    let net = NetnsHost::create(208);
    let podman = Podman::start("h30topo", 239);
    let listener = net.master_side.to_string();
    let (mut api, port, swarm_port) = master_command(dir.path(), &listener);
    // The topology's one LAN takes the engine's subnet of the test.
    api.env("SVC_TOPOLOGY_SUBNET_POOL", &podman.subnet)
        .env("SVC_DOCKER_HOST", format!("unix://{}", dir.path().join("no-engine.sock").display()));
    let api = start_api(api, port).await;
    let master = Master { token: admin_token(port).await, api, port };
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));

    let address = net.address.to_string();
    let leaf = ca.issue("delta", std::slice::from_ref(&address)).unwrap();
    let host = enroll(&db, "delta", &address, AGENT_PORT, &leaf.fingerprint).await;
    let uuid = host.uuid.to_string();
    let agent_dir = dir.path().join("delta");
    let mut command = agent_command(&agent_dir, &ca, &leaf, &address, AGENT_PORT);
    podman.configure(&mut command, &agent_dir.join("ingest.log"));
    command
        .env("SVC_MASTER_HOST", &listener)
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_HOST_UUID", &uuid)
        .env("SVC_AGENT_HEARTBEAT_S", "0.5");
    let agent = Proc::spawn(net.wrap(&command));

    // Before its first heartbeat the host is only enrolled: not a target yet.
    let blank = |name: &str, target: &str| json!({"name": name, "mode": "agent", "target_host_uuid": target});
    let refused = master.post("/topologies/blank", blank("early", &uuid), 400).await;
    assert!(refused["detail"].as_str().unwrap().contains("expected 'active'"), "{refused}");
    eventually("the host's first heartbeat makes it active", || async {
        db.swarm_host(host.uuid).await.is_ok_and(|h| h.status == HostStatus::Active)
    })
    .await;
    let stranger = uuid::Uuid::new_v4().to_string();
    for target in [stranger.as_str(), "not-a-host"] {
        let refused = master.post("/topologies/blank", blank("lost", target), 400).await;
        assert_eq!(refused["detail"], format!("swarm host {target:?} not found"));
    }

    // One LAN, one decky, targeted at delta.
    let topology = master.post("/topologies/blank", blank("maze", &uuid), 201).await;
    assert_eq!((&topology["mode"], &topology["target_host_uuid"]), (&json!("agent"), &json!(uuid)));
    let id = topology["id"].as_str().unwrap().to_string();
    let lan = master.post(&format!("/topologies/{id}/lans"), json!({"name": "dmz", "is_dmz": true}), 201).await;
    let decky =
        master.post(&format!("/topologies/{id}/deckies"), json!({"name": "web", "services": ["ssh"]}), 201).await;
    let edge = json!({"decky_uuid": decky["uuid"], "lan_id": lan["id"]});
    master.post(&format!("/topologies/{id}/edges"), edge, 201).await;

    let deploying = master.post(&format!("/topologies/{id}/deploy"), json!({}), 202).await;
    assert_eq!(deploying["status"], "deploying");
    let active = master.reaches(&id, "active").await;
    assert_eq!(active["deckies"][0]["state"], "running", "{active}");
    let container = format!("{}-t{}-web", podman.fleet, &id.replace('-', "")[..8]);
    assert_eq!(podman.state(&container).as_deref(), Some("running"), "the decky runs on the agent's engine");
    assert_eq!(podman.networks().len(), 1, "the LAN is a network on the agent's engine");

    // The host's heartbeats carry where the topology stands there. The agent's store is moved as
    // its heal moves it (a heal's degraded spell is shorter than a heartbeat; setting it here makes
    // it last): the master follows, reason and all, and back.
    let agent_store = master_store(&agent_dir.join("data"));
    let topology_id: uuid::Uuid = id.parse().unwrap();
    let (active, degraded) = (TopologyStatus::Active, TopologyStatus::Degraded);
    agent_store
        .set_topology_status(topology_id, Some(&[active]), degraded, Some("its container had stopped"), Utc::now())
        .await
        .unwrap();
    master.reaches(&id, "degraded").await;
    let (_, events) = master.call(Method::GET, &format!("/topologies/{id}/status-events"), None).await;
    assert_eq!(events[0]["reason"], "its container had stopped", "{events}");
    agent_store
        .set_topology_status(topology_id, Some(&[degraded]), active, Some("container started again"), Utc::now())
        .await
        .unwrap();
    master.reaches(&id, "active").await;

    // The host applies the topology whole: no live mutation.
    let mutation = json!({"op": "add_lan", "payload": {"name": "extra"}});
    let (status, body) = master.call(Method::POST, &format!("/topologies/{id}/mutations"), Some(mutation)).await;
    assert_eq!(status, 409, "{body}");

    // A host that no longer keeps it (its store wiped, say) leaves it degraded, and says so.
    let kept = agent_store.topology_detail(topology_id).await.unwrap();
    agent_store.delete_topology(topology_id, &[active]).await.unwrap();
    master.reaches(&id, "degraded").await;
    let (_, events) = master.call(Method::GET, &format!("/topologies/{id}/status-events"), None).await;
    assert_eq!(events[0]["reason"], "its swarm host no longer has it", "{events}");
    agent_store.create_topology(&kept).await.unwrap();
    master.reaches(&id, "active").await;

    master.post(&format!("/topologies/{id}/teardown"), json!({}), 202).await;
    let torn = master.reaches(&id, "torn_down").await;
    assert_eq!(torn["deckies"][0]["state"], "torn_down", "{torn}");
    assert!(podman.containers().is_empty() && podman.networks().is_empty(), "teardown removed what it made");
    let (status, _) = master.call(Method::DELETE, &format!("/topologies/{id}"), None).await;
    assert_eq!(status, 204);

    // The agent is gone (the host is still `active` until its silence is noticed): the deploy
    // fails with a generic reason within the connect timeout.
    drop(agent);
    let topology = master.post("/topologies/blank", blank("orphan", &uuid), 201).await;
    let id = topology["id"].as_str().unwrap();
    master.post(&format!("/topologies/{id}/deploy"), json!({}), 202).await;
    master.reaches(id, "failed").await;
    let (_, events) = master.call(Method::GET, &format!("/topologies/{id}/status-events"), None).await;
    let reason = events[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("swarm host 'delta': "), "{events}");
    db.close().await;
}
