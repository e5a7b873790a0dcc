//! Which interface the sniffer captures on, and what `/health` says about it: an explicit
//! interface coming and going (the sniffer embedded in the API, or in its own process by its
//! heartbeat); the address → decky map following deploys and teardowns in the fleet store (sqlite
//! and MariaDB); and, given no interface, the fleet's own network (podman): it waits while there is
//! none, and captures a fleet deployed after it started, torn down, and deployed elsewhere.
//!
//! Needs root, `ip` and `curl` (scripts/lib.sh installs them), and podman for the fleet tests.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::process::Command;

use common::{DEADLINE, Nats, Proc, eventually, ip, svc};
use futures::StreamExt;

/// The decky the explicit-interface tests name in `SVC_SNIFFER_DECKIES`.
const DECKY: &str = "decky-a";
const SERVER_V4: &str = "10.213.0.2";

#[tokio::test(flavor = "multi_thread")]
async fn health_follows_an_embedded_sniffers_interface() {
    let dir = tempfile::tempdir().unwrap();
    let iface = format!("svcsn{}", std::process::id() % 100_000);
    let (mut command, port) = common::api_command(dir.path(), None);
    command.env("SVC_EMBED_SNIFFER", "true").env("SVC_SNIFFER_IFACE", &iface);
    // No such interface yet: the API starts anyway and says why the sniffer fails.
    let api = common::start_api(command, port).await;
    health_follows_the_interface(port, &iface).await;
    assert!(api.output().contains("Cannot capture"), "the raw reason is in the server log");
}

/// The same for a sniffer in its own process (a capture host's), known to the API by its heartbeat.
#[tokio::test(flavor = "multi_thread")]
async fn health_follows_a_separate_sniffers_interface_by_its_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let iface = format!("svchb{}", std::process::id() % 100_000);
    let nats = Nats::start();
    let (command, port) = common::api_command(dir.path(), Some(&nats));
    let _api = common::start_api(command, port).await;
    let mut worker = svc(dir.path(), &["worker", "sniffer"]);
    worker
        .env("SVC_NATS_URL", nats.url())
        .env("SVC_SNIFFER_IFACE", &iface)
        .env("SVC_SNIFFER_DECKIES", format!("{DECKY}={SERVER_V4}"))
        .env("SVC_INGEST_LOG_FILE", dir.path().join("sniffer.log"));
    let sniffer = Proc::spawn(worker);
    health_follows_the_interface(port, &iface).await;
    assert!(sniffer.output().contains("Cannot capture"), "the raw reason is in the worker's log");
}

/// `/health`'s sniffer component while `iface` is missing (failing, a generic reason), then
/// present (ok), then gone again (failing).
async fn health_follows_the_interface(port: u16, iface: &str) {
    assert!(rustix::process::geteuid().is_root(), "the sniffer tests create interfaces: run them as root");
    let url = format!("http://127.0.0.1:{port}/api/v1/health");
    let sniffer = || async {
        let body: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        body["components"]["sniffer_worker"].clone()
    };
    eventually("the sniffer reports its missing interface", || async {
        sniffer().await == serde_json::json!({"status": "failing", "detail": "capture interface unavailable"})
    })
    .await;
    let _cleanup = DummyInterface::add(iface);
    eventually("the sniffer captures once the interface exists", || async { sniffer().await["status"] == "ok" }).await;
    ip(&["link", "del", iface]);
    eventually("the sniffer fails when the interface is gone", || async {
        sniffer().await["detail"] == "capture interface unavailable"
    })
    .await;
}

/// An interface of the test's own (one end of a veth pair, no traffic), removed on drop if still there.
struct DummyInterface(String);

impl DummyInterface {
    fn add(name: &str) -> DummyInterface {
        ip(&["link", "add", name, "type", "veth", "peer", "name", &format!("{name}p")]);
        ip(&["link", "set", name, "up"]);
        DummyInterface(name.to_string())
    }
}

impl Drop for DummyInterface {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).stderr(std::process::Stdio::null()).status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_decky_map_follows_deploys_and_teardowns_in_the_fleet_store() {
    use std::sync::Arc;
    use svc::db::{Deployment, FleetNetwork};
    use svc_workers::sniffer::deckies::{self, DeckyMap, FleetDeckies};

