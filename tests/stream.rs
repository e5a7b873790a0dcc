//! The live log stream through the real server: who may open it, the per-user cap, resuming with
//! `Last-Event-ID` or `?lastEventId=`, live rows over a real `nats-server` and by polling without
//! one, filters, database failure and shutdown. Frames are parsed from the raw body. Last, the
//! bus-fed event streams' shared opening (`http::stream::bus_events`) over a real `nats-server`.

use svc_test_support::in_process as common;

use std::time::{Duration, Instant};

use common::logs::{LogWriter, at, log};
use common::sse::{EventStream, Frame};
use common::{ADMIN_PASSWORD, TestApi, TestDb, user_token};
use reqwest::StatusCode;
use serde_json::{Value, json};
use svc::bus::logs::BatchCommitted;
use svc::db::{NewLog, Role};
use svc_test_support::processes::Nats;

/// Long enough for a loaded machine, short enough to fail a broken test quickly.
const PATIENCE: Duration = Duration::from_secs(10);

/// The `type` of a frame's data, as the log stream sends it.
trait Kind {
    fn kind(&self) -> String;
}

impl Kind for Frame {
    fn kind(&self) -> String {
        self.json()["type"].as_str().unwrap().to_string()
    }
}

/// The log stream's frames over an [`EventStream`].
trait LogFrames {
    async fn next_logs(&mut self, within: Duration) -> Frame;
    async fn expect_summary(&mut self) -> (Value, Value);
    async fn rows(&mut self, count: usize) -> Vec<Value>;
}

impl LogFrames for EventStream {
    /// The next `logs` frame, skipping statistics.
    async fn next_logs(&mut self, within: Duration) -> Frame {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self.next_event(left).await.expect("the stream is still open");
            if frame.kind() == "logs" {
                return frame;
            }
        }
    }

    /// The `stats` and `histogram` frames every stream starts with.
    async fn expect_summary(&mut self) -> (Value, Value) {
        let stats = self.next_event(PATIENCE).await.unwrap();
        let histogram = self.next_event(PATIENCE).await.unwrap();
        assert_eq!((stats.event.as_deref(), stats.kind().as_str()), (Some("message"), "stats"), "{stats:?}");
        assert_eq!((histogram.event.as_deref(), histogram.kind().as_str()), (Some("message"), "histogram"));
        (stats.json()["data"].clone(), histogram.json()["data"].clone())
    }

    /// Rows from `logs` frames until `count` arrived, checking each frame's `id:` and size.
    async fn rows(&mut self, count: usize) -> Vec<Value> {
        let mut rows = Vec::new();
        while rows.len() < count {
            let frame = self.next_logs(PATIENCE).await;
            let data = frame.json()["data"].as_array().unwrap().clone();
            assert!(!data.is_empty() && data.len() <= 50, "a frame holds 1 to 50 rows, not {}", data.len());
            let last = data.last().unwrap()["id"].as_i64().unwrap();
            assert_eq!(frame.id, Some(last.to_string()), "a logs frame's id is its last row's");
            assert_eq!(frame.event.as_deref(), Some("message"));
            rows.extend(data);
        }
        assert_eq!(rows.len(), count, "no more rows than expected");
        rows
    }
}

fn ids(rows: &[Value]) -> Vec<i64> {
    rows.iter().map(|r| r["id"].as_i64().unwrap()).collect()
}

/// `GET /stream` with the given credentials and query.
async fn request(
    api: &TestApi,
    bearer: Option<&str>,
    last_event_id: Option<&str>,
    query: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = api.client.get(api.url("/stream")).query(query);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    request.send().await.unwrap()
}

/// An open stream (asserting 200), its summary frames already read.
async fn open(api: &TestApi, token: &str, last_event_id: Option<&str>, query: &[(&str, &str)]) -> EventStream {
    let response = request(api, Some(token), last_event_id, query).await;
    assert_eq!(response.status(), StatusCode::OK, "{query:?}");
    let mut stream = EventStream::new(response);
    stream.expect_summary().await;
    stream
}

async fn refused(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    (status, response.json().await.unwrap())
}

fn row(n: i64, service: &str) -> NewLog {
    log("ssh-01", service, "login_attempt", "10.0.0.1", json!({"n": n.to_string()}), at(n))
}

