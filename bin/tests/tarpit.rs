//! The tarpit on a real engine and a real kernel: a decky deployed on podman (its http decoy on
//! port 80, and a dual-stack one on 8080 started in the same container), an attacker in a network
//! namespace of the test's own on the decky's bridge, over IPv4 and IPv6. A rule is set through
//! the API and read back with `tc` inside the decky's namespace; connections are seen entering and
//! exiting (with a duration) in the ingest file and then in `/logs`, an IPv4 client of the
//! dual-stack listener as IPv4; a restart of the API (and its watcher) in the middle enters nobody
//! twice; a decky restart gets the rule again; DELETE removes the root; a `tc` failure is a 409 without `tc`'s words; a stopped
//! decky is a 404. Where the kernel has netem, a connection's round trip is measured to grow by
//! the delay; where it has not, the test says so and checks the throttle that stands in. And the
//! watcher as its own process, `svc worker tarpit`: heard on the bus, stopped by a stop intent. And
//! a macvlan decky: the rule lands in the decky, never on the host's NIC (DECNET's defect).

use svc_test_support::processes as common;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::podman::Podman;
use common::{
    Nats, Proc, admin_token, api_command, eventually, ip, list_workers, path, row, start_api, svc, workers_api,
};
use rustix::process::Signal;
use serde_json::{Value, json};

/// Building the image from a debug binary and starting the container takes longer than a call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);
const OCTET: u8 = 75;
/// The two tests on an engine take turns: both would build the decky image from this binary at
/// once, and a build removes the images no container uses (the other's, half loaded).
static ENGINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// The macvlan test's subnet.
const MACVLAN_OCTET: u8 = 76;
const DELAY_MS: u64 = 300;

fn v4(host: u8) -> String {
    v4_in(OCTET, host)
}

fn v4_in(octet: u8, host: u8) -> String {
    format!("10.213.{octet}.{host}")
}

fn v6(host: u16) -> String {
    format!("fd7a:{OCTET}::{host:x}")
}

/// `program args` inside the network namespace at `namespace`; its output.
fn in_namespace(namespace: &Path, program: &str, args: &[&str]) -> Output {
    let mut command = Command::new(program);
    command.args(args).env("PATH", path());
    svc::netns::enter(namespace, move || command.output().unwrap()).unwrap()
}

