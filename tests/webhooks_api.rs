//! The webhook routes through the real server on every backend under test: DECNET's shapes and
//! texts, the secret shown once and never again (nor logged), the failure state a re-enable
//! clears, the destination rules at create and patch (each refused destination answered 422 and
//! never connected to), the create limit, and the test ping against a receiver this test runs on
//! 127.0.0.1 (signature, body, headers; a redirect is not followed).

use svc_test_support::in_process as common;

use std::net::IpAddr;

use chrono::Utc;
use common::receiver::{Receiver, Tripwire};
use common::{LogCapture, RoleTokens, TestApi, TestDb, user_token};
use hmac::{Hmac, Mac};
use reqwest::header::RETRY_AFTER;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;
use svc::db::{DeliveryFailure, NewDelivery, Role};
use uuid::Uuid;

struct Reply {
    status: StatusCode,
    retry_after: Option<String>,
    body: Value,
}

async fn call(
    client: &reqwest::Client,
    api: &TestApi,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Reply {
    let mut request = client.request(method, api.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry_after = response.headers().get(RETRY_AFTER).map(|v| v.to_str().unwrap().to_string());
    let text = response.text().await.unwrap();
    Reply { status, retry_after, body: serde_json::from_str(&text).unwrap_or(Value::String(text)) }
}

async fn admin(api: &TestApi) -> String {
    user_token(&api.state, "root", Role::Admin).await
}

async fn create(api: &TestApi, token: &str, body: Value) -> Reply {
    call(&api.client, api, Method::POST, "/webhooks/", token, Some(body)).await
}

fn hex_hmac(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn webhooks_are_managed_with_decnets_shapes_and_the_secret_is_shown_once() {
    let (logs, _guard) = LogCapture::start();
    for backend in TestDb::all() {
        let (api, RoleTokens { admin: token, viewer }) = TestApi::start_with_users(backend.api_config(&[])).await;
        let at = |path: &str| format!("/webhooks/{path}");

        let created = create(
            &api,
            &token,
            json!({"name": "SIEM", "url": "https://8.8.8.8/hook", "simple_events": ["AttackerDetail"],
                   "topic_patterns": ["credential.captured", "attacker.>"]}),
        )
        .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}: {}", backend.name, created.body);
        let siem = created.body.clone();
        let generated = siem["secret"].as_str().unwrap().to_string();
        assert_eq!(generated.len(), 64);
        assert_eq!(siem["topic_patterns"], json!(["attacker.>", "credential.captured"]));
        assert_eq!((siem["enabled"].clone(), siem["consecutive_failures"].clone()), (json!(true), json!(0)));
        assert_eq!(siem["warnings"], json!([]));
        for field in ["last_success_at", "last_failure_at", "last_error", "auto_disabled_at"] {
            assert_eq!(siem[field], Value::Null, "{field}");
        }
        let uuid = siem["uuid"].as_str().unwrap().to_string();

        let chat_secret = "a chat secret of 32 characters!!";
        let chat = create(
            &api,
            &token,
            json!({"name": "chat", "url": "http://8.8.4.4:8080/in", "secret": chat_secret,
                   "simple_events": ["DeckyStatus", "SystemStatus"], "enabled": false}),
        )
        .await;
        assert_eq!(chat.status, StatusCode::CREATED, "{}", chat.body);
        assert_eq!(chat.body["secret"], chat_secret);
        assert_eq!(chat.body["topic_patterns"], json!(["decky.*.state", "decky.*.traffic", "system.>"]));
        assert_eq!(chat.body["enabled"], false);
        assert!(chat.body["warnings"][0].as_str().unwrap().starts_with("insecure_url: URL uses http://."));

        let cases = [
            (
                json!({"name": "siem", "url": "https://8.8.8.8/", "topic_patterns": ["a.b"]}),
                StatusCode::CONFLICT,
                json!("Webhook name already exists"),
            ),
            (
                json!({"name": "none", "url": "https://8.8.8.8/"}),
                StatusCode::BAD_REQUEST,
                json!("Provide at least one simple_events entry or topic_patterns pattern."),
            ),
            (
                json!({"name": "short", "url": "https://8.8.8.8/", "secret": "too short", "topic_patterns": ["a"]}),
                StatusCode::BAD_REQUEST,
                json!("Bad Request: Schema structural violation (wrong type, extra fields, or invalid length)."),
            ),
            (
                json!({"url": "https://8.8.8.8/", "topic_patterns": ["a"]}),
                StatusCode::BAD_REQUEST,
                json!("Bad Request: Schema structural violation (wrong type, extra fields, or invalid length)."),
            ),
            (
                json!({"name": "bad", "url": "https://8.8.8.8/", "topic_patterns": ["a..b"]}),
                StatusCode::UNPROCESSABLE_ENTITY,
                json!("Invalid request parameters"),
            ),
            (
                json!({"name": "bad", "url": "https://8.8.8.8/", "topic_patterns": ["a.>.b"]}),
                StatusCode::UNPROCESSABLE_ENTITY,
                json!("Invalid request parameters"),
            ),
            (
                json!({"name": "bad", "url": "https://8.8.8.8/", "simple_events": ["Everything"]}),
                StatusCode::UNPROCESSABLE_ENTITY,
                json!("Invalid request parameters"),
            ),
            (
                json!({"name": "x".repeat(65), "url": "https://8.8.8.8/", "topic_patterns": ["a"]}),
                StatusCode::UNPROCESSABLE_ENTITY,
                json!("Invalid request parameters"),
            ),
        ];
        for (body, status, detail) in cases {
            let reply = create(&api, &token, body.clone()).await;
            assert_eq!((reply.status, &reply.body["detail"]), (status, &detail), "{body}");
        }

        let listed = call(&api.client, &api, Method::GET, "/webhooks/", &token, None).await;
        assert_eq!(listed.status, StatusCode::OK);
        let names: Vec<&str> = listed.body.as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["SIEM", "chat"]);
        let no_slash = call(&api.client, &api, Method::GET, "/webhooks", &token, None).await;
        assert_eq!(no_slash.body, listed.body);
        let one = call(&api.client, &api, Method::GET, &at(&uuid), &token, None).await;
        assert_eq!(one.body["name"], "SIEM");
        for shown in listed.body.as_array().unwrap().iter().chain([&one.body]) {
            assert!(shown.get("secret").is_none(), "a secret in {shown}");
        }
        let missing = call(&api.client, &api, Method::GET, &at(&Uuid::new_v4().to_string()), &token, None).await;
        assert_eq!((missing.status, &missing.body["detail"]), (StatusCode::NOT_FOUND, &json!("Webhook not found")));
        let not_uuid = call(&api.client, &api, Method::GET, &at("nope"), &token, None).await;
        assert_eq!(not_uuid.status, StatusCode::UNPROCESSABLE_ENTITY);
        let forbidden = call(&api.client, &api, Method::GET, "/webhooks/", &viewer, None).await;
        assert_eq!(forbidden.status, StatusCode::FORBIDDEN);

        // Delivery failed until it turned the webhook off; re-enabling clears all of it.
        let webhook = Uuid::parse_str(&uuid).unwrap();
        let delivery = NewDelivery {
            webhook_uuid: webhook,
            event_id: Uuid::new_v4(),
            topic: "attacker.observed".into(),
            body: "{}".into(),
        };
        api.state.db.enqueue_deliveries(&[delivery], Utc::now()).await.unwrap();
        let due = api.state.db.due_deliveries(Utc::now(), 10).await.unwrap();
        let failure = DeliveryFailure { error: "http 503".into(), retry_at: Some(Utc::now()), failure_limit: 1 };
        let outcome = api.state.db.delivery_failed(&due[0], &failure, Utc::now()).await.unwrap();
        assert!(outcome.disabled);
        let tripped = call(&api.client, &api, Method::GET, &at(&uuid), &token, None).await.body;
        assert_eq!((tripped["enabled"].clone(), tripped["consecutive_failures"].clone()), (json!(false), json!(1)));
        assert_eq!(tripped["last_error"], "auto-disabled after 1 consecutive failures: http 503");
        assert!(tripped["auto_disabled_at"].is_string() && tripped["last_failure_at"].is_string());
        let enabled = call(&api.client, &api, Method::PATCH, &at(&uuid), &token, Some(json!({"enabled": true}))).await;
        assert_eq!(enabled.status, StatusCode::OK, "{}", enabled.body);
        assert_eq!(
            (enabled.body["enabled"].clone(), enabled.body["consecutive_failures"].clone()),
            (json!(true), json!(0))
        );
        assert_eq!(
            (enabled.body["auto_disabled_at"].clone(), enabled.body["last_error"].clone()),
            (Value::Null, Value::Null)
        );
        assert_eq!(api.state.db.pending_deliveries().await.unwrap(), 1, "its waiting event is kept for it");

        let one_path = at(&uuid);
        let patch = |body: Value| call(&api.client, &api, Method::PATCH, &one_path, &token, Some(body));
        let cleared = patch(json!({"topic_patterns": [], "simple_events": []})).await;
        assert_eq!(
            (cleared.status, &cleared.body["detail"]),
            (StatusCode::BAD_REQUEST, &json!("Cannot clear all patterns; disable the webhook instead."))
        );
        let clash = patch(json!({"name": "CHAT"})).await;
        assert_eq!(
            (clash.status, &clash.body["detail"]),
            (StatusCode::CONFLICT, &json!("Webhook name already exists"))
        );
        let unchanged = patch(json!({})).await;
        assert_eq!(unchanged.body["updated_at"], enabled.body["updated_at"]);
        let rotated = "a rotated secret, 16 or more";
        let renamed =
            patch(json!({"name": "SIEM-2", "secret": rotated, "topic_patterns": ["decky.*.lifecycle"]})).await;
        assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
        assert_eq!(
            (renamed.body["name"].clone(), renamed.body["topic_patterns"].clone()),
            (json!("SIEM-2"), json!(["decky.*.lifecycle"]))
        );
        assert!(renamed.body.get("secret").is_none());
        assert_eq!(api.state.db.webhook(webhook).await.unwrap().secret.expose(), rotated);

        let deleted = call(&api.client, &api, Method::DELETE, &at(&uuid), &token, None).await;
        assert_eq!((deleted.status, &deleted.body), (StatusCode::OK, &json!({"message": "Webhook deleted"})));
        assert_eq!(api.state.db.pending_deliveries().await.unwrap(), 0, "its events go with it");
        let again = call(&api.client, &api, Method::DELETE, &at(&uuid), &token, None).await;
        assert_eq!(again.status, StatusCode::NOT_FOUND);

        let text = logs.text();
        for secret in [generated.as_str(), chat_secret, rotated] {
            assert!(!text.contains(secret), "{}: a secret reached the log", backend.name);
        }
        api.stop().await;
    }
}

/// Two `/etc/hosts` lines, one name: a public and a private address. Removed on drop.
struct MixedName(String);

impl MixedName {
    fn add() -> MixedName {
        let name = format!("mixed-{}.svc-test.invalid", Uuid::new_v4().simple());
        let mut hosts = std::fs::read_to_string("/etc/hosts").unwrap();
        if !hosts.ends_with('\n') {
            hosts.push('\n');
        }
        hosts.push_str(&format!("93.184.216.34 {name}\n10.0.0.1 {name}\n"));
        // Written in place: /etc/hosts may be a mount point that cannot be replaced.
        std::fs::write("/etc/hosts", hosts).expect("the tests run as root and may add /etc/hosts entries");
        MixedName(name)
    }
}

impl Drop for MixedName {
    fn drop(&mut self) {
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
        let kept: String = hosts.lines().filter(|l| !l.contains(&self.0)).map(|l| format!("{l}\n")).collect();
        std::fs::write("/etc/hosts", kept).unwrap();
    }
}

#[tokio::test]
async fn destinations_the_rules_refuse_are_422_at_create_and_patch_and_never_reached() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = admin(&api).await;
    let tripwire = Tripwire::start().await;
    let mixed = MixedName::add();
    let port = tripwire.port;
    let refused = [
        format!("http://10.0.0.1:{port}/"),
        format!("http://127.0.0.1:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://169.254.169.254:{port}/latest/meta-data/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::ffff:7f00:1]:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        format!("http://100.64.0.1:{port}/"),
        format!("http://[fd00::1]:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://{}:{port}/", mixed.0),
        format!("ftp://8.8.8.8:{port}/"),
        format!("http://user:pass@8.8.8.8:{port}/"),
        format!("https://8.8.8.8/{}", "a".repeat(2048)),
    ];
    for (i, url) in refused.iter().enumerate() {
        let reply =
            create(&api, &token, json!({"name": format!("w{i}"), "url": url, "topic_patterns": ["attacker.>"]})).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {}", reply.body);
    }
    let forbidden = create(&api, &token, json!({"name": "x", "url": refused[1], "topic_patterns": ["a"]})).await;
    assert!(forbidden.body["detail"].as_str().unwrap().starts_with("Webhook destination is not allowed"));
    assert!(!forbidden.body.to_string().contains("127.0.0.1"), "the answer names no address");

    let kept = create(&api, &token, json!({"name": "kept", "url": "https://8.8.8.8/", "topic_patterns": ["a"]})).await;
    let path = format!("/webhooks/{}", kept.body["uuid"].as_str().unwrap());
    for url in &refused[..12] {
        let reply = call(&api.client, &api, Method::PATCH, &path, &token, Some(json!({"url": url}))).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "patch to {url}");
    }
    let listed = call(&api.client, &api, Method::GET, "/webhooks/", &token, None).await.body;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["url"], "https://8.8.8.8/");
    assert_eq!(tripwire.connections(), 0, "a refused destination was connected to");
    api.stop().await;
}