/// Commits `count` rows in batches of 40; returns their ids, oldest first.
async fn commit_rows(writer: &mut LogWriter, count: i64) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut n = 0;
    while n < count {
        let size = (count - n).min(40);
        let committed = writer.logs((n..n + size).map(|i| row(i, "ssh")).collect()).await;
        ids.extend(committed.last_log_id - size + 1..=committed.last_log_id);
        n += size;
    }
    ids
}

async fn mint_ticket(api: &TestApi, token: &str) -> reqwest::Response {
    api.client.post(api.url("/auth/sse-ticket")).bearer_auth(token).send().await.unwrap()
}

#[tokio::test]
async fn a_ticket_opens_one_stream_a_bearer_header_works_and_a_query_token_never_does() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;

    let ticket: Value = mint_ticket(&api, &token).await.json().await.unwrap();
    let ticket = ticket["ticket"].as_str().unwrap().to_string();
    let response = request(&api, None, None, &[("ticket", &ticket)]).await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["x-accel-buffering"], "no");
    let mut stream = EventStream::new(response);
    let (stats, histogram) = stream.expect_summary().await;
    assert_eq!(stats, json!({"total_logs": 0, "unique_attackers": 0, "active_deckies": 0, "deployed_deckies": 0}));
    assert_eq!(histogram, json!([]));
    drop(stream);

    let credentials = json!({"detail": "Could not validate credentials"});
    let again = refused(request(&api, None, None, &[("ticket", &ticket)]).await).await;
    assert_eq!(again, (StatusCode::UNAUTHORIZED, credentials.clone()), "a ticket is single use");
    let made_up = refused(request(&api, None, None, &[("ticket", "made-up")]).await).await;
    assert_eq!(made_up.0, StatusCode::UNAUTHORIZED);
    let query_token = refused(request(&api, None, None, &[("token", &token)]).await).await;
    assert_eq!(query_token, (StatusCode::UNAUTHORIZED, credentials.clone()), "a token in the URL never authenticates");
    assert_eq!(refused(request(&api, None, None, &[]).await).await.0, StatusCode::UNAUTHORIZED);
    // A header is checked fully, without falling back to a ticket.
    let fresh: Value = mint_ticket(&api, &token).await.json().await.unwrap();
    let bad_header = request(&api, Some("forged"), None, &[("ticket", fresh["ticket"].as_str().unwrap())]).await;
    assert_eq!(bad_header.status(), StatusCode::UNAUTHORIZED);

    open(&api, &token, None, &[]).await;

    let new = svc::db::NewUser {
        username: "fresh".into(),
        password_hash: svc::auth::password::hash(ADMIN_PASSWORD).unwrap(),
        role: Role::Viewer,
        must_change_password: true,
    };
    let fresh = api.state.db.add_user(new, chrono::Utc::now()).await.unwrap();
    let must_change = api.state.sessions.mint(&fresh).unwrap();
    let blocked = json!({"detail": "Password change required before accessing this resource"});
    assert_eq!(
        refused(request(&api, Some(&must_change), None, &[]).await).await,
        (StatusCode::FORBIDDEN, blocked.clone())
    );
    assert_eq!(refused(mint_ticket(&api, &must_change).await).await, (StatusCode::FORBIDDEN, blocked));
    api.stop().await;
}

