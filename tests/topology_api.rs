//! The topology routes against a real database (sqlite, and MariaDB when configured), with the
//! container engine out of reach: a seed reproduces a topology; the generator's limits and the
//! mode rules answer 400/409/422 as DECNET does; reads, status events, the catalog; the
//! pending-only child edits with version locking; the mutation queue's refusals and its records;
//! a deploy or teardown while the engine does not answer is refused (409) and changes nothing;
//! delete's refusal. (Deploys and live mutations on a real engine, and the mutator:
//! `bin/tests/topology.rs`.)

use svc_test_support::in_process as common;

use common::sse::{EventStream, Frame};
use common::{RoleTokens, TestApi, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::db::TopologyStatus;
use uuid::Uuid;

const NO_ENGINE: &str = "unix:///nonexistent/engine.sock";

/// Long enough for a loaded machine, short enough to fail a broken test quickly.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

struct Api {
    api: TestApi,
    admin: String,
    viewer: String,
}

async fn start(db: &TestDb) -> Api {
    start_with(db, &[]).await
}

async fn start_with(db: &TestDb, extra: &[(&str, &str)]) -> Api {
    let mut vars = vec![
        ("SVC_DOCKER_HOST", NO_ENGINE),
        ("SVC_DECKY_BINARY", "/bin/true"),
        ("SVC_TOPOLOGY_SUBNET_POOL", "10.214.0.0/16"),
        // No container runs here, so the host needs no shield from these LANs: a mutation applied
        // to a live topology would otherwise leave its INPUT chain on the host.
        ("SVC_DECKY_HOST_ISOLATION", "false"),
    ];
    vars.extend_from_slice(extra);
    let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(db.api_config(&vars)).await;
    Api { api, admin, viewer }
}

/// An API on a bus of its own (returned too: it lives as long as the test holds it).
async fn start_with_bus(db: &TestDb) -> (svc_test_support::processes::Nats, Api) {
    let nats = svc_test_support::processes::Nats::start();
    let url = nats.url();
    let api = start_with(db, &[("SVC_NATS_URL", url.as_str())]).await;
    (nats, api)
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

    async fn detail(&self, id: &str) -> Value {
        self.get(&format!("/topologies/{id}")).await
    }

    /// The topology's event stream, opened with the admin's bearer token.
    async fn events(&self, id: &str) -> EventStream {
        let url = self.api.url(&format!("/topologies/{id}/events"));
        let response = self.api.client.get(url).bearer_auth(&self.admin).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        EventStream::new(response)
    }
}

/// A topology stream's opening: a keepalive comment first, then the snapshot (returned).
async fn opening(stream: &mut EventStream) -> Frame {
    let first = stream.next_within(PATIENCE).await.expect("the stream is open");
    assert_eq!((first.comment.as_deref(), first.event.as_deref()), (Some("keepalive"), None), "{first:?}");
    let snapshot = stream.next_within(PATIENCE).await.expect("the stream is open");
    assert_eq!(snapshot.event.as_deref(), Some("snapshot"), "{snapshot:?}");
    snapshot
}

fn generate(name: &str, seed: u64) -> Value {
    json!({"name": name, "depth": 2, "branching_factor": 2, "deckies_per_lan_max": 2, "cross_edge_probability": 0.5, "seed": seed})
}

/// A topology's shape by names: LANs, deckies with their services and addresses, edges.
fn shape(detail: &Value) -> Value {
    let lan_name =
        |id: &Value| detail["lans"].as_array().unwrap().iter().find(|l| l["id"] == *id).unwrap()["name"].clone();
    let decky_name =
        |id: &Value| detail["deckies"].as_array().unwrap().iter().find(|d| d["uuid"] == *id).unwrap()["name"].clone();
    let lans: Vec<Value> =
        detail["lans"].as_array().unwrap().iter().map(|l| json!([l["name"], l["subnet"], l["is_dmz"]])).collect();
    let deckies: Vec<Value> =
        detail["deckies"].as_array().unwrap().iter().map(|d| json!([d["name"], d["services"], d["ip"]])).collect();
    let mut edges: Vec<String> = detail["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {} {}",
                decky_name(&e["decky_uuid"]),
                lan_name(&e["lan_id"]),
                e["ip"],
                e["is_bridge"],
                e["forwards_l3"]
            )
        })
        .collect();
    edges.sort();
    json!({"lans": lans, "deckies": deckies, "edges": edges})
}

