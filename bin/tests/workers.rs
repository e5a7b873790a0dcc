//! `/workers` against real processes: `svc api` and `svc worker` (the test-only fixture bodies)
//! on a real `nats-server` the test starts, stops and restarts.

use svc_test_support::processes as common;

use common::*;
use reqwest::Method;
use rustix::process::Signal;
use std::time::{Duration, Instant};
use svc::roster::{Embedding, KNOWN_WORKERS, WORKERS};

fn worker(dir: &std::path::Path, name: &str, nats: &Nats) -> Proc {
    let mut command = svc(dir, &["worker", name]);
    command.env("SVC_NATS_URL", nats.url());
    Proc::spawn(command)
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeats_make_rows_ok_silence_stale_and_a_lost_bus_unknown_until_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = Nats::start();
    let (mut command, port) = api_command(dir.path(), Some(&nats));
    command.env("SVC_WORKER_STALE_SECS", "2");
    let api = start_api(command, port).await;
    let _a = worker(dir.path(), "fixture-a", &nats);
    let mut b = worker(dir.path(), "fixture-b", &nats);

    eventually("api and both workers are ok", || async {
        let body = list_workers(port).await;
        ["api", "fixture-a", "fixture-b"].iter().all(|w| status_of(&body, w) == "ok")
    })
    .await;
    let body = list_workers(port).await;
    assert_eq!(body["bus_connected"], true);
    let a = row(&body, "fixture-a").unwrap();
    for field in ["pid", "host", "version", "uptime_sec", "counters"] {
        assert!(a["extra"].get(field).is_some(), "heartbeat without {field}: {a}");
    }
    assert!(a["last_heartbeat_ts"].as_f64().unwrap() <= body["generated_at"].as_f64().unwrap());
    assert_eq!(status_of(&body, "sniffer"), "unknown", "never heard from");

    b.signal(Signal::TERM);
    assert_eq!(b.wait().code(), Some(0));
    eventually("the silent worker is stale", || async {
        let body = list_workers(port).await;
        status_of(&body, "fixture-b") == "stale" && status_of(&body, "fixture-a") == "ok"
    })
    .await;

    nats.stop();
    eventually("the API sees the bus gone", || async { list_workers(port).await["bus_connected"] == false }).await;
    let body = list_workers(port).await;
    for row in body["workers"].as_array().unwrap() {
        assert_eq!(row["status"], "unknown", "{row}");
    }
    let health = reqwest::get(format!("http://127.0.0.1:{port}/api/v1/health")).await.unwrap();
    assert_eq!(health.status(), 200, "the API keeps serving without a bus");

    nats.restart();
    rows_ok_again(port, "rows are ok again after the bus returns").await;
    drop(api);
}