#[tokio::test]
async fn the_sixth_stream_of_a_user_is_refused_until_one_of_the_five_closes() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let user = api.state.db.user_by_name("watcher").await.unwrap().uuid;
    let mut streams = Vec::new();
    for _ in 0..5 {
        streams.push(open(&api, &token, None, &[]).await);
    }
    let over = refused(request(&api, Some(&token), None, &[]).await).await;
    assert_eq!(over, (StatusCode::TOO_MANY_REQUESTS, json!({"detail": "SSE connection limit (5) reached"})));
    // Through a ticket too: the cap is per user, not per credential.
    let ticket: Value = mint_ticket(&api, &token).await.json().await.unwrap();
    let by_ticket = request(&api, None, None, &[("ticket", ticket["ticket"].as_str().unwrap())]).await;
    assert_eq!(by_ticket.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another user has slots of its own.
    let other = user_token(&api.state, "other", Role::Viewer).await;
    let other_stream = open(&api, &other, None, &[]).await;

    // A client going away frees its slot.
    let started = Instant::now();
    drop(streams.pop());
    let sixth = loop {
        let response = request(&api, Some(&token), None, &[]).await;
        if response.status() == StatusCode::OK {
            break response;
        }
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(started.elapsed() < Duration::from_secs(20), "the slot was not freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("slot freed after {:?}", started.elapsed());
    drop(sixth);
    drop(streams);
    drop(other_stream);
    let started = Instant::now();
    while api.state.sse.open(user) > 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "slots still held: {}", api.state.sse.open(user));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.stop().await;
}

/// Waits until `condition` holds.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < PATIENCE, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes the ingester's notice for a committed batch.
async fn announce(api: &TestApi, last_log_id: i64) {
    let notice = BatchCommitted { component: "ingester".into(), flushed: 1, position: 0, last_log_id };
    svc::bus::logs::publish(&api.state.bus, &notice).await.unwrap();
}

#[tokio::test]
async fn last_event_id_replays_every_missed_row_then_live_rows_arrive_over_the_bus_within_a_second() {
    let nats = Nats::start();
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[("SVC_NATS_URL", &nats.url())])).await;
        assert!(api.state.bus.is_connected());
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        let stored = commit_rows(&mut writer, 130).await;

        // The client saw the first ten rows before it lost the connection.
        let resume = stored[9].to_string();
        let mut stream = open(&api, &token, Some(&resume), &[]).await;
        let replayed = stream.rows(120).await;
        assert_eq!(ids(&replayed), stored[10..], "{}: exactly the missed rows, oldest first", backend.name);
        assert_eq!(replayed[0]["timestamp"], "2026-11-21T14:10:00.000Z");
        assert!(replayed[0]["fields"].is_string());

        let committed = writer.logs(vec![row(500, "ssh")]).await;
        let published = Instant::now();
        announce(&api, committed.last_log_id).await;
        let live = stream.next_logs(PATIENCE).await;
        let latency = published.elapsed();
        assert_eq!(ids(live.json()["data"].as_array().unwrap()), [committed.last_log_id]);
        assert!(latency < Duration::from_millis(1000), "{}: live row took {latency:?}", backend.name);
        println!("{}: live row over the bus after {latency:?}", backend.name);
        drop(stream);
        api.stop().await;
    }
}

#[tokio::test]
async fn while_the_bus_is_down_rows_arrive_by_polling_and_notices_resume_when_it_returns() {
    let mut nats = Nats::start();
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[("SVC_NATS_URL", &nats.url())])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let mut writer = LogWriter::new(&api.state.db).await;
    let mut stream = open(&api, &token, None, &[]).await;

    nats.stop();
    eventually("the API notices the bus is gone", || !api.state.bus.is_connected()).await;
    let committed = writer.logs(vec![row(1, "ssh")]).await;
    let started = Instant::now();
    let live = stream.next_logs(PATIENCE).await;
    assert_eq!(ids(live.json()["data"].as_array().unwrap()), [committed.last_log_id]);
    assert!(started.elapsed() < Duration::from_millis(2500), "polling took {:?}", started.elapsed());

    nats.restart();
    eventually("the API reconnects", || api.state.bus.is_connected()).await;
    // Let the poll after the reconnect pass, so the next row can only come by its notice.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let committed = writer.logs(vec![row(2, "ssh")]).await;
    let published = Instant::now();
    announce(&api, committed.last_log_id).await;
    let live = stream.next_logs(PATIENCE).await;
    assert_eq!(ids(live.json()["data"].as_array().unwrap()), [committed.last_log_id]);
    assert!(published.elapsed() < Duration::from_millis(1000), "the notice took {:?}", published.elapsed());
    api.stop().await;
}