fn ok(output: Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The attacker: a namespace of the test's own on the decky's network (a veth port of its bridge,
/// or a macvlan beside it on the same parent), with addresses on the decky's subnet. Removed when
/// dropped, with the host link the test made for it.
struct Attacker {
    name: String,
    host_if: String,
}

impl Attacker {
    /// A namespace `tpn<kind><pid>`: the tests of this file run at once, each with its own.
    fn new(kind: char, host_if: &str) -> Attacker {
        let name = format!("tpn{kind}{}", std::process::id() % 100_000);
        let attacker = Attacker { name, host_if: host_if.into() };
        ip(&["netns", "add", &attacker.name]);
        attacker
    }

    /// On the bridge holding `gateway`, with an IPv4 and an IPv6 address.
    fn on_bridge_of(gateway: &str) -> Attacker {
        let id = std::process::id() % 100_000;
        let attacker = Attacker::new('b', &format!("tpa{id}"));
        let inner = format!("tpb{id}");
        ip(&["link", "add", &attacker.host_if, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", &attacker.name]);
        ip(&["link", "set", &attacker.host_if, "master", &bridge_holding(gateway)]);
        ip(&["link", "set", &attacker.host_if, "up"]);
        attacker.address(&inner, &[&format!("{}/24", v4(250)), &format!("{}/64", v6(0x250))]);
        attacker
    }

    /// A macvlan sibling of the deckies on `parent` (an interface the attacker owns).
    fn beside(parent: &str, address: &str) -> Attacker {
        let attacker = Attacker::new('m', parent);
        let inner = format!("tpm{}", std::process::id() % 100_000);
        ip(&["link", "add", &inner, "link", parent, "type", "macvlan", "mode", "bridge"]);
        ip(&["link", "set", &inner, "netns", &attacker.name]);
        attacker.address(&inner, &[address]);
        attacker
    }

    fn address(&self, inner: &str, addresses: &[&str]) {
        let ns = self.namespace();
        for address in addresses {
            let mut args = vec!["addr", "add", address, "dev", inner];
            if address.contains(':') {
                args.push("nodad");
            }
            ok(in_namespace(&ns, "ip", &args));
        }
        ok(in_namespace(&ns, "ip", &["link", "set", inner, "up"]));
        ok(in_namespace(&ns, "ip", &["link", "set", "lo", "up"]));
    }

    fn namespace(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// A connection from the attacker to `to`, made inside its namespace.
    fn connect(&self, to: SocketAddr) -> std::io::Result<TcpStream> {
        svc::netns::enter(&self.namespace(), move || TcpStream::connect_timeout(&to, Duration::from_secs(10))).unwrap()
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.host_if]).env("PATH", path()).status();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).env("PATH", path()).status();
    }
}

/// The host interface holding `address` (the bridge of the fleet's network).
fn bridge_holding(address: &str) -> String {
    let output = Command::new("ip").args(["-o", "-4", "addr", "show"]).env("PATH", path()).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(&format!(" {address}/")))
        .unwrap_or_else(|| panic!("no host interface holds {address}:\n{text}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

struct Api {
    api: Proc,
    port: u16,
    token: String,
    ingest: PathBuf,
    dir: tempfile::TempDir,
}

impl Api {
    async fn start(podman: &Podman, dir: tempfile::TempDir) -> Api {
        let ingest = dir.path().join("ingest.log");
        let (mut command, port) = api_command(dir.path(), None);
        podman.configure(&mut command, &ingest).env("SVC_TARPIT_POLL_SECS", "0.2");
        let api = start_api(command, port).await;
        let token = admin_token(port).await;
        Api { api, port, token, ingest, dir }
    }

    /// Stops the API with SIGTERM (its watcher finishes the poll in hand) and starts it again on
    /// the same database and ingest file.
    async fn restart(mut self, podman: &Podman) -> Api {
        self.api.signal(Signal::TERM);
        assert!(self.api.wait().success(), "{}", self.api.output());
        Api::start(podman, self.dir).await
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        common::api_call(self.port, &self.token, method, path, body).await
    }

    async fn deploy(&self, ini: &str) {
        let (status, body) =
            self.call(reqwest::Method::POST, "/deckies/deploy", Some(json!({"ini_content": ini}))).await;
        assert_eq!(status, 202, "{body}");
        let id = body["lifecycle_ids"][0].as_str().unwrap().to_string();
        let deadline = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let (_, body) = self.call(reqwest::Method::GET, &format!("/deckies/lifecycle?ids={id}"), None).await;
            match body["rows"][0]["status"].as_str() {
                Some("succeeded") => return,
                Some("failed") => panic!("deploy failed: {body}\n{}", self.api.output()),
                _ => {}
            }
            assert!(Instant::now() < deadline, "deploy did not finish: {body}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn lines(&self, kind: &str) -> Vec<String> {
        let text = std::fs::read_to_string(&self.ingest).unwrap_or_default();
        text.lines().filter(|l| l.contains(&format!(" tarpit - {kind} "))).map(str::to_string).collect()
    }

    /// The `kind` lines of attacker `ip` on `port`.
    fn of(&self, kind: &str, ip: &str, port: u16) -> Vec<String> {
        let needle = format!("src_ip=\"{ip}\" port=\"{port}\"");
        self.lines(kind).into_iter().filter(|l| l.contains(&needle)).collect()
    }
}

fn pid_of(podman: &Podman, container: &str) -> u32 {
    podman.run(&["inspect", "--format", "{{.State.Pid}}", container]).trim().parse().unwrap()
}

/// `tc <what> show dev eth0` inside the decky's namespace.
fn tc_show(pid: u32, what: &str) -> String {
    ok(in_namespace(&svc::netns::namespace_of(pid), "tc", &[what, "show", "dev", "eth0"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_slows_the_decky_and_the_watcher_reports_who_is_caught() {
    let _turn = ENGINE.lock().await;
    let podman = Podman::start("tarpit", OCTET);
    let api = Api::start(&podman, tempfile::tempdir().unwrap()).await;
    let ini = format!("[general]\nnet = {}\ngw = {}\n\n[trap]\nservices = http\n", podman.subnet, v4(1));
    api.deploy(&ini).await;
    let container = format!("{}-trap", podman.fleet);
    let decky_ip = v4(2);

    // The decky gets an IPv6 address and a dual-stack listener on 8080 beside its own decoy.
    let decky_ns = svc::netns::namespace_of(pid_of(&podman, &container));
    // /proc/sys/net is the namespace of whoever opens it: a thread inside the decky's.
    svc::netns::enter(&decky_ns, || std::fs::write("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "0")).unwrap().unwrap();
    ok(in_namespace(&decky_ns, "ip", &["-6", "addr", "add", &format!("{}/64", v6(2)), "dev", "eth0", "nodad"]));
    podman.run(&[
        "exec",
        "-d",
        &container,
        "/usr/local/bin/svc",
        "decky",
        "--name",
        "trap",
        "--services",
        "http:8080",
        "--bind",
        "::",
    ]);
    let attacker = Attacker::on_bridge_of(&v4(1));
    let http4: SocketAddr = format!("{decky_ip}:80").parse().unwrap();
    let dual4: SocketAddr = format!("{decky_ip}:8080").parse().unwrap();
    let dual6: SocketAddr = format!("[{}]:8080", v6(2)).parse().unwrap();
    eventually("the dual-stack listener answers over IPv6", || async { attacker.connect(dual6).is_ok() }).await;

    // The rule, and what it put in the decky's namespace.
    let (status, body) = api
        .call(reqwest::Method::POST, "/deckies/trap/tarpit", Some(json!({"ports": [80, 8080], "delay_ms": DELAY_MS})))
        .await;
    assert_eq!(status, 201, "{body}\n{}", api.api.output());
    assert_eq!(body["message"], "tarpit active");
    let delay_in_force = body["delay_in_force"].as_bool().unwrap();
    let pid = pid_of(&podman, &container);
    let qdiscs = tc_show(pid, "qdisc");
    assert!(qdiscs.contains("qdisc htb 7a7: root"), "{qdiscs}");
    let filters = tc_show(pid, "filter");
    for port in [80u16, 8080] {
        let sport = format!("match {port:04x}0000/ffff0000 at 20");
        let sport6 = format!("match {port:04x}0000/ffff0000 at 40");
        assert!(filters.contains(&sport) && filters.contains(&sport6), "port {port} over IPv4 and IPv6:\n{filters}");
    }
    let classes = tc_show(pid, "class");
    assert!(classes.contains("class htb 7a7:1"), "{classes}");
    if delay_in_force {
        assert_eq!(body["enforcement"], "delay");
        assert!(qdiscs.contains(&format!("qdisc netem 7a8: parent 7a7:1 limit 10000 delay {DELAY_MS}ms")), "{qdiscs}");
        // The SYN-ACK comes from port 80, so the handshake alone takes the delay.
        let started = Instant::now();
        drop(attacker.connect(http4).unwrap());
        let round_trip = started.elapsed();
        assert!(round_trip >= Duration::from_millis(DELAY_MS * 9 / 10), "a round trip took {round_trip:?}");
    } else {
        eprintln!("this kernel has no netem: the delay is not in force; checking the throttle that stands in");
        assert_eq!(body["enforcement"], "throttle");
        assert!(!qdiscs.contains("netem"), "{qdiscs}");
        assert!(classes.contains("rate 32Kbit ceil 32Kbit"), "{classes}");
        let health: Value =
            reqwest::get(format!("http://127.0.0.1:{}/api/v1/health", api.port)).await.unwrap().json().await.unwrap();
        assert_eq!(health["components"]["tarpit"]["status"], "failing", "{health}");
        assert!(health["components"]["tarpit"]["detail"].as_str().unwrap().contains("not in force"));
    }
    let enabled = api.lines("tarpit_enabled");
    assert_eq!(enabled.len(), 1);
    assert!(enabled[0].contains("ports=\"80,8080\"") && enabled[0].contains(&format!("delay_ms=\"{DELAY_MS}\"")));

    // Caught over IPv4, IPv6, and IPv4 through the dual-stack listener (reported as IPv4).
    let attacker4 = v4(250);
    let attacker6 = v6(0x250);
    let held = [attacker.connect(http4).unwrap(), attacker.connect(dual6).unwrap(), attacker.connect(dual4).unwrap()];
    for (ip, port) in [(&attacker4, 80), (&attacker6, 8080), (&attacker4, 8080)] {
        eventually(&format!("{ip} on {port} enters"), || async { api.of("tarpit_enter", ip, port).len() == 1 }).await;
    }
    // Stored and searched like every other event.
    eventually("the enters are searchable logs", || async {
        let (_, body) = api.call(reqwest::Method::GET, "/logs?search=event:tarpit_enter%20decky:trap", None).await;
        body["total"] == 3 && body["data"].as_array().unwrap().iter().any(|r| r["attacker_ip"] == attacker6.as_str())
    })
    .await;
    let (status, body) = api.call(reqwest::Method::GET, "/deckies/trap/tarpit", None).await;
    assert_eq!(status, 200, "{body}");
    let mut active: Vec<(String, u64)> = body["active_connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["ip"].as_str().unwrap().to_string(), c["port"].as_u64().unwrap()))
        .collect();
    active.sort();
    assert_eq!(active, [(attacker4.clone(), 80), (attacker4.clone(), 8080), (attacker6.clone(), 8080)]);

    // The watcher restarts with the API: nobody caught is entered again, and an exit after the
    // restart is still reported, with how long the attacker was held.
    let api = api.restart(&podman).await;
    let [http, ipv6, mapped] = held;
    drop(ipv6);
    eventually("the IPv6 attacker exits", || async { api.of("tarpit_exit", &attacker6, 8080).len() == 1 }).await;
    let exit = &api.of("tarpit_exit", &attacker6, 8080)[0];
    assert!(exit.contains("duration_s=\""), "{exit}");
    for (ip, port) in [(&attacker4, 80), (&attacker6, 8080), (&attacker4, 8080)] {
        assert_eq!(api.of("tarpit_enter", ip, port).len(), 1, "{ip} on {port} entered once across the restart");
    }
    drop((http, mapped));
    for port in [80, 8080] {
        eventually("the IPv4 attacker exits", || async { api.of("tarpit_exit", &attacker4, port).len() == 1 }).await;
    }

    // A decky restart gives it a new namespace: the watcher puts the rule back.
    podman.restart_container(&[], &container);
    let restarted = pid_of(&podman, &container);
    assert_ne!(restarted, pid);
    eventually("the rule is in the restarted decky", || async {
        svc::netns::enter(&svc::netns::namespace_of(restarted), || {
            Command::new("tc").args(["qdisc", "show", "dev", "eth0"]).env("PATH", path()).output().unwrap()
        })
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("qdisc htb 7a7: root"))
    })
    .await;

    // DELETE removes exactly what the rule added.
    let (status, body) = api.call(reqwest::Method::DELETE, "/deckies/trap/tarpit", None).await;
    assert_eq!((status, body), (200, json!({"message": "tarpit removed"})));
    assert!(!tc_show(restarted, "qdisc").contains("7a7:"));
    assert_eq!(api.lines("tarpit_disabled").len(), 1);

    // Another root on the interface: `tc` fails, the client gets a generic 409, the other root
    // stays, and no rule is stored.
    let decky_ns = svc::netns::namespace_of(restarted);
    ok(in_namespace(&decky_ns, "tc", &["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "pfifo"]));
    let (status, body) = api
        .call(reqwest::Method::POST, "/deckies/trap/tarpit", Some(json!({"ports": [80], "delay_ms": DELAY_MS})))
        .await;
    assert_eq!((status, &body), (409, &json!({"detail": "tarpit command failed"})));
    assert!(tc_show(restarted, "qdisc").contains("qdisc pfifo 1: root"));
    assert_eq!(api.call(reqwest::Method::GET, "/deckies/trap/tarpit", None).await.0, 404);
    // (A decky stopped behind the fleet's back no longer stays stopped: the fleet starts it again
    // at once, bin/tests/fleet_events.rs; so no "not running" case is made here.)
    drop(attacker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_runs_as_its_own_worker_heartbeats_and_obeys_a_stop_intent() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start();
    let (command, port) = api_command(dir.path(), Some(&nats));
    let _api = start_api(command, port).await;
    let mut command = svc(dir.path(), &["worker", "tarpit"]);
    command.env("SVC_NATS_URL", nats.url()).env("SVC_TARPIT_POLL_SECS", "0.2");
    let mut worker = Proc::spawn(command);
    eventually("the watcher is heard and polls", || async {
        let body = list_workers(port).await;
        row(&body, "tarpit").is_some_and(|r| r["status"] == "ok" && r["extra"]["counters"]["polls"].as_u64() > Some(0))
    })
    .await;
    let (status, body) = workers_api(reqwest::Method::POST, port, "/workers/tarpit/stop").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(worker.wait().code(), Some(0), "{}", worker.output());
    assert!(worker.output().contains("Stop requested"), "{}", worker.output());
}

/// A macvlan decky: DECNET shaped the host side of the decky's veth, which for macvlan is the
/// host's own NIC. Here the rule lands in the decky's namespace, and the parent stays untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_macvlan_decky_the_rule_is_in_the_decky_and_not_on_the_host_nic() {
    let _turn = ENGINE.lock().await;
    let podman = Podman::start("tarpit-mv", MACVLAN_OCTET);
    // The parent NIC: one end of a veth pair (this kernel has no dummy interfaces).
    let id = std::process::id() % 100_000;
    let parent = format!("tpd{id}");
    ip(&["link", "add", &parent, "type", "veth", "peer", "name", &format!("tpe{id}")]);
    for link in [parent.clone(), format!("tpe{id}")] {
        ip(&["link", "set", &link, "up"]);
    }
    // Removes the parent (and every macvlan on it) however the test ends.
    let attacker = Attacker::beside(&parent, &format!("{}/24", v4_in(MACVLAN_OCTET, 250)));
    let api = Api::start(&podman, tempfile::tempdir().unwrap()).await;
    let ini = format!(
        "[general]\nnet = {}\ngw = {}\ninterface = {parent}\n\n[trap]\nservices = http\n",
        podman.subnet,
        v4_in(MACVLAN_OCTET, 1)
    );
    api.deploy(&ini).await;
    let container = format!("{}-trap", podman.fleet);
    let (status, body) =
        api.call(reqwest::Method::POST, "/deckies/trap/tarpit", Some(json!({"ports": [80], "delay_ms": 500}))).await;
    assert_eq!(status, 201, "{body}\n{}", api.api.output());
    let pid = pid_of(&podman, &container);
    assert!(tc_show(pid, "qdisc").contains("qdisc htb 7a7: root"));
    let host = Command::new("tc").args(["qdisc", "show", "dev", &parent]).env("PATH", path()).output().unwrap();
    assert!(!String::from_utf8_lossy(&host.stdout).contains("7a7:"), "the host's NIC is left alone");

    let decky: SocketAddr = format!("{}:80", v4_in(MACVLAN_OCTET, 2)).parse().unwrap();
    let held = attacker.connect(decky).unwrap();
    let attacker_ip = v4_in(MACVLAN_OCTET, 250);
    eventually("the attacker enters", || async { api.of("tarpit_enter", &attacker_ip, 80).len() == 1 }).await;
    drop(held);
    eventually("the attacker exits", || async { api.of("tarpit_exit", &attacker_ip, 80).len() == 1 }).await;
    let (status, _) = api.call(reqwest::Method::DELETE, "/deckies/trap/tarpit", None).await;
    assert_eq!(status, 200);
    assert!(!tc_show(pid, "qdisc").contains("7a7:"));
}
