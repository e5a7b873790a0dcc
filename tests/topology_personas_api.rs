//! A topology's email personas through the real server on every backend under test, as DECNET's
//! MazeNET PERSONAS editor reads and replaces them: DECNET's shape and defaults, invalid entries
//! dropped one by one, the refusals (not a list, every entry invalid, a viewer, an unknown
//! topology) leaving the stored list as it was.

use svc_test_support::in_process as common;

use common::{RoleTokens, TestApi, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

struct Api {
    api: TestApi,
    admin: String,
    viewer: String,
}

async fn start(db: &TestDb) -> Api {
    // No engine and no host shield: nothing here is deployed.
    let vars = [("SVC_DOCKER_HOST", "unix:///nonexistent/engine.sock"), ("SVC_DECKY_HOST_ISOLATION", "false")];
    let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(db.api_config(&vars)).await;
    Api { api, admin, viewer }
}

impl Api {
    async fn call_as(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.api.client.request(method, self.api.url(path)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.call_as(&self.admin, method, path, body).await
    }

    async fn created(&self, path: &str, body: Value) -> Value {
        let (status, body) = self.call(Method::POST, path, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{path}: {body}");
        body
    }

    async fn get(&self, path: &str) -> Value {
        self.api.ok(path, &self.admin, &[]).await
    }
}

#[tokio::test]
async fn personas_are_read_and_replaced_keeping_the_valid_entries() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let topology = api.created("/topologies/blank", json!({"name": "mailroom"})).await;
        let id = topology["id"].as_str().unwrap();
        let path = format!("/topologies/{id}/personas");
        let empty = api.get(&path).await;
        assert_eq!(
            empty,
            json!({"topology_id": id, "topology_name": "mailroom", "language_default": "en", "personas": []}),
            "{}",
            db.name
        );

        let ana = json!({"name": "Ana Ruiz", "email": "ana@corp.example", "role": "CFO", "language": "es",
                         "mannerisms": ["signs off with 'Saludos'"]});
        let typo = json!({"name": "Bob", "email": "bob-at-corp", "role": "IT"});
        let (status, replaced) = api.call(Method::PUT, &path, Some(json!({"personas": [ana, typo]}))).await;
        assert_eq!(status, StatusCode::OK, "{}: {replaced}", db.name);
        let kept = replaced["personas"].as_array().unwrap();
        assert_eq!(kept.len(), 1, "{}: the typo is dropped, Ana kept: {replaced}", db.name);
        assert_eq!(
            (&kept[0]["name"], &kept[0]["tone"], &kept[0]["active_hours"], &kept[0]["signature"]),
            (&json!("Ana Ruiz"), &json!("formal"), &json!("09:00-18:00"), &Value::Null),
            "{}: DECNET's defaults, every field present",
            db.name
        );
        assert_eq!(api.get(&path).await, replaced, "{}: stored as answered", db.name);

        // Refusals leave the list as it was.
        let viewer = api.viewer.clone();
        for (token, body, status, detail) in [
            (&api.admin, json!({"personas": "Ana"}), StatusCode::BAD_REQUEST, Some("body.personas must be a list")),
            (&api.admin, json!({}), StatusCode::BAD_REQUEST, Some("body.personas must be a list")),
            (&api.admin, json!({"personas": [{"name": "x"}, 3]}), StatusCode::BAD_REQUEST, None),
            (&viewer, json!({"personas": []}), StatusCode::FORBIDDEN, None),
        ] {
            let (got, answer) = api.call_as(token, Method::PUT, &path, Some(body.clone())).await;
            assert_eq!(got, status, "{}: {body}: {answer}", db.name);
            if let Some(detail) = detail {
                assert_eq!(answer["detail"], detail, "{}", db.name);
            }
        }
        assert!(api.get(&path).await["personas"][0]["name"] == "Ana Ruiz", "{}", db.name);
        let (status, cleared) = api.call(Method::PUT, &path, Some(json!({"personas": []}))).await;
        assert_eq!((status, &cleared["personas"]), (StatusCode::OK, &json!([])), "{}: an empty list clears", db.name);

        let missing = format!("/topologies/{}/personas", Uuid::new_v4());
        for method in [Method::GET, Method::PUT] {
            let (status, body) = api.call(method.clone(), &missing, Some(json!({"personas": []}))).await;
            assert_eq!((status, &body["detail"]), (StatusCode::NOT_FOUND, &json!("Topology not found")), "{method}");
        }
        api.api.stop().await;
    }
}
