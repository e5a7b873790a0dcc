//! The fleet on a real engine (podman's Docker-compatible service, started by the test): a deploy
//! from INI builds the decky image from this `svc` binary, starts each decky's container on a
//! network of the test's own and reaches `succeeded`; the deckies answer attackers and the
//! collector carries their lines into the ingest file, exactly once even when killed again and
//! again; a redeploy recreates containers and the collector follows the new ones; a bad image
//! fails with a generic error; teardown removes the container; health follows the engine.

use svc_test_support::processes as common;

use std::time::{Duration, Instant};

use common::podman::Podman;
use common::{DEADLINE, Proc, admin_token, api_command, eventually, start_api, svc};
use rustix::process::Signal;
use serde_json::{Value, json};

/// Building the image from a debug binary (hundreds of MB) and starting containers takes longer
/// than an API call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);

struct Fleet {
    api: Proc,
    port: u16,
    token: String,
    ingest: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// `svc api` on `podman`'s engine, its fleet and ingest file the test's own; the collector
/// embedded when `collector`.
async fn api_on(podman: &Podman, collector: bool) -> Fleet {
    api_with(podman, &[("SVC_EMBED_COLLECTOR", &collector.to_string())]).await
}

/// `svc api` on `podman`'s engine with its own database (in its own directory), configured
/// further by `settings`.
async fn api_with(podman: &Podman, settings: &[(&str, &str)]) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let ingest = dir.path().join("ingest.log");
    let (mut command, port) = api_command(dir.path(), None);
    podman.configure(&mut command, &ingest).env("SVC_COLLECTOR_RECONCILE_S", "1");
    command.envs(settings.iter().copied());
    let api = start_api(command, port).await;
    let token = admin_token(port).await;
    Fleet { api, port, token, ingest, _dir: dir }
}