#[tokio::test]
async fn without_a_bus_a_stream_starts_at_the_newest_row_and_live_rows_arrive_by_polling() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        commit_rows(&mut writer, 5).await;

        let response = request(&api, Some(&token), None, &[]).await;
        let mut stream = EventStream::new(response);
        let (stats, _) = stream.expect_summary().await;
        assert_eq!(stats["total_logs"], 5);
        // `?lastEventId=0` is DECNET's default and means the same: from now on.
        let mut zero = open(&api, &token, None, &[("lastEventId", "0")]).await;

        let committed = writer.logs(vec![row(77, "ssh")]).await;
        let started = Instant::now();
        for stream in [&mut stream, &mut zero] {
            let live = stream.next_logs(PATIENCE).await;
            assert_eq!(
                ids(live.json()["data"].as_array().unwrap()),
                [committed.last_log_id],
                "{}: no backlog",
                backend.name
            );
        }
        let latency = started.elapsed();
        assert!(latency < Duration::from_millis(2500), "{}: polling took {latency:?}", backend.name);
        println!("{}: live row by polling after {latency:?}", backend.name);
        api.stop().await;
    }
}

#[tokio::test]
async fn the_dashboards_last_event_id_parameter_resumes_and_the_header_wins() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let mut writer = LogWriter::new(&api.state.db).await;
    let stored = commit_rows(&mut writer, 10).await;

    let mut by_query = open(&api, &token, None, &[("lastEventId", &stored[3].to_string())]).await;
    assert_eq!(ids(&by_query.rows(6).await), stored[4..]);
    let mut both = open(&api, &token, Some(&stored[7].to_string()), &[("lastEventId", &stored[1].to_string())]).await;
    assert_eq!(ids(&both.rows(2).await), stored[8..]);
    // From the start: every row.
    let mut everything = open(&api, &token, Some("0"), &[]).await;
    assert_eq!(ids(&everything.rows(10).await), stored);

    let invalid = (StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": "Invalid request parameters"}));
    for header in ["abc", "-1", "1.5", "", "+5"] {
        assert_eq!(refused(request(&api, Some(&token), Some(header), &[]).await).await, invalid, "header {header}");
    }
    for query in ["abc", "-1"] {
        let reply = refused(request(&api, Some(&token), None, &[("lastEventId", query)]).await).await;
        assert_eq!(reply, invalid, "lastEventId={query}");
    }
    api.stop().await;
}

#[tokio::test]
async fn filters_apply_to_the_stream_and_bad_ones_are_refused_before_it_starts() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        let first = writer.logs((0..60).map(|n| row(n, if n % 3 == 0 { "http" } else { "ssh" })).collect()).await;
        let first_id = first.last_log_id - 59;

        let response = request(&api, Some(&token), Some("0"), &[("search", "service:http")]).await;
        let mut stream = EventStream::new(response);
        let (stats, histogram) = stream.expect_summary().await;
        assert_eq!(stats["total_logs"], 60, "{}: statistics are not filtered", backend.name);
        let counted: u64 = histogram.as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(counted, 20, "the histogram is");
        let http = stream.rows(20).await;
        assert!(http.iter().all(|r| r["service"] == "http"));
        assert_eq!(ids(&http), (0..20).map(|i| first_id + 3 * i).collect::<Vec<_>>());

        // Rows that do not match are skipped; the next one that does arrives.
        writer.logs(vec![row(100, "ssh"), row(101, "ssh")]).await;
        let later = writer.logs(vec![row(102, "http")]).await;
        let live = stream.next_logs(PATIENCE).await;
        assert_eq!(ids(live.json()["data"].as_array().unwrap()), [later.last_log_id], "{}", backend.name);

        let window = [("start_time", "2026-11-21 14:58:00"), ("end_time", "2026-11-21T14:59:00Z")];
        let window = request(&api, Some(&token), Some("0"), &window).await;
        let mut window = EventStream::new(window);
        window.expect_summary().await;
        assert_eq!(ids(&window.rows(2).await), [first.last_log_id - 1, first.last_log_id]);

        let invalid = (StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": "Invalid request parameters"}));
        let long = "a".repeat(513);
        for query in [[("start_time", "yesterday")], [("end_time", "2026-11-21")], [("search", long.as_str())]] {
            assert_eq!(refused(request(&api, Some(&token), None, &query).await).await, invalid, "{query:?}");
        }
        let max = "a".repeat(512);
        open(&api, &token, None, &[("search", &max), ("start_time", "null"), ("end_time", "undefined")]).await;
        api.stop().await;
    }
}

