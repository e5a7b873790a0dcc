//! The collector under real faults, on a real engine (podman's Docker-compatible service, started
//! by the test): its ingest file's disk fills (health fails with the reason, and once space is
//! freed every line arrives, once); 64,000 numbered requests at about 1,000 a second, fast enough
//! for podman to split lines into pieces, while the collector is killed -9 again and again (every
//! request once and whole); a restarted container is followed again within 2 s.
//!
//! Each test holds an unreachable route for its subnet, so that while a decky's bridge is gone
//! (its only container restarting) nothing sent to the decky leaves the host.

use svc_test_support::processes as common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::podman::Podman;
use common::{DEADLINE, Proc, admin_token, api_command, start_api, svc};
use futures::StreamExt;
use rustix::process::Signal;
use serde_json::{Value, json};

/// Building the image from a debug binary (hundreds of MB) and starting containers takes longer
/// than an API call.
const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);

/// `svc api` on an engine of the test's own, with a decky `sink` (HTTP) deployed.
struct Fleet {
    api: Proc,
    port: u16,
    token: String,
    ingest: PathBuf,
    decky_ip: String,
    dir: tempfile::TempDir,
}

impl Fleet {
    /// The API on `podman`, writing to `ingest` (in its own directory when `None`), configured
    /// further by `settings`, with `sink` deployed and running.
    async fn deploy(podman: &Podman, ingest: Option<&Path>, settings: &[(&str, &str)]) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let ingest = ingest.map_or_else(|| dir.path().join("ingest.log"), Path::to_path_buf);
        let (mut command, port) = api_command(dir.path(), None);
        podman.configure(&mut command, &ingest).env("SVC_COLLECTOR_RECONCILE_S", "1");
        // These tests count every request once: no flood cap and no watermark (their disks are
        // small on purpose) unless `settings` say otherwise.
        command.env("SVC_FLOOD_CAP_PER_S", "0").env("SVC_DISK_MIN_FREE_MB", "0");
        command.envs(settings.iter().copied());
        let api = start_api(command, port).await;
        let token = admin_token(port).await;
        let mut fleet = Fleet { api, port, token, ingest, decky_ip: String::new(), dir };
        let gateway = podman.subnet.replace(".0/24", ".1");
        let ini = format!("[general]\nnet = {}\ngw = {gateway}\n[sink]\nservices = http\n", podman.subnet);
        let (status, body) = fleet
            .call(reqwest::Method::POST, "/deckies/deploy", Some(json!({"ini_content": ini, "replace_fleet": false})))
            .await;
        assert_eq!(status, 202, "{body}");
        let id = body["lifecycle_ids"][0].as_str().unwrap().to_string();
        let deadline = Instant::now() + DEPLOY_DEADLINE;
        loop {
            let (_, body) = fleet.call(reqwest::Method::GET, &format!("/deckies/lifecycle?ids={id}"), None).await;
            match body["rows"][0]["status"].as_str() {
                Some("succeeded") => break,
                Some("failed") => panic!("deploy failed: {body}\n{}", fleet.api.output()),
                _ => assert!(Instant::now() < deadline, "deploy did not finish: {body}"),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let (_, deckies) = fleet.call(reqwest::Method::GET, "/deckies", None).await;
        let sink = deckies.as_array().unwrap().iter().find(|d| d["name"] == "sink").unwrap();
        fleet.decky_ip = sink["ip"].as_str().unwrap().to_string();
        fleet
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        common::api_call(self.port, &self.token, method, path, body).await
    }

    /// The collector's `/health` component: its status and detail.
    async fn collector_health(&self) -> (String, Option<String>) {
        let (_, body) = self.call(reqwest::Method::GET, "/health", None).await;
        let component = &body["components"]["collector_worker"];
        (component["status"].as_str().unwrap_or("absent").to_string(), component["detail"].as_str().map(Into::into))
    }

    fn ingested(&self) -> String {
        std::fs::read_to_string(&self.ingest).unwrap_or_default()
    }

    /// `svc worker collector` on this fleet, reconciling every `reconcile_s`.
    fn collector(&self, podman: &Podman, reconcile_s: &str) -> Proc {
        let mut command = svc(self.dir.path(), &["worker", "collector"]);
        command
            .env("SVC_DOCKER_HOST", podman.host())
            .env("SVC_FLEET_NAME", &podman.fleet)
            .env("SVC_INGEST_LOG_FILE", &self.ingest)
            .env("SVC_COLLECTOR_RECONCILE_S", reconcile_s)
            .env("SVC_FLOOD_CAP_PER_S", "0")
            .env("SVC_DISK_MIN_FREE_MB", "0");
        Proc::spawn(command)
    }

    /// Waits until every one of `count` requests `/<tag>/<n>/end` is in the ingest file, then
    /// checks each is there exactly once and whole (its line ends with the fields written last).
    /// `engine_lost` is how many lines the engine reported it could not read back itself: each
    /// may reach the file cut, or not at all, and is not the collector's loss.
    async fn expect_each_once(
        &self,
        tag: &str,
        count: usize,
        deadline: Instant,
        collector: &dyn Fn() -> String,
        engine_lost: &dyn Fn() -> usize,
    ) {
        let by_request = loop {
            let (by_request, cut) = self.requests_in_file(tag, count);
            let lost = engine_lost();
            assert!(cut <= lost, "{cut} cut lines, {lost} lost by the engine; {}", collector());
            let seen = by_request.iter().filter(|c| **c > 0).count();
            if seen + lost >= count {
                if lost > 0 {
                    eprintln!("the engine lost {lost} line(s) reading its own log; {seen} of {count} arrived");
                }
                break by_request;
            }
            assert!(
                Instant::now() < deadline,
                "{seen} of {count} requests reached the file; {}collector:\n{}",
                self.missing_with_neighbours(tag, &by_request),
                collector()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let repeated: Vec<_> = by_request.iter().enumerate().filter(|(_, c)| **c > 1).take(10).collect();
        assert!(repeated.is_empty(), "requests not in the file exactly once (request, times): {repeated:?}");
    }

    /// The first requests missing from the file, each with the file's lines of its neighbours (a
    /// line holding two requests would show there).
    fn missing_with_neighbours(&self, tag: &str, by_request: &[usize]) -> String {
        let text = self.ingested();
        let mut report = String::new();
        for n in by_request.iter().enumerate().filter(|(_, c)| **c == 0).map(|(n, _)| n).take(5) {
            report.push_str(&format!("request {n} is missing; its neighbours' lines:\n"));
            let neighbours = [n.wrapping_sub(1), n + 1].map(|k| format!("/{tag}/{k}/"));
            for line in text.lines().filter(|l| neighbours.iter().any(|m| l.contains(m.as_str()))) {
                report.push_str(&format!("  {}\n", line.chars().take(800).collect::<String>()));
            }
        }
        report
    }

    /// How many times each request `/<tag>/<n>/end` (`n` below `count`) is in the ingest file
    /// whole (its line ends with the fields written last), and how many lines are cut.
    fn requests_in_file(&self, tag: &str, count: usize) -> (Vec<usize>, usize) {
        let text = self.ingested();
        let marker = format!("/{tag}/");
        let mut by_request = vec![0usize; count];
        let mut cut = 0;
        for line in text.lines().filter(|l| l.contains(&marker)) {
            if !(line.starts_with('<') && line.contains("src_port=") && line.ends_with(']')) {
                eprintln!("a cut line: {line}");
                cut += 1;
                continue;
            }
            let n = line.split(&marker).nth(1).and_then(|rest| rest.split('/').next());
            let n: usize =
                n.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("a line without its number: {line}"));
            by_request[n] += 1;
        }
        (by_request, cut)
    }
}

/// A route that keeps the test's subnet on this host while it exists (unreachable whenever the
/// decky's bridge is gone), removed when the test ends.
struct HostOnlyRoute(String);

impl HostOnlyRoute {
    fn hold(subnet: &str) -> HostOnlyRoute {
        let _ = Command::new("ip").args(["route", "del", "unreachable", subnet, "metric", "4242"]).output();
        common::ip(&["route", "add", "unreachable", subnet, "metric", "4242"]);
        HostOnlyRoute(subnet.to_string())
    }
}

impl Drop for HostOnlyRoute {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["route", "del", "unreachable", &self.0, "metric", "4242"]).output();
    }
}

