//! `svc supervise` as a real process tree: a private nats-server, `svc api` and a fixture worker.

use svc_test_support::processes as common;

use common::*;
use rustix::process::Signal;

/// `svc supervise --workers fixture-a` with a private bus; returns it and the API's port.
async fn supervise(dir: &std::path::Path) -> (Proc, u16) {
    let port = free_port();
    let mut command = svc(dir, &["supervise", "--workers", "fixture-a", "--grace-secs", "10"]);
    command.env("SVC_API_PORT", port.to_string());
    let supervisor = Proc::spawn(command);
    eventually("the worker is heard through the private bus", || async {
        reqwest::get(format!("http://127.0.0.1:{port}/api/v1/health")).await.is_ok()
            && status_of(&list_workers(port).await, "fixture-a") == "ok"
    })
    .await;
    (supervisor, port)
}

fn pid_of(body: &serde_json::Value, worker: &str) -> i32 {
    row(body, worker).unwrap()["extra"]["pid"].as_i64().unwrap() as i32
}

#[tokio::test(flavor = "multi_thread")]
async fn children_start_a_killed_worker_comes_back_and_sigterm_stops_all() {
    let dir = tempfile::tempdir().unwrap();
    let (mut supervisor, port) = supervise(dir.path()).await;
    let children = children_of(supervisor.pid());
    assert_eq!(children.len(), 3, "nats, api, fixture-a: {children:?}\n{}", supervisor.output());
    let output = supervisor.output();
    for prefix in ["nats |", "api |", "fixture-a |"] {
        assert!(output.contains(prefix), "no output prefixed {prefix:?}:\n{output}");
    }

    let first = pid_of(&list_workers(port).await, "fixture-a");
    assert!(children.contains(&first));
    let killed = std::time::Instant::now();
    rustix::process::kill_process(rustix::process::Pid::from_raw(first).unwrap(), Signal::KILL).unwrap();
    eventually("the worker is restarted", || async {
        let body = list_workers(port).await;
        status_of(&body, "fixture-a") == "ok" && pid_of(&body, "fixture-a") != first
    })
    .await;
    assert!(killed.elapsed() >= std::time::Duration::from_secs(1), "restarted before the first backoff");
    assert!(supervisor.output().contains("Child crashed; restarting after backoff"), "{}", supervisor.output());

    let children = children_of(supervisor.pid());
    assert_eq!(children.len(), 3, "{children:?}");
    supervisor.signal(Signal::TERM);
    assert_eq!(supervisor.wait().code(), Some(0), "{}", supervisor.output());
    for pid in children {
        assert!(!alive(pid), "child {pid} outlived the supervisor");
    }
    let output = supervisor.output();
    let stopped = |name: &str| output.find(&format!("child={name} status=")).unwrap_or_else(|| panic!("{output}"));
    assert!(
        stopped("fixture-a") < stopped("api") && stopped("api") < stopped("nats"),
        "not in reverse order:\n{output}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_stopped_by_intent_stays_stopped_until_the_api_asks_the_supervisor_to_start_it() {
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, port) = supervise(dir.path()).await;
    let first = pid_of(&list_workers(port).await, "fixture-a");
    let (status, body) = workers_api(reqwest::Method::POST, port, "/workers/fixture-a/stop").await;
    assert_eq!(status, 202, "{body}");
    eventually("the worker exits cleanly", || async { !alive(first) }).await;
    assert!(supervisor.output().contains("Child exited cleanly; not restarting it"), "{}", supervisor.output());

    let (status, body) = workers_api(reqwest::Method::POST, port, "/workers/fixture-a/start").await;
    assert_eq!((status, body), (202, serde_json::json!({"accepted": true, "worker": "fixture-a", "action": "start"})));
    eventually("the worker runs again", || async {
        let body = list_workers(port).await;
        status_of(&body, "fixture-a") == "ok" && pid_of(&body, "fixture-a") != first
    })
    .await;
    let (status, _) = workers_api(reqwest::Method::POST, port, "/workers/fixture-a/start").await;
    assert_eq!(status, 202, "already running: accepted, nothing done");
    assert_eq!(children_of(supervisor.pid()).len(), 3, "one of each: {}", supervisor.output());
}

#[tokio::test(flavor = "multi_thread")]
async fn no_child_survives_a_killed_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, _) = supervise(dir.path()).await;
    let children = children_of(supervisor.pid());
    assert_eq!(children.len(), 3, "{children:?}");
    supervisor.signal(Signal::KILL);
    eventually("every child is gone", || async { children.iter().all(|pid| !alive(*pid)) }).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn by_default_the_profiler_runs_and_starts_after_the_api_has_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = svc(dir.path(), &["supervise", "--grace-secs", "10"]);
    command.env("SVC_API_PORT", port.to_string()).env_remove("SVC_SUPERVISE_WORKERS");
    let mut supervisor = Proc::spawn(command);
    eventually("the profiler is heard through the private bus", || async {
        reqwest::get(format!("http://127.0.0.1:{port}/api/v1/health")).await.is_ok()
            && status_of(&list_workers(port).await, "profiler") == "ok"
    })
    .await;
    eventually("the profiler has caught up", || async { supervisor.output().contains("Profiles are caught up") }).await;
    let output = supervisor.output();
    assert!(!output.contains("no such table"), "a worker started before the tables existed:\n{output}");
    supervisor.signal(Signal::TERM);
    assert_eq!(supervisor.wait().code(), Some(0), "{}", supervisor.output());
}