#[tokio::test]
async fn a_seed_reproduces_its_topology() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let first = api.created("/topologies/", generate("maze-a", 42)).await;
        assert_eq!((first["status"].as_str(), first["version"].as_i64()), (Some("pending"), Some(1)));
        let id = first["id"].as_str().unwrap().to_string();
        let a = shape(&api.detail(&id).await);
        assert!(a["lans"].as_array().unwrap().len() >= 3, "{a}");
        assert_eq!(a["lans"][0], json!(["LAN-00", "10.214.0.0/24", true]));

        // While the first holds its subnets a second one gets others, with the same structure.
        let twin = api.created("/topologies", generate("maze-b", 42)).await;
        let b = shape(&api.detail(twin["id"].as_str().unwrap()).await);
        assert_eq!(a["deckies"].as_array().unwrap().len(), b["deckies"].as_array().unwrap().len());
        assert_ne!(a["lans"], b["lans"]);

        // Deleted, its subnets are free again: the same seed gives the very same topology.
        let (status, _) = api.call(Method::DELETE, &format!("/topologies/{id}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let again = api.created("/topologies/", generate("maze-a", 42)).await;
        assert_eq!(shape(&api.detail(again["id"].as_str().unwrap()).await), a, "{}", db.name);
        let other = api.created("/topologies/", generate("maze-c", 43)).await;
        assert_ne!(shape(&api.detail(other["id"].as_str().unwrap()).await)["deckies"], a["deckies"]);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn generation_parameters_are_checked_as_decnet_does() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let cases: &[(Value, StatusCode, Option<&str>)] = &[
            (
                json!({"name": "x", "depth": 0, "branching_factor": 1}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("Invalid request parameters"),
            ),
            (json!({"name": "x", "depth": 17, "branching_factor": 1}), StatusCode::UNPROCESSABLE_ENTITY, None),
            (json!({"name": "x", "depth": 1, "branching_factor": 9}), StatusCode::UNPROCESSABLE_ENTITY, None),
            (
                json!({"name": "x", "depth": 1, "branching_factor": 1, "bridge_forward_probability": 1.5}),
                StatusCode::UNPROCESSABLE_ENTITY,
                None,
            ),
            (
                json!({"name": "x", "depth": 1, "branching_factor": 1, "mode": "cloud"}),
                StatusCode::UNPROCESSABLE_ENTITY,
                None,
            ),
            (json!({"name": "x", "branching_factor": 1}), StatusCode::BAD_REQUEST, None),
            (json!({"name": "", "depth": 1, "branching_factor": 1}), StatusCode::BAD_REQUEST, None),
            (json!({"name": "x", "depth": 1, "branching_factor": 1, "colour": "red"}), StatusCode::BAD_REQUEST, None),
            (
                json!({"name": "x", "depth": 1, "branching_factor": 1, "mode": "agent"}),
                StatusCode::BAD_REQUEST,
                Some("mode='agent' requires target_host_uuid"),
            ),
            (
                json!({"name": "x", "depth": 1, "branching_factor": 1, "target_host_uuid": "h"}),
                StatusCode::BAD_REQUEST,
                Some("target_host_uuid is only valid when mode='agent'"),
            ),
            (
                json!({"name": "x", "depth": 1, "branching_factor": 1, "services_explicit": ["gopher"]}),
                StatusCode::BAD_REQUEST,
                Some("unknown service 'gopher'"),
            ),
        ];
        for (body, status, detail) in cases {
            let (got, answer) = api.call(Method::POST, "/topologies/", Some(body.clone())).await;
            assert_eq!(got, *status, "{body}: {answer}");
            if let Some(detail) = detail {
                assert_eq!(answer["detail"], *detail, "{body}");
            }
        }
        api.created("/topologies/", json!({"name": "x", "depth": 1, "branching_factor": 1})).await;
        let (status, body) = api.call(Method::POST, "/topologies/blank", Some(json!({"name": "x"}))).await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (StatusCode::CONFLICT, Some("Topology name \"x\" already exists"))
        );
        // A pool too small for the tree: 409.
        let (status, body) = api
            .call(
                Method::POST,
                "/topologies/",
                Some(json!({"name": "huge", "depth": 16, "branching_factor": 8, "seed": 1})),
            )
            .await;
        assert_eq!((status, body["detail"].as_str()), (StatusCode::CONFLICT, Some("subnet pool exhausted")));
        // A viewer reads but does not write.
        let viewer = api.viewer.clone();
        let (status, _) = api.call_as(&viewer, Method::POST, "/topologies/blank", Some(json!({"name": "v"}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = api.call_as(&viewer, Method::GET, "/topologies/", None).await;
        assert_eq!(status, StatusCode::OK);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn reads_list_page_and_refuse_unknown_or_malformed_ids() {
    for db in TestDb::all() {
        let api = start(&db).await;
        for n in 0..3 {
            api.created("/topologies/blank", json!({"name": format!("t{n}")})).await;
        }
        let page = api.api.ok("/topologies/", &api.admin, &[("limit", "2"), ("offset", "1")]).await;
        assert_eq!((page["total"].as_u64(), page["data"].as_array().unwrap().len()), (Some(3), 2));
        let filtered = api.api.ok("/topologies/", &api.admin, &[("status", "active")]).await;
        assert_eq!(filtered["total"], 0);
        let reply = api.api.get("/topologies/", Some(&api.admin), &[("limit", "501")]).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);

        let missing = Uuid::new_v4();
        for path in [
            format!("/topologies/{missing}"),
            format!("/topologies/{missing}/status-events"),
            format!("/topologies/{missing}/mutations"),
        ] {
            let reply = api.api.get(&path, Some(&api.admin), &[]).await;
            assert_eq!(
                (reply.status, reply.body["detail"].as_str()),
                (StatusCode::NOT_FOUND, Some("Topology not found")),
                "{path}"
            );
        }
        for path in ["/topologies/not-a-uuid", "/topologies/1%27%20or%201=1/status-events", "/topologies/../etc"] {
            let reply = api.api.get(path, Some(&api.admin), &[]).await;
            assert!(
                matches!(reply.status, StatusCode::UNPROCESSABLE_ENTITY | StatusCode::NOT_FOUND),
                "{path}: {}",
                reply.status
            );
        }
        let catalog = api.get("/topologies/services").await;
        assert!(catalog["services"].as_array().unwrap().contains(&json!("ssh")));
        assert_eq!(catalog["fleet_singletons"], json!([]));
        let archetypes = api.get("/topologies/archetypes").await;
        assert!(archetypes["archetypes"].as_array().unwrap().iter().any(|a| a["slug"] == "web-server"));
        assert_eq!(api.get("/topologies/next-subnet").await["subnet"], "10.214.0.0/24");
        api.api.stop().await;
    }
}

#[tokio::test]
async fn pending_child_edits_build_a_topology_under_version_locking() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let topology = api.created("/topologies/blank", json!({"name": "hand-made"})).await;
        let id = topology["id"].as_str().unwrap().to_string();
        let base = format!("/topologies/{id}");
        let dmz =
            api.created(&format!("{base}/lans"), json!({"name": "dmz", "is_dmz": true, "expected_version": 1})).await;
        assert_eq!(dmz["subnet"], "10.214.0.0/24");
        let (status, body) = api
            .call(Method::POST, &format!("{base}/lans"), Some(json!({"name": "inner", "expected_version": 1})))
            .await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (StatusCode::CONFLICT, Some("Version conflict: expected 1, current 2"))
        );
        let inner = api.created(&format!("{base}/lans"), json!({"name": "inner", "subnet": "10.214.9.0/24"})).await;
        let (status, _) = api
            .call(Method::POST, &format!("{base}/lans"), Some(json!({"name": "dup", "subnet": "10.214.9.0/24"})))
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "a subnet another LAN has");
        for (body, want) in [
            (json!({"name": "inner"}), StatusCode::CONFLICT),
            (json!({"name": "spaced", "subnet": " 10.214.8.0/24"}), StatusCode::BAD_REQUEST),
            (json!({"name": "padded", "subnet": "10.214.8.0/024"}), StatusCode::BAD_REQUEST),
            (json!({"name": "has space"}), StatusCode::BAD_REQUEST),
            (json!({"name": "pinned", "host_uuid": Uuid::new_v4()}), StatusCode::BAD_REQUEST),
        ] {
            let (status, answer) = api.call(Method::POST, &format!("{base}/lans"), Some(body.clone())).await;
            assert_eq!(status, want, "{body}: {answer}");
        }
        assert_eq!(api.get("/topologies/next-subnet").await["subnet"], "10.214.1.0/24");

        let web = api.created(&format!("{base}/deckies"), json!({"name": "web", "services": ["http", "ssh"]})).await;
        let gw = api.created(&format!("{base}/deckies"), json!({"name": "gw", "services": ["ssh"]})).await;
        let (status, _) = api.call(Method::POST, &format!("{base}/deckies"), Some(json!({"name": "Bad Name"}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, _) = api.call(Method::POST, &format!("{base}/deckies"), Some(json!({"name": "gw"}))).await;
        assert_eq!(status, StatusCode::CONFLICT, "a decky name taken");
        let stranger = json!({"decky_uuid": Uuid::new_v4(), "lan_id": dmz["id"]});
        let (status, _) = api.call(Method::POST, &format!("{base}/edges"), Some(stranger)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "a decky not of this topology");
        let home = api.created(&format!("{base}/edges"), json!({"decky_uuid": web["uuid"], "lan_id": dmz["id"]})).await;
        assert_eq!(home["ip"], "10.214.0.2");
        let gw_home =
            api.created(&format!("{base}/edges"), json!({"decky_uuid": gw["uuid"], "lan_id": inner["id"]})).await;
        let next = api.get(&format!("{base}/lans/{}/next-ip", dmz["id"].as_str().unwrap())).await;
        assert_eq!(next, json!({"subnet": "10.214.0.0/24", "ip": "10.214.0.3"}));
        let bridge = api
            .created(
                &format!("{base}/edges"),
                json!({"decky_uuid": gw["uuid"], "lan_id": dmz["id"], "forwards_l3": true}),
            )
            .await;
        assert_eq!((bridge["ip"].as_str(), bridge["is_bridge"].as_bool()), (Some("10.214.0.3"), Some(true)));
        let detail = api.detail(&id).await;
        assert_eq!(
            detail["deckies"].as_array().unwrap().iter().find(|d| d["name"] == "gw").unwrap()["ip"],
            "10.214.9.2"
        );
        assert!(
            detail["edges"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["decky_uuid"] == gw["uuid"])
                .all(|e| e["is_bridge"] == true)
        );
        assert_eq!(gw_home["ip"], "10.214.9.2");

        // The home LAN of a decky cannot go; a patch renames; edges and deckies go.
        let (status, _) =
            api.call(Method::DELETE, &format!("{base}/lans/{}", inner["id"].as_str().unwrap()), None).await;
        assert_eq!(status, StatusCode::CONFLICT);
        let (status, renamed) = api
            .call(
                Method::PATCH,
                &format!("{base}/lans/{}", inner["id"].as_str().unwrap()),
                Some(json!({"name": "core", "x": 3.0})),
            )
            .await;
        assert_eq!(
            (status, renamed["name"].as_str(), renamed["x"].as_f64()),
            (StatusCode::OK, Some("core"), Some(3.0))
        );
        let (status, _) =
            api.call(Method::DELETE, &format!("{base}/edges/{}", bridge["id"].as_str().unwrap()), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (status, body) =
            api.call(Method::DELETE, &format!("{base}/edges/{}", bridge["id"].as_str().unwrap()), None).await;
        assert_eq!((status, body["detail"].as_str()), (StatusCode::NOT_FOUND, Some("Edge not found")));
        let (status, _) =
            api.call(Method::DELETE, &format!("{base}/deckies/{}", web["uuid"].as_str().unwrap()), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let detail = api.detail(&id).await;
        assert_eq!((detail["deckies"].as_array().unwrap().len(), detail["edges"].as_array().unwrap().len()), (1, 1));

        // Not pending: the child routes refuse, and point at the queue.
        api.api
            .state
            .db
            .set_topology_status(id.parse().unwrap(), None, TopologyStatus::Deploying, None, chrono::Utc::now())
            .await
            .unwrap();
        let (status, body) = api.call(Method::POST, &format!("{base}/lans"), Some(json!({"name": "late"}))).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(
            body["detail"],
            "Topology is 'deploying'; free-form child edits are pending-only.  Use the mutation queue for active topologies."
        );
        api.api.stop().await;
    }
}

#[tokio::test]
async fn the_mutation_queue_is_open_only_on_live_topologies() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let topology = api.created("/topologies/", generate("live", 5)).await;
        let id = topology["id"].as_str().unwrap().to_string();
        let path = format!("/topologies/{id}/mutations");
        let add = json!({"op": "add_lan", "payload": {"name": "extra"}});
        let (status, body) = api.call(Method::POST, &path, Some(add.clone())).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(
            body["detail"],
            "Topology is 'pending'; the mutation queue is only open for 'active' or 'degraded' topologies.  Use child-CRUD endpoints while pending."
        );
        let uuid: Uuid = id.parse().unwrap();
        let db_handle = &api.api.state.db;
        db_handle.set_topology_status(uuid, None, TopologyStatus::Deploying, None, chrono::Utc::now()).await.unwrap();
        db_handle.set_topology_status(uuid, None, TopologyStatus::Active, None, chrono::Utc::now()).await.unwrap();

        let (status, body) = api.call(Method::POST, &path, Some(add.clone())).await;
        assert_eq!((status, body["state"].as_str()), (StatusCode::ACCEPTED, Some("pending")), "{body}");
        let mutation_id = body["mutation_id"].as_str().unwrap().to_string();
        let version = api.detail(&id).await["topology"]["version"].as_i64().unwrap();
        let (status, body) = api
            .call(
                Method::POST,
                &path,
                Some(json!({"op": "add_lan", "payload": {"name": "x2"}, "expected_version": version - 1})),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["detail"], format!("Version conflict: expected {}, current {version}", version - 1));
        for (body, want) in [
            (json!({"op": "explode"}), StatusCode::UNPROCESSABLE_ENTITY),
            (json!({"op": "remove_lan", "payload": {}}), StatusCode::BAD_REQUEST),
            (
                json!({"op": "add_decky", "payload": {"name": "d", "lan": "LAN-00", "services": ["gopher"]}}),
                StatusCode::BAD_REQUEST,
            ),
            (json!({"op": "add_decky", "payload": {"name": "Not A Name", "lan": "LAN-00"}}), StatusCode::BAD_REQUEST),
            (json!({"op": "update_lan", "payload": {"name": "LAN-00", "subnet": 7}}), StatusCode::BAD_REQUEST),
            (json!({"op": "add_lan", "payload": {"name": "y", "bogus": 1}}), StatusCode::BAD_REQUEST),
            (json!({"payload": {}}), StatusCode::BAD_REQUEST),
        ] {
            let (status, answer) = api.call(Method::POST, &path, Some(body.clone())).await;
            assert_eq!(status, want, "{body}: {answer}");
        }
        // What applies is decided when it is applied: a queued op may name what an earlier one makes.
        let (status, _) =
            api.call(Method::POST, &path, Some(json!({"op": "remove_lan", "payload": {"name": "extra"}}))).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let listed = api.get(&path).await;
        assert_eq!(listed.as_array().unwrap().len(), 2);
        let listed = json!([listed[1].clone()]);
        assert_eq!(listed[0]["id"], mutation_id.as_str());
        assert_eq!((listed[0]["op"].as_str(), listed[0]["state"].as_str()), (Some("add_lan"), Some("pending")));
        assert_eq!(listed[0]["payload"], json!({"name": "extra"}));
        assert_eq!(api.api.ok(&path, &api.admin, &[("state", "applied")]).await, json!([]));
        let reply = api.api.get(&path, Some(&api.admin), &[("state", "sideways")]).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);

        // Live: no delete, no deploy.
        let (status, body) = api.call(Method::DELETE, &format!("/topologies/{id}"), None).await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (StatusCode::CONFLICT, Some("Topology is 'active'; teardown to 'torn_down' before delete."))
        );
        let (status, body) = api.call(Method::POST, &format!("/topologies/{id}/deploy"), None).await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (StatusCode::CONFLICT, Some("Topology is 'active'; only 'pending' topologies can be deployed."))
        );
        api.api.stop().await;
    }
}