    for db in store::TestDb::all() {
        let repo = db.open().await;
        let network = FleetNetwork { subnet: "10.9.0.0/24".into(), gateway: "10.9.0.1".into(), interface: None };
        let deploy = |deckies: Vec<svc::db::DeckyConfig>| {
            let (repo, network) = (repo.clone(), network.clone());
            async move {
                let at = chrono::Utc::now();
                let deployment =
                    Deployment { network: &network, deckies: &deckies, replace: false, lifecycles: &[], at };
                repo.commit_deployment(deployment).await.unwrap();
            }
        };
        deploy(vec![store::decky_config("web-1", "10.9.0.5")]).await;
        let (maps_tx, maps) = tokio::sync::watch::channel(Arc::new(DeckyMap::default()));
        let cancel = tokio_util::sync::CancellationToken::new();
        let follower = tokio::spawn(deckies::follow(
            Arc::new(FleetDeckies(repo.clone())),
            std::time::Duration::from_millis(50),
            Arc::new(tokio::sync::Notify::new()),
            maps_tx,
            cancel.clone(),
        ));
        let decky_of = |ip: &str| maps.borrow().decky(&ip.parse().unwrap()).map(str::to_string);
        eventually("the first decky is mapped", || async { decky_of("10.9.0.5").as_deref() == Some("web-1") }).await;
        deploy(vec![store::decky_config("db-1", "10.9.0.6")]).await;
        eventually("a deployed decky is mapped", || async { decky_of("10.9.0.6").as_deref() == Some("db-1") }).await;
        assert!(repo.remove_decky("web-1").await.unwrap());
        eventually("a torn down decky is no longer mapped", || async { decky_of("10.9.0.5").is_none() }).await;
        assert_eq!(decky_of("10.9.0.6").as_deref(), Some("db-1"));
        cancel.cancel();
        follower.await.unwrap();
    }
}

/// `/health`'s sniffer component on the API at `port`.
async fn sniffer_health(port: u16) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/api/v1/health");
    let body: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    body["components"]["sniffer_worker"].clone()
}

