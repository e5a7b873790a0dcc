//! Issue 33, item 5: the host's own services are out of a decky's reach. A decky of a real fleet
//! (podman's engine, the test's own) connects from inside its network namespace to listeners the
//! test opens on the host, on the fleet bridge's gateway address and on the host's main address:
//! both are refused, while the host still reaches the decky's decoy. Without svc's chain (removed
//! by hand, as on a host before the fix) the same connection succeeds, and the next reconcile
//! puts the chain back; tearing the fleet down leaves no chain and no jump to it. A topology's
//! deckies meet the same refusal on their LANs, from a chain of the topology's own that its heal
//! puts back and its teardown removes.

use svc_test_support::processes as common;

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::podman::Podman;
use common::{admin_token, api_call, api_command, deploy_and_wait, eventually, start_api};

/// Building the image from a debug binary and starting the container takes longer than a call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);

/// A connection to `to` opened from inside the network namespace of process `pid`: `Ok` when it
/// was accepted, else how it failed.
fn connect_from(pid: u32, to: SocketAddr) -> Result<(), ErrorKind> {
    let namespace = svc::netns::namespace_of(pid);
    svc::netns::enter(&namespace, move || TcpStream::connect_timeout(&to, Duration::from_secs(3)).map(drop))
        .expect("the decky's namespace can be entered")
        .map_err(|err| err.kind())
}