#[tokio::test]
async fn a_mutation_moves_the_version_once_from_enqueue_to_applied() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let topology = api.created("/topologies/blank", json!({"name": "versioned"})).await;
        let id = topology["id"].as_str().unwrap().to_string();
        api.created(&format!("/topologies/{id}/lans"), json!({"name": "only"})).await;
        let uuid: Uuid = id.parse().unwrap();
        let store = &api.api.state.db;
        store.set_topology_status(uuid, None, TopologyStatus::Deploying, None, chrono::Utc::now()).await.unwrap();
        store.set_topology_status(uuid, None, TopologyStatus::Active, None, chrono::Utc::now()).await.unwrap();
        let version = || async { api.detail(&id).await["topology"]["version"].as_i64().unwrap() };
        let before = version().await;

        // Moving a LAN on the map needs no engine: the mutation applies.
        let body = json!({"op": "update_lan", "payload": {"name": "only", "x": 4.0}, "expected_version": before});
        let (status, _) = api.call(Method::POST, &format!("/topologies/{id}/mutations"), Some(body)).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        assert_eq!(version().await, before + 1, "{}: queued", db.name);
        let now = chrono::Utc::now();
        let claim = store.claim_mutation("test", now, now - chrono::Duration::minutes(5)).await.unwrap();
        let state = api.api.state.topologies.apply(&claim.mutation.expect("a pending mutation")).await;
        assert_eq!(state, svc::db::MutationState::Applied);
        assert_eq!(version().await, before + 1, "{}: applying it moves the version no further", db.name);
        assert_eq!(api.detail(&id).await["lans"][0]["x"], 4.0);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn a_deploy_or_teardown_without_an_engine_is_refused_and_changes_nothing() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let topology = api.created("/topologies/", generate("doomed", 9)).await;
        let id = topology["id"].as_str().unwrap().to_string();
        let before = api.get(&format!("/topologies/{id}/status-events")).await;
        let (status, body) = api.call(Method::POST, &format!("/topologies/{id}/deploy"), None).await;
        assert_eq!(
            (status, body["detail"].as_str()),
            (StatusCode::CONFLICT, Some("Container runtime unavailable")),
            "{}",
            db.name
        );
        assert_eq!(api.detail(&id).await["topology"]["status"], "pending");
        assert_eq!(api.get(&format!("/topologies/{id}/status-events")).await, before);

        // A failed one cannot be torn down either while the engine is away; delete still works.
        let uuid: Uuid = id.parse().unwrap();
        let store = &api.api.state.db;
        store.set_topology_status(uuid, None, TopologyStatus::Deploying, None, chrono::Utc::now()).await.unwrap();
        store.set_topology_status(uuid, None, TopologyStatus::Failed, None, chrono::Utc::now()).await.unwrap();
        let (status, _) = api.call(Method::POST, &format!("/topologies/{id}/teardown"), None).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(api.detail(&id).await["topology"]["status"], "failed");
        let (status, _) = api.call(Method::POST, &format!("/topologies/{}/deploy", Uuid::new_v4()), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "an unknown topology is 404 first");
        let (status, _) = api.call(Method::DELETE, &format!("/topologies/{id}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn the_event_stream_needs_a_ticket_or_bearer_and_opens_with_a_snapshot() {
    let db = TestDb::sqlite();
    let api = start(&db).await;
    let topology = api.created("/topologies/", generate("watched", 3)).await;
    let id = topology["id"].as_str().unwrap().to_string();
    let uuid: Uuid = id.parse().unwrap();
    let store = &api.api.state.db;
    store.set_topology_status(uuid, None, TopologyStatus::Deploying, None, chrono::Utc::now()).await.unwrap();
    store.set_topology_status(uuid, None, TopologyStatus::Active, None, chrono::Utc::now()).await.unwrap();
    let (_, queued) = api
        .call(
            Method::POST,
            &format!("/topologies/{id}/mutations"),
            Some(json!({"op": "add_lan", "payload": {"name": "n"}})),
        )
        .await;

    let url = api.api.url(&format!("/topologies/{id}/events"));
    let anonymous = api.api.client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let by_query = api.api.client.get(&url).query(&[("token", api.admin.as_str())]).send().await.unwrap();
    assert_eq!(by_query.status(), StatusCode::UNAUTHORIZED, "a token in the query never authenticates");
    let unknown = api
        .api
        .client
        .get(api.api.url(&format!("/topologies/{}/events", Uuid::new_v4())))
        .bearer_auth(&api.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(unknown.json::<Value>().await.unwrap()["detail"], "Topology not found");

    let ticket: Value = api
        .api
        .client
        .post(api.api.url("/auth/sse-ticket"))
        .bearer_auth(&api.admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let response =
        api.api.client.get(&url).query(&[("ticket", ticket["ticket"].as_str().unwrap())]).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = EventStream::new(response);
    let snapshot = opening(&mut stream).await;
    let data = snapshot.json();
    assert_eq!((data["topology_id"].as_str(), data["status"].as_str()), (Some(id.as_str()), Some("active")));
    assert_eq!(data["in_flight"][0]["id"], queued["mutation_id"]);
    assert_eq!(
        data["in_flight"][0]["payload"],
        json!({"name": "n"}),
        "the payload is an object, not DECNET's JSON text"
    );
    drop(stream);
    api.api.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_dropped_not_buffered() {
    let db = TestDb::sqlite();
    let (nats, api) = start_with_bus(&db).await;
    let topology = api.created("/topologies/blank", json!({"name": "flooded"})).await;
    let id = topology["id"].as_str().unwrap().to_string();
    let mut stream = api.events(&id).await;
    opening(&mut stream).await;

    // The client reads nothing while far more events arrive than the socket and the stream's
    // backlog hold; then it reads: the stream ends instead of having kept them all.
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let subject = format!("topology.{id}.status");
    let sent = 200_000;
    let event =
        json!({"topic": subject, "type": "status", "ts": 0.0, "payload": {"state": "active", "pad": "x".repeat(200)}})
            .to_string();
    for _ in 0..sent {
        bus.publish(subject.clone(), event.clone().into()).await.unwrap();
    }
    bus.flush().await.unwrap();
    let mut frames = 0usize;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(frame) = stream.next_within(std::time::Duration::from_secs(60)).await {
            frames += usize::from(frame.event.as_deref() == Some("status"));
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream of a client that fell behind was not ended");
    assert!(frames < sent, "{frames} of {sent} frames were kept for it");
    api.api.stop().await;
}

#[tokio::test]
async fn the_stream_forwards_the_decky_events_of_its_own_topology_only() {
    let db = TestDb::sqlite();
    let (nats, api) = start_with_bus(&db).await;
    let watched = api.created("/topologies/blank", json!({"name": "watched"})).await;
    let other = api.created("/topologies/blank", json!({"name": "other"})).await;
    let id = watched["id"].as_str().unwrap().to_string();
    let mut stream = api.events(&id).await;
    opening(&mut stream).await;

    // In publishing order: another topology's decky, a fleet decky (no topology), then this
    // topology's. One subscription carries all three in order, so when the third arrives first
    // the other two were left out.
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let service_added = |decky: &str, topology: Value| {
        let subject = format!("decky.{decky}.service_added");
        let payload =
            json!({"decky_name": decky, "service_name": "ftp", "topology_id": topology, "services": ["ssh", "ftp"]});
        (subject.clone(), json!({"topic": subject, "type": "service_added", "ts": 1.5, "payload": payload}))
    };
    for (subject, event) in [
        service_added("elsewhere", other["id"].clone()),
        (
            "decky.flat.mutation".to_string(),
            json!({"topic": "decky.flat.mutation", "type": "mutation", "ts": 1.0, "payload": {"decky": "flat"}}),
        ),
        service_added("inside", watched["id"].clone()),
    ] {
        bus.publish(subject, event.to_string().into()).await.unwrap();
    }
    bus.flush().await.unwrap();
    let frame = stream.next_event(PATIENCE).await.expect("the stream is open");
    assert_eq!(frame.event.as_deref(), Some("decky.service_added"), "{frame:?}");
    assert_eq!(frame.json(), service_added("inside", watched["id"].clone()).1);
    api.api.stop().await;
}

#[tokio::test]
async fn a_restart_ends_deploys_and_teardowns_it_stranded() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let stranded = api.created("/topologies/blank", json!({"name": "stranded"})).await;
        let recent = api.created("/topologies/blank", json!({"name": "recent"})).await;
        let store = api.api.state.db.clone();
        let hours_ago = chrono::Utc::now() - chrono::Duration::hours(2);
        for (topology, at) in [(&stranded, hours_ago), (&recent, chrono::Utc::now())] {
            let id: Uuid = topology["id"].as_str().unwrap().parse().unwrap();
            store.set_topology_status(id, None, TopologyStatus::Deploying, None, at).await.unwrap();
        }
        api.api.stop().await;

        // The next start fails the old one with the reason; one moved lately may be another
        // replica's, and is left alone.
        let vars = [("SVC_DOCKER_HOST", NO_ENGINE)];
        let restarted = TestApi::start(db.api_config(&vars)).await;
        let store = &restarted.state.db;
        let id: Uuid = stranded["id"].as_str().unwrap().parse().unwrap();
        let events = store.status_events(id, 10).await.unwrap();
        assert_eq!(
            (events[0].to_status, events[0].reason.as_deref()),
            (TopologyStatus::Failed, Some("master restarted during operation")),
            "{}",
            db.name
        );
        let id: Uuid = recent["id"].as_str().unwrap().parse().unwrap();
        assert_eq!(store.topology(id).await.unwrap().status, TopologyStatus::Deploying);
        restarted.stop().await;
    }
}
