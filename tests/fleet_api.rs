//! The fleet's routes against a real database (sqlite, and MariaDB when configured), with the
//! container engine out of reach: every INI rule and refusal of `POST /deckies/deploy` in the
//! spec's order and DECNET's words, additive and replacing deploys, the lifecycle poll, the
//! inventory, teardown's refusals, and health when the engine is gone; every decky route's answer
//! to a name the path rule refuses, and to a stored row that no longer decodes. (Deploys on a real
//! engine: `bin/tests/fleet.rs`.)

use svc_test_support::in_process as common;

use common::{RoleTokens, TestApi, TestDb};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection;

/// An engine address nothing listens on: deploys are stored, then fail in the background.
const NO_ENGINE: &str = "unix:///nonexistent/engine.sock";

/// What a deploy record and its decky say when the engine cannot be reached.
const ENGINE_AWAY: &str = "the container engine could not be reached; the deploy is retried when it answers";

struct Api {
    api: TestApi,
    admin: String,
    viewer: String,
}

async fn start(db: &TestDb, extra: &[(&str, &str)]) -> Api {
    let mut vars = vec![("SVC_DOCKER_HOST", NO_ENGINE), ("SVC_DECKY_BINARY", "/bin/true")];
    vars.extend_from_slice(extra);
    let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(db.api_config(&vars)).await;
    Api { api, admin, viewer }
}

