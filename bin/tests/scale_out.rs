//! Scale-out (issue 37): several `svc api` processes on one MariaDB database and one NATS
//! deployment behave as one API. Each test starts real replicas on loopback ports; the database
//! tests need `SVC_TEST_MYSQL_URL` (sqlite has no server several processes share).

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Proc, eventually, free_port};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use store::{ADMIN_PASSWORD, TestDb};

/// The spec's bound for a revocation to reach every replica.
const REVOCATION_BOUND: Duration = Duration::from_secs(10);

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
    _dir: tempfile::TempDir,
    _backend: TestDb,
}

impl Deployment {
    /// `None` when no MariaDB is configured. The first replica starts alone (it migrates the
    /// database and seeds the admin), then the others, as an operator's rollout would.
    async fn start(n: usize, nats_url: Option<&str>) -> Option<Deployment> {
        let Some(backend) = TestDb::mysql() else {
            eprintln!("SVC_TEST_MYSQL_URL unset: replicas need a database server to share");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = Vec::new();
        for i in 0..n {
            replicas.push(start_replica(&backend, &dir.path().join(format!("replica-{i}")), nats_url).await);
        }
        Some(Deployment { replicas, _dir: dir, _backend: backend })
    }
}

fn replica_command(backend: &TestDb, dir: &Path, nats_url: Option<&str>) -> (Command, u16) {
    std::fs::create_dir_all(dir).unwrap();
    let port = free_port();
    let mut command = common::svc(dir, &["api"]);
    command.envs(backend.vars()).env("SVC_DATA_DIR", dir.join("data")).env("SVC_API_PORT", port.to_string());
    // Ingestion is another test's subject; the replicas here share no log file.
    command.env("SVC_INGEST_LOG_FILE", "");
    if let Some(url) = nats_url {
        command.env("SVC_NATS_URL", url);
    }
    (command, port)
}

async fn start_replica(backend: &TestDb, dir: &Path, nats_url: Option<&str>) -> Replica {
    let (command, port) = replica_command(backend, dir, nats_url);
    Replica { proc: common::start_api(command, port).await, port }
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