/// The host's address on its default route (`ip route get`'s `src`).
fn main_address() -> String {
    let output = std::process::Command::new("ip").args(["-4", "route", "get", "1.1.1.1"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut words = text.split_whitespace().skip_while(|w| *w != "src");
    words.nth(1).unwrap_or_else(|| panic!("no source address in {text}")).to_string()
}

/// Removes svc's chain for the test's subnet and connects from the decky (process `pid`) to
/// `listener`, which then answers; removed again when a reconcile or heal put it back in between.
fn gets_through_without_its_chain(podman: &Podman, pid: u32, listener: SocketAddr) {
    loop {
        podman.remove_isolation();
        match connect_from(pid, listener) {
            Ok(()) => return,
            Err(_) if !podman.isolation_chains().is_empty() => continue,
            Err(kind) => panic!("without the chain the gateway listener is unreachable too: {kind:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decky_cannot_reach_the_hosts_own_listeners_and_the_host_still_reaches_the_decky() {
    let podman = Podman::start("h33i-iso", 237);
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    podman.configure(&mut command, &dir.path().join("ingest.log")).env("SVC_RECONCILE_S", "1");
    let api = start_api(command, port).await;
    let token = admin_token(port).await;
    let gateway = podman.subnet.replace(".0/24", ".1");
    let ini = format!("[general]\nnet = {}\ngw = {gateway}\n[bait]\nservices = http\n", podman.subnet);
    let rows = deploy_and_wait(port, &token, &ini, DEPLOY_DEADLINE).await;
    assert_eq!(rows[0]["status"], "succeeded", "{rows:?}\n{}", api.output());
    let container = format!("{}-bait", podman.fleet);
    let pid: u32 = podman.run(&["inspect", "--format", "{{.State.Pid}}", &container]).trim().parse().unwrap();
    let decky_ip = podman.subnet.replace(".0/24", ".2");
    let network = podman.run(&["network", "inspect", "--format", "{{json .}}", &format!("{}-fleet", podman.fleet)]);
    assert!(network.contains(&format!("\"{gateway}\"")), "the engine gives the bridge the gateway: {network}");

    // Listeners of the host's own: one on the bridge's gateway address, one on its main address.
    let bridge_listener = TcpListener::bind(format!("{gateway}:0")).unwrap();
    let main_listener = TcpListener::bind(format!("{}:0", main_address())).unwrap();
    let listeners = [bridge_listener.local_addr().unwrap(), main_listener.local_addr().unwrap()];
    for listener in listeners {
        assert_eq!(connect_from(pid, listener), Err(ErrorKind::ConnectionRefused), "{listener} from the decky");
    }
    // The host still reaches the decky's decoy (its replies pass).
    let response = reqwest::Client::new()
        .get(format!("http://{decky_ip}/"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("the decky's decoy does not answer the host: {e}"));
    assert!(response.status().as_u16() < 600);
    let chains = podman.isolation_chains();
    assert_eq!(chains.len(), 1, "one chain of the fleet's own: {chains:?}");

    // Without the chain (a host before the fix, or someone flushing it) the decky gets through;
    // the next reconcile puts it back. Removed again if a pass restored it between the two steps.
    gets_through_without_its_chain(&podman, pid, listeners[0]);
    assert_eq!(connect_from(pid, listeners[1]).ok(), Some(()), "without the chain the host's address answers");
    eventually("the reconcile shields the host again", || async {
        connect_from(pid, listeners[0]) == Err(ErrorKind::ConnectionRefused)
    })
    .await;
    assert_eq!(podman.isolation_chains(), chains, "the same chain, once");

    // Teardown leaves no chain, no jump.
    let (status, body) = api_call(port, &token, reqwest::Method::DELETE, "/deckies/bait", None).await;
    assert!(status < 300, "{status} {body}");
    assert_eq!(podman.isolation_chains(), Vec::<String>::new());
    let input =
        String::from_utf8_lossy(&std::process::Command::new("iptables").args(["-w", "-S"]).output().unwrap().stdout)
            .into_owned();
    assert!(!input.contains(&chains[0]), "no jump to {} is left:\n{input}", chains[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_decky_cannot_reach_the_hosts_own_listeners_and_its_chain_goes_with_it() {
    let podman = Podman::start("h33i-topo", 243);
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    // The topology's one LAN takes the engine's subnet of the test.
    podman
        .configure(&mut command, &dir.path().join("ingest.log"))
        .env("SVC_TOPOLOGY_SUBNET_POOL", &podman.subnet)
        .env("SVC_RECONCILE_S", "1");
    let api = start_api(command, port).await;
    let token = admin_token(port).await;
    let post = |path: String, body: serde_json::Value| {
        let token = token.clone();
        async move {
            let (status, answer) = api_call(port, &token, reqwest::Method::POST, &path, Some(body)).await;
            assert!(status < 300, "POST {path}: {status} {answer}");
            answer
        }
    };
    let topology = post("/topologies/blank".into(), serde_json::json!({"name": "shielded"})).await;
    let id = topology["id"].as_str().unwrap().to_string();
    let lan = post(format!("/topologies/{id}/lans"), serde_json::json!({"name": "dmz", "is_dmz": true})).await;
    let decky =
        post(format!("/topologies/{id}/deckies"), serde_json::json!({"name": "web", "services": ["http"]})).await;
    let edge = serde_json::json!({"decky_uuid": decky["uuid"], "lan_id": lan["id"]});
    post(format!("/topologies/{id}/edges"), edge).await;
    post(format!("/topologies/{id}/deploy"), serde_json::json!({})).await;
    let status = || async {
        let path = format!("/topologies/{id}");
        api_call(port, &token, reqwest::Method::GET, &path, None).await.1["topology"]["status"].clone()
    };
    let deadline = std::time::Instant::now() + DEPLOY_DEADLINE;
    while status().await != "active" {
        assert!(std::time::Instant::now() < deadline, "not active: {}\n{}", status().await, api.output());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let container = format!("{}-t{}-web", podman.fleet, &id.replace('-', "")[..8]);
    let pid: u32 = podman.run(&["inspect", "--format", "{{.State.Pid}}", &container]).trim().parse().unwrap();
    let chains = podman.isolation_chains();
    assert_eq!(chains.len(), 1, "one chain of the topology's own: {chains:?}");
    assert!(chains[0].starts_with("SVC-T"), "{chains:?}");

    let gateway = podman.subnet.replace(".0/24", ".1");
    let bridge_listener = TcpListener::bind(format!("{gateway}:0")).unwrap();
    let main_listener = TcpListener::bind(format!("{}:0", main_address())).unwrap();
    let listeners = [bridge_listener.local_addr().unwrap(), main_listener.local_addr().unwrap()];
    for listener in listeners {
        assert_eq!(connect_from(pid, listener), Err(ErrorKind::ConnectionRefused), "{listener} from the decky");
    }
    // The chain is what refuses: without it the decky gets through, and the next heal puts it back.
    gets_through_without_its_chain(&podman, pid, listeners[0]);
    eventually("the heal shields the host again", || async {
        connect_from(pid, listeners[0]) == Err(ErrorKind::ConnectionRefused)
    })
    .await;
    assert_eq!(podman.isolation_chains(), chains, "the same chain, once");

    let path = format!("/topologies/{id}/teardown");
    api_call(port, &token, reqwest::Method::POST, &path, Some(serde_json::json!({}))).await;
    eventually("the teardown removes the topology's chain", || async { podman.isolation_chains().is_empty() }).await;
    let input =
        String::from_utf8_lossy(&std::process::Command::new("iptables").args(["-w", "-S"]).output().unwrap().stdout)
            .into_owned();
    assert!(!input.contains(&chains[0]), "no jump to {} is left:\n{input}", chains[0]);
}
