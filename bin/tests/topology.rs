//! Topologies on a real engine (podman's Docker-compatible service) with a real `nats-server` and
//! real `svc worker mutator` processes: a two-LAN topology with a bridge decky deploys (each LAN a
//! network, each decky a container with an address on each of its LANs and its routes to the
//! other LANs through the bridge decky that forwards, the DMZ decky answering from the host, the
//! inner decky answering a namespace on the DMZ through the bridge and seeing its own address);
//! a decky's container removed, restarted or stopped comes back with its addresses and routes,
//! and the status events say so; each of the eight ops applies live; the event stream shows the snapshot, then
//! enqueued → applying → applied in order; teardown removes exactly what the deploy made; two
//! mutators never apply one mutation twice; a mutator killed while applying leaves no mutation
//! stuck; without a bus the mutator's poll still applies mutations. Subnets are the test's own,
//! in 10.214.0.0/16.

use svc_test_support::processes as common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::podman::Podman;
use common::{Nats, Proc, admin_token, api_command, eventually, ip, start_api, svc};
use futures::StreamExt;
use serde_json::{Value, json};

/// The decky image is built from this debug binary (hundreds of MB) on first use.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(240);

struct Topo {
    _api: Proc,
    port: u16,
    token: String,
    pool: String,
    dir: tempfile::TempDir,
}

async fn api_on(podman: &Podman, nats: Option<&Nats>, pool: &str) -> Topo {
    podman.owns_pool(pool);
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), nats);
    command
        .env("SVC_DOCKER_HOST", podman.host())
        .env("SVC_FLEET_NAME", &podman.fleet)
        .env("SVC_DECKY_BINARY", env!("CARGO_BIN_EXE_svc"))
        .env("SVC_TOPOLOGY_SUBNET_POOL", pool)
        .env("SVC_RECONCILE_S", "1");
    let api = start_api(command, port).await;
    let token = admin_token(port).await;
    Topo { _api: api, port, token, pool: pool.to_string(), dir }
}

impl Topo {
    /// `svc worker mutator` on the same database and engine, polling every second.
    fn mutator(&self, podman: &Podman, nats: Option<&Nats>, claim_timeout: &str) -> Proc {
        let mut command = svc(self.dir.path(), &["worker", "mutator"]);
        command
            .env("SVC_DOCKER_HOST", podman.host())
            .env("SVC_FLEET_NAME", &podman.fleet)
            .env("SVC_DECKY_BINARY", env!("CARGO_BIN_EXE_svc"))
            .env("SVC_TOPOLOGY_SUBNET_POOL", &self.pool)
            .env("SVC_MUTATOR_POLL_S", "1")
            .env("SVC_MUTATOR_CLAIM_TIMEOUT_S", claim_timeout);
        if let Some(nats) = nats {
            command.env("SVC_NATS_URL", nats.url());
        }
        Proc::spawn(command)
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        common::api_call(self.port, &self.token, method, path, body).await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (status, body) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert!(status == 201 || status == 202, "{path}: {status} {body}");
        body
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }

    async fn status(&self, id: &str) -> String {
        self.get(&format!("/topologies/{id}")).await["topology"]["status"].as_str().unwrap().to_string()
    }

    /// Waits until the newest status event is `→ active` with a reason naming `restored`, and
    /// the one before it `→ degraded` naming `found`.
    async fn healed(&self, id: &str, found: &str, restored: &str) {
        let path = format!("/topologies/{id}/status-events");
        eventually(&format!("{restored} in the status events"), || async {
            let events = self.get(&path).await;
            let said = |n: usize, to: &str, what: &str| {
                events[n]["to_status"] == to && events[n]["reason"].as_str().is_some_and(|r| r.contains(what))
            };
            said(0, "active", restored) && said(1, "degraded", found)
        })
        .await;
    }

