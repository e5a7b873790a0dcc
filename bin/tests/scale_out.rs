//! Scale-out (issue 37): several `svc api` processes on one MariaDB database and one NATS
//! deployment behave as one API. Each test starts real replicas on loopback ports; the database
//! tests need `SVC_TEST_MYSQL_URL` (sqlite has no server several processes share).

#[path = "scale_out/nats_failover.rs"]
mod nats_failover;
#[path = "scale_out/services.rs"]
mod services;

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Proc, eventually, free_port};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use services::Haproxy;
use store::{ADMIN_PASSWORD, TestDb};

/// The spec's bound for a revocation to reach every replica ("about 10 seconds": the replicas'
/// caches live 10 s), and a second for the polling requests themselves.
const REVOCATION_BOUND: Duration = Duration::from_secs(11);

/// Waits, when the login limit's five-minute window closes within `needed`, for the next one: the
/// windows are fixed (aligned to the epoch), so a count that crosses a boundary starts again.
async fn whole_login_window(needed: Duration) {
    let window = 300_000u128;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let left = Duration::from_millis(u64::try_from(window - now % window).unwrap());
    if left < needed {
        eprintln!("waiting {left:?} for the next limit window");
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
}

/// A replica of the API: its process and its port.
struct Replica {
    proc: Proc,
    port: u16,
}

impl Replica {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/api/v1{path}", self.port)
    }
}

/// Three replicas (or `n`) on one fresh MariaDB database and the given NATS servers.
struct Deployment {
    replicas: Vec<Replica>,
    dir: tempfile::TempDir,
    backend: TestDb,
}

impl Deployment {
    /// `None` when no MariaDB is configured. The first replica starts alone (it migrates the
    /// database and seeds the admin), then the others, as an operator's rollout would.
    async fn start(n: usize, nats_url: Option<&str>) -> Option<Deployment> {
        Deployment::start_with(n, nats_url, &[]).await
    }

    /// The same, each replica with `vars` on top.
    async fn start_with(n: usize, nats_url: Option<&str>, vars: &[(&str, &str)]) -> Option<Deployment> {
        let Some(backend) = TestDb::mysql() else {
            eprintln!("SVC_TEST_MYSQL_URL unset: replicas need a database server to share");
            return None;
        };
        Some(Deployment::start_on(backend, n, nats_url, vars).await)
    }

    /// `n` replicas on `backend`.
    async fn start_on(backend: TestDb, n: usize, nats_url: Option<&str>, vars: &[(&str, &str)]) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = Vec::new();
        for i in 0..n {
            let (mut command, port) = replica_command(&backend, &dir.path().join(format!("replica-{i}")), nats_url);
            command.envs(vars.iter().copied());
            replicas.push(Replica { proc: common::start_api(command, port).await, port });
        }
        Deployment { replicas, dir, backend }
    }
}

fn replica_command(backend: &TestDb, dir: &Path, nats_url: Option<&str>) -> (Command, u16) {
    std::fs::create_dir_all(dir).unwrap();
    let port = free_port();
    let mut command = common::svc(dir, &["api"]);
    command.envs(backend.vars()).env("SVC_DATA_DIR", dir.join("data")).env("SVC_API_PORT", port.to_string());
    // No log file unless a test gives the replicas one to share.
    command.env("SVC_INGEST_LOG_FILE", "");
    if let Some(url) = nats_url {
        command.env("SVC_NATS_URL", url);
    }
    (command, port)
}

