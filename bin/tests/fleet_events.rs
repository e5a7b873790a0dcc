//! The fleet healing itself on a real engine (podman's Docker-compatible service, started by the
//! test): a decky killed with `podman kill` answers again within 5 s, brought back by the
//! reconcile pass the engine's `die` event asks for (the periodic pass is an hour away here) and
//! reached at its new hardware address, and `/deckies` says it is down meanwhile; with the fleet's bridge gone, a packet for a decky's
//! address is refused on the host and nothing leaves by the outward interface (a capture says
//! so), and the route that holds the subnet goes with the fleet.

use svc_test_support::processes as common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::podman::Podman;
use common::{DEADLINE, Proc, admin_token, api_command, eventually, start_api};
use serde_json::{Value, json};

/// Building the image from a debug binary (hundreds of MB) and starting a container takes longer
/// than an API call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);
/// The route metric svc holds a fleet subnet on the host with (`fleet::host_routes`).
const FLEET_ROUTE_METRIC: u64 = 4040;

struct Api {
    api: Proc,
    port: u16,
    token: String,
    _dir: tempfile::TempDir,
}

/// `svc api` on `podman`'s engine whose periodic reconcile pass is an hour away: whatever brings a
/// decky back within the test is the engine's events.
async fn api_on(podman: &Podman) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    podman.configure(&mut command, &dir.path().join("ingest.log")).env("SVC_RECONCILE_S", "3600");
    let api = start_api(command, port).await;
    let token = admin_token(port).await;
    Api { api, port, token, _dir: dir }
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        common::api_call(self.port, &self.token, method, path, body).await
    }

    /// Deploys `amount` deckies of section `name` running the HTTP decoy on `podman`'s subnet
    /// (`name`, or `name-01`… when more than one); their addresses by name once `/deckies` says
    /// they all run.
    async fn deploy(&self, podman: &Podman, name: &str, amount: usize) -> BTreeMap<String, String> {
        let gateway = podman.subnet.replace(".0/24", ".1");
        let ini = format!(
            "[general]\nnet = {}\ngw = {gateway}\n\n[{name}]\nservices = http\namount = {amount}\n",
            podman.subnet
        );
        let (status, body) = self
            .call(reqwest::Method::POST, "/deckies/deploy", Some(json!({"ini_content": ini, "replace_fleet": true})))
            .await;
        assert_eq!(status, 202, "{body}; the API said:\n{}", self.api.output());
        let deadline = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let deckies = self.deckies().await;
            if deckies.len() == amount && deckies.iter().all(|d| d["state"] == "running") {
                return deckies
                    .iter()
                    .map(|d| (d["name"].as_str().unwrap().to_string(), d["ip"].as_str().unwrap().to_string()))
                    .collect();
            }
            assert!(Instant::now() < deadline, "the deckies did not start: {deckies:?}\n{}", self.api.output());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn deckies(&self) -> Vec<Value> {
        let (status, body) = self.call(reqwest::Method::GET, "/deckies", None).await;
        assert_eq!(status, 200, "{body}");
        body.as_array().unwrap().clone()
    }

    async fn state_of(&self, name: &str) -> String {
        let deckies = self.deckies().await;
        let decky = deckies.iter().find(|d| d["name"] == name).unwrap_or_else(|| panic!("no decky {name}"));
        decky["state"].as_str().unwrap().to_string()
    }
}

/// Whether the HTTP decoy at `ip` answers within half a second.
async fn answers(ip: &str) -> bool {
    let client = reqwest::Client::new();
    client.get(format!("http://{ip}/")).timeout(Duration::from_millis(500)).send().await.is_ok()
}