/// A small tmpfs of the test's own, unmounted when the test ends.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .env("PATH", common::path())
            .status()
            .unwrap();
        assert!(status.success(), "a tmpfs could not be mounted");
        SmallDisk(dir)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `file` until the disk is full.
    fn fill(&self, file: &str) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.path().join(file)).unwrap();
        let chunk = vec![b'x'; 4096];
        while filler.write_all(&chunk).is_ok() {}
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).env("PATH", common::path()).status();
    }
}

/// A request to the decky's HTTP decoy, sent again only while no connection is made (the decky
/// may be starting): a request that reached it is never sent twice.
async fn visit(client: &reqwest::Client, ip: &str, path: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match client.get(format!("http://{ip}{path}")).send().await {
            Ok(_) => return,
            Err(err) if err.is_connect() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("{path}: {err}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ingest_disk_fails_health_with_the_reason_and_once_freed_nothing_is_lost_or_repeated() {
    const BEFORE: usize = 20;
    const WHILE_FULL: usize = 200;
    let podman = Podman::start("hcl-full", 225);
    let _route = HostOnlyRoute::hold(&podman.subnet);
    let disk = SmallDisk::mount("2m");
    let ingest = disk.path().join("ingest.log");
    let fleet = Fleet::deploy(&podman, Some(&ingest), &[("SVC_EMBED_COLLECTOR", "true")]).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    for n in 0..BEFORE {
        visit(&client, &fleet.decky_ip, &format!("/before/{n}/end")).await;
    }
    let api_output = || fleet.api.output();
    fleet.expect_each_once("before", BEFORE, Instant::now() + DEADLINE, &api_output, &|| 0).await;

    disk.fill("filler");
    for n in 0..WHILE_FULL {
        visit(&client, &fleet.decky_ip, &format!("/full/{n}/end")).await;
    }
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (status, detail) = fleet.collector_health().await;
        if status == "failing" {
            assert_eq!(detail.as_deref(), Some("cannot write the ingest file: no space left"));
            break;
        }
        assert!(Instant::now() < deadline, "health still says {status} with the disk full:\n{}", fleet.api.output());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(fleet.api.output().contains("Collector: writing failed; paused, retrying"), "{}", fleet.api.output());

    std::fs::remove_file(disk.path().join("filler")).unwrap();
    fleet.expect_each_once("full", WHILE_FULL, Instant::now() + DEADLINE, &api_output, &|| 0).await;
    fleet.expect_each_once("before", BEFORE, Instant::now(), &api_output, &|| 0).await;
    let deadline = Instant::now() + DEADLINE;
    while fleet.collector_health().await.0 != "ok" {
        assert!(Instant::now() < deadline, "health did not recover: {:?}", fleet.collector_health().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_thousand_requests_at_a_thousand_a_second_arrive_once_and_whole_across_kills() {
    const REQUESTS: usize = 64_000;
    const PER_SECOND: u64 = 1_000;
    const KILLS: usize = 12;
    let podman = Podman::start("hcl-split", 226);
    let _route = HostOnlyRoute::hold(&podman.subnet);
    let fleet = Fleet::deploy(&podman, None, &[("SVC_EMBED_COLLECTOR", "false")]).await;
    let mut collector = fleet.collector(&podman, "0.5");

    // The attacker: numbered requests, paced at about a thousand a second, 16 in flight at most.
    let load = tokio::spawn({
        let ip = fleet.decky_ip.clone();
        async move {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
            let mut pace = tokio::time::interval(Duration::from_micros(1_000_000 / PER_SECOND));
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let paced = futures::stream::unfold((pace, 0usize), |(mut pace, n)| async move {
                if n == REQUESTS {
                    return None;
                }
                pace.tick().await;
                Some((n, (pace, n + 1)))
            });
            let started = Instant::now();
            paced
                .map(|n| {
                    let (client, ip) = (client.clone(), ip.clone());
                    async move { visit(&client, &ip, &format!("/seq/{n}/end")).await }
                })
                // Well under the decoy's 32 connections per source, which a closing one still holds.
                .buffer_unordered(16)
                .collect::<Vec<()>>()
                .await;
            started.elapsed()
        }
    });
    // The collector killed -9 every few seconds while the load runs, at most KILLS times; what each
    // killed one said is kept for a failure's report.
    let mut killed = Vec::new();
    for kill in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(2_000 + 1_500 * (kill as u64 % 3))).await;
        if load.is_finished() {
            break;
        }
        collector.signal(Signal::KILL);
        collector.wait();
        killed.push(collector.output());
        collector = fleet.collector(&podman, "0.5");
    }
    let took = load.await.unwrap();
    eprintln!("{REQUESTS} requests took {took:?}");
    // On a failure: did the engine's own copy have every request (then the collector lost one)?
    let output = || {
        let engine = podman.run(&["logs", &format!("{}-sink", podman.fleet)]);
        let in_engine = engine.lines().filter(|line| line.contains("/seq/")).count();
        let last = collector.output();
        let runs = killed.iter().chain([&last]).enumerate();
        let said: String = runs.map(|(run, output)| format!("-- collector run {run}:\n{output}\n")).collect();
        format!("the engine's log holds {in_engine} request lines\n{said}")
    };
    let engine_lost = || podman.log_lines_lost();
    fleet.expect_each_once("seq", REQUESTS, Instant::now() + Duration::from_secs(120), &output, &engine_lost).await;
    // The engine's log of the decky is capped (`DECKY_LOG_MAX_BYTES`): this says how near the cap the load came.
    eprintln!("the ingest file holds {} bytes", fleet.ingested().len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_containers_lines_are_collected_within_two_seconds() {
    const RESTARTS: usize = 4;
    const BACKLOG: usize = 2_000;
    let podman = Podman::start("hcl-again", 227);
    let _route = HostOnlyRoute::hold(&podman.subnet);
    let fleet = Fleet::deploy(&podman, None, &[("SVC_EMBED_COLLECTOR", "false")]).await;
    // The periodic re-list is far away: only the engine's events can find a restarted container.
    let collector = fleet.collector(&podman, "30");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    visit(&client, &fleet.decky_ip, "/first/0/end").await;
    let output = || collector.output();
    fleet.expect_each_once("first", 1, Instant::now() + DEADLINE, &output, &|| 0).await;

    let container = format!("{}-sink", podman.fleet);
    for n in 0..RESTARTS {
        // The collector is held still while the container restarts, as a busy or starved one is,
        // with a backlog of the old run's lines: when it goes on, the old stream has lines left
        // to hand over as the start event comes in.
        collector.signal(Signal::STOP);
        let busy = (n * BACKLOG)..((n + 1) * BACKLOG);
        futures::stream::iter(busy)
            .for_each_concurrent(16, |k| {
                let (client, ip) = (client.clone(), fleet.decky_ip.clone());
                async move { visit(&client, &ip, &format!("/busy/{k}/end")).await }
            })
            .await;
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string();
        podman.restart_container(&["--time", "0"], &container);
        visit(&client, &fleet.decky_ip, &format!("/again/{n}/end")).await;
        let deadline = Instant::now() + DEADLINE;
        while !podman
            .run(&[
                "events",
                "--stream=false",
                "--since",
                &since,
                "--filter",
                "event=start",
                "--filter",
                &format!("container={container}"),
            ])
            .contains(&container)
        {
            assert!(Instant::now() < deadline, "no start event for the restart");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        collector.signal(Signal::CONT);
        let resumed = Instant::now();
        let line = format!("/again/{n}/end\"");
        while !fleet.ingested().contains(&line) {
            assert!(
                resumed.elapsed() < Duration::from_secs(2),
                "restart {n}: the line was not collected within 2 s; collector:\n{}",
                collector.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    fleet.expect_each_once("busy", RESTARTS * BACKLOG, Instant::now() + DEADLINE, &output, &|| 0).await;
    fleet.expect_each_once("again", RESTARTS, Instant::now(), &output, &|| 0).await;
}

/// The `total` of `/logs?search=…` as the admin reads it.
async fn logs_total(fleet: &Fleet, search: &str) -> u64 {
    let query = format!("/logs?limit=1&search={}", urlencoding(search));
    let (_, body) = fleet.call(reqwest::Method::GET, &query, None).await;
    body["total"].as_u64().unwrap_or_else(|| panic!("{query}: {body}"))
}

fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect()
}

/// The sum of the `request` counts the `flood_suppressed` rows of `attacker` carry.
async fn requests_suppressed(fleet: &Fleet, attacker: &str) -> u64 {
    let query =
        format!("/logs?limit=1000&search={}", urlencoding(&format!("event:flood_suppressed attacker:{attacker}")));
    let (_, body) = fleet.call(reqwest::Method::GET, &query, None).await;
    body["data"]
        .as_array()
        .or_else(|| body["rows"].as_array())
        .or_else(|| body["logs"].as_array())
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .filter_map(|row| {
            let fields: Value = serde_json::from_str(row["fields"].as_str()?).ok()?;
            let events = fields["events"].as_str()?.to_string();
            events.split(',').find_map(|e| e.strip_prefix("request:").and_then(|n| n.parse::<u64>().ok()))
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decky_runs_confined_and_one_addresses_flood_is_capped_and_counted_while_another_is_stored_whole() {
    const FLOOD: u64 = 3_000;
    const OTHER: u64 = 40;
    const CAP_PER_S: u64 = 20;
    const WINDOW_S: u64 = 5;
    let podman = Podman::start("h33-cap", 236);
    let _route = HostOnlyRoute::hold(&podman.subnet);
    let settings = [
        ("SVC_EMBED_COLLECTOR", "true"),
        ("SVC_FLOOD_CAP_PER_S", "20"),
        ("SVC_FLOOD_WINDOW_S", "5"),
        ("SVC_DISK_MIN_FREE_MB", "0"),
    ];
    let fleet = Fleet::deploy(&podman, None, &settings).await;

    // The profile, as the engine reports it and as the kernel holds the decky's process.
    let container = podman.containers().into_iter().next().expect("the decky's container");
    let inspected: Value = serde_json::from_str(&podman.run(&["inspect", &container])).unwrap();
    let inspected = &inspected[0];
    let host = &inspected["HostConfig"];
    assert_eq!(inspected["Config"]["User"], "65534:65534", "{inspected}");
    assert_eq!(host["ReadonlyRootfs"], true, "{host}");
    assert_eq!(host["Memory"], 256 << 20, "{host}");
    assert_eq!(host["PidsLimit"], 256, "{host}");
    assert!(host["SecurityOpt"].to_string().contains("no-new-privileges"), "{host}");
    assert!(host["Tmpfs"]["/tmp"].as_str().is_some_and(|o| o.contains("size=16m")), "{host}");
    let log = &host["LogConfig"];
    assert!(
        log["Size"].as_str().is_some_and(|s| s.starts_with("64") || s.starts_with("67")),
        "the engine's log is capped: {log}"
    );
    let pid = inspected["State"]["Pid"].as_u64().expect("a running decky");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = |key: &str| status.lines().find(|l| l.starts_with(key)).unwrap_or_default().to_string();
    assert!(line("Uid:").split_whitespace().skip(1).all(|uid| uid == "65534"), "{}", line("Uid:"));
    for caps in ["CapEff:", "CapPrm:", "CapBnd:", "CapAmb:"] {
        assert_eq!(line(caps).split_whitespace().nth(1), Some("0000000000000000"), "{caps} of the decky");
    }
    assert_eq!(line("NoNewPrivs:").split_whitespace().nth(1), Some("1"));

    // A second address of the host's on the decky's network, for the other attacker.
    let gateway = podman.subnet.replace(".0/24", ".1");
    let other = podman.subnet.replace(".0/24", ".250");
    let networks: Value =
        serde_json::from_str(&podman.run(&["network", "inspect", &format!("{}-fleet", podman.fleet)]))
            .unwrap_or(Value::Null);
    let bridge = networks[0]["network_interface"].as_str().expect("the fleet's bridge").to_string();
    common::ip(&["addr", "add", &format!("{other}/32"), "dev", &bridge]);

    let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    let other_client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .local_address(other.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    visit(&client, &fleet.decky_ip, "/warm/0/end").await;
    let started = Instant::now();
    let flood = futures::stream::iter(0..FLOOD).for_each_concurrent(16, |k| {
        let (client, ip) = (client.clone(), fleet.decky_ip.clone());
        async move { visit(&client, &ip, &format!("/flood/{k}/end")).await }
    });
    let second = async {
        for k in 0..OTHER {
            visit(&other_client, &fleet.decky_ip, &format!("/other/{k}/end")).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::join!(flood, second);
    let took = started.elapsed();
    eprintln!("{FLOOD} requests from one address took {took:?}");

    // Everything is accounted for: stored, or counted in a summary once its window ended.
    let flood_search = format!("event:request attacker:{gateway}");
    let deadline = Instant::now() + DEADLINE + Duration::from_secs(WINDOW_S * 2);
    let (stored, suppressed) = loop {
        let stored = logs_total(&fleet, &flood_search).await;
        let suppressed = requests_suppressed(&fleet, &gateway).await;
        // The warm-up request is the flood's too.
        if stored + suppressed > FLOOD {
            break (stored, suppressed);
        }
        assert!(
            Instant::now() < deadline,
            "stored {stored} + suppressed {suppressed} of {FLOOD}:\n{}",
            fleet.api.output()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(stored + suppressed, FLOOD + 1, "each request stored or counted, once");
    let windows = took.as_secs() / WINDOW_S + 2;
    assert!(stored <= CAP_PER_S * WINDOW_S * windows, "{stored} stored over {windows} windows");
    assert!(suppressed > 0, "the flood was over the cap");
    assert_eq!(logs_total(&fleet, &format!("event:request attacker:{other}")).await, OTHER, "the other address");
    assert_eq!(logs_total(&fleet, &format!("event:flood_suppressed attacker:{other}")).await, 0);
}
