//! A swarm whose hosts run real containers: three `svc agent`s, each in a network namespace of its
//! own with a container engine of its own (podman's API service; its socket is on the shared
//! filesystem, reachable from inside the namespace) and its deckies on a subnet of its own
//! (`SVC_AGENT_DECKY_NET`). A deploy to the master spreads its deckies over the hosts; they become
//! containers on their host's engine, `succeeded`, and show in `/swarm/deckies` and `/deckies`
//! with their host. `POST /deckies/{name}/mutate` and `DELETE /deckies/{name}` reach the decky's
//! host; a deploy with `replace_fleet` clears every host of what the new INI does not name, and one
//! that pins a decky to another host moves it there.
//!
//! `SVC_SWARM_BENCH_DECKIES` sets how many deckies the first deploy makes (default 6); the wall
//! time from the POST to every record `succeeded` is printed (`benches/swarm-containers.sh`).

use svc_test_support::processes as common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::netns::NetnsHost;
use common::podman::Podman;
use common::swarm::{agent_command, enroll, master_command, master_store};
use common::{Proc, admin_token, api_call, eventually, start_api};
use reqwest::Method;
use serde_json::{Value, json};
use svc::db::HostStatus;
use svc::swarm::pki::Ca;

/// Building the decky image from a debug binary and starting tens of containers on a shared
/// machine takes longer than an API call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(300);
const AGENT_PORT: u16 = 8765;

/// One worker host: its namespace, engine and agent, and the master's record of it.
struct Host {
    name: &'static str,
    uuid: String,
    podman: Podman,
    _agent: Proc,
    _net: NetnsHost,
}

struct Master {
    api: Proc,
    port: u16,
    token: String,
}

impl Master {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        api_call(self.port, &self.token, method, path, body).await
    }

    /// Waits until every record of `ids` has ended; the records.
    async fn ended(&self, ids: &[Value]) -> Vec<Value> {
        let query: Vec<String> = ids.iter().map(|id| format!("ids={}", id.as_str().unwrap())).collect();
        let path = format!("/deckies/lifecycle?{}", query.join("&"));
        let deadline = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let (_, body) = self.call(Method::GET, &path, None).await;
            let rows = body["rows"].as_array().cloned().unwrap_or_default();
            if rows.len() == ids.len() && rows.iter().all(|r| r["status"] == "succeeded" || r["status"] == "failed") {
                return rows;
            }
            assert!(Instant::now() < deadline, "the records did not end: {rows:?}\n{}", self.api.output());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Deploys `ini`; the lifecycle ids.
    async fn deploy(&self, ini: &str, replace: bool) -> Vec<Value> {
        let body = json!({"ini_content": ini, "replace_fleet": replace});
        let (status, accepted) = self.call(Method::POST, "/deckies/deploy", Some(body)).await;
        assert_eq!((status, &accepted["mode"]), (202, &json!("swarm")), "{accepted}");
        accepted["lifecycle_ids"].as_array().unwrap().clone()
    }

    /// `/swarm/deckies` as (decky, host name, state), by decky.
    async fn swarm_deckies(&self) -> Vec<(String, String, String)> {
        let (status, body) = self.call(Method::GET, "/swarm/deckies", None).await;
        assert_eq!(status, 200, "{body}");
        let text = |row: &Value, key: &str| row[key].as_str().unwrap_or_default().to_string();
        body.as_array()
            .unwrap()
            .iter()
            .map(|r| (text(r, "decky_name"), text(r, "host_name"), text(r, "state")))
            .collect()
    }
}

fn ini(deckies: usize) -> String {
    format!("[general]\nnet = 172.30.97.0/24\n\n[web]\narchetype = linux-server\namount = {deckies}\n")
}

