//! OpenTelemetry traces from a real `svc api` process to a real OTLP/gRPC receiver
//! (`opentelemetry-proto` over tonic): a server span per request named by its route template,
//! under the process's `service.name`, flushed at shutdown; a line carried in a trace (as the
//! collector writes it) stored with that trace by an ingester span continuing it; and a collector
//! that cannot be reached stops nothing.

use std::time::{Duration, Instant};

use rustix::process::Signal;
use std::io::Write;
use svc_test_support::otlp::OtlpReceiver;

use svc_test_support::processes::swarm::{
    agent_command, enroll, forwarder_command, listening, master_command, master_store,
};
use svc_test_support::processes::{
    Nats, Proc, admin_token, api_call, api_command, eventually, free_port, start_api, workers_api,
};

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

#[tokio::test(flavor = "multi_thread")]
async fn a_request_traces_its_store_verbs_and_its_bus_message_and_a_message_received_continues_its_trace() {
    use futures::StreamExt as _;
    let receiver = OtlpReceiver::start().await;
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), Some(&nats));
    command.env("SVC_DEVELOPER_TRACING", "true").env("SVC_OTEL_ENDPOINT", receiver.endpoint());
    let mut api = start_api(command, port).await;
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let mut control = bus.subscribe("system.probe.control").await.unwrap();

    // A worker's heartbeat published in a trace of its own: the API's registry receives it.
    let (heartbeat_trace, heartbeat_span) = ("5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8");
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("traceparent", format!("00-{heartbeat_trace}-{heartbeat_span}-01").as_str());
    let heartbeat = svc::bus::Event::new("system.probe.health", "heartbeat", serde_json::json!({"worker": "probe"}));
    bus.publish_with_headers("system.probe.health", headers, serde_json::to_vec(&heartbeat).unwrap().into())
        .await
        .unwrap();
    bus.flush().await.unwrap();
    // Once heard, the worker is known and can be asked to stop: a request that publishes.
    eventually("the stop intent is published", || async {
        workers_api(reqwest::Method::POST, port, "/workers/probe/stop").await.0 == 202
    })
    .await;
    let intent = tokio::time::timeout(Duration::from_secs(10), control.next()).await.unwrap().unwrap();
    let carried = intent.headers.as_ref().and_then(|h| h.get("traceparent")).expect("a traceparent header");
    let carried = svc::logline::read_traceparent(carried.as_str()).expect("a well-formed traceparent");
    let (request_trace, publish_span) = (carried.trace_id.to_string(), carried.span_id.to_string());

    api.signal(Signal::TERM);
    assert!(api.wait().success(), "{}", api.output());
    eventually("the receiver has the request's publish span", || async {
        receiver.spans().iter().any(|s| s.span_id == publish_span)
    })
    .await;
    let spans = receiver.spans();
    let in_request: Vec<_> = spans.iter().filter(|s| s.trace_id == request_trace).collect();
    let request = in_request.iter().find(|s| s.name == "POST /api/v1/workers/{name}/stop").expect("the server span");
    assert_eq!(request.parent_span_id, "", "the request starts the trace");
    let publish = in_request.iter().find(|s| s.span_id == publish_span).unwrap();
    assert_eq!((publish.name.as_str(), publish.kind), ("publish system.probe.control", 4));
    let verbs: Vec<_> = in_request.iter().filter(|s| s.name.starts_with("store.")).collect();
    assert!(!verbs.is_empty(), "the request's store verbs are in its trace: {in_request:?}");
    for verb in &verbs {
        assert_eq!(verb.kind, 3, "a client span: {verb:?}");
        assert_eq!(verb.attribute("db.system.name"), Some("sqlite"));
        assert_eq!(verb.name, format!("store.{}", verb.attribute("db.operation.name").unwrap()));
    }
    let received = spans
        .iter()
        .find(|s| s.name == "receive system.probe.health" && s.trace_id == heartbeat_trace)
        .expect("the heartbeat's receive span continues its publisher's trace");
    assert_eq!((received.parent_span_id.as_str(), received.kind), (heartbeat_span, 5), "a consumer span");
    assert_eq!(received.service, "svc-api");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_master_carries_a_requests_trace_to_the_agent_it_calls() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, api_port, swarm_port) = master_command(dir.path(), "127.0.0.1");
    command.env("SVC_DEVELOPER_TRACING", "true").env("SVC_OTEL_ENDPOINT", receiver.endpoint());
    let mut api = start_api(command, api_port).await;
    let ca = svc::swarm::pki::Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));
    let leaf = ca.issue("alpha", &["127.0.0.1".to_string()]).unwrap();
    let agent_port = free_port();
    let host = enroll(&db, "alpha", "127.0.0.1", agent_port, &leaf.fingerprint).await;
    let mut command = agent_command(&dir.path().join("alpha"), &ca, &leaf, "127.0.0.1", agent_port);
    command
        .env("SVC_MASTER_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_HOST_UUID", host.uuid.to_string())
        .env("SVC_DEVELOPER_TRACING", "true")
        .env("SVC_OTEL_ENDPOINT", receiver.endpoint());
    let agent = Proc::spawn(command);
    listening("127.0.0.1", agent_port).await;

    // The teardown is answered at once; the call to the agent goes on in the background.
    let token = admin_token(api_port).await;
    let path = format!("/swarm/hosts/{}/teardown", host.uuid);
    let (status, body) = api_call(api_port, &token, reqwest::Method::POST, &path, Some(serde_json::json!({}))).await;
    assert_eq!(status, 202, "{body}");
    let served = || receiver.spans().into_iter().find(|s| s.service == "svc-agent" && s.name == "POST /teardown");
    eventually("the agent's server span reaches the receiver", || async { served().is_some() }).await;
    let served = served().unwrap();
    // The master's spans of that trace: exported at the latest when it stops.
    api.signal(Signal::TERM);
    assert!(api.wait().success(), "{}", api.output());
    drop(agent);
    eventually("the master's call span reaches the receiver", || async {
        receiver.spans().iter().any(|s| s.span_id == served.parent_span_id)
    })
    .await;
    let spans = receiver.spans();
    assert_eq!(served.kind, 2, "a server span");
    let call = spans.iter().find(|s| s.span_id == served.parent_span_id).expect("its parent is the master's call");
    assert_eq!((call.service.as_str(), call.name.as_str(), call.kind), ("svc-api", "POST /teardown", 3));
    assert_eq!(call.trace_id, served.trace_id);
    assert!(
        spans.iter().any(|s| s.trace_id == served.trace_id && s.name == "POST /api/v1/swarm/hosts/{uuid}/teardown"),
        "the agent's span is in the trace of the request that asked for the teardown"
    );
    db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_host_carries_its_traces_to_the_master_in_heartbeats_and_shipped_lines() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, api_port, swarm_port) = master_command(dir.path(), "127.0.0.1");
    let syslog_port = free_port();
    command
        .env("SVC_SWARM_SYSLOG_PORT", syslog_port.to_string())
        .env("SVC_DEVELOPER_TRACING", "true")
        .env("SVC_OTEL_ENDPOINT", receiver.endpoint());
    let api = start_api(command, api_port).await;
    let token = admin_token(api_port).await;
    let ca = svc::swarm::pki::Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));
    let leaf = ca.issue("alpha", &["127.0.0.1".to_string()]).unwrap();
    let agent_port = free_port();
    let host = enroll(&db, "alpha", "127.0.0.1", agent_port, &leaf.fingerprint).await;
    let traced = |mut command: std::process::Command| {
        command.env("SVC_DEVELOPER_TRACING", "true").env("SVC_OTEL_ENDPOINT", receiver.endpoint());
        command
    };
    let mut command = traced(agent_command(&dir.path().join("alpha"), &ca, &leaf, "127.0.0.1", agent_port));
    command
        .env("SVC_MASTER_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_HOST_UUID", host.uuid.to_string())
        .env("SVC_AGENT_HEARTBEAT_S", "0.5");
    let _agent = Proc::spawn(command);

    // Heartbeats: the master's server span of each continues the agent's client span.
    let heartbeat =
        || receiver.spans().into_iter().find(|s| s.service == "svc-api" && s.name == "POST /swarm/heartbeat");
    eventually("a heartbeat's server span reaches the receiver", || async { heartbeat().is_some() }).await;
    let served = heartbeat().unwrap();
    eventually("the agent's call span reaches the receiver", || async {
        receiver.spans().iter().any(|s| s.span_id == served.parent_span_id)
    })
    .await;
    let call = receiver.spans().into_iter().find(|s| s.span_id == served.parent_span_id).unwrap();
    assert_eq!((call.service.as_str(), call.name.as_str(), call.kind), ("svc-agent", "POST /swarm/heartbeat", 3));
    assert_eq!((call.trace_id.as_str(), served.kind), (served.trace_id.as_str(), 2));

    // A line the host's collector wrote in a trace, shipped by the host's forwarder: stored on the
    // master with that trace, by an ingester span continuing the collector's.
    let (trace_id, collector_span) = ("6bf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9");
    let line = r#"<134>1 2026-11-26T06:00:00Z decky-31 ssh - login_attempt [relay@55555 src_ip="198.51.100.31" username="root" password="toor"] login"#;
    let carried = svc::logline::with_trace_context(line, &format!("00-{trace_id}-{collector_span}-01")).unwrap();
    let log = dir.path().join("alpha/ingest.log");
    std::fs::write(&log, format!("{carried}\n")).unwrap();
    let _forwarder =
        Proc::spawn(traced(forwarder_command(&dir.path().join("alpha"), &ca, &leaf, "127.0.0.1", syslog_port, &log)));
    eventually("the shipped line is stored", || async { stored_row(api_port, &token, "decky-31").await.is_some() })
        .await;
    let row = stored_row(api_port, &token, "decky-31").await.unwrap();
    assert_eq!((&row["trace_id"], &row["raw_line"]), (&serde_json::json!(trace_id), &serde_json::json!(line)), "{row}");
    eventually("the master's ingester span of that trace reaches the receiver", || async {
        receiver.spans().iter().any(|s| s.name == "ingester.process_record" && s.trace_id == trace_id)
    })
    .await;
    let spans = receiver.spans();
    let stored = spans.iter().find(|s| s.name == "ingester.process_record" && s.trace_id == trace_id).unwrap();
    assert_eq!((stored.parent_span_id.as_str(), stored.service.as_str()), (collector_span, "svc-api"));
    assert_eq!(row["span_id"], stored.span_id.as_str(), "{}", api.output());
    db.close().await;
}