impl Api {
    async fn deploy_as(&self, token: &str, body: Value) -> (StatusCode, Value) {
        let response =
            self.api.client.post(self.api.url("/deckies/deploy")).bearer_auth(token).json(&body).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn deploy(&self, ini: &str, replace: bool) -> (StatusCode, Value) {
        self.deploy_as(&self.admin, json!({"ini_content": ini, "replace_fleet": replace})).await
    }

    async fn refused(&self, ini: &str) -> (StatusCode, String) {
        let (status, body) = self.deploy(ini, false).await;
        (status, body["detail"].as_str().unwrap_or_default().to_string())
    }

    async fn deckies(&self) -> Vec<Value> {
        self.api.ok("/deckies", &self.admin, &[]).await.as_array().unwrap().clone()
    }

    async fn delete(&self, name: &str) -> (StatusCode, Value) {
        let response = self
            .api
            .client
            .delete(self.api.url(&format!("/deckies/{name}")))
            .bearer_auth(&self.admin)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

const NET: &str = "[general]\nnet = 10.77.0.0/24\ngw = 10.77.0.1\n";

#[tokio::test]
async fn malformed_ini_is_refused_in_the_contracts_order_and_words() {
    for db in TestDb::all() {
        let api = start(&db, &[]).await;
        let cases: &[(&str, StatusCode, &str)] = &[
            ("   \n", StatusCode::CONFLICT, "Configuration conflict: INI content is empty."),
            (
                "services = ssh\n[web]\n",
                StatusCode::CONFLICT,
                "Configuration conflict: INI syntax or characters are invalid.",
            ),
            (
                "[web]\nno delimiter here\n",
                StatusCode::CONFLICT,
                "Configuration conflict: INI syntax or characters are invalid.",
            ),
            ("# nothing\n", StatusCode::CONFLICT, "Invalid INI config structure: No decky sections found."),
            (NET, StatusCode::CONFLICT, "Invalid INI config structure: No decky sections found."),
        ];
        for (ini, status, detail) in cases {
            assert_eq!(api.refused(ini).await, (*status, detail.to_string()), "{ini:?}");
        }
        let huge = format!("[web]\nservices = ssh\n# {}\n", "x".repeat(600 * 1024));
        assert_eq!(api.refused(&huge).await, (StatusCode::UNPROCESSABLE_ENTITY, "Invalid INI config".into()));
        let (status, _) = api.deploy_as(&api.admin, json!({"ini_content": "[web]\n", "extra": 1})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "extra fields are structural");
        let (status, _) = api.deploy_as(&api.admin, json!({"replace_fleet": true})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "a missing INI is structural");
        let viewer = api.viewer.clone();
        let (status, _) = api.deploy_as(&viewer, json!({"ini_content": "[web]\n"})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "deploying is for admins");
        assert!(api.deckies().await.is_empty(), "nothing refused was stored");
        api.api.stop().await;
    }
}

#[tokio::test]
async fn ini_rules_refuse_what_cannot_be_deployed_with_a_reason() {
    for db in TestDb::all() {
        let api = start(&db, &[("SVC_DEPLOYMENT_LIMIT", "4")]).await;
        let cases: &[(&str, &str)] = &[
            ("[web]\nservices = ssh, gopher\n", "[web] unknown service `gopher`"),
            ("[web]\narchetype = mainframe\n", "[web] unknown archetype `mainframe`"),
            (
                "[web]\nip = 10.77.0.9\namount = 2\n",
                "[web] Cannot combine ip= with amount=2. Remove ip= or use amount=1.",
            ),
            ("[web]\namount = 0\n", "[web] amount= must be an integer from 1 to 100, got '0'"),
            ("[web]\namount = 101\n", "[web] amount= must be an integer from 1 to 100"),
            ("[Web]\nservices = ssh\n", "decky name 'Web' must be 1 to 64 of a-z, 0-9 and '-'"),
            ("[web]\nservics = ssh\n", "[web] unknown option `servics`"),
            ("[web]\nmutate_interval = soon\n", "[web] mutate_interval= must be a positive number of minutes"),
            ("[web]\nnmap_os = plan9\n", "[web] nmap_os `plan9` is none of"),
            ("[custom-x]\nbinary = img\n", "[custom-x]: bring-your-own services are not supported"),
            ("[web.gopher]\nx = 1\n[web]\n", "[web.gopher]: `gopher` is not a service"),
            ("[general]\nnet = 10.77.0.0/33\n[web]\n", "[general] net: `10.77.0.0/33` is not an IPv4 subnet"),
            (
                "[general]\nnet = 10.77.0.0/24\ngw = 10.78.0.1\n[web]\n",
                "[general] gw 10.78.0.1 is not a host address of 10.77.0.0/24",
            ),
            (
                "[general]\nnet = 10.77.0.0/24\n[web]\nip = 10.99.0.5\n",
                "[web] ip 10.99.0.5 is not a host address of the fleet network",
            ),
            (
                "[general]\nnet = 10.77.0.0/24\n[web]\nip = 10.77.0.1\n",
                "[web] ip 10.77.0.1 is the fleet network's gateway",
            ),
            (
                "[a]\nip = 10.77.0.5\n[b]\nip = 10.77.0.5\n[general]\nnet = 10.77.0.0/24\n",
                "IP 10.77.0.5 of decky 'b' is already taken",
            ),
            ("[web]\namount = 2\n[web-01]\n", "decky 'web-01' is defined twice in the INI"),
            (
                "[general]\nnet = 10.77.0.0/29\n[web]\namount = 6\n",
                "no free address left in 10.77.0.0/29 for decky 'web-06'",
            ),
            ("[web]\namount = 5\n", "Deployment would result in 5 deckies, exceeding the configured limit of 4"),
        ];
        for (ini, detail) in cases {
            let (status, said) = api.refused(ini).await;
            assert_eq!(status, StatusCode::CONFLICT, "{ini:?}: {said}");
            assert!(said.starts_with(detail), "{ini:?}: {said:?} does not start with {detail:?}");
        }
        assert!(api.deckies().await.is_empty(), "nothing refused was stored");
        api.api.stop().await;
    }
}

#[tokio::test]
async fn deploys_add_or_replace_and_are_polled_through_their_lifecycle_records() {
    for db in TestDb::all() {
        let api = start(&db, &[("SVC_DEPLOYMENT_LIMIT", "5")]).await;
        let ini = format!(
            "{NET}[web]\namount = 2\narchetype = web-server\nmutate_interval = 30\n[mail]\nip = 10.77.0.40\n\
             services = smtp\n[web.http]\nserver_header = nginx/1.18.0\n"
        );
        let (status, body) = api.deploy(&ini, false).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["mode"], "unihost");
        let ids: Vec<&str> = body["lifecycle_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(ids.len(), 3);

        let deckies = api.deckies().await;
        let names: Vec<&str> = deckies.iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["mail", "web-01", "web-02"], "ordered by name");
        let web = &deckies[1];
        assert_eq!(web["ip"], "10.77.0.2", "the first free address after the gateway");
        assert_eq!(deckies[2]["ip"], "10.77.0.3");
        assert_eq!(deckies[0]["ip"], "10.77.0.40", "an explicit address is kept");
        assert_eq!(web["services"], json!(["http", "https", "ssh"]), "the archetype's services");
        assert_eq!(web["archetype"], "web-server");
        assert_eq!(web["mutate_interval"], 30);
        assert_eq!(web["hostname"], "web-01");
        assert_eq!(web["service_config"]["http"]["server_header"], "nginx/1.18.0", "[web.http] reaches web-NN");
        for field in [
            "distro",
            "base_image",
            "build_base",
            "nmap_os",
            "last_mutated",
            "last_login_attempt",
            "host_uuid",
            "state",
        ] {
            assert!(web.get(field).is_some(), "DeckyConfig field {field} in {web}");
        }

        // No engine: each record ends failed with the generic reason (the dashboard's poll ends),
        // and the deckies say so; reconcile retries them while they stay stored.
        let query: Vec<(&str, &str)> = ids.iter().map(|id| ("ids", *id)).collect();
        let mut rows = Vec::new();
        for _ in 0..200 {
            rows = api.api.ok("/deckies/lifecycle", &api.admin, &query).await["rows"].as_array().unwrap().clone();
            if rows.iter().all(|r| r["status"] == "failed") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(rows.len(), 3);
        for row in &rows {
            assert_eq!(row["status"], "failed", "{row}");
            assert_eq!(row["operation"], "deploy");
            assert!(row["completed_at"].is_string(), "{row}");
            assert_eq!(row["error"], ENGINE_AWAY, "{row}");
        }
        assert!(api.deckies().await.iter().all(|d| d["state"] == "failed" && d["last_error"] == ENGINE_AWAY));

        // Additive: collisions with the stored fleet, and the limit counts the whole fleet (a
        // running decky's name is refused: `bin/tests/fleet.rs`).
        assert_eq!(
            api.refused("[db]\nip = 10.77.0.40\n").await,
            (StatusCode::CONFLICT, "IP 10.77.0.40 is already in use by an existing decky".into())
        );
        assert_eq!(
            api.refused("[db]\namount = 3\n").await,
            (StatusCode::CONFLICT, "Deployment would result in 6 deckies, exceeding the configured limit of 5".into())
        );
        assert!(
            api.refused("[general]\nnet = 10.88.0.0/24\n[db]\n").await.1.starts_with("the fleet is on 10.77.0.0/24")
        );
        let (status, body) = api.deploy("[db]\n", false).await;
        assert_eq!((status, body["lifecycle_ids"].as_array().unwrap().len()), (StatusCode::ACCEPTED, 1));
        let db_ip = api.deckies().await.into_iter().find(|d| d["name"] == "db").unwrap()["ip"].clone();
        assert_eq!(db_ip, "10.77.0.4", "existing addresses are reserved");
        // A decky whose deploy failed may be deployed again by name, as one more try.
        let (status, body) = api.deploy("[web-01]\n", false).await;
        assert_eq!((status, body["lifecycle_ids"].as_array().map(Vec::len)), (StatusCode::ACCEPTED, Some(1)), "{body}");
        assert_eq!(api.deckies().await.len(), 4, "the same fleet");

        // Replace: the INI is the whole fleet.
        let (status, _) = api.deploy("[general]\nnet = 10.88.0.0/24\n[solo]\nservices = telnet\n", true).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let deckies = api.deckies().await;
        assert_eq!(deckies.len(), 1);
        assert_eq!((deckies[0]["name"].as_str(), deckies[0]["ip"].as_str()), (Some("solo"), Some("10.88.0.2")));

        // The lifecycle poll's own rules: unknown ids are left out; none, too many or malformed refused.
        let unknown = uuid::Uuid::new_v4().to_string();
        let body = api.api.ok("/deckies/lifecycle", &api.admin, &[("ids", &unknown)]).await;
        assert_eq!(body, json!({"rows": []}));
        assert_eq!(api.api.get("/deckies/lifecycle", Some(&api.admin), &[]).await.status, StatusCode::BAD_REQUEST);
        let many: Vec<(&str, &str)> = (0..201).map(|_| ("ids", unknown.as_str())).collect();
        assert_eq!(
            api.api.get("/deckies/lifecycle", Some(&api.admin), &many).await.status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        let bad = api.api.get("/deckies/lifecycle", Some(&api.admin), &[("ids", "x")]).await;
        assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn teardown_refuses_bad_names_unknown_deckies_and_an_unreachable_engine() {
    for db in TestDb::all() {
        let api = start(&db, &[]).await;
        let (status, body) = api.delete("web").await;
        assert_eq!((status, body["detail"].as_str()), (StatusCode::NOT_FOUND, Some("No active deployment")));
        assert_eq!(api.delete("Bad_Name").await.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(api.delete(&"a".repeat(65)).await.0, StatusCode::UNPROCESSABLE_ENTITY);
        api.deploy("[web]\n", false).await;
        let (status, body) = api.delete("other").await;
        assert_eq!((status, body["detail"].as_str()), (StatusCode::NOT_FOUND, Some("Decky other not found")));
        let (status, body) = api.delete("web").await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (StatusCode::CONFLICT, Some("Container runtime operation failed"))
        );
        assert_eq!(api.deckies().await.len(), 1, "a decky whose container could not be removed stays listed");
        api.api.stop().await;
    }
}

#[tokio::test]
async fn health_requires_the_engine_once_a_fleet_is_deployed_and_stats_count_deckies() {
    let db = TestDb::sqlite();
    let api = start(&db, &[]).await;
    let health = api.api.get("/health", None, &[]).await;
    assert_eq!(health.status, StatusCode::OK, "{}", health.body);
    assert!(health.body["components"].get("container_runtime").is_none(), "no fleet: the engine is no component");
    api.deploy("[web]\n[mail]\n", false).await;
    let health = api.api.get("/health", None, &[]).await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE, "{}", health.body);
    assert_eq!(health.body["status"], "unhealthy");
    assert_eq!(health.body["components"]["container_runtime"]["status"], "failing");
    assert_eq!(health.body["components"]["container_runtime"]["detail"], "container runtime unavailable");
    let stats = api.api.ok("/stats", &api.admin, &[]).await;
    assert_eq!((stats["deployed_deckies"].as_u64(), stats["active_deckies"].as_u64()), (Some(2), Some(0)));
    api.api.stop().await;
}

#[tokio::test]
async fn stats_ask_the_engine_at_most_once_a_second_and_a_deploy_counts_again_at_once() {
    const LISTING_FAILED: &str = "Cannot list the fleet's containers";
    let (capture, _guard) = common::LogCapture::start();
    let db = TestDb::sqlite();
    let api = start(&db, &[]).await;
    assert_eq!(api.deploy("[web]\n[mail]\n", false).await.0, StatusCode::ACCEPTED);
    for _ in 0..200 {
        if api.deckies().await.iter().all(|d| d["state"] == "failed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(api.deckies().await.iter().all(|d| d["state"] == "failed"), "the deploys end without an engine");

    // Each poll would list the engine's containers (here: fail to, and warn).
    let before = capture.lines_containing(LISTING_FAILED).len();
    for _ in 0..20 {
        let stats = api.api.ok("/stats", &api.admin, &[]).await;
        assert_eq!((stats["deployed_deckies"].as_u64(), stats["active_deckies"].as_u64()), (Some(2), Some(0)));
    }
    let asked = capture.lines_containing(LISTING_FAILED).len() - before;
    assert!((1..=2).contains(&asked), "20 polls within about a second asked the engine {asked} times");

    assert_eq!(api.deploy("[db]\n", false).await.0, StatusCode::ACCEPTED);
    let stats = api.api.ok("/stats", &api.admin, &[]).await;
    assert_eq!(stats["deployed_deckies"].as_u64(), Some(3), "a deploy here is counted at once");
    api.api.stop().await;
}

/// `PUT /deckies/{name}/mutate-interval` answers a name the path rule refuses 422, as every other
/// decky route does (it answered 404, taking any text for a name).
#[tokio::test]
async fn every_decky_route_refuses_a_name_the_path_rule_refuses_with_422() {
    let db = TestDb::sqlite();
    let api = start(&db, &[]).await;
    let interval = json!({"mutate_interval": "30m"});
    for name in ["Bad_Name", &"a".repeat(65)] {
        for (method, path, body) in [
            (reqwest::Method::DELETE, format!("/deckies/{name}"), None),
            (reqwest::Method::POST, format!("/deckies/{name}/mutate"), None),
            (reqwest::Method::PUT, format!("/deckies/{name}/mutate-interval"), Some(&interval)),
            (reqwest::Method::GET, format!("/deckies/{name}/tarpit"), None),
        ] {
            let mut request = api.api.client.request(method.clone(), api.api.url(&path)).bearer_auth(&api.admin);
            if let Some(body) = body {
                request = request.json(body);
            }
            let status = request.send().await.unwrap().status();
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{method} {path}");
        }
    }
    api.api.stop().await;
}

/// A stored row that no longer decodes (edited by hand here, in the database itself) is answered
/// as the spec says, 422 `internal_validation_error`, not 500: a value that is not the model's
/// (an unknown state, a config that is not JSON) and a column of the wrong type alike.
#[tokio::test]
async fn a_stored_row_that_does_not_decode_is_a_data_consistency_error() {
    let db = TestDb::sqlite();
    let api = start(&db, &[]).await;
    let (status, body) = api.deploy("[web]\n", false).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["lifecycle_ids"][0].as_str().unwrap().to_string();
    // The deploy fails in the background (no engine); the row is left alone once it has.
    let mut lifecycle = Value::Null;
    for _ in 0..200 {
        lifecycle = api.api.ok("/deckies/lifecycle", &api.admin, &[("ids", &id)]).await;
        if lifecycle["rows"][0]["status"] == "failed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(lifecycle["rows"][0]["status"], "failed", "{lifecycle}");
    assert_eq!(lifecycle["rows"][0]["error"], ENGINE_AWAY, "{lifecycle}");
    assert_eq!(api.deckies().await.len(), 1);

    let path = db.vars().into_iter().find(|(name, _)| name == "SVC_DB_PATH").unwrap().1;
    let mut store = sqlx::SqliteConnection::connect(&format!("sqlite://{path}")).await.unwrap();
    let expected = json!({"detail": "Internal data consistency error", "type": "internal_validation_error"});
    let (state, config, updated_at): (String, String, i64) =
        sqlx::query_as("select state, config, updated_at from fleet_deckies").fetch_one(&mut store).await.unwrap();
    for (column, bad) in
        [("state", json!("sideways")), ("config", json!("not json")), ("updated_at", json!("yesterday"))]
    {
        let corrupt = format!("update fleet_deckies set {column} = ?");
        sqlx::query(&corrupt).bind(bad.as_str().unwrap()).execute(&mut store).await.unwrap();
        let response = api.api.client.get(api.api.url("/deckies")).bearer_auth(&api.admin).send().await.unwrap();
        let status = response.status();
        let body = response.json::<Value>().await.unwrap_or(Value::Null);
        assert_eq!((status, body), (StatusCode::UNPROCESSABLE_ENTITY, expected.clone()), "{column} = {bad}");
        sqlx::query("update fleet_deckies set state = ?, config = ?, updated_at = ?")
            .bind(&state)
            .bind(&config)
            .bind(updated_at)
            .execute(&mut store)
            .await
            .unwrap();
        assert_eq!(api.deckies().await.len(), 1, "restored");
    }
    sqlx::query("update decky_lifecycle set status = 'sideways'").execute(&mut store).await.unwrap();
    let response = api
        .api
        .client
        .get(api.api.url("/deckies/lifecycle"))
        .query(&[("ids", &id)])
        .bearer_auth(&api.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY, "an unknown lifecycle status");
    api.api.stop().await;
}

/// The deployment's identity (issue 28, bug 2.3) is made once and kept: every call, from any
/// process and after a reopen, gives the same one; racing first calls agree; another database
/// has another.
#[tokio::test]
async fn the_deployment_identity_is_made_once_and_kept() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let racing = futures::future::join_all((0..4).map(|_| db.deployment_id())).await;
        let first = racing[0].as_ref().unwrap();
        assert!(racing.iter().all(|id| id.as_ref().unwrap() == first), "{}: {racing:?}", backend.name);
        db.close().await;
        let again = backend.open().await;
        assert_eq!(again.deployment_id().await.unwrap(), *first, "{}: kept across a reopen", backend.name);
        again.close().await;
        let others = TestDb::all();
        let other = others.iter().find(|b| b.name == backend.name).unwrap().open().await;
        assert_ne!(
            other.deployment_id().await.unwrap(),
            *first,
            "{}: another database, another identity",
            backend.name
        );
        other.close().await;
    }
}