async fn request(
    replica: &Replica,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, replica.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn login(replica: &Replica, username: &str, password: &str) -> (StatusCode, Value) {
    request(replica, Method::POST, "/auth/login", None, Some(json!({"username": username, "password": password}))).await
}

/// The seeded admin's token, its first password change done on `replica`.
async fn admin_token(replica: &Replica) -> String {
    const PASSWORD: &str = "the admin's own password";
    let (status, first) = login(replica, "admin", ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let token = first["access_token"].as_str().unwrap();
    let change = json!({"old_password": ADMIN_PASSWORD, "new_password": PASSWORD});
    let (status, body) = request(replica, Method::POST, "/auth/change-password", Some(token), Some(change)).await;
    assert!(status.is_success(), "{status} {body}");
    let (status, body) = login(replica, "admin", PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

/// Waits until every replica refuses `token` (401 on a viewer route); fails after the spec's bound.
async fn refused_everywhere(deployment: &Deployment, token: &str, what: &str) {
    let started = Instant::now();
    for replica in &deployment.replicas {
        loop {
            let (status, _) = request(replica, Method::GET, "/config", Some(token), None).await;
            if status == StatusCode::UNAUTHORIZED {
                break;
            }
            assert!(
                started.elapsed() < REVOCATION_BOUND,
                "{what}: replica on port {} still answers {status} after {:?}",
                replica.port,
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!("{what}: refused by every replica after {:?}", started.elapsed());
}

async fn accepted_everywhere(deployment: &Deployment, token: &str) {
    for replica in &deployment.replicas {
        let (status, body) = request(replica, Method::GET, "/config", Some(token), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

#[tokio::test]
async fn login_attempts_are_limited_for_the_deployment_not_per_replica() {
    let Some(deployment) = Deployment::start(3, None).await else { return };
    whole_login_window(Duration::from_secs(30)).await;
    // Ten attempts in total, spread over the replicas: each counts against the same window.
    for attempt in 0..10 {
        let replica = &deployment.replicas[attempt % 3];
        let (status, body) = login(replica, "nobody", "not the password at all").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "attempt {} on replica {}: {body}", attempt + 1, attempt % 3);
    }
    // The eleventh, on any replica, is over the deployment's limit.
    for replica in &deployment.replicas {
        let (status, body) = login(replica, "nobody", "not the password at all").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "replica on port {}: {body}", replica.port);
        assert_eq!(body["error"], "Rate limit exceeded: 10 per 5 minute", "{body}");
    }
}

#[tokio::test]
async fn a_token_logged_out_on_one_replica_is_refused_by_all() {
    let Some(deployment) = Deployment::start(3, None).await else { return };
    let token = admin_token(&deployment.replicas[0]).await;
    accepted_everywhere(&deployment, &token).await;
    let (status, body) = request(&deployment.replicas[1], Method::POST, "/auth/logout", Some(&token), None).await;
    assert!(status.is_success(), "{status} {body}");
    refused_everywhere(&deployment, &token, "logout").await;
}

#[tokio::test]
async fn a_password_changed_on_one_replica_ends_older_tokens_on_all() {
    let Some(deployment) = Deployment::start(3, None).await else { return };
    let token = admin_token(&deployment.replicas[0]).await;
    // A second session of the same user, which the change on another replica must end too.
    let (status, body) = login(&deployment.replicas[2], "admin", "the admin's own password").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let older = body["access_token"].as_str().unwrap().to_string();
    accepted_everywhere(&deployment, &older).await;
    // Tokens carry their issue time in whole seconds: a change in the same second as the login
    // would not tell them apart.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let change = json!({"old_password": "the admin's own password", "new_password": "yet another admin password"});
    let (status, body) =
        request(&deployment.replicas[1], Method::POST, "/auth/change-password", Some(&token), Some(change)).await;
    assert!(status.is_success(), "{status} {body}");
    refused_everywhere(&deployment, &older, "password change").await;
}

#[tokio::test]
async fn a_user_deleted_on_one_replica_is_refused_by_all() {
    let Some(deployment) = Deployment::start(3, None).await else { return };
    let admin = admin_token(&deployment.replicas[0]).await;
    let create = json!({"username": "analyst", "password": "a first analyst password", "role": "viewer"});
    let (status, user) =
        request(&deployment.replicas[0], Method::POST, "/config/users", Some(&admin), Some(create)).await;
    assert!(status.is_success(), "{status} {user}");
    let (_, first) = login(&deployment.replicas[1], "analyst", "a first analyst password").await;
    let change = json!({"old_password": "a first analyst password", "new_password": "the analyst's own password"});
    let first_token = first["access_token"].as_str().unwrap();
    let (status, body) =
        request(&deployment.replicas[1], Method::POST, "/auth/change-password", Some(first_token), Some(change)).await;
    assert!(status.is_success(), "{status} {body}");
    let (status, body) = login(&deployment.replicas[2], "analyst", "the analyst's own password").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["access_token"].as_str().unwrap().to_string();
    accepted_everywhere(&deployment, &token).await;
    let uuid = user["uuid"].as_str().unwrap();
    let (status, body) =
        request(&deployment.replicas[0], Method::DELETE, &format!("/config/users/{uuid}"), Some(&admin), None).await;
    assert!(status.is_success(), "{status} {body}");
    refused_everywhere(&deployment, &token, "user deleted").await;
}

#[tokio::test]
async fn a_stream_ticket_minted_on_one_replica_opens_one_stream_on_another() {
    let Some(deployment) = Deployment::start(3, None).await else { return };
    let token = admin_token(&deployment.replicas[0]).await;
    let (status, body) = request(&deployment.replicas[0], Method::POST, "/auth/sse-ticket", Some(&token), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ticket = body["ticket"].as_str().unwrap();
    let client = reqwest::Client::new();
    let open = |replica: &Replica| client.get(replica.url("/stream")).query(&[("ticket", ticket)]).send();
    let stream = open(&deployment.replicas[1]).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK, "the ticket opens a stream on another replica");
    let again = open(&deployment.replicas[2]).await.unwrap();
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED, "and only one");
    let again = open(&deployment.replicas[1]).await.unwrap();
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED, "not even twice on the same replica");
    drop(stream);
}

/// The holders of the database's worker leases: (source, holder `host:pid:…`).
fn lease_holders(backend: &TestDb) -> Vec<(String, String)> {
    let url = backend.mysql_url().unwrap();
    let (server, database) = url.rsplit_once('/').unwrap();
    let authority = server.trim_start_matches("mysql://");
    let (user, host) = authority.split_once('@').unwrap_or(("root", authority));
    let (host, port) = host.split_once(':').unwrap_or((host, "3306"));
    let output = Command::new("mysql")
        .args([
            "-h",
            host,
            "-P",
            port,
            "-u",
            user,
            "-N",
            "-B",
            "-e",
            "select source, holder from ingest_leases",
            database,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(source, holder)| (source.to_string(), holder.to_string()))
        .collect()
}

/// The pid in a lease holder `host:pid:uuid`.
fn holder_pid(holder: &str) -> i32 {
    holder.split(':').nth(1).and_then(|pid| pid.parse().ok()).unwrap_or_else(|| panic!("holder {holder}"))
}

/// An auth attempt numbered `seq`, as a decky's collector writes it.
fn lines(range: std::ops::Range<usize>) -> String {
    range
        .map(|seq| {
            format!(
                "<134>1 2026-05-02T06:00:25.453826+00:00 decky-1 ssh - auth_attempt [relay@55555 src_ip=\"192.0.2.7\" seq=\"{seq}\"]\n"
            )
        })
        .collect()
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// The `seq` of every stored row as `replica` lists them, sorted.
async fn stored_seqs(replica: &Replica, token: &str) -> Vec<usize> {
    let (status, body) = request(replica, Method::GET, "/logs?limit=1000", Some(token), None).await;
    if status != StatusCode::OK {
        return Vec::new();
    }
    let mut seqs: Vec<usize> = body["data"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|row| {
                    let fields = &row["fields"];
                    let fields: Value = match fields {
                        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                        other => other.clone(),
                    };
                    fields["seq"].as_str().and_then(|seq| seq.parse().ok())
                })
                .collect()
        })
        .unwrap_or_default();
    seqs.sort_unstable();
    seqs
}

#[tokio::test]
async fn one_ingester_at_a_time_and_another_takes_over_when_it_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("decnet.log");
    append(&file, &lines(0..50));
    let vars = [
        ("SVC_INGEST_LOG_FILE", file.to_str().unwrap()),
        ("SVC_INGEST_LEASE_SECS", "2"),
        ("SVC_INGEST_BATCH_MAX_WAIT_MS", "20"),
        ("SVC_EMBED_COLLECTOR", "false"),
    ];
    let Some(mut deployment) = Deployment::start_with(3, None, &vars).await else { return };
    let token = admin_token(&deployment.replicas[0]).await;
    eventually("the first 50 lines are stored once", || async {
        stored_seqs(&deployment.replicas[1], &token).await == (0..50).collect::<Vec<_>>()
    })
    .await;
    let holders: Vec<_> = lease_holders(&deployment.backend)
        .into_iter()
        .filter(|(s, _)| s.contains("decnet.log") || s.contains("ingest"))
        .collect();
    assert_eq!(holders.len(), 1, "one ingest lease: {holders:?}");
    let holder = holder_pid(&holders[0].1);
    let index = deployment.replicas.iter().position(|r| r.proc.pid() == holder).expect("a replica holds the lease");
    let killed = deployment.replicas.remove(index);
    killed.proc.signal(rustix::process::Signal::KILL);
    let started = Instant::now();
    append(&file, &lines(50..100));
    let survivor = &deployment.replicas[0];
    eventually("another replica stores the next 50 lines", || async {
        stored_seqs(survivor, &token).await.len() >= 100
    })
    .await;
    eprintln!("ingest lease failover: the lines written after the kill stored after {:?}", started.elapsed());
    assert_eq!(stored_seqs(survivor, &token).await, (0..100).collect::<Vec<_>>(), "no line lost or stored twice");
    let after = lease_holders(&deployment.backend);
    assert!(after.iter().all(|(_, h)| holder_pid(h) != holder), "the dead replica holds nothing: {after:?}");
    drop(dir);
    drop(deployment.dir);
}

#[tokio::test]
async fn workers_and_health_tell_the_same_truth_on_every_replica() {
    let nats = common::Nats::start();
    let Some(deployment) = Deployment::start_with(3, Some(&nats.url()), &[("SVC_WORKER_STALE_SECS", "2")]).await else {
        return;
    };
    let token = admin_token(&deployment.replicas[0]).await;
    let view = |replica: &Replica| {
        let token = token.clone();
        let url = replica.url("/workers");
        async move {
            let body: Value =
                reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap();
            let mut rows: Vec<(String, String)> = body["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r["name"].as_str().unwrap().to_string(), r["status"].as_str().unwrap().to_string()))
                .collect();
            rows.sort();
            rows
        }
    };
    eventually("every replica lists the same workers", || async {
        let first = view(&deployment.replicas[0]).await;
        let mut same = !first.is_empty();
        for replica in &deployment.replicas[1..] {
            same &= view(replica).await == first;
        }
        same
    })
    .await;
    let mut statuses = Vec::new();
    for replica in &deployment.replicas {
        let (status, body) = request(replica, Method::GET, "/health", None, None).await;
        statuses.push((status, body["status"].clone(), body["components"].clone()));
    }
    assert!(statuses[0].2.as_object().is_some_and(|c| !c.is_empty()), "{statuses:?}");
    assert!(statuses.windows(2).all(|w| w[0] == w[1]), "health differs between replicas: {statuses:?}");
}

/// A client that retries what failed for want of a replica (the connection cut, a 502/503 from the
/// proxy), as a dashboard does; `Err` only when every attempt failed.
async fn retried(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    token: &str,
    body: Option<&Value>,
) -> Result<(StatusCode, Value), String> {
    let mut last = String::new();
    for _ in 0..5 {
        let mut request = client.request(method.clone(), url).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(body);
        }
        match request.send().await {
            Ok(response)
                if ![StatusCode::BAD_GATEWAY, StatusCode::SERVICE_UNAVAILABLE].contains(&response.status()) =>
            {
                let status = response.status();
                return Ok((status, response.json().await.unwrap_or(Value::Null)));
            }
            Ok(response) => last = response.status().to_string(),
            Err(err) => last = err.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

#[tokio::test]
async fn a_replica_killed_behind_haproxy_costs_nothing_but_retries() {
    // The streams this test opens and drops count against the per-user cap until each replica
    // notices the drop (its next keep-alive): a cap above what the test opens keeps that out.
    let Some(mut deployment) = Deployment::start_with(3, None, &[("SVC_SSE_MAX_PER_USER", "200")]).await else {
        return;
    };
    let ports: Vec<u16> = deployment.replicas.iter().map(|r| r.port).collect();
    let Some(proxy) = Haproxy::start(&ports).await else { return };
    let token = admin_token(&deployment.replicas[0]).await;
    let client = reqwest::Client::new();
    // Streams open through the proxy, one on each replica (round robin).
    let mut streams = Vec::new();
    for _ in 0..3 {
        let (_, ticket) = retried(&client, Method::POST, &proxy.url("/auth/sse-ticket"), &token, None).await.unwrap();
        let stream =
            client.get(proxy.url("/stream")).query(&[("ticket", ticket["ticket"].as_str().unwrap())]).send().await;
        let stream = stream.unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        streams.push(stream);
    }

    let writes = 60;
    let mut failures = Vec::new();
    let mut killed = None;
    for i in 0..writes {
        if i == writes / 3 {
            let victim = deployment.replicas.remove(1);
            victim.proc.signal(rustix::process::Signal::KILL);
            killed = Some(Instant::now());
        }
        let read = retried(&client, Method::GET, &proxy.url("/logs?limit=10"), &token, None).await;
        if let Err(err) = read {
            failures.push(format!("read {i}: {err}"));
        }
        let user = json!({"username": format!("user-{i}"), "password": "a long enough password", "role": "viewer"});
        match retried(&client, Method::POST, &proxy.url("/config/users"), &token, Some(&user)).await {
            // A retry of a create the dead replica committed before its answer was lost.
            Ok((status, _)) if status.is_success() || status == StatusCode::CONFLICT => {}
            Ok((status, body)) => failures.push(format!("write {i}: {status} {body}")),
            Err(err) => failures.push(format!("write {i}: {err}")),
        }
        let (_, ticket) = retried(&client, Method::POST, &proxy.url("/auth/sse-ticket"), &token, None).await.unwrap();
        let stream =
            client.get(proxy.url("/stream")).query(&[("ticket", ticket["ticket"].as_str().unwrap())]).send().await;
        match stream {
            Ok(response) if response.status() == StatusCode::OK => streams.push(response),
            Ok(response) => failures.push(format!("stream {i}: {}", response.status())),
            Err(err) => failures.push(format!("stream {i}: {err}")),
        }
        if streams.len() > 3 {
            streams.remove(0);
        }
    }
    eprintln!(
        "kill -9 of one replica behind haproxy: {writes} rounds finished {:?} after it",
        killed.unwrap().elapsed()
    );
    assert!(failures.is_empty(), "retried clients saw errors: {failures:#?}");
    let (status, config) = retried(&client, Method::GET, &proxy.url("/config"), &token, None).await.unwrap();
    assert_eq!(status, StatusCode::OK);
    let mut names: Vec<String> = config["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("user-"))
        .collect();
    names.sort();
    let mut expected: Vec<String> = (0..writes).map(|i| format!("user-{i}")).collect();
    expected.sort();
    assert_eq!(names, expected, "every write stored exactly once");
}

#[tokio::test]
async fn every_replica_answers_503_while_the_database_is_away_and_recovers_by_itself() {
    let Some(backend) = TestDb::mysql() else {
        eprintln!("SVC_TEST_MYSQL_URL unset: replicas need a database server to share");
        return;
    };
    backend.open().await.close().await;
    // The database server as the replicas see it: a proxy the test takes down and brings back,
    // as a restart of the shared MariaDB would (which other tests on this machine use too).
    let (mut database, via_proxy) = store::proxy::DbProxy::start(backend.mysql_url().unwrap()).await;
    let deployment = Deployment::start_on(backend, 3, None, &[("SVC_DB_URL", &via_proxy)]).await;
    let pids: Vec<i32> = deployment.replicas.iter().map(|r| r.proc.pid()).collect();
    let token = admin_token(&deployment.replicas[0]).await;
    accepted_everywhere(&deployment, &token).await;

    database.down().await;
    for replica in &deployment.replicas {
        eventually("the replica says the database is unavailable", || async {
            request(replica, Method::GET, "/config", Some(&token), None).await.0 == StatusCode::SERVICE_UNAVAILABLE
                && request(replica, Method::GET, "/health", None, None).await.0 == StatusCode::SERVICE_UNAVAILABLE
        })
        .await;
    }

    database.up().await;
    let back = Instant::now();
    for replica in &deployment.replicas {
        eventually("the replica serves again", || async {
            request(replica, Method::GET, "/config", Some(&token), None).await.0 == StatusCode::OK
                && request(replica, Method::GET, "/health", None, None).await.0 == StatusCode::OK
        })
        .await;
    }
    eprintln!("database back: every replica served again after {:?}", back.elapsed());
    let still: Vec<i32> = deployment.replicas.iter().map(|r| r.proc.pid()).collect();
    assert_eq!(still, pids);
    assert!(pids.iter().all(|pid| common::alive(*pid)), "no replica restarted");
}

#[tokio::test]
async fn limits_fall_back_to_each_replica_while_the_database_is_away() {
    let Some(backend) = TestDb::mysql() else {
        eprintln!("SVC_TEST_MYSQL_URL unset: the outage needs a database server");
        return;
    };
    backend.open().await.close().await;
    let (mut database, via_proxy) = store::proxy::DbProxy::start(backend.mysql_url().unwrap()).await;
    let config = backend.api_config(&[("SVC_DB_URL", &via_proxy)]);
    let db = svc::db::connect(&config.db).unwrap();
    let limits = svc::http::RateLimits::shared(true, db.clone());
    let client: std::net::IpAddr = "192.0.2.9".parse().unwrap();
    whole_login_window(Duration::from_secs(40)).await;
    for _ in 0..6 {
        limits.login(client, "someone").await.unwrap();
    }
    database.down().await;
    // Counted in memory now: this replica's own ten, and no more.
    for attempt in 0..10 {
        assert!(limits.login(client, "someone").await.is_ok(), "attempt {attempt} while the database is away");
    }
    assert!(limits.login(client, "someone").await.is_err(), "still limited while the database is away");
    database.up().await;
    // Back in the database once the fallback's spell is over; it counted the first six: four
    // more, then refused.
    eventually("the database counts again", || async { db.ping().await.is_ok() }).await;
    tokio::time::sleep(svc::http::limit::FALLBACK_SPELL).await;
    for attempt in 0..4 {
        assert!(limits.login(client, "someone").await.is_ok(), "attempt {} once the database is back", attempt + 7);
    }
    assert!(limits.login(client, "someone").await.is_err(), "the deployment's eleventh attempt");
    db.close().await;
}