/// Waits until the bus is connected and the API's and fixture-a's rows read `ok`.
async fn rows_ok_again(port: u16, what: &str) {
    eventually(what, || async {
        let body = list_workers(port).await;
        body["bus_connected"] == true && status_of(&body, "api") == "ok" && status_of(&body, "fixture-a") == "ok"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_bus_is_noticed_within_ten_seconds_and_recovered_when_it_answers_again() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start();
    let (command, port) = api_command(dir.path(), Some(&nats));
    let api = start_api(command, port).await;
    let _a = worker(dir.path(), "fixture-a", &nats);
    eventually("api and the worker are ok", || async {
        let body = list_workers(port).await;
        body["bus_connected"] == true && ["api", "fixture-a"].iter().all(|w| status_of(&body, w) == "ok")
    })
    .await;

    // The server keeps its sockets but answers nothing, as a wedged or paused server does.
    nats.signal(Signal::STOP);
    let hung = Instant::now();
    eventually("the API sees the bus gone", || async { list_workers(port).await["bus_connected"] == false }).await;
    let noticed = hung.elapsed();
    assert!(noticed <= Duration::from_secs(10), "a hung bus noticed after {noticed:?}");
    let body = list_workers(port).await;
    assert_eq!(status_of(&body, "fixture-a"), "unknown");

    nats.signal(Signal::CONT);
    rows_ok_again(port, "rows are ok again once the server answers").await;
    drop(api);
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_workers_have_fresh_rows_from_the_start_and_a_stop_intent_stops_them_inside_the_api() {
    let nats = Nats::start();
    // A real interval: a first heartbeat lost would leave a row unknown for half a minute.
    for start in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let (mut command, port) = api_command(dir.path(), Some(&nats));
        command.env("SVC_HEARTBEAT_SECS", "30");
        let started = Instant::now();
        let api = start_api(command, port).await;
        eventually("the api and its embedded ingester have fresh rows", || async {
            let body = list_workers(port).await;
            status_of(&body, "api") == "ok" && status_of(&body, "ingest") == "ok"
        })
        .await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "start {start}: rows fresh after {took:?}");
        let ingest = list_workers(port).await;
        assert_eq!(row(&ingest, "ingest").unwrap()["extra"]["pid"], api.pid(), "beats from inside the API");

        if start == 0 {
            let (status, body) = workers_api(Method::POST, port, "/workers/ingest/stop").await;
            assert_eq!(status, 202, "{body}");
            let health = format!("http://127.0.0.1:{port}/api/v1/health");
            eventually("health shows the embedded ingester stopped", || async {
                let reply = reqwest::get(&health).await.unwrap();
                let status = reply.status();
                let body: serde_json::Value = reply.json().await.unwrap();
                status == 503 && body["components"]["ingestion_worker"]["detail"] == "not running"
            })
            .await;
            assert_eq!(status_of(&list_workers(port).await, "api"), "ok", "the API itself goes on");
        }
        drop(api);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_intent_makes_the_worker_exit_zero_unknown_is_404_and_no_bus_is_503() {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = Nats::start();
    let (command, port) = api_command(dir.path(), Some(&nats));
    let _api = start_api(command, port).await;
    let mut a = worker(dir.path(), "fixture-a", &nats);
    eventually("the worker is heard", || async { status_of(&list_workers(port).await, "fixture-a") == "ok" }).await;

    let (status, body) = workers_api(Method::POST, port, "/workers/fixture-a/stop").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body, serde_json::json!({"accepted": true, "worker": "fixture-a", "action": "stop"}));
    assert_eq!(a.wait().code(), Some(0), "{}", a.output());
    assert!(a.output().contains("Stop requested"), "{}", a.output());

    let (status, body) = workers_api(Method::POST, port, "/workers/nope/stop").await;
    assert_eq!((status, body), (404, serde_json::json!({"detail": "Unknown worker: 'nope'"})));

    nats.stop();
    eventually("the API sees the bus gone", || async { list_workers(port).await["bus_connected"] == false }).await;
    let (status, body) = workers_api(Method::POST, port, "/workers/collector/stop").await;
    assert_eq!((status, body), (503, serde_json::json!({"detail": "bus unavailable"})));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_bus_every_known_worker_is_unknown_and_installed_follows_unit_files() {
    let dir = tempfile::tempdir().unwrap();
    let units = dir.path().join("units");
    std::fs::create_dir_all(&units).unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command.env("SVC_UNIT_CACHE_SECS", "1");
    let _api = start_api(command, port).await;

    let body = list_workers(port).await;
    assert_eq!(body["bus_connected"], false);
    let names: Vec<&str> = body["workers"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, KNOWN_WORKERS);
    assert!(body["workers"].as_array().unwrap().iter().all(|r| r["status"] == "unknown" && r["installed"] == false));

    let installed = |body: serde_json::Value| row(&body, "sniffer").unwrap()["installed"].as_bool().unwrap();
    std::fs::write(units.join("svc-sniffer.service"), "[Service]\n").unwrap();
    eventually("the new unit counts", || async { installed(list_workers(port).await) }).await;
    std::fs::remove_file(units.join("svc-sniffer.service")).unwrap();
    assert!(installed(list_workers(port).await), "the listing is cached");
    eventually("the removed unit no longer counts", || async { !installed(list_workers(port).await) }).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn starts_without_a_service_manager_say_why_in_decnet_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let units = dir.path().join("units");
    std::fs::create_dir_all(&units).unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command.env("SVC_UNIT_CACHE_SECS", "1");
    let _api = start_api(command, port).await;

    let (status, body) = workers_api(Method::POST, port, "/workers/reconciler/start").await;
    assert_eq!((status, body), (404, serde_json::json!({"detail": "Unknown worker: 'reconciler'"})));
    let (status, body) = workers_api(Method::POST, port, "/workers/sniffer/start").await;
    assert_eq!((status, body), (503, serde_json::json!({"detail": "unit file not installed: svc-sniffer.service"})));
    // Known before it is heard from, like every worker of the project.
    let (status, body) = workers_api(Method::POST, port, "/workers/webhook/start").await;
    assert_eq!((status, body), (503, serde_json::json!({"detail": "unit file not installed: svc-webhook.service"})));
    // Installed, but systemd does not run this host (the tests' unit directory stands in for it).
    std::fs::write(units.join("svc-sniffer.service"), "[Service]\n").unwrap();
    eventually("the installed unit is refused for want of systemd", || async {
        let (status, body) = workers_api(Method::POST, port, "/workers/sniffer/start").await;
        status == 503
            && body["detail"] == "no service manager can start svc-sniffer.service: systemd does not run this host, nor svc supervise this worker"
    })
    .await;

    let (status, body) = workers_api(Method::POST, port, "/workers/start-all").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["started"], serde_json::json!([]));
    assert_eq!(body["already_running"], serde_json::json!(["api", "ingest", "tarpit"]), "the API and what it embeds");
    let failed = body["failed"].as_array().unwrap();
    let names: Vec<&str> = failed.iter().map(|f| f["name"].as_str().unwrap()).collect();
    let not_embedded: Vec<&str> =
        WORKERS.iter().filter(|w| w.embedding != Embedding::Always).map(|worker| worker.name).collect();
    assert_eq!(names, not_embedded);
    assert_eq!(failed[0]["reason"], "unit file not installed: svc-collector.service");
    assert_eq!(
        failed[2]["reason"],
        "no service manager can start svc-sniffer.service: systemd does not run this host, nor svc supervise this worker"
    );
}

#[test]
fn a_worker_without_a_body_is_refused_with_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = svc(dir.path(), &["worker", "no-such-worker"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no worker `no-such-worker`") && err.contains("fixture-a"), "{err}");
    assert!(err.contains("sniffer"), "the sniffer is one of them: {err}");
}
