//! OpenTelemetry traces from a real `svc api` process to a real OTLP/gRPC receiver
//! (`opentelemetry-proto` over tonic): a server span per request named by its route template,
//! under the process's `service.name`, flushed at shutdown; a line carried in a trace (as the
//! collector writes it) stored with that trace by an ingester span continuing it; and a collector
//! that cannot be reached stops nothing.

use std::time::{Duration, Instant};

use rustix::process::Signal;
use std::io::Write;
use svc_test_support::otlp::OtlpReceiver;

use svc_test_support::processes::{admin_token, api_command, eventually, free_port, start_api};

/// The stored log row of `decky`, if there is one yet.
async fn stored_row(port: u16, token: &str, decky: &str) -> Option<serde_json::Value> {
    let logs: serde_json::Value = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/logs"))
        .bearer_auth(token)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    logs["data"].as_array()?.iter().find(|row| row["decky"] == decky).cloned()
}

async fn get(port: u16, path: &str) -> u16 {
    reqwest::get(format!("http://127.0.0.1:{port}/api/v1{path}")).await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_request_is_a_server_span_named_by_its_route_and_shutdown_flushes_them() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command.env("SVC_DEVELOPER_TRACING", "true").env("SVC_OTEL_ENDPOINT", receiver.endpoint());
    let mut api = start_api(command, port).await;
    let attacker = uuid::Uuid::new_v4();
    assert_eq!(get(port, &format!("/attackers/{attacker}")).await, 401);
    get(port, "/health").await;
    // The batch waits seconds before it exports: what arrives now, the shutdown sent.
    api.signal(Signal::TERM);
    assert!(api.wait().success(), "{}", api.output());
    eventually("the receiver has the request spans", || async {
        receiver.spans().iter().any(|s| s.name == "GET /api/v1/attackers/{uuid}")
    })
    .await;
    let spans = receiver.spans();
    let span = spans.iter().find(|s| s.name == "GET /api/v1/attackers/{uuid}").unwrap();
    assert_eq!(span.service, "svc-api");
    assert_eq!(span.kind, 2, "a server span");
    assert_eq!(span.attribute("http.route"), Some("/api/v1/attackers/{uuid}"));
    assert_eq!(span.attribute("http.response.status_code"), Some("401"));
    assert_eq!((span.trace_id.len(), span.span_id.len()), (32, 16));
    assert!(spans.iter().any(|s| s.name.starts_with("GET /api/v1/health")), "{spans:?}");
    assert!(!spans.iter().any(|s| s.name.contains(&attacker.to_string())), "a raw path never names a span");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_collector_stops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    let nobody = format!("http://127.0.0.1:{}", free_port());
    command.env("SVC_DEVELOPER_TRACING", "true").env("SVC_OTEL_ENDPOINT", nobody);
    let mut api = start_api(command, port).await;
    for _ in 0..5 {
        assert_eq!(get(port, "/attackers").await, 401, "the API answers");
    }
    let asked = Instant::now();
    api.signal(Signal::TERM);
    assert!(api.wait().success(), "{}", api.output());
    assert!(asked.elapsed() < Duration::from_secs(15), "shutdown waited {:?} on the collector", asked.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_carried_in_a_trace_is_stored_with_it_by_an_ingester_span_of_the_same_trace() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command.env("SVC_DEVELOPER_TRACING", "true").env("SVC_OTEL_ENDPOINT", receiver.endpoint());
    let _api = start_api(command, port).await;
    let token = admin_token(port).await;

    // What the collector writes for a decky's line when traces are on.
    let (trace_id, collector_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let line = r#"<134>1 2026-11-26T06:00:00Z decky-07 ssh - login_attempt [relay@55555 src_ip="198.51.100.23" username="root" password="toor"] login"#;
    let carried = svc::logline::with_trace_context(line, &format!("00-{trace_id}-{collector_span}-01")).unwrap();
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.path().join("data/ingest.log")).unwrap();
    writeln!(file, "{carried}").unwrap();

    eventually("the line is stored", || async { stored_row(port, &token, "decky-07").await.is_some() }).await;
    let row = stored_row(port, &token, "decky-07").await.unwrap();
    assert_eq!(row["trace_id"], trace_id, "{row}");
    assert_eq!(row["raw_line"], line, "the stored line is the decky's, without the trace element");
    assert!(!row["fields"].as_str().unwrap_or_default().contains("traceparent"), "{row}");
    eventually("the ingester's span of that trace reaches the receiver", || async {
        receiver.spans().iter().any(|s| s.name == "ingester.process_record" && s.trace_id == trace_id)
    })
    .await;
    let spans = receiver.spans();
    let ingester = spans.iter().find(|s| s.name == "ingester.process_record" && s.trace_id == trace_id).unwrap();
    assert_eq!(ingester.parent_span_id, collector_span, "it continues the collector's span");
    assert_eq!(ingester.service, "svc-api", "the API embeds the ingester");
    assert_eq!(ingester.attribute("decky"), Some("decky-07"));
    assert_eq!(row["span_id"], ingester.span_id.as_str(), "the row names the span that stored it");
}