    async fn wait_status(&self, id: &str, want: &str, deadline: Duration) {
        let end = Instant::now() + deadline;
        loop {
            let status = self.status(id).await;
            if status == want {
                return;
            }
            assert!(Instant::now() < end, "topology {id} is {status}, not {want}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Enqueues `op`; the mutation's id.
    async fn enqueue(&self, id: &str, op: &str, payload: Value) -> String {
        let body = self.post(&format!("/topologies/{id}/mutations"), json!({"op": op, "payload": payload})).await;
        body["mutation_id"].as_str().unwrap().to_string()
    }

    /// Waits until the mutation is terminal; its row.
    async fn settled(&self, id: &str, mutation: &str) -> Value {
        let end = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let rows = self.get(&format!("/topologies/{id}/mutations")).await;
            let row = rows.as_array().unwrap().iter().find(|r| r["id"] == mutation).cloned().unwrap();
            if row["state"] == "applied" || row["state"] == "failed" {
                return row;
            }
            assert!(Instant::now() < end, "mutation {mutation} stuck: {row}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn applied(&self, id: &str, op: &str, payload: Value) {
        let mutation = self.enqueue(id, op, payload.clone()).await;
        let row = self.settled(id, &mutation).await;
        assert_eq!(row["state"], "applied", "{op} {payload}: {row}");
    }

    /// A blank topology with the LANs given (name, is_dmz) and deckies (name, home LAN, more LANs).
    async fn build(&self, name: &str, lans: &[(&str, bool)], deckies: &[(&str, &str, &[&str])]) -> String {
        let topology = self.post("/topologies/blank", json!({"name": name})).await;
        let id = topology["id"].as_str().unwrap().to_string();
        let mut lan_ids = BTreeMap::new();
        for (lan, dmz) in lans {
            let row = self.post(&format!("/topologies/{id}/lans"), json!({"name": lan, "is_dmz": dmz})).await;
            lan_ids.insert(lan.to_string(), row["id"].clone());
        }
        for (decky, home, more) in deckies {
            let row =
                self.post(&format!("/topologies/{id}/deckies"), json!({"name": decky, "services": ["ssh"]})).await;
            for lan in std::iter::once(home).chain(more.iter()) {
                let edge = json!({"decky_uuid": row["uuid"], "lan_id": lan_ids[*lan], "forwards_l3": !more.is_empty()});
                self.post(&format!("/topologies/{id}/edges"), edge).await;
            }
        }
        id
    }
}

/// The container's address on each network it is attached to.
fn addresses(podman: &Podman, container: &str) -> BTreeMap<String, String> {
    let text = podman.run(&["inspect", "--format", "{{json .NetworkSettings.Networks}}", container]);
    let networks: BTreeMap<String, Value> = serde_json::from_str(text.trim()).unwrap();
    networks.into_iter().map(|(name, n)| (name, n["IPAddress"].as_str().unwrap_or_default().to_string())).collect()
}

/// The routes svc set inside a container's network namespace (`ip route show proto 245`).
fn routes_of(podman: &Podman, container: &str) -> Vec<String> {
    let pid = podman.run(&["inspect", "--format", "{{.State.Pid}}", container]);
    let output = std::process::Command::new("nsenter")
        .arg(format!("--net=/proc/{}/ns/net", pid.trim()))
        .args(["ip", "route", "show", "proto", "245"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(|l| l.trim().to_string()).collect()
}

/// A network namespace of the test's own with one leg on a LAN's bridge; removed on drop.
struct Probe {
    ns: String,
    host_if: String,
}

impl Probe {
    /// A probe at `address` on `bridge`, routing `routes` (`subnet`, `via`) as a host on that LAN would.
    fn on(bridge: &str, address: &str, routes: &[(&str, &str)]) -> Probe {
        let id = std::process::id() % 100_000;
        let probe = Probe { ns: format!("tprobe-{id}"), host_if: format!("tph{id}") };
        let inner = format!("tpn{id}");
        ip(&["netns", "add", &probe.ns]);
        ip(&["link", "add", &probe.host_if, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", &probe.ns]);
        ip(&["link", "set", &probe.host_if, "master", bridge, "up"]);
        ip(&["-n", &probe.ns, "addr", "add", address, "dev", &inner]);
        ip(&["-n", &probe.ns, "link", "set", &inner, "up"]);
        ip(&["-n", &probe.ns, "link", "set", "lo", "up"]);
        for (subnet, via) in routes {
            ip(&["-n", &probe.ns, "route", "add", subnet, "via", via]);
        }
        probe
    }

    /// The first bytes `addr` (`ip:port`) sends to a connection from inside the namespace.
    fn banner(&self, addr: &str) -> String {
        let (host, port) = addr.split_once(':').unwrap();
        let script = format!("exec 3<>/dev/tcp/{host}/{port} && head -c 4 <&3");
        let output = std::process::Command::new("ip")
            .args(["netns", "exec", &self.ns, "timeout", "5", "bash", "-c", &script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", &self.host_if]).output();
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

fn network_exists(podman: &Podman, name: &str) -> bool {
    podman.networks().iter().any(|n| n == name)
}

/// The `(event, data)` frames of an event stream, read as they come.
struct Frames(reqwest::Response, String);

impl Frames {
    async fn open(topo: &Topo, id: &str) -> Frames {
        let response = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/api/v1/topologies/{id}/events", topo.port))
            .bearer_auth(&topo.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Frames(response, String::new())
    }

    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.1.find("\n\n") {
                let frame: String = self.1.drain(..end + 2).collect();
                let mut event = String::new();
                let mut data = String::new();
                for line in frame.lines() {
                    if let Some(name) = line.strip_prefix("event: ") {
                        event = name.to_string();
                    } else if let Some(text) = line.strip_prefix("data: ") {
                        data.push_str(text);
                    }
                }
                if event.is_empty() {
                    continue; // a keepalive comment
                }
                return (event, serde_json::from_str(&data).unwrap());
            }
            let chunk = tokio::time::timeout(common::DEADLINE, self.0.chunk()).await.expect("a frame in time");
            self.1.push_str(&String::from_utf8_lossy(&chunk.unwrap().expect("the stream stays open")));
        }
    }
}

#[tokio::test]
async fn a_topology_deploys_mutates_live_and_tears_down_exactly_what_it_made() {
    let podman = Podman::start("topo", 0);
    let nats = Nats::start();
    let topo = api_on(&podman, Some(&nats), "10.214.0.0/20").await;
    let _mutator = topo.mutator(&podman, Some(&nats), "300");
    let id = topo
        .build(
            "maze",
            &[("dmz", true), ("inner", false)],
            &[("web", "dmz", &[]), ("gw", "inner", &["dmz"]), ("db", "inner", &[])],
        )
        .await;
    let started = Instant::now();
    topo.post(&format!("/topologies/{id}/deploy"), json!({})).await;
    topo.wait_status(&id, "active", DEPLOY_DEADLINE).await;
    eprintln!("deployed 2 LANs and 3 deckies in {:?} (image build included)", started.elapsed());

    let detail = topo.get(&format!("/topologies/{id}")).await;
    let network = |lan: &str| {
        detail["lans"].as_array().unwrap().iter().find(|l| l["name"] == lan).unwrap()["docker_network_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (dmz, inner) = (network("dmz"), network("inner"));
    let prefix = format!("{}-t{}", podman.fleet, &id.replace('-', "")[..8]);
    let gw = addresses(&podman, &format!("{prefix}-gw"));
    assert_eq!(gw.get(&inner).map(String::as_str), Some("10.214.1.2"), "{gw:?}");
    assert_eq!(gw.get(&dmz).map(String::as_str), Some("10.214.0.3"), "{gw:?}");
    let web = addresses(&podman, &format!("{prefix}-web"));
    assert_eq!(web, BTreeMap::from([(dmz.clone(), "10.214.0.2".to_string())]));
    assert_eq!(podman.run(&["network", "inspect", "--format", "{{.Internal}}", &inner]).trim(), "true");
    assert_eq!(podman.run(&["network", "inspect", "--format", "{{.Internal}}", &dmz]).trim(), "false");
    // The DMZ decky answers on its address like a host would, the bridge on its DMZ leg too.
    for addr in ["10.214.0.2:22", "10.214.0.3:22"] {
        eventually(&format!("{addr} answers SSH"), || async move {
            let Ok(Ok(mut stream)) =
                tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr)).await
            else {
                return false;
            };
            let mut banner = [0u8; 4];
            tokio::io::AsyncReadExt::read_exact(&mut stream, &mut banner).await.is_ok() && &banner == b"SSH-"
        })
        .await;
    }

    // From a namespace of the test's own on the DMZ, routing to the inner LAN through the bridge
    // decky like the DMZ's deckies do: the DMZ decky, the bridge's DMZ leg and, through the bridge,
    // the inner decky answer; the inner decky sees the probe's own address, not the host's.
    let db = addresses(&podman, &format!("{prefix}-db"));
    assert_eq!(db, BTreeMap::from([(inner.clone(), "10.214.1.3".to_string())]));
    let bridge = podman.run(&["network", "inspect", "--format", "{{.NetworkInterface}}", &dmz]);
    let probe = Probe::on(bridge.trim(), "10.214.0.250/24", &[("10.214.1.0/24", "10.214.0.3")]);
    for addr in ["10.214.0.2:22", "10.214.0.3:22", "10.214.1.3:22"] {
        eventually(&format!("{addr} answers the probe"), || async { probe.banner(addr) == "SSH-" }).await;
    }
    let db_log = podman.run(&["logs", &format!("{prefix}-db")]);
    let seen_from: Vec<&str> = db_log.lines().filter(|l| l.contains(" connect ")).collect();
    assert!(
        !seen_from.is_empty() && seen_from.iter().all(|l| l.contains("src_ip=\"10.214.0.250\"")),
        "the inner decky logs the probe's address: {seen_from:?}"
    );
    drop(probe);
    // Each decky's route to the LAN it is not on goes via the bridge's leg on its own LAN.
    assert_eq!(routes_of(&podman, &format!("{prefix}-db")), ["10.214.0.0/24 via 10.214.1.2 dev eth0"]);
    assert_eq!(routes_of(&podman, &format!("{prefix}-web")), ["10.214.1.0/24 via 10.214.0.3 dev eth0"]);
    assert_eq!(routes_of(&podman, &format!("{prefix}-gw")), Vec::<String>::new(), "the bridge is on both");

    // The engine loses a container, restarts one (a new namespace has no routes), stops one: the
    // API's reconcile brings each back on its addresses with its routes, and the topology's
    // status events say what it found and what it restored.
    // (What the reconcile finds depends on when it looks: a container being removed may still
    // be listed, stopped; one restarting may be running already, without its routes.)
    podman.run(&["rm", "-f", &format!("{prefix}-db")]);
    topo.healed(&id, "'db': its container", "'db': container made again").await;
    assert_eq!(addresses(&podman, &format!("{prefix}-db")), db);
    assert_eq!(routes_of(&podman, &format!("{prefix}-db")), ["10.214.0.0/24 via 10.214.1.2 dev eth0"]);
    podman.restart_container(&[], &format!("{prefix}-web"));
    topo.healed(&id, "'web': its", "routes set again").await;
    assert_eq!(routes_of(&podman, &format!("{prefix}-web")), ["10.214.1.0/24 via 10.214.0.3 dev eth0"]);
    podman.stop_container(&[], &format!("{prefix}-gw"));
    topo.healed(&id, "'gw': its container", "'gw': container").await;
    assert_eq!(addresses(&podman, &format!("{prefix}-gw")), gw);
    eventually("the inner decky answers through the bridge again", || async {
        let probe = Probe::on(bridge.trim(), "10.214.0.250/24", &[("10.214.1.0/24", "10.214.0.3")]);
        probe.banner("10.214.1.3:22") == "SSH-"
    })
    .await;
    assert_eq!(topo.status(&id).await, "active");

    // The stream: snapshot first, then a mutation's life in order.
    let mut frames = Frames::open(&topo, &id).await;
    let (event, snapshot) = frames.next().await;
    assert_eq!((event.as_str(), snapshot["status"].as_str()), ("snapshot", Some("active")), "{snapshot}");
    let mutation = topo.enqueue(&id, "add_lan", json!({"name": "extra"})).await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let (event, data) = frames.next().await;
        if data["payload"]["mutation_id"] == mutation.as_str() {
            seen.push(event);
        }
    }
    assert_eq!(seen, ["mutation.enqueued", "mutation.applying", "mutation.applied"]);
    let extra = topo.get(&format!("/topologies/{id}")).await["lans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "extra")
        .unwrap()["docker_network_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(network_exists(&podman, &extra));

    // Each op, live.
    topo.applied(&id, "attach_decky", json!({"decky": "web", "lan": "extra", "ip": "10.214.2.9"})).await;
    assert_eq!(addresses(&podman, &format!("{prefix}-web")).get(&extra).map(String::as_str), Some("10.214.2.9"));
    topo.applied(&id, "detach_decky", json!({"decky": "web", "lan": "extra"})).await;
    assert!(!addresses(&podman, &format!("{prefix}-web")).contains_key(&extra));
    topo.applied(&id, "add_decky", json!({"name": "late", "lan": "inner", "services": ["http"]})).await;
    assert_eq!(addresses(&podman, &format!("{prefix}-late")).get(&inner).map(String::as_str), Some("10.214.1.4"));
    let before = podman.run(&["inspect", "--format", "{{.Id}}", &format!("{prefix}-late")]);
    topo.applied(&id, "update_decky", json!({"decky": "late", "services": ["ssh", "http"]})).await;
    let after = podman.run(&["inspect", "--format", "{{.Id}}", &format!("{prefix}-late")]);
    assert_ne!(before, after, "new services, new container");
    topo.applied(&id, "update_lan", json!({"name": "extra", "x": 10.0, "y": 20.0})).await;
    topo.applied(&id, "remove_decky", json!({"decky": "late"})).await;
    assert!(podman.state(&format!("{prefix}-late")).is_none());
    topo.applied(&id, "remove_lan", json!({"name": "extra"})).await;
    assert!(!network_exists(&podman, &extra));
    // An op that cannot apply fails with its reason and leaves the topology as it was.
    let refused = topo.enqueue(&id, "remove_lan", json!({"name": "dmz"})).await;
    let row = topo.settled(&id, &refused).await;
    assert_eq!(
        (row["state"].as_str(), row["reason"].as_str()),
        (Some("failed"), Some("LAN 'dmz' is the home LAN of a decky"))
    );
    assert_eq!(topo.status(&id).await, "active");

    topo.post(&format!("/topologies/{id}/teardown"), json!({})).await;
    topo.wait_status(&id, "torn_down", DEPLOY_DEADLINE).await;
    let labelled = podman.run(&["ps", "-aq", "--filter", &format!("label=svc.topology={id}")]);
    assert_eq!(labelled.trim(), "", "no container left");
    for net in [&dmz, &inner] {
        assert!(!network_exists(&podman, net), "{net} removed");
    }
    let nat = std::process::Command::new("iptables").args(["-t", "nat", "-S"]).output().unwrap();
    let chain = format!("SVC-{}", &id.replace('-', "")[..16]);
    assert!(!String::from_utf8_lossy(&nat.stdout).contains(&chain), "the NAT exemption {chain} removed");
    let (status, _) = topo.call(reqwest::Method::DELETE, &format!("/topologies/{id}"), None).await;
    assert_eq!(status, 204);
}

/// The mutation ids each `applying` event names, in order, until `count` of them arrived.
async fn applying_ids(subscriber: &mut async_nats::Subscriber, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    while ids.len() < count {
        let message = tokio::time::timeout(common::DEADLINE, subscriber.next()).await.expect("an event").unwrap();
        let event: Value = serde_json::from_slice(&message.payload).unwrap();
        ids.push(event["payload"]["mutation_id"].as_str().unwrap().to_string());
    }
    ids
}

#[tokio::test]
async fn two_mutators_never_apply_one_mutation_and_a_killed_one_leaves_none_stuck() {
    let podman = Podman::start("race", 0);
    let nats = Nats::start();
    let topo = api_on(&podman, Some(&nats), "10.214.16.0/20").await;
    let id = topo.build("race", &[("dmz", true)], &[]).await;
    topo.post(&format!("/topologies/{id}/deploy"), json!({})).await;
    topo.wait_status(&id, "active", DEPLOY_DEADLINE).await;

    let bus = async_nats::connect(nats.url()).await.unwrap();
    let mut applying = bus.subscribe(format!("topology.{id}.mutation.applying")).await.unwrap();
    bus.flush().await.unwrap();
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(topo.enqueue(&id, "update_lan", json!({"name": "dmz", "x": n})).await);
    }
    let first = topo.mutator(&podman, Some(&nats), "300");
    let second = topo.mutator(&podman, Some(&nats), "300");
    for mutation in &ids {
        assert_eq!(topo.settled(&id, mutation).await["state"], "applied");
    }
    let mut announced = applying_ids(&mut applying, ids.len()).await;
    announced.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(announced, expected, "each mutation applied exactly once, by one mutator");
    // Both beat on `system.mutator.health` and stop on a stop intent, exiting 0.
    let mut health = bus.subscribe("system.mutator.health".to_string()).await.unwrap();
    tokio::time::timeout(common::DEADLINE, health.next()).await.expect("a mutator heartbeat");
    let stop = json!({"topic": "system.mutator.control", "type": "control", "ts": 0.0,
        "payload": {"action": "stop", "requested_by": "test", "ts": 0.0}});
    bus.publish("system.mutator.control", stop.to_string().into()).await.unwrap();
    bus.flush().await.unwrap();
    for mut mutator in [first, second] {
        assert!(mutator.wait().success(), "{}", mutator.output());
    }

    // A mutator killed mid-apply (a decky's image is being built): the next one fails it.
    let mut victim = topo.mutator(&podman, Some(&nats), "2");
    let slow = topo.enqueue(&id, "add_decky", json!({"name": "slow", "lan": "dmz"})).await;
    assert_eq!(applying_ids(&mut applying, 1).await, std::slice::from_ref(&slow));
    victim.signal(rustix::process::Signal::KILL);
    victim.wait();
    let rows = topo.get(&format!("/topologies/{id}/mutations?state=applying")).await;
    assert_eq!(rows.as_array().unwrap().len(), 1, "left applying by the dead mutator");
    let _rescuer = topo.mutator(&podman, Some(&nats), "2");
    let row = topo.settled(&id, &slow).await;
    assert_eq!(
        (row["state"].as_str(), row["reason"].as_str()),
        (Some("failed"), Some("the mutator stopped while applying it"))
    );
    assert_eq!(topo.status(&id).await, "degraded");
    // The queue moves on.
    let next = topo.enqueue(&id, "update_lan", json!({"name": "dmz", "y": 1})).await;
    assert_eq!(topo.settled(&id, &next).await["state"], "applied");
}

#[tokio::test]
async fn without_a_bus_the_mutators_poll_applies_mutations() {
    let podman = Podman::start("nobus", 0);
    let topo = api_on(&podman, None, "10.214.32.0/20").await;
    let id = topo.build("quiet", &[("dmz", true)], &[]).await;
    topo.post(&format!("/topologies/{id}/deploy"), json!({})).await;
    topo.wait_status(&id, "active", DEPLOY_DEADLINE).await;
    let _mutator = topo.mutator(&podman, None, "300");
    topo.applied(&id, "add_lan", json!({"name": "second"})).await;
    let lans = topo.get(&format!("/topologies/{id}")).await["lans"].clone();
    assert_eq!(lans.as_array().unwrap().len(), 2);

    // A deploy that fails half way (its second LAN's subnet is the first topology's) leaves
    // nothing behind, and says why: the subnet is in use.
    let clash = topo.post("/topologies/blank", json!({"name": "clash"})).await;
    let clash = clash["id"].as_str().unwrap().to_string();
    topo.post(&format!("/topologies/{clash}/lans"), json!({"name": "a-fine", "subnet": "10.214.40.0/24"})).await;
    topo.post(&format!("/topologies/{clash}/lans"), json!({"name": "z-taken", "subnet": "10.214.32.0/24"})).await;
    let networks_before = podman.networks().len();
    topo.post(&format!("/topologies/{clash}/deploy"), json!({})).await;
    topo.wait_status(&clash, "failed", DEPLOY_DEADLINE).await;
    let events = topo.get(&format!("/topologies/{clash}/status-events")).await;
    assert_eq!(
        events[0]["reason"],
        "a LAN's network could not be created: subnet 10.214.32.0/24 is in use (on the host or by another network)",
        "what failed, and why (issue 28, bug 2.2)"
    );
    assert_eq!(podman.networks().len(), networks_before, "the first LAN's network was removed again");

    topo.post(&format!("/topologies/{id}/teardown"), json!({})).await;
    topo.wait_status(&id, "torn_down", DEPLOY_DEADLINE).await;
}