#[tokio::test]
async fn deckies_dispatched_to_hosts_become_their_containers_and_are_mutated_and_removed_there() {
    let deckies: usize = std::env::var("SVC_SWARM_BENCH_DECKIES").ok().and_then(|n| n.parse().ok()).unwrap_or(6);
    let dir = tempfile::tempdir().unwrap();
    let nets: Vec<NetnsHost> = (202..205).map(NetnsHost::create).collect();
    // Every host reaches the master's heartbeat listener on the first namespace's link.
    let listener = nets[0].master_side.to_string();
    for net in &nets[1..] {
        common::ip(&["-n", &net.name, "route", "add", &format!("{listener}/32"), "via", &net.master_side.to_string()]);
    }
    let (mut api, port, swarm_port) = master_command(dir.path(), &listener);
    api.env("SVC_DEPLOYMENT_LIMIT", "300")
        .env("SVC_DOCKER_HOST", format!("unix://{}", dir.path().join("no-engine.sock").display()));
    let api = start_api(api, port).await;
    let master = Master { token: admin_token(port).await, api, port };
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));

    let mut hosts = Vec::new();
    for ((net, name), octet) in nets.into_iter().zip(["alpha", "bravo", "charlie"]).zip(232u8..) {
        let podman = Podman::start(&format!("h30{name}"), octet);
        let address = net.address.to_string();
        let leaf = ca.issue(name, std::slice::from_ref(&address)).unwrap();
        let record = enroll(&db, name, &address, AGENT_PORT, &leaf.fingerprint).await;
        let agent_dir = dir.path().join(name);
        let mut command = agent_command(&agent_dir, &ca, &leaf, &address, AGENT_PORT);
        podman.configure(&mut command, &agent_dir.join("ingest.log"));
        command
            .env("SVC_MASTER_HOST", &listener)
            .env("SVC_SWARM_PORT", swarm_port.to_string())
            .env("SVC_HOST_UUID", record.uuid.to_string())
            .env("SVC_AGENT_HEARTBEAT_S", "0.5")
            .env("SVC_AGENT_DECKY_NET", &podman.subnet)
            .env("SVC_DEPLOYMENT_LIMIT", "100");
        let agent = Proc::spawn(net.wrap(&command));
        hosts.push(Host { name, uuid: record.uuid.to_string(), podman, _agent: agent, _net: net });
    }
    // A host is sent deckies once it has been heard from.
    eventually("every host's first heartbeat makes it active", || async {
        let hosts = db.swarm_hosts(Some(HostStatus::Active)).await.unwrap_or_default();
        hosts.len() == 3
    })
    .await;
    let host_named = |uuid: &str| hosts.iter().find(|h| h.uuid == uuid).expect("a host of the test").name;

    // The deploy: every decky a container on its host's engine.
    let started = Instant::now();
    let ids = master.deploy(&ini(deckies), false).await;
    let rows = master.ended(&ids).await;
    let elapsed = started.elapsed();
    assert!(rows.iter().all(|r| r["status"] == "succeeded"), "{rows:?}\n{}", master.api.output());
    println!("swarm deploy: {deckies} deckies over 3 hosts, every record succeeded in {:.1} s", elapsed.as_secs_f64());
    let placed: BTreeMap<String, &str> = rows
        .iter()
        .map(|r| (r["decky_name"].as_str().unwrap().to_string(), host_named(r["host_uuid"].as_str().unwrap())))
        .collect();
    for host in &hosts {
        let on_host = placed.values().filter(|name| **name == host.name).count();
        assert_eq!(on_host, deckies / 3, "{} runs its share", host.name);
        assert_eq!(host.podman.containers().len(), on_host, "{}'s engine runs its deckies", host.name);
    }
    eventually("/swarm/deckies shows each decky running on its host", || async {
        let listed = master.swarm_deckies().await;
        listed.len() == deckies
            && listed.iter().all(|(decky, host, state)| placed.get(decky) == Some(&host.as_str()) && state == "running")
    })
    .await;
    let (_, fleet) = master.call(Method::GET, "/deckies", None).await;
    let fleet = fleet.as_array().unwrap();
    assert_eq!(fleet.len(), deckies, "{fleet:?}");
    for entry in fleet {
        let decky = entry["name"].as_str().unwrap();
        assert_eq!(entry["host_name"], json!(placed[decky]), "{entry}");
        assert_eq!(host_named(entry["host_uuid"].as_str().unwrap()), placed[decky]);
        assert_eq!(entry["state"], "running");
    }

    // Mutate web-01 (alpha's): its agent recreates the container; the record carries alpha and
    // ends with its heartbeat.
    let alpha = &hosts[0];
    assert_eq!(placed["web-01"], "alpha");
    let before = alpha.podman.run(&["inspect", "--format", "{{.Id}}", &format!("{}-web-01", alpha.podman.fleet)]);
    let (status, body) = master.call(Method::POST, "/deckies/web-01/mutate", None).await;
    assert_eq!(status, 202, "{body}\n{}", master.api.output());
    let mutated = master.ended(body["lifecycle_ids"].as_array().unwrap()).await;
    assert_eq!((&mutated[0]["status"], &mutated[0]["operation"]), (&json!("succeeded"), &json!("mutate")));
    assert_eq!(mutated[0]["host_uuid"], json!(alpha.uuid));
    let after = alpha.podman.run(&["inspect", "--format", "{{.Id}}", &format!("{}-web-01", alpha.podman.fleet)]);
    assert_ne!(before, after, "the mutation made a new container");
    let (status, body) = master.call(Method::POST, "/deckies/nowhere/mutate", None).await;
    assert_eq!(status, 404, "{body}");

    // Delete web-02 (bravo's): gone from bravo's engine and from the master's records.
    let bravo = &hosts[1];
    assert_eq!(placed["web-02"], "bravo");
    let (status, body) = master.call(Method::DELETE, "/deckies/web-02", None).await;
    assert_eq!(status, 204, "{body}\n{}", master.api.output());
    assert_eq!(bravo.podman.containers().len(), deckies / 3 - 1);
    eventually("the master forgets web-02", || async {
        !master.swarm_deckies().await.iter().any(|(decky, _, _)| decky == "web-02")
    })
    .await;

    // Replace the whole swarm with one decky: every host is cleared, the new one lands on alpha.
    let ids = master.deploy("[general]\nnet = 172.30.97.0/24\n\n[solo]\narchetype = linux-server\n", true).await;
    let rows = master.ended(&ids).await;
    assert_eq!(
        (&rows[0]["status"], host_named(rows[0]["host_uuid"].as_str().unwrap())),
        (&json!("succeeded"), "alpha")
    );
    eventually("only the new decky is left anywhere", || async {
        master.swarm_deckies().await == [("solo".to_string(), "alpha".to_string(), "running".to_string())]
    })
    .await;
    let counts: Vec<usize> = hosts.iter().map(|h| h.podman.containers().len()).collect();
    assert_eq!(counts, [1, 0, 0], "the replaced deckies' containers are gone");

    // Pin solo to charlie in a deploy that replaces nothing: it leaves alpha, one decky on one host.
    let moved = "[general]\nnet = 172.30.97.0/24\n\n[solo]\narchetype = linux-server\nhost = charlie\n";
    let rows = master.ended(&master.deploy(moved, false).await).await;
    assert_eq!(
        (&rows[0]["status"], host_named(rows[0]["host_uuid"].as_str().unwrap())),
        (&json!("succeeded"), "charlie"),
        "{}",
        master.api.output()
    );
    eventually("solo is charlie's alone", || async {
        master.swarm_deckies().await == [("solo".to_string(), "charlie".to_string(), "running".to_string())]
    })
    .await;
    let counts: Vec<usize> = hosts.iter().map(|h| h.podman.containers().len()).collect();
    assert_eq!(counts, [0, 0, 1], "solo's container moved from alpha to charlie");
    db.close().await;
}