#[tokio::test]
async fn a_database_failure_ends_the_stream_with_an_error_frame() {
    let (capture, _guard) = common::LogCapture::start();
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let mut stream = open(&api, &token, None, &[]).await;
    api.state.db.close().await;
    // Wake the stream as a commit would.
    api.state.log_tail.advance(i64::MAX);
    let error = stream.next_event(PATIENCE).await.expect("an error frame");
    assert_eq!(error.event.as_deref(), Some("error"));
    assert_eq!(error.json(), json!({"type": "error", "message": "Stream interrupted"}));
    assert!(stream.next_within(PATIENCE).await.is_none(), "the stream ends after the error frame");
    assert_eq!(capture.lines_containing("Log stream interrupted").len(), 1, "the cause is logged");
    api.stop().await;
}

#[tokio::test]
async fn shutdown_ends_open_streams_at_once() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(open(&api, &token, None, &[]).await);
    }
    let started = Instant::now();
    tokio::time::timeout(PATIENCE, api.stop()).await.expect("shutdown does not wait for the streams");
    println!("shut down in {:?}", started.elapsed());
    for stream in &mut streams {
        assert!(stream.next_within(PATIENCE).await.is_none(), "the server ended the stream");
    }
}

/// The frames of an event-stream response body until one named `name` arrives (or `PATIENCE` passes).
async fn frames_until(body: axum::body::Body, name: &str) -> Vec<String> {
    use futures::StreamExt;
    let mut body = body.into_data_stream();
    let (mut text, mut frames) = (String::new(), Vec::new());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        while let Some(end) = text.find("\n\n") {
            let frame: String = text.drain(..end + 2).collect();
            let done = frame.lines().any(|line| line == format!("event: {name}"));
            frames.push(frame);
            if done {
                return frames;
            }
        }
        match tokio::time::timeout_at(deadline, body.next()).await {
            Ok(Some(Ok(chunk))) => text.push_str(std::str::from_utf8(&chunk).unwrap()),
            Ok(_) => panic!("the stream ended before an {name:?} frame: {frames:?}"),
            Err(_) => panic!("no {name:?} frame within {PATIENCE:?}: {frames:?}"),
        }
    }
}

/// A bus-fed stream subscribes before it reads its snapshot: an event a worker publishes while the
/// snapshot is being read (here by the reader itself, the moment between the two) reaches the
/// client, though the snapshot, read before the event existed, cannot hold it.
#[tokio::test]
async fn an_event_published_while_a_bus_stream_reads_its_snapshot_reaches_the_client() {
    use axum::response::sse::Event;
    use svc::bus::{self, Bus};
    use svc::http::stream::SseSlots;
    use svc::http::stream::bus_events::BusEvents;

    let nats = Nats::start();
    let api = Bus::connect(Some(&nats.url()), "api").await;
    let worker = Bus::connect(Some(&nats.url()), "worker").await;
    assert!(api.is_connected() && worker.is_connected());
    let slot = std::sync::Arc::new(SseSlots::new(1)).acquire(uuid::Uuid::new_v4()).unwrap();
    let events = BusEvents {
        label: "test".into(),
        subjects: vec![svc::bus::topics::ALL_ATTACKER_OBSERVATIONS.to_string()],
        name: |_subject: &str, event: &bus::Event| Some(event.kind.clone()),
    };
    let published = bus::Event::new("attacker.observation.test", "observation", json!({"n": 1}));
    let opening = async {
        // Confirmed: the server has the event before the snapshot is "read".
        worker.publish_confirmed(&published).await.unwrap();
        Ok(vec![Event::default().event("snapshot").data("{}")])
    };
    let closing = tokio_util::sync::CancellationToken::new();
    let frames = events.open(&api, closing.clone(), slot, opening).await.unwrap();
    let response = svc::http::stream::sse::response(frames);
    let frames = frames_until(response.into_body(), "observation").await;
    assert!(frames[0].contains("event: snapshot"), "the snapshot opens the stream: {frames:?}");
    let live = frames.last().unwrap();
    let data = live.lines().find_map(|line| line.strip_prefix("data: ")).unwrap();
    assert_eq!(serde_json::from_str::<Value>(data).unwrap()["payload"], json!({"n": 1}));
    closing.cancel();
}