#[tokio::test]
async fn webhook_create_is_limited_to_twenty_a_minute_per_address() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = admin(&api).await;
    for i in 0..20 {
        let reply =
            create(&api, &token, json!({"name": format!("w{i}"), "url": "https://8.8.8.8/", "topic_patterns": ["a"]}))
                .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{i}");
    }
    let limited =
        create(&api, &token, json!({"name": "w20", "url": "https://8.8.8.8/", "topic_patterns": ["a"]})).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.body["error"], "Rate limit exceeded: 20 per 1 minute");
    let retry_after: u64 = limited.retry_after.unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    // Another client address has its own window.
    let other = reqwest::Client::builder().local_address("127.0.0.2".parse::<IpAddr>().unwrap()).build().unwrap();
    let elsewhere = call(
        &other,
        &api,
        Method::POST,
        "/webhooks/",
        &token,
        Some(json!({"name": "w20", "url": "https://8.8.8.8/", "topic_patterns": ["a"]})),
    )
    .await;
    assert_eq!(elsewhere.status, StatusCode::CREATED);
    api.stop().await;
}

#[tokio::test]
async fn the_test_route_sends_one_signed_ping_and_follows_no_redirect() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[("SVC_WEBHOOK_ALLOW_PRIVATE", "true")])).await;
    assert_eq!(logs.lines_containing("SVC_WEBHOOK_ALLOW_PRIVATE is on").len(), 1, "a warning at start");
    let token = admin(&api).await;
    let receiver = Receiver::start().await;
    let secret = "the receiver's shared secret";
    let created = create(
        &api,
        &token,
        json!({"name": "local", "url": receiver.url("/hook?tenant=7"), "secret": secret, "topic_patterns": ["attacker.>"]}),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let test = format!("/webhooks/{}/test", created.body["uuid"].as_str().unwrap());

    let reply = call(&api.client, &api, Method::POST, &test, &token, None).await;
    assert_eq!(reply.body, json!({"delivered": true, "status_code": 200, "error": null}));
    let hits = receiver.hits();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(hit.path, "/hook?tenant=7");
    assert_eq!(hit.header("content-type"), "application/json");
    assert_eq!(hit.header("x-decnet-signature"), format!("sha256={}", hex_hmac(secret, &hit.body)));
    let body = hit.json();
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "payload", "topic", "ts", "type", "v"]);
    assert_eq!(
        (body["v"].clone(), body["topic"].clone(), body["type"].clone()),
        (json!(1), json!("test.ping"), json!("test"))
    );
    assert_eq!(body["payload"]["triggered_by"], "root");
    assert_eq!(hit.header("x-decnet-event-id"), body["id"].as_str().unwrap());
    assert_eq!(hit.header("x-decnet-event-topic"), "test.ping");
    let sent_at: i64 = hit.header("x-decnet-timestamp").parse().unwrap();
    assert!((Utc::now().timestamp() - sent_at).abs() < 60);
    assert!(svc::time::parse_utc(body["ts"].as_str().unwrap()).is_ok());

    // A redirect is an answer, not an instruction: the second address is never reached.
    let tripwire = Tripwire::start().await;
    receiver.redirect(&format!("http://127.0.0.1:{}/", tripwire.port));
    let redirected = call(&api.client, &api, Method::POST, &test, &token, None).await;
    assert_eq!(redirected.body, json!({"delivered": false, "status_code": 302, "error": "non-retryable 302"}));
    receiver.answer(&[503]);
    let failing = call(&api.client, &api, Method::POST, &test, &token, None).await;
    assert_eq!(failing.body, json!({"delivered": false, "status_code": 503, "error": "http 503"}));
    assert_eq!(receiver.hits().len(), 3);
    assert_eq!(tripwire.connections(), 0);
    let missing =
        call(&api.client, &api, Method::POST, &format!("/webhooks/{}/test", Uuid::new_v4()), &token, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(!logs.text().contains(secret));
    api.stop().await;
}