impl Fleet {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        common::api_call(self.port, &self.token, method, path, body).await
    }

    /// Deploys `ini` and waits until every lifecycle record is terminal; the records.
    async fn deploy(&self, ini: &str, replace: bool) -> Vec<Value> {
        let (status, body) = self
            .call(reqwest::Method::POST, "/deckies/deploy", Some(json!({"ini_content": ini, "replace_fleet": replace})))
            .await;
        assert_eq!(status, 202, "{body}; the API said:\n{}", self.api.output());
        let ids: Vec<String> =
            body["lifecycle_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
        let query: String = ids.iter().map(|id| format!("ids={id}")).collect::<Vec<_>>().join("&");
        let deadline = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let (status, body) = self.call(reqwest::Method::GET, &format!("/deckies/lifecycle?{query}"), None).await;
            assert_eq!(status, 200, "{body}");
            let rows = body["rows"].as_array().unwrap().clone();
            assert_eq!(rows.len(), ids.len());
            if rows.iter().all(|r| r["status"] == "succeeded" || r["status"] == "failed") {
                return rows;
            }
            assert!(Instant::now() < deadline, "deploy did not finish: {rows:?}\n{}", self.api.output());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn deckies(&self) -> Vec<Value> {
        let (status, body) = self.call(reqwest::Method::GET, "/deckies", None).await;
        assert_eq!(status, 200, "{body}");
        body.as_array().unwrap().clone()
    }

    fn ingested(&self) -> String {
        std::fs::read_to_string(&self.ingest).unwrap_or_default()
    }
}

fn status_of(rows: &[Value], decky: &str) -> (String, Value) {
    let row =
        rows.iter().find(|r| r["decky_name"] == decky).unwrap_or_else(|| panic!("no record of {decky}: {rows:?}"));
    (row["status"].as_str().unwrap().to_string(), row["error"].clone())
}

fn ip_of(deckies: &[Value], name: &str) -> String {
    deckies.iter().find(|d| d["name"] == name).unwrap()["ip"].as_str().unwrap().to_string()
}

/// A request to a decky's HTTP decoy (a container the test made).
async fn visit(ip: &str, path: &str) {
    let response = reqwest::Client::new()
        .get(format!("http://{ip}{path}"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("the decky at {ip} does not answer: {e}"));
    assert!(response.status().as_u16() < 600);
}

/// Sends `message` through a decky's SMTP decoy (a container the test made); the reply to `DATA`.
fn send_mail(ip: &str, message: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let stream = std::net::TcpStream::connect((ip, 25)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    // A reply's last line has a space after its code.
    let mut reply = || -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the decoy hung up");
            if line.as_bytes().get(3) == Some(&b' ') {
                return line.clone();
            }
        }
    };
    reply();
    for command in ["EHLO attacker", "MAIL FROM:<a@evil.example>", "RCPT TO:<ceo@corp.example>", "DATA"] {
        writer.write_all(format!("{command}\r\n").as_bytes()).unwrap();
        reply();
    }
    writer.write_all(format!("{message}\r\n.\r\n").as_bytes()).unwrap();
    let queued = reply();
    writer.write_all(b"QUIT\r\n").unwrap();
    queued
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deckies_deploy_serve_and_reach_the_ingest_file_and_teardown_removes_them() {
    let mut podman = Podman::start("deploy", 71);
    let fleet = api_on(&podman, true).await;
    let gateway = podman.subnet.replace(".0/24", ".1");
    let ini = format!(
        "[general]\nnet = {}\ngw = {gateway}\n\n[web]\nservices = http\namount = 2\n\n[mail]\nservices = smtp, telnet\n\
         [mail.telnet]\nbanner = Ubuntu 22.04 LTS\n",
        podman.subnet
    );
    let rows = fleet.deploy(&ini, false).await;
    for decky in ["web-01", "web-02", "mail"] {
        assert_eq!(status_of(&rows, decky).0, "succeeded", "{rows:?}\n{}", fleet.api.output());
    }
    assert_eq!(podman.containers().len(), 3);
    let images = podman.run(&["images", "--format", "{{.Repository}}:{{.Tag}}", "localhost/svc-decky"]);
    assert_eq!(images.lines().count(), 1, "older decky images are removed once a new one is built: {images}");
    let deckies = fleet.deckies().await;
    assert!(deckies.iter().all(|d| d["state"] == "running"), "{deckies:?}");
    let again = json!({"ini_content": "[web-01]\nservices = http\n", "replace_fleet": false});
    let (status, body) = fleet.call(reqwest::Method::POST, "/deckies/deploy", Some(again)).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (409, Some("decky 'web-01' already exists; submit with replace_fleet=true to overwrite the fleet")),
        "an additive deploy refuses a running decky's name"
    );
    let web = ip_of(&deckies, "web-01");
    assert_eq!(web, podman.subnet.replace(".0/24", ".2"), "addresses are handed out in order after the gateway");

    // An attacker's request reaches the ingest file through the collector, as the decoy wrote it.
    visit(&web, "/probe-one").await;
    eventually("the request is in the ingest file", || async {
        fleet.ingested().lines().any(|l| l.contains(" web-01 http ") && l.contains("/probe-one"))
    })
    .await;

    // A message to the mail decky is kept on this host, through the read-only decky's one writable
    // mount, and an admin downloads it byte for byte.
    let mail = ip_of(&deckies, "mail");
    let queued = tokio::task::spawn_blocking(move || send_mail(&mail, "Subject: wire\r\n\r\nsend it today")).await;
    assert!(queued.unwrap().starts_with("250 "));
    let accepted = |l: &&str| l.contains(" mail smtp ") && l.contains("message_accepted");
    eventually("the message's line is ingested", || async { fleet.ingested().lines().any(|l| accepted(&l)) }).await;
    let line = fleet.ingested().lines().find(accepted).unwrap().to_string();
    assert!(line.contains(r#"stored="true""#), "{line}");
    let stored_as = line.split(r#"stored_as=""#).nth(1).and_then(|rest| rest.split('"').next()).unwrap().to_string();
    let file = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/api/v1/artifacts/mail/{stored_as}?service=smtp", fleet.port))
        .bearer_auth(&fleet.token)
        .send()
        .await
        .unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(file.bytes().await.unwrap(), &b"Subject: wire\r\n\r\nsend it today\r\n"[..]);

    // Replace the fleet: web-01 recreated, web-02 gone, mail on an image this host does not have.
    let first = podman.run(&["inspect", "--format", "{{.Id}}", &format!("{}-web-01", podman.fleet)]);
    let ini = format!(
        "[general]\nnet = {}\ngw = {gateway}\n[web-01]\nservices = http\n[mail]\nimage = localhost/svc-missing:none\n",
        podman.subnet
    );
    let rows = fleet.deploy(&ini, true).await;
    assert_eq!(status_of(&rows, "web-01").0, "succeeded");
    let (status, error) = status_of(&rows, "mail");
    assert_eq!(status, "failed");
    assert_eq!(error, "the decky's container could not be started", "a generic text, not the engine's");
    let second = podman.run(&["inspect", "--format", "{{.Id}}", &format!("{}-web-01", podman.fleet)]);
    assert_ne!(first, second, "the redeploy recreated the container");
    eventually("the replaced fleet's containers are gone", || async { podman.containers().len() == 1 }).await;
    visit(&web, "/probe-two").await;
    eventually("the recreated container is followed", || async {
        fleet.ingested().lines().any(|l| l.contains("/probe-two"))
    })
    .await;
    assert_eq!(fleet.ingested().matches("/probe-one").count(), 1, "nothing repeated after the recreate");

    // Health follows the engine, which is required once a fleet is deployed.
    let health = |port: u16| async move {
        let response = reqwest::get(format!("http://127.0.0.1:{port}/api/v1/health")).await.unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    };
    podman.stop();
    eventually("health reports the engine down", || async {
        let (status, body) = health(fleet.port).await;
        status == 503 && body["components"]["container_runtime"]["status"] == "failing"
    })
    .await;
    podman.restart();
    eventually("health reports the engine back", || async {
        health(fleet.port).await.1["components"]["container_runtime"]["status"] == "ok"
    })
    .await;

    // Teardown removes the container; a second one finds nothing.
    let (status, _) = fleet.call(reqwest::Method::DELETE, "/deckies/web-01", None).await;
    assert_eq!(status, 204);
    assert_eq!(podman.state(&format!("{}-web-01", podman.fleet)), None);
    let (status, body) = fleet.call(reqwest::Method::DELETE, "/deckies/web-01", None).await;
    assert_eq!((status, body["detail"].as_str()), (404, Some("Decky web-01 not found")));
}

/// A small pseudo-random sequence (the test needs varied pauses, not a random crate).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_writes_every_line_exactly_once_across_twenty_kills() {
    const REQUESTS: usize = 1_500;
    const KILLS: usize = 20;
    let podman = Podman::start("collect", 72);
    let fleet = api_on(&podman, false).await;
    let gateway = podman.subnet.replace(".0/24", ".1");
    let rows = fleet
        .deploy(&format!("[general]\nnet = {}\ngw = {gateway}\n[sink]\nservices = http\n", podman.subnet), false)
        .await;
    assert_eq!(status_of(&rows, "sink").0, "succeeded", "{rows:?}");
    let ip = ip_of(&fleet.deckies().await, "sink");

    let collector_command = || {
        let mut command = svc(fleet._dir.path(), &["worker", "collector"]);
        command
            .env("SVC_DOCKER_HOST", podman.host())
            .env("SVC_FLEET_NAME", &podman.fleet)
            .env("SVC_INGEST_LOG_FILE", &fleet.ingest)
            .env("SVC_COLLECTOR_RECONCILE_S", "0.5")
            // Every numbered request must be stored: one address's flood is this test's load.
            .env("SVC_FLOOD_CAP_PER_S", "0")
            .env("SVC_DISK_MIN_FREE_MB", "0");
        command
    };
    let mut collector = Proc::spawn(collector_command());
    // A running container's decoys bind their ports a moment later (longer on a loaded machine).
    eventually("the decky's HTTP decoy listens", || async {
        tokio::net::TcpStream::connect(format!("{ip}:80")).await.is_ok()
    })
    .await;

    // The attacker: numbered requests, while the collector is killed at random moments.
    let load = tokio::spawn({
        let ip = ip.clone();
        async move {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
            for n in 0..REQUESTS {
                client.get(format!("http://{ip}/seq/{n}/end")).send().await.unwrap();
            }
        }
    });
    let mut random = Lcg(Instant::now().elapsed().as_nanos() as u64 ^ u64::from(std::process::id()));
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(100 + random.below(500))).await;
        collector.signal(Signal::KILL);
        collector.wait();
        collector = Proc::spawn(collector_command());
    }
    load.await.unwrap();

    let deadline = Instant::now() + DEADLINE;
    loop {
        let text = fleet.ingested();
        let seen = (0..REQUESTS).filter(|n| text.contains(&format!("/seq/{n}/end"))).count();
        if seen == REQUESTS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{seen} of {REQUESTS} requests reached the file; collector:\n{}",
            collector.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let text = fleet.ingested();
    for n in 0..REQUESTS {
        let count = text.matches(&format!("/seq/{n}/end\"")).count();
        assert_eq!(count, 1, "request {n} is in the ingest file {count} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decky_mutates_on_request_and_on_schedule_and_each_change_reaches_the_ingest_file() {
    let podman = Podman::start("mutate", 79);
    let fleet = api_on(&podman, false).await;
    let gateway = podman.subnet.replace(".0/24", ".1");
    let ini = format!(
        "[general]\nnet = {}\ngw = {gateway}\n\n[shifty]\narchetype = linux-server\n\n[steady]\narchetype = web-server\nmutate_interval = 1\n",
        podman.subnet
    );
    let rows = fleet.deploy(&ini, false).await;
    assert_eq!(status_of(&rows, "shifty").0, "succeeded", "{rows:?}");
    let decky = |deckies: Vec<Value>, name: &str| deckies.into_iter().find(|d| d["name"] == name).unwrap();
    let before = decky(fleet.deckies().await, "shifty")["services"].clone();

    let (status, body) = fleet.call(reqwest::Method::POST, "/deckies/shifty/mutate", None).await;
    assert_eq!(status, 202, "{body}");
    let id = body["lifecycle_ids"][0].as_str().unwrap().to_string();
    let deadline = Instant::now() + DEPLOY_DEADLINE;
    let record = loop {
        let (_, body) = fleet.call(reqwest::Method::GET, &format!("/deckies/lifecycle?ids={id}"), None).await;
        let record = body["rows"][0].clone();
        if record["status"] == "succeeded" || record["status"] == "failed" {
            break record;
        }
        assert!(Instant::now() < deadline, "mutation did not finish: {record}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        (record["operation"].as_str(), record["status"].as_str()),
        (Some("mutate"), Some("succeeded")),
        "{record}"
    );
    let after = decky(fleet.deckies().await, "shifty");
    assert_ne!(after["services"], before, "new services");
    assert_eq!(after["state"], "running", "{after}; the API said:\n{}", fleet.api.output());
    let env = podman.run(&["inspect", "--format", "{{json .Config.Env}}", &format!("{}-shifty", podman.fleet)]);
    let services: Vec<String> =
        after["services"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
    assert!(env.contains(&format!("SVC_DECKY_SERVICES={}", services.join(","))), "{env}");
    let line = fleet.ingested().lines().find(|l| l.contains(" shifty mutator - decky_mutated ")).map(str::to_string);
    let line = line.expect("a decky_mutated line in the ingest file");
    assert!(
        line.contains(r#"trigger="operator""#) && line.contains(&format!(r#"new_services="{}""#, services.join(","))),
        "{line}"
    );

    let (status, body) = fleet
        .call(reqwest::Method::PUT, "/deckies/shifty/mutate-interval", Some(json!({"mutate_interval": "0m"})))
        .await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = fleet
        .call(reqwest::Method::PUT, "/deckies/ghost/mutate-interval", Some(json!({"mutate_interval": "1m"})))
        .await;
    assert_eq!((status, body["detail"].as_str()), (404, Some("Decky not found")));
    let (status, body) = fleet
        .call(reqwest::Method::PUT, "/deckies/shifty/mutate-interval", Some(json!({"mutate_interval": "2d"})))
        .await;
    assert_eq!((status, body["message"].as_str()), (200, Some("Mutation interval updated")));
    assert_eq!(decky(fleet.deckies().await, "shifty")["mutate_interval"], 2880);
    let (status, body) = fleet.call(reqwest::Method::POST, "/deckies/ghost/mutate", None).await;
    assert_eq!((status, body["detail"].as_str()), (404, Some("Decky ghost not found")));

    // On schedule: `steady` was deployed with a one-minute interval and never changed, so the
    // mutator's first round mutates it.
    let mut command = svc(fleet._dir.path(), &["worker", "mutator"]);
    command
        .env("SVC_DOCKER_HOST", podman.host())
        .env("SVC_FLEET_NAME", &podman.fleet)
        .env("SVC_DECKY_BINARY", env!("CARGO_BIN_EXE_svc"))
        .env("SVC_INGEST_LOG_FILE", &fleet.ingest);
    let _mutator = Proc::spawn(command);
    let deadline = Instant::now() + DEPLOY_DEADLINE;
    while !fleet
        .ingested()
        .lines()
        .any(|l| l.contains(" steady mutator - decky_mutated ") && l.contains(r#"trigger="scheduled""#))
    {
        assert!(Instant::now() < deadline, "no scheduled mutation of steady:\n{}", fleet.ingested());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(decky(fleet.deckies().await, "steady")["last_mutated"].as_f64().unwrap() > 0.0);
}

/// Issue 28, bug 2.2: a deploy whose network cannot be made says what to do, not only that it
/// failed: its subnet is taken (here by another network; a host interface reads the same), or a
/// network of the fleet's name is left on another subnet. The decky's image is one this engine
/// lacks, so no image is built and a network that could be made shows as the container failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_whose_network_cannot_be_made_says_why_and_what_to_do() {
    let podman = Podman::start("hof-net", 200);
    let fleet = api_on(&podman, false).await;
    let subnet = podman.subnet.clone();
    let other = subnet.replace(".200.0/", ".201.0/");
    let label = format!("svc.fleet={}", podman.fleet);
    let ini = format!("[general]\nnet = {subnet}\n[lone]\nimage = localhost/svc-missing:none\n");

    let squatter = format!("{}-squatter", podman.fleet);
    podman.run(&["network", "create", "--label", &label, "--subnet", &subnet, &squatter]);
    let (status, error) = status_of(&fleet.deploy(&ini, true).await, "lone");
    assert_eq!(status, "failed");
    assert_eq!(
        error,
        format!(
            "the fleet network could not be created: subnet {subnet} is in use (on the host or by another network); \
             choose another"
        ),
        "{}",
        fleet.api.output()
    );
    assert!(fleet.api.output().contains("is already used on the host"), "the engine's own words are in the log");
    podman.run(&["network", "rm", &squatter]);

    let leftover = format!("{}-fleet", podman.fleet);
    podman.run(&["network", "create", "--label", &label, "--subnet", &other, &leftover]);
    let (status, error) = status_of(&fleet.deploy(&ini, true).await, "lone");
    assert_eq!(status, "failed");
    assert_eq!(error, format!("the fleet network exists with another subnet ({other}): tear down or choose another"));
    let (_, body) = fleet.call(reqwest::Method::GET, "/deckies", None).await;
    assert_eq!(body[0]["last_error"], error, "the decky says it too");

    // Without the leftover the network is made; only the missing image is left to fail.
    podman.run(&["network", "rm", &leftover]);
    let (status, error) = status_of(&fleet.deploy(&ini, true).await, "lone");
    assert_eq!((status.as_str(), error), ("failed", Value::from("the decky's container could not be started")));
}

/// Issue 28, bug 2.3: a second API with an empty database, on the engine a running fleet uses and
/// with its fleet name, removed every decky of the first within a reconcile. Each deployment now
/// only changes what carries its identity: the second reports the first's deckies in its health
/// and leaves them running; the first keeps reconciling its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_deployment_on_the_engine_leaves_the_first_ones_deckies_alone() {
    let podman = Podman::start("hof-two", 202);
    let first = api_with(&podman, &[("SVC_RECONCILE_S", "1")]).await;
    let ini = format!("[general]\nnet = {}\n[keep]\nservices = http\n", podman.subnet);
    let rows = first.deploy(&ini, false).await;
    assert_eq!(status_of(&rows, "keep").0, "succeeded", "{rows:?}\n{}", first.api.output());
    let container = format!("{}-keep", podman.fleet);
    let labels = podman.run(&["inspect", "--format", "{{json .Config.Labels}}", &container]);
    assert!(labels.contains("svc.deployment"), "the container carries its deployment's identity: {labels}");

    let second = api_with(&podman, &[("SVC_RECONCILE_S", "1")]).await;
    let health = |port: u16| async move {
        let response = reqwest::get(format!("http://127.0.0.1:{port}/api/v1/health")).await.unwrap();
        response.json::<Value>().await.unwrap()
    };
    eventually("the second deployment's health reports the first's decky", || async {
        let body = health(second.port).await;
        body["components"]["fleet"]["status"] == "failing"
            && body["components"]["fleet"]["detail"].as_str().is_some_and(|d| d.contains(&container))
    })
    .await;
    assert_eq!(health(second.port).await["status"], "degraded", "optional: the second still serves");
    assert_eq!(podman.state(&container).as_deref(), Some("running"), "{}", second.api.output());
    assert!(!second.api.output().contains("Removing a container"), "{}", second.api.output());
    assert!(second.deckies().await.is_empty());
    assert!(health(first.port).await["components"].get("fleet").is_none(), "the first sees only its own");

    // The first still brings its own decky back; the second still leaves it alone.
    let started = podman.started_at(&container);
    podman.stop_container(&["-t", "1"], &container);
    eventually("the first deployment restarts its stopped decky", || async {
        podman.state(&container).as_deref() == Some("running") && podman.started_at(&container) != started
    })
    .await;
    assert!(!second.api.output().contains("Removing a container"), "{}", second.api.output());
}
