//! The tarpit's routes against a real database (sqlite, and MariaDB when configured), with the
//! container engine out of reach: the path pattern, roles, every body rule, the 404s, a rule whose
//! decky is gone read and removed (with `tarpit_disabled` in the ingest file), and health saying
//! so while a rule's delay is not in force. (Rules on real deckies, `tc` and the watcher:
//! `bin/tests/tarpit.rs`.)

use svc_test_support::in_process as common;

use chrono::Utc;
use common::{RoleTokens, TestApi, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::db::{Enforced, Enforcement, TarpitRule, TarpitSession};
use uuid::Uuid;

struct Api {
    api: TestApi,
    admin: String,
    viewer: String,
    ingest: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn start(db: &TestDb) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let ingest = dir.path().join("ingest.log");
    let vars = [
        ("SVC_DOCKER_HOST", "unix:///nonexistent/engine.sock"),
        ("SVC_DECKY_BINARY", "/bin/true"),
        ("SVC_INGEST_LOG_FILE", ingest.to_str().unwrap()),
    ];
    let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(db.api_config(&vars)).await;
    Api { api, admin, viewer, ingest, _dir: dir }
}

impl Api {
    async fn call(&self, method: Method, decky: &str, token: Option<&str>, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.api.client.request(method, self.api.url(&format!("/deckies/{decky}/tarpit")));
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

    async fn post(&self, decky: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, decky, Some(&self.admin), Some(body)).await
    }
}

#[tokio::test]
async fn names_roles_and_bodies_are_checked() {
    for backend in TestDb::all() {
        let api = start(&backend).await;
        let good = json!({"ports": [22], "delay_ms": 500});
        let long = "a".repeat(65);
        for name in ["Web-01", "web_01", "web%2001", long.as_str()] {
            for method in [Method::GET, Method::POST, Method::DELETE] {
                let (status, body) = api.call(method.clone(), name, Some(&api.admin), Some(good.clone())).await;
                assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{method} {name}: {body} ({})", backend.name);
                assert_eq!(body["detail"], "Invalid request parameters");
            }
        }
        assert_eq!(api.call(Method::POST, "web-01", None, Some(good.clone())).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(api.call(Method::GET, "web-01", None, None).await.0, StatusCode::UNAUTHORIZED);
        let (status, _) = api.call(Method::POST, "web-01", Some(&api.viewer), Some(good.clone())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "setting a rule is an admin's");
        assert_eq!(api.call(Method::DELETE, "web-01", Some(&api.viewer), None).await.0, StatusCode::FORBIDDEN);

        let unprocessable = [
            json!({"ports": [], "delay_ms": 500}),
            json!({"ports": [0], "delay_ms": 500}),
            json!({"ports": [65536], "delay_ms": 500}),
            json!({"ports": [-22], "delay_ms": 500}),
            json!({"ports": [22], "delay_ms": 99}),
            json!({"ports": [22], "delay_ms": 300001}),
            json!({"ports": (1..=257).collect::<Vec<u32>>(), "delay_ms": 500}),
        ];
        for body in unprocessable {
            let (status, reply) = api.post("web-01", body.clone()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {reply}");
        }
        let structural = [
            json!({"ports": ["22"], "delay_ms": 500}),
            json!({"ports": [22.5], "delay_ms": 500}),
            json!({"ports": [22]}),
            json!({"ports": [22], "delay_ms": 500, "veth": "eth0"}),
            json!({"ports": 22, "delay_ms": 500}),
        ];
        for body in structural {
            assert_eq!(api.post("web-01", body.clone()).await.0, StatusCode::BAD_REQUEST, "{body}");
        }
        let response = api
            .api
            .client
            .post(api.api.url("/deckies/web-01/tarpit"))
            .bearer_auth(&api.admin)
            .header("content-type", "text/plain")
            .body(good.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

        // No such decky, and no rule to read or remove. (`22.0` is an integer, as JSON Schema says.)
        let (status, body) = api.post("ghost", json!({"ports": [22.0], "delay_ms": 500.0})).await;
        assert_eq!((status, body["detail"].as_str()), (StatusCode::NOT_FOUND, Some("Decky ghost not found")));
        for method in [Method::GET, Method::DELETE] {
            let (status, body) = api.call(method, "ghost", Some(&api.admin), None).await;
            assert_eq!(status, StatusCode::NOT_FOUND);
            assert_eq!(body["detail"], "No active tarpit rule for this decky");
        }
        api.api.stop().await;
    }
}

#[tokio::test]
async fn a_rule_of_a_gone_decky_reads_and_goes_and_health_tells_the_delay_is_not_in_force() {
    for backend in TestDb::all() {
        let api = start(&backend).await;
        let health = || async {
            let response = api.api.client.get(api.api.url("/health")).send().await.unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        };
        assert!(health().await.1["components"].get("tarpit").is_none(), "no rule, no component");

        let db = &api.api.state.db;
        let rule = TarpitRule {
            id: Uuid::new_v4(),
            decky_name: "gone".into(),
            ports: vec![22, 2222],
            delay_ms: 1500,
            created_at: Utc::now(),
            created_by: Uuid::new_v4().to_string(),
        };
        let throttled = Enforced { enforcement: Enforcement::Throttle, namespace: Some("b/1".into()), at: Utc::now() };
        db.put_tarpit_rule(&rule, &throttled).await.unwrap();
        let caught = TarpitSession {
            decky_name: "gone".into(),
            attacker_ip: "fd7a::9".into(),
            port: 22,
            entered_at: Utc::now(),
        };
        db.open_tarpit_sessions(&[caught]).await.unwrap();

        let (status, body) = api.call(Method::GET, "gone", Some(&api.viewer), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["rule"]["id"], rule.id.to_string());
        assert_eq!(body["rule"]["decky_name"], "gone");
        assert_eq!(body["rule"]["ports"], json!([22, 2222]));
        assert_eq!(body["rule"]["delay_ms"], 1500);
        assert_eq!(body["rule"]["created_by"], rule.created_by);
        assert_eq!(body["active_connections"], json!([{"ip": "fd7a::9", "port": 22}]));
        assert_eq!((body["enforcement"].as_str(), body["delay_in_force"].as_bool()), (Some("throttle"), Some(false)));

        let (status, body) = health().await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["status"], "degraded", "{body}");
        assert_eq!(body["components"]["tarpit"]["status"], "failing");
        assert!(body["components"]["tarpit"]["detail"].as_str().unwrap().contains("delay not in force"));

        // Its decky is gone: nothing is in force, the rule simply goes.
        let (status, body) = api.call(Method::DELETE, "gone", Some(&api.admin), None).await;
        assert_eq!((status, body), (StatusCode::OK, json!({"message": "tarpit removed"})));
        assert_eq!(api.call(Method::GET, "gone", Some(&api.admin), None).await.0, StatusCode::NOT_FOUND);
        let lines = std::fs::read_to_string(&api.ingest).unwrap();
        let line = lines.lines().find(|l| l.contains(" tarpit_disabled ")).expect("tarpit_disabled is written");
        assert!(line.contains(" gone tarpit ") && line.contains("operator=\"root\""), "{line}");
        assert!(health().await.1["components"].get("tarpit").is_none());
        api.api.stop().await;
    }
}