/// `ip ARGS`, its standard output.
fn ip(args: &[&str]) -> String {
    let output = Command::new("ip").args(args).env("LC_ALL", "C").output().unwrap();
    assert!(output.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The host's routes for exactly `subnet`, as `ip -j` describes them.
fn routes_for(subnet: &str) -> Vec<Value> {
    let all: Vec<Value> =
        serde_json::from_str(&ip(&["-j", "route", "show", "table", "main", "exact", subnet])).unwrap();
    all
}

fn fleet_route_held(subnet: &str) -> bool {
    routes_for(subnet).iter().any(|r| r["type"] == "unreachable" && r["metric"].as_u64() == Some(FLEET_ROUTE_METRIC))
}

/// A route of the test's own holding its subnet on the host (metric 4242, below svc's own) while
/// a test whose subject is not that route restarts a decky: no packet of the test ever follows the
/// default route, whatever svc does. Removed when dropped.
struct SubnetGuard(String);

impl SubnetGuard {
    fn hold(subnet: &str) -> SubnetGuard {
        ip(&["route", "replace", "unreachable", subnet, "metric", "4242"]);
        SubnetGuard(subnet.to_string())
    }
}

impl Drop for SubnetGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["route", "del", "unreachable", &self.0, "metric", "4242"]).output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_decky_answers_again_within_five_seconds_and_deckies_says_it_was_down() {
    let podman = Podman::start("hev-kill", 230);
    let _guard = SubnetGuard::hold(&podman.subnet);
    let api = api_on(&podman).await;
    // Two deckies: the other keeps the bridge, so the host's neighbour entry for the killed one's
    // address outlives it (and names a hardware address that is gone once it is back).
    let deckies = api.deploy(&podman, "web", 2).await;
    let address = deckies["web-01"].clone();
    eventually("the decky answers", || answers(&address)).await;

    podman.run(&["kill", &format!("{}-web-01", podman.fleet)]);
    let killed = Instant::now();
    // `/deckies` follows the engine's `die` event: it says so before the decky is back.
    while api.state_of("web-01").await == "running" {
        assert!(killed.elapsed() < Duration::from_secs(2), "/deckies still says running\n{}", api.api.output());
    }
    let reported_down = killed.elapsed();
    while !answers(&address).await {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "the killed decky does not answer 5 s later\n{}",
            api.api.output()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let back = killed.elapsed();
    eventually("/deckies says the decky runs again", || async { api.state_of("web-01").await == "running" }).await;
    println!("killed decky: reported down after {reported_down:?}, answering again after {back:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_fleet_bridge_gone_a_packet_for_a_decky_is_refused_on_the_host_and_the_route_goes_with_the_fleet() {
    let mut podman = Podman::start("hev-route", 231);
    let api = api_on(&podman).await;
    let address = api.deploy(&podman, "edge", 1).await["edge"].clone();
    // Checked before any packet is sent: without the route the packet would leave the host.
    assert!(
        fleet_route_held(&podman.subnet),
        "no unreachable route holds {}: {:?}",
        podman.subnet,
        routes_for(&podman.subnet)
    );

    // The engine's API away (so nothing restarts the decky), its only container stopped: the
    // bridge and its connected route go.
    podman.stop();
    podman.run(&["stop", "-t", "0", &format!("{}-edge", podman.fleet)]);
    eventually("the bridge's connected route is gone", || async {
        routes_for(&podman.subnet).iter().all(|r| r["type"] == "unreachable")
    })
    .await;
    let lookup = Command::new("ip").args(["route", "get", &address]).env("LC_ALL", "C").output().unwrap();
    let said = String::from_utf8_lossy(&lookup.stderr);
    assert!(!lookup.status.success() && said.contains("No route to host"), "the host still routes {address}: {said}");

    let outward = outward_interface();
    let mut capture = Capture::start(&outward, &address);
    let refused =
        std::net::TcpStream::connect_timeout(&format!("{address}:80").parse().unwrap(), Duration::from_secs(2));
    let error = refused.expect_err("nothing answers for the decky's address");
    assert_eq!(error.kind(), std::io::ErrorKind::HostUnreachable, "refused on the host, not timed out: {error}");
    let captured = capture.stop();
    assert!(captured.contains("0 packets captured"), "a packet for {address} left by {outward}: {captured}");

    // The engine back, the fleet torn down: the route goes with it.
    podman.restart();
    eventually("the decky is back", || answers(&address)).await;
    let (status, body) = api.call(reqwest::Method::DELETE, "/deckies/edge", None).await;
    assert_eq!(status, 204, "{body}");
    assert!(!fleet_route_held(&podman.subnet), "the route outlived the fleet: {:?}", routes_for(&podman.subnet));
}

/// The interface the host's default route leaves by.
fn outward_interface() -> String {
    let routes: Vec<Value> = serde_json::from_str(&ip(&["-j", "route", "show", "default"])).unwrap();
    routes.first().and_then(|r| r["dev"].as_str()).expect("the host has a default route").to_string()
}

/// `tcpdump` on an interface for packets to or from one address, until stopped.
struct Capture {
    child: std::process::Child,
    stderr: Vec<String>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Capture {
    /// Returns once tcpdump listens.
    fn start(interface: &str, address: &str) -> Capture {
        let mut child = Command::new("tcpdump")
            .args(["-i", interface, "-n", "-l", "host", address])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump runs");
        let (send, lines) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let mut capture = Capture { child, stderr: Vec::new(), lines };
        let deadline = Instant::now() + DEADLINE;
        while !capture.stderr.iter().any(|l| l.contains("listening on")) {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = capture.lines.recv_timeout(left).unwrap_or_else(|_| panic!("tcpdump: {:?}", capture.stderr));
            capture.stderr.push(line);
        }
        capture
    }

    /// Stops the capture; what tcpdump printed (the packets, and its count of them).
    fn stop(&mut self) -> String {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.child.id() as i32).unwrap(),
            rustix::process::Signal::INT,
        )
        .unwrap();
        let status = self.child.wait().unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut out).unwrap();
        self.stderr.extend(self.lines.iter());
        format!("{status}\n{out}{}", self.stderr.join("\n"))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
