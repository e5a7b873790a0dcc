//! DECNET's Realism routes through the real server on every backend under test: the planner's
//! weights (DECNET's defaults, a change of some lists, every refusal with DECNET's text), the
//! global persona pool, the synthetic files the pool's personas are shown to have written on the
//! fleet's deckies (the same on every request, paged and filtered, one with its body), and the LLM
//! provider, whose API key is sealed in the database and never answered. Viewers read, admins write.

use svc_test_support::in_process as common;

use chrono::Utc;
use common::{RoleTokens, TestApi, TestDb, decky_config};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::db::{Deployment, FleetNetwork};

const API_KEY: &str = "sk-realism-provider-key-0123456789";

struct Api {
    api: TestApi,
    admin: String,
    viewer: String,
}

async fn start(db: &TestDb) -> Api {
    let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(db.api_config(&[])).await;
    Api { api, admin, viewer }
}

impl Api {
    async fn call_as(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let reply = self.api.call(method, path, token, body).await;
        (reply.status, reply.body)
    }

    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call_as(&self.admin, Method::PUT, path, Some(body)).await
    }

    /// What a viewer reads (viewers read every realism route).
    async fn get(&self, path: &str) -> Value {
        self.api.ok(path, &self.viewer, &[]).await
    }
}

#[tokio::test]
async fn the_planner_weights_default_to_decnets_and_change_as_decnet_checks() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let defaults = api.get("/realism/config").await;
        assert_eq!(defaults["canary_probability"], json!(0.03), "{}", db.name);
        assert_eq!(
            defaults["user_class_weights"],
            json!([{"content_class": "note", "weight": 30}, {"content_class": "todo", "weight": 20},
                   {"content_class": "draft", "weight": 15}, {"content_class": "script", "weight": 10}]),
            "{}",
            db.name
        );
        assert_eq!(defaults["system_class_weights"].as_array().unwrap().len(), 3);
        assert_eq!(defaults["canary_class_weights"].as_array().unwrap().len(), 10);
        assert!(defaults.get("dropped_entries").is_none());

        let change = json!({"user_class_weights": [{"content_class": "todo", "weight": 3},
                                                   {"content_class": "log_cron", "weight": 9}],
                            "canary_probability": 0.5});
        let (status, changed) = api.put("/realism/config", change).await;
        assert_eq!(status, StatusCode::OK, "{}: {changed}", db.name);
        assert_eq!(changed["user_class_weights"], json!([{"content_class": "todo", "weight": 3}]));
        assert_eq!(changed["dropped_entries"], json!(["log_cron"]), "{}: a class of another list is reported", db.name);
        assert_eq!(changed["system_class_weights"], defaults["system_class_weights"], "what is absent stays");
        let stored = api.get("/realism/config").await;
        assert_eq!(
            (&stored["canary_probability"], &stored["user_class_weights"]),
            (&json!(0.5), &changed["user_class_weights"])
        );
        assert!(stored.get("dropped_entries").is_none());

        for (body, detail) in [
            (json!({"user_class_weights": "note"}), "weights must be a list"),
            (json!({"user_class_weights": null}), "weights must be a list"),
            (json!({"user_class_weights": [1]}), "each weight entry must be an object"),
            (json!({"user_class_weights": [{"weight": 1}]}), "content_class must be a string, got None"),
            (
                json!({"user_class_weights": [{"content_class": "note", "weight": -2}]}),
                "weight for 'note' must be a non-negative integer",
            ),
            (
                json!({"user_class_weights": [{"content_class": "note", "weight": 0.5}]}),
                "weight for 'note' must be a non-negative integer",
            ),
            (json!({"user_class_weights": [{"content_class": "memo", "weight": 1}]}), "unknown content_class: 'memo'"),
            (
                json!({"canary_class_weights": [{"content_class": "note", "weight": 1}]}),
                "weights list resolved to zero valid entries",
            ),
            (
                json!({"system_class_weights": [{"content_class": "cache_tmp", "weight": 0}]}),
                "weights must sum to a positive number",
            ),
            (json!({"canary_probability": 2}), "canary_probability must be in [0.0, 1.0]"),
            (json!({"canary_probability": null}), "canary_probability must be in [0.0, 1.0]"),
        ] {
            let (status, answer) = api.put("/realism/config", body.clone()).await;
            assert_eq!((status, &answer["detail"]), (StatusCode::BAD_REQUEST, &json!(detail)), "{}: {body}", db.name);
        }
        assert_eq!(api.get("/realism/config").await, stored, "{}: refusals change nothing", db.name);
        let (status, _) = api.put("/realism/config", json!([1])).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{}: a body not an object", db.name);
        let (status, _) = api.call_as(&api.viewer, Method::PUT, "/realism/config", Some(json!({}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}", db.name);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn the_persona_pool_is_replaced_whole_and_its_personas_write_the_fleets_files() {
    for db in TestDb::all() {
        let api = start(&db).await;
        assert_eq!(api.get("/realism/personas").await["personas"], json!([]), "{}", db.name);
        assert_eq!(
            api.get("/realism/synthetic-files").await,
            json!({"total": 0, "limit": 50, "offset": 0, "data": []})
        );
        let network = FleetNetwork { subnet: "172.29.0.0/24".into(), gateway: "172.29.0.1".into(), interface: None };
        let deckies = [decky_config("web-01", "172.29.0.10"), decky_config("db-01", "172.29.0.11")];
        let deployment =
            Deployment { network: &network, deckies: &deckies, replace: true, lifecycles: &[], at: Utc::now() };
        api.api.state.db.commit_deployment(deployment).await.unwrap();
        assert_eq!(api.get("/realism/synthetic-files").await["total"], 0, "{}: no personas, no files", db.name);

        let ana = json!({"name": "Ana Ruiz", "email": "ana@corp.example", "role": "CFO"});
        let bob = json!({"name": "Bob", "email": "bob@corp.example", "role": "Ops", "tone": "casual"});
        let (status, pool) = api.put("/realism/personas", json!({"personas": [ana, {"name": "typo"}, bob]})).await;
        assert_eq!(status, StatusCode::OK, "{}: {pool}", db.name);
        assert!(pool["path"].as_str().is_some_and(|path| !path.is_empty()));
        let names: Vec<&str> =
            pool["personas"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Ana Ruiz", "Bob"], "{}: the invalid entry is dropped", db.name);
        assert_eq!(pool["personas"][0]["language"], "en");
        assert_eq!(api.get("/realism/personas").await, pool);
        for (token, body, status) in [
            (&api.admin, json!({"personas": "Ana"}), StatusCode::BAD_REQUEST),
            (&api.admin, json!({"personas": [{"name": "x"}]}), StatusCode::BAD_REQUEST),
            (&api.viewer, json!({"personas": []}), StatusCode::FORBIDDEN),
        ] {
            let (got, answer) = api.call_as(token, Method::PUT, "/realism/personas", Some(body.clone())).await;
            assert_eq!(got, status, "{}: {body}: {answer}", db.name);
        }
        assert_eq!(api.get("/realism/personas").await, pool, "{}: refusals change nothing", db.name);

        let all = api.get("/realism/synthetic-files?limit=500").await;
        let files = all["data"].as_array().unwrap();
        assert!(files.len() >= 8 && all["total"] == files.len(), "{}: {all}", db.name);
        assert_eq!(api.get("/realism/synthetic-files?limit=500").await, all, "{}: the same files every time", db.name);
        for file in files {
            assert!(file.get("last_body").is_none(), "a listing carries no bodies");
            assert!(["web-01", "db-01"].contains(&file["decky_name"].as_str().unwrap()), "{file}");
            assert!(["Ana Ruiz", "Bob"].contains(&file["persona"].as_str().unwrap()), "{file}");
            assert!(file["last_modified"].as_str().unwrap() >= file["created_at"].as_str().unwrap(), "{file}");
            assert_eq!(file["content_hash"].as_str().unwrap().len(), 64);
        }
        let modified: Vec<&str> = files.iter().map(|f| f["last_modified"].as_str().unwrap()).collect();
        assert!(modified.windows(2).all(|w| w[0] >= w[1]), "{}: newest change first", db.name);

        let page = api.get("/realism/synthetic-files?limit=2&offset=1").await;
        assert_eq!((&page["total"], &page["limit"], &page["offset"]), (&all["total"], &json!(2), &json!(1)));
        assert_eq!(page["data"].as_array().unwrap()[..], files[1..3]);
        let decky_uuid = files[0]["decky_uuid"].as_str().unwrap();
        let mine = api.get(&format!("/realism/synthetic-files?limit=500&decky_uuid={decky_uuid}&persona=Bob")).await;
        let expected: Vec<&Value> =
            files.iter().filter(|f| f["decky_uuid"] == decky_uuid && f["persona"] == "Bob").collect();
        assert_eq!(mine["data"].as_array().unwrap().iter().collect::<Vec<_>>(), expected, "{}", db.name);
        let class = files[0]["content_class"].as_str().unwrap();
        let of_class = api.get(&format!("/realism/synthetic-files?limit=500&content_class={class}&persona=null")).await;
        assert!(of_class["data"].as_array().unwrap().iter().all(|f| f["content_class"] == class));

        let uuid = files[0]["uuid"].as_str().unwrap();
        let detail = api.get(&format!("/realism/synthetic-files/{uuid}")).await;
        let body = detail["last_body"].as_str().unwrap();
        assert!(!body.is_empty() && detail["truncated"] == false, "{detail}");
        let hash: String =
            <sha2::Sha256 as sha2::Digest>::digest(body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(detail["content_hash"], hash, "{}: the hash is the body's", db.name);
        let mut listed = files[0].clone();
        for field in ["last_body", "truncated"] {
            listed[field] = detail[field].clone();
        }
        assert_eq!(detail, listed, "{}: the detail is the listed file and its body", db.name);

        for path in ["/realism/synthetic-files/00000000-0000-0000-0000-000000000000", "/realism/synthetic-files/nope"] {
            let (status, answer) = api.call_as(&api.viewer, Method::GET, path, None).await;
            assert_eq!((status, &answer["detail"]), (StatusCode::NOT_FOUND, &json!("synthetic file not found")));
        }
        let long_class = format!("content_class={}", "c".repeat(33));
        for query in ["limit=0", "limit=501", "offset=-1", long_class.as_str()] {
            let (status, answer) =
                api.call_as(&api.viewer, Method::GET, &format!("/realism/synthetic-files?{query}"), None).await;
            assert_eq!(
                (status, &answer["detail"]),
                (StatusCode::UNPROCESSABLE_ENTITY, &json!("Invalid request parameters")),
                "{query}"
            );
        }
        api.api.stop().await;
    }
}

/// The API key column of the LLM setting, as stored.
async fn stored_key(db: &TestDb, api: &TestApi) -> Option<String> {
    let select = "select secret from realism_settings where setting_key = 'llm'";
    match db.mysql_url() {
        Some(url) => {
            let pool = sqlx::MySqlPool::connect(url).await.unwrap();
            let (secret,): (Option<String>,) = sqlx::query_as(select).fetch_one(&pool).await.unwrap();
            pool.close().await;
            secret
        }
        None => {
            let connection = rusqlite::Connection::open(api.state.config.data_dir.join("svc.db")).unwrap();
            connection.query_row(select, [], |row| row.get(0)).unwrap()
        }
    }
}

#[tokio::test]
async fn the_llm_provider_is_changed_by_admins_and_its_key_is_sealed_and_never_answered() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let defaults =
            json!({"provider": "ollama", "base_url": null, "model": "llama3.1", "timeout": 60.0, "api_key_set": false});
        assert_eq!(api.get("/realism/llm").await, defaults, "{}", db.name);

        let change = json!({"provider": "ollama", "base_url": "https://llm.corp.example:11434/", "model": "qwen2.5",
                            "timeout": 30, "api_key": API_KEY});
        let (status, changed) = api.put("/realism/llm", change).await;
        assert_eq!(status, StatusCode::OK, "{}: {changed}", db.name);
        let expected = json!({"provider": "ollama", "base_url": "https://llm.corp.example:11434", "model": "qwen2.5",
                              "timeout": 30.0, "api_key_set": true});
        assert_eq!(changed, expected, "{}", db.name);
        assert_eq!(api.get("/realism/llm").await, expected);
        let sealed = stored_key(&db, &api.api).await.unwrap();
        assert!(sealed.starts_with("sealed:v1:") && !sealed.contains(API_KEY), "{}: {sealed}", db.name);
        let stored = api.api.state.db.realism_setting("llm").await.unwrap().unwrap();
        assert_eq!(stored.secret.unwrap().expose(), API_KEY, "{}: the key opens whole", db.name);
        assert!(!stored.value.contains(API_KEY));

        // A change without the key keeps it; the model alone changes.
        let (status, kept) = api.put("/realism/llm", json!({"model": "llama3.2"})).await;
        assert_eq!(
            (status, &kept["model"], &kept["api_key_set"], &kept["base_url"]),
            (StatusCode::OK, &json!("llama3.2"), &json!(true), &expected["base_url"])
        );

        for (body, detail) in [
            (json!({"provider": "openai"}), Some("provider must be one of ['fake', 'ollama'], got 'openai'")),
            (json!({"base_url": "ftp://llm.corp.example"}), Some("base_url must start with http:// or https://")),
            (json!({"base_url": "llm.corp.example"}), Some("base_url must start with http:// or https://")),
            (json!({"base_url": "http://"}), Some("base_url is not a valid URL")),
            (
                json!({"base_url": "https://me:pw@llm.corp.example"}),
                Some("base_url must not carry credentials; give the key as api_key"),
            ),
            (json!({"timeout": 0}), Some("timeout must be greater than 0 and at most 3600 seconds")),
            (json!({"timeout": 3601}), Some("timeout must be greater than 0 and at most 3600 seconds")),
            (json!({"model": " "}), Some("model must be 1 to 256 characters")),
            (json!({"api_key": "k".repeat(4097)}), Some("api_key must be at most 4096 characters")),
            (json!({"timeout": "60"}), None),
            (json!({"provider": null}), None),
        ] {
            let (status, answer) = api.put("/realism/llm", body.clone()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{}: {body}: {answer}", db.name);
            if let Some(detail) = detail {
                assert_eq!(answer["detail"], detail, "{}: {body}", db.name);
            }
            assert!(!answer.to_string().contains(API_KEY));
        }
        let (status, _) = api.call_as(&api.viewer, Method::PUT, "/realism/llm", Some(json!({"api_key": "x"}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}", db.name);
        assert_eq!(api.get("/realism/llm").await, kept, "{}: refusals change nothing", db.name);

        // `fake` and a cleared URL are DECNET's; an empty key clears the stored one.
        let (status, cleared) =
            api.put("/realism/llm", json!({"provider": "fake", "base_url": "", "api_key": ""})).await;
        assert_eq!(
            (status, &cleared["provider"], &cleared["base_url"], &cleared["api_key_set"]),
            (StatusCode::OK, &json!("fake"), &Value::Null, &json!(false)),
            "{}",
            db.name
        );
        assert_eq!(stored_key(&db, &api.api).await, None, "{}", db.name);
        let (_, again) = api.put("/realism/llm", json!({"api_key": API_KEY})).await;
        assert_eq!(again["api_key_set"], true);
        let (_, nulled) = api.put("/realism/llm", json!({"api_key": null})).await;
        assert_eq!(nulled["api_key_set"], false, "{}: null clears the key too", db.name);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn the_realism_routes_are_in_the_openapi_document() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[("SVC_DEVELOPER", "true")])).await;
    let doc: Value =
        api.client.get(api.base.replace("/api/v1", "/openapi.json")).send().await.unwrap().json().await.unwrap();
    for (path, method, status) in [
        ("/api/v1/realism/config", "get", "403"),
        ("/api/v1/realism/config", "put", "400"),
        ("/api/v1/realism/personas", "put", "400"),
        ("/api/v1/realism/llm", "get", "200"),
        ("/api/v1/realism/llm", "put", "415"),
        ("/api/v1/realism/synthetic-files", "get", "422"),
        ("/api/v1/realism/synthetic-files/{uuid}", "get", "404"),
    ] {
        assert!(doc["paths"][path][method]["responses"][status].is_object(), "{method} {path} {status}");
    }
    for schema in [
        "RealismWeights",
        "WeightsChange",
        "LlmChange",
        "LlmResponse",
        "PoolResponse",
        "SyntheticFilesResponse",
        "SyntheticFileDetail",
    ] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
    api.stop().await;
}