/// Deploys one HTTPS decky `name` on `10.213.<octet>.0/24` through the API and waits until it
/// runs; its address.
async fn deploy_https_decky(port: u16, token: &str, octet: u8, name: &str) -> String {
    let ini = format!("[general]\nnet = 10.213.{octet}.0/24\ngw = 10.213.{octet}.1\n\n[{name}]\nservices = https\n");
    let deploy = serde_json::json!({"ini_content": ini, "replace_fleet": false});
    let (status, body) = common::api_call(port, token, reqwest::Method::POST, "/deckies/deploy", Some(deploy)).await;
    assert_eq!(status, 202, "{body}");
    let id = body["lifecycle_ids"][0].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let lifecycle = format!("/deckies/lifecycle?ids={id}");
        let (_, body) = common::api_call(port, token, reqwest::Method::GET, &lifecycle, None).await;
        match body["rows"][0]["status"].as_str() {
            Some("succeeded") => break,
            Some("failed") => panic!("the deploy failed: {body}"),
            _ => assert!(std::time::Instant::now() < deadline, "the deploy did not finish: {body}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let (_, deckies) = common::api_call(port, token, reqwest::Method::GET, "/deckies", None).await;
    let decky = deckies.as_array().unwrap().iter().find(|d| d["name"] == name).unwrap();
    decky["ip"].as_str().unwrap().to_string()
}

/// The embedded sniffer with no interface given, started before any fleet exists (as a new user
/// starts it): its health says it waits for a fleet network; a fleet deployed afterwards is
/// captured (a TLS handshake to a decky becomes a `tls_client_hello` row), its teardown sends the
/// sniffer back to waiting, and a fleet deployed again on another network is captured there.
#[tokio::test(flavor = "multi_thread")]
async fn an_embedded_sniffer_captures_a_fleet_deployed_after_it_started() {
    let podman = common::podman::Podman::start("snf-follow", 210);
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = common::api_command(dir.path(), None);
    podman.configure(&mut command, &dir.path().join("ingest.log")).env("SVC_EMBED_SNIFFER", "true");
    let api = common::start_api(command, port).await;
    let token = common::admin_token(port).await;
    let waiting = serde_json::json!({"status": "failing", "detail": "waiting for a fleet network: none deployed"});
    eventually("the sniffer says it waits for a fleet", || async { sniffer_health(port).await == waiting }).await;

    for (octet, decky) in [(210, "front"), (211, "back")] {
        let ip = deploy_https_decky(port, &token, octet, decky).await;
        eventually("the sniffer captures the fleet's network", || async {
            sniffer_health(port).await["status"] == "ok"
        })
        .await;
        // The test's own handshakes to its own decky, until one is a stored row (the decky's TLS
        // decoy may take a moment to listen; repeats are one event within the dedup window).
        let search = format!("/logs?search=event:tls_client_hello%20decky:{decky}");
        eventually(&format!("a handshake to {decky} ({ip}) is a tls_client_hello row"), || async {
            let _ = Command::new("curl")
                .args(["-sk", "--max-time", "5", "-o", "/dev/null", &format!("https://{ip}/")])
                .status();
            let (_, body) = common::api_call(port, &token, reqwest::Method::GET, &search, None).await;
            body["data"].as_array().is_some_and(|rows| {
                rows.iter().any(|r| {
                    (&r["event_type"], &r["decky"], &r["service"])
                        == (&"tls_client_hello".into(), &decky.into(), &"sniffer".into())
                        && r["fields"].as_str().is_some_and(|fields| fields.contains(&ip))
                })
            })
        })
        .await;
        let (status, body) =
            common::api_call(port, &token, reqwest::Method::DELETE, &format!("/deckies/{decky}"), None).await;
        assert!((200..300).contains(&status), "{status} {body}");
        eventually("a torn down fleet sends the sniffer back to waiting", || async {
            sniffer_health(port).await == waiting
        })
        .await;
    }
    assert!(api.output().contains("The capture interface changed"), "{}", api.output());
}

/// `svc worker sniffer` on its own, given no interface, follows the fleet store as the embedded one
/// does, and its heartbeat says what it waits for: no fleet network, then a stored bridge network
/// whose bridge does not exist yet; it captures once a host interface holds the network's gateway
/// (as the engine's bridge does), and waits again when the last decky and its bridge are gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_separate_sniffer_follows_the_fleet_network_in_the_store_and_says_what_it_waits_for() {
    assert!(rustix::process::geteuid().is_root(), "the sniffer tests create interfaces: run them as root");
    let db = store::TestDb::sqlite();
    let repo = db.open().await;
    let nats = Nats::start();
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let mut beats = bus.subscribe("system.sniffer.health").await.unwrap();
    bus.flush().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut worker = svc(dir.path(), &["worker", "sniffer"]);
    worker.envs(db.vars()).env("SVC_NATS_URL", nats.url()).env("SVC_INGEST_LOG_FILE", dir.path().join("sniffer.log"));
    let sniffer = Proc::spawn(worker);
    heartbeat_fault(&mut beats, "no fleet network", Some("waiting for a fleet network: none deployed")).await;

    let network =
        svc::db::FleetNetwork { subnet: "10.213.212.0/24".into(), gateway: "10.213.212.1".into(), interface: None };
    let deckies = [store::decky_config("web-1", "10.213.212.2")];
    let at = chrono::Utc::now();
    let deployment = svc::db::Deployment { network: &network, deckies: &deckies, replace: false, lifecycles: &[], at };
    repo.commit_deployment(deployment).await.unwrap();
    heartbeat_fault(
        &mut beats,
        "a stored network without its bridge",
        Some("waiting for the bridge of fleet network 10.213.212.0/24"),
    )
    .await;

    let bridge = DummyInterface::add(&format!("svcbr{}", std::process::id() % 100_000));
    ip(&["addr", "add", "10.213.212.1/24", "dev", &bridge.0]);
    heartbeat_fault(&mut beats, "the bridge holding the gateway", None).await;
    assert!(sniffer.output().contains(&format!("Capturing iface={}", bridge.0)), "{}", sniffer.output());

    // A teardown: the last decky leaves the store, and the engine removes the bridge with the network.
    assert!(repo.remove_decky("web-1").await.unwrap());
    drop(bridge);
    heartbeat_fault(&mut beats, "the last decky torn down", Some("waiting for a fleet network: none deployed")).await;
}

/// Waits until a heartbeat on `beats` carries the fault `wanted` (`None`: the worker works).
async fn heartbeat_fault(beats: &mut async_nats::Subscriber, what: &str, wanted: Option<&str>) {
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut last = None;
    while std::time::Instant::now() < deadline {
        let beat = tokio::time::timeout(DEADLINE, beats.next()).await.expect("a heartbeat").unwrap();
        let event: serde_json::Value = serde_json::from_slice(&beat.payload).unwrap();
        last = event["payload"]["fault"].as_str().map(str::to_string);
        if last.as_deref() == wanted {
            return;
        }
    }
    panic!("{what}: the sniffer's fault is still {last:?}");
}
