//! `GET /metrics` scraped by a real Prometheus: the counters the test causes are what Prometheus's
//! HTTP API answers; who may read it (the token, loopback only without one); bounded labels under a
//! scan of random paths. And the bus's own heartbeat, `system.bus.health`, as `/workers` shows it
//! over a real `nats-server` that is restarted under it. And traces off means off: not one span.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use svc::db::Role;
use svc_test_support::in_process::{TestApi, TestDb, user_token};
use svc_test_support::processes::prometheus::Prometheus;
use svc_test_support::processes::{Nats, eventually};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

const TOKEN: &str = "metrics-token-0123456789abcdef";

fn root(api: &TestApi) -> String {
    api.base.trim_end_matches("/api/v1").to_string()
}

async fn scrape(api: &TestApi, token: Option<&str>) -> (u16, String) {
    let mut request = api.client.get(format!("{}/metrics", root(api)));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn prometheus_scrapes_the_request_counts_it_is_asked_for() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[("SVC_METRICS_TOKEN", TOKEN)])).await;
    let target = root(&api).trim_start_matches("http://").to_string();
    let prometheus = Prometheus::start(&target, "/metrics", TOKEN);

    for _ in 0..3 {
        assert_eq!(api.get("/health", None, &[]).await.status, 200);
    }
    for _ in 0..2 {
        assert_eq!(api.get("/logs", None, &[]).await.status, 401, "no token: refused");
    }
    let health = r#"svc_http_requests_total{job="svc",route="/api/v1/health",method="GET",status="200"}"#;
    let refused = r#"svc_http_requests_total{job="svc",route="/api/v1/logs",method="GET",status="401"}"#;
    eventually("Prometheus has the three health requests and the two refused log reads", || async {
        prometheus.query(health).await == Some(3.0) && prometheus.query(refused).await == Some(2.0)
    })
    .await;
    assert_eq!(prometheus.last_scrape_error().await, None, "Prometheus read every line of the exposition");
    assert_eq!(prometheus.query(r#"up{job="svc"}"#).await, Some(1.0));
    let le = r#"svc_http_request_duration_seconds_bucket{route="/api/v1/health",method="GET",status="200",le="+Inf"}"#;
    assert_eq!(prometheus.query(le).await, Some(3.0), "the histogram counts every request");
    assert_eq!(prometheus.query("svc_bus_connected").await, Some(0.0), "no bus configured");
    assert_eq!(prometheus.query(r#"svc_fleet_deckies{state="running"}"#).await, Some(0.0));
    assert_eq!(prometheus.query("svc_scrape_store_ok").await, Some(1.0));
    assert!(prometheus.query(r#"svc_worker_up{worker="api"}"#).await.is_some(), "a row per known worker");
    api.stop().await;
}

#[tokio::test]
async fn the_token_is_required_when_set_and_a_public_binding_without_one_serves_nothing() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[("SVC_METRICS_TOKEN", TOKEN)])).await;
    assert_eq!(scrape(&api, None).await.0, 401);
    assert_eq!(scrape(&api, Some("metrics-token-0123456789abcdeX")).await.0, 401);
    let (status, body) = scrape(&api, Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert!(body.contains("# TYPE svc_http_requests_total counter"), "{body}");
    api.stop().await;

    let loopback = TestApi::start(db.api_config(&[])).await;
    assert_eq!(scrape(&loopback, None).await.0, 200, "no token, loopback binding: local readers only");
    loopback.stop().await;

    let public = [("SVC_API_HOST", "0.0.0.0"), ("SVC_CORS_ORIGINS", "https://dash.example")];
    let exposed = TestApi::start(db.api_config(&public)).await;
    assert_eq!(scrape(&exposed, None).await.0, 404, "a public binding never serves metrics without a token");
    exposed.stop().await;
}

#[tokio::test]
async fn a_scan_of_random_paths_adds_one_series_and_never_a_path() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[("SVC_METRICS_TOKEN", TOKEN)])).await;
    for i in 0..50 {
        let path = format!("{}/wp-admin/{i}/x%22y", root(&api));
        assert_eq!(api.client.get(path).send().await.unwrap().status(), 404);
        let uuid = uuid::Uuid::new_v4();
        assert_eq!(api.get(&format!("/attackers/{uuid}"), None, &[]).await.status, 401);
    }
    let weird = reqwest::Method::from_bytes(b"PROPFIND").unwrap();
    api.client.request(weird, api.url("/health")).send().await.unwrap();
    let (_, body) = scrape(&api, Some(TOKEN)).await;
    assert!(!body.contains("wp-admin") && !body.contains("PROPFIND"), "{body}");
    let requests: Vec<&str> = body.lines().filter(|l| l.starts_with("svc_http_requests_total{")).collect();
    assert!(requests.contains(&r#"svc_http_requests_total{route="unmatched",method="GET",status="404"} 50"#), "{body}");
    assert!(
        requests.contains(&r#"svc_http_requests_total{route="/api/v1/attackers/{uuid}",method="GET",status="401"} 50"#),
        "{body}"
    );
    assert!(requests.iter().any(|l| l.contains(r#"method="other""#)), "{body}");
    assert!(requests.len() <= 4, "one series per template, method and status: {requests:?}");
    api.stop().await;
}

#[tokio::test]
async fn the_bus_heartbeat_shows_round_trip_and_reconnects_in_workers() {
    let mut nats = Nats::start();
    let db = TestDb::sqlite();
    let url = nats.url();
    let api = TestApi::start(db.api_config(&[("SVC_NATS_URL", &url), ("SVC_HEARTBEAT_SECS", "0.2")])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let bus_row = || async {
        let workers = api.ok("/workers", &token, &[]).await;
        workers["workers"].as_array().unwrap().iter().find(|row| row["name"] == "bus").cloned()
    };
    eventually("the bus row has the API's beat", || async {
        bus_row().await.is_some_and(|row| row["extra"]["processes"]["svc-api"]["rtt_ms"].as_f64().is_some())
    })
    .await;
    let row = bus_row().await.unwrap();
    assert_eq!(row["status"], "ok");
    let api_beat = &row["extra"]["processes"]["svc-api"];
    assert_eq!(api_beat["reconnects"], 0, "{row}");
    assert_eq!(api_beat["pid"], std::process::id());
    assert!(api_beat["rtt_ms"].as_f64().unwrap() > 0.0, "{row}");

    nats.stop();
    nats.restart();
    eventually("the API's bus beat counts the reconnect", || async {
        bus_row().await.is_some_and(|row| row["extra"]["processes"]["svc-api"]["reconnects"] == 1)
    })
    .await;
    let (status, body) = scrape(&api, None).await;
    assert_eq!(status, 200);
    assert!(body.lines().any(|l| l == "svc_bus_connected 1"), "{body}");
    api.stop().await;
}

/// Counts every span created on the thread it is the default subscriber of.
struct CountSpans(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> Layer<S> for CountSpans {
    fn on_new_span(&self, _: &tracing::span::Attributes<'_>, _: &tracing::span::Id, _: Context<'_, S>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn with_tracing_off_no_span_is_created_and_no_exporter_exists() {
    let nats = Nats::start();
    let spans = Arc::new(AtomicUsize::new(0));
    // Current-thread runtime: the API's tasks run on this thread, under this subscriber.
    let _counting = tracing_subscriber::registry().with(CountSpans(spans.clone())).set_default();
    let db = TestDb::sqlite();
    let url = nats.url();
    for (tracing_on, expect_spans) in [("false", false), ("true", true)] {
        let config = db.api_config(&[
            ("SVC_NATS_URL", &url),
            ("SVC_HEARTBEAT_SECS", "0.2"),
            ("SVC_DEVELOPER_TRACING", tracing_on),
        ]);
        let (traces, layer) = svc::logging::traces(&config, "svc-api");
        assert_eq!(layer.is_some(), expect_spans, "an exporter exists only with tracing on");
        traces.shutdown();
        spans.store(0, Ordering::Relaxed);
        let api = TestApi::start(config).await;
        let token = user_token(&api.state, &format!("viewer-{tracing_on}"), Role::Viewer).await;
        for _ in 0..5 {
            api.ok("/workers", &token, &[]).await;
            assert_eq!(api.get("/logs", None, &[]).await.status, 401);
        }
        scrape(&api, None).await;
        // Heartbeats and the bus's own went out meanwhile (their publishes would be spans too).
        eventually("the API's heartbeat was heard", || async {
            let workers = api.ok("/workers", &token, &[]).await;
            workers["workers"].as_array().unwrap().iter().any(|row| row["name"] == "bus")
        })
        .await;
        api.stop().await;
        let made = spans.load(Ordering::Relaxed);
        assert_eq!(made > 0, expect_spans, "SVC_DEVELOPER_TRACING={tracing_on}: {made} spans");
    }
}
