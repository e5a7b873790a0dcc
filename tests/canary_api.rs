//! The canary routes and the callback through the real server on every backend under test: tokens
//! of every generator created and listed in the fields DECNET's dashboard reads, revoked by delete;
//! blobs uploaded as multipart/form-data and refused when too big, partless or not multipart;
//! viewers refused every write and the blobs; and the callback, which answers a known token's
//! `/c/{token}/…` with a GIF and records the trigger (count, time, row, the line in the ingest file),
//! and answers anything else (unknown or malformed tokens, `..`, an oversized body) with the same
//! plain 404 page, recording nothing. `/logs`, the attacker and webhooks are `bin/tests/canary.rs`.

use svc_test_support::in_process as common;

use common::{RoleTokens, TestApi, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::canary::CanaryKind;

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
    let (api, RoleTokens { admin, viewer }) =
        TestApi::start_with_users(db.api_config(&[("SVC_INGEST_LOG_FILE", ingest.to_str().unwrap())])).await;
    Api { api, admin, viewer, ingest, _dir: dir }
}

impl Api {
    async fn call(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let reply = self.api.call(method, path, token, body).await;
        (reply.status, reply.body)
    }

    async fn create(&self, body: Value) -> Value {
        let (status, token) = self.call(&self.admin, Method::POST, "/canary/tokens", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{token}");
        token
    }

    /// The server's root (the callback is not under `/api/v1`).
    fn root(&self) -> String {
        self.api.base.trim_end_matches("/api/v1").to_string()
    }

    async fn upload(&self, token: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
        let response = self
            .api
            .client
            .post(self.api.url("/canary/blobs"))
            .bearer_auth(token)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

const BOUNDARY: &str = "canary-test-boundary-7f3a";

fn multipart(part: &str, filename: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{part}\"; filename=\"{filename}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

fn form() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

/// A raw HTTP/1.1 request to the server's root, so the path is sent exactly as written; the
/// status line and the body.
async fn raw(root: &str, request: &str) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = root.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&answer[..split]).to_string();
    (head, answer[split + 4..].to_vec())
}

#[tokio::test]
async fn tokens_of_every_generator_are_created_listed_and_revoked() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let mut made = Vec::new();
        for kind in CanaryKind::ALL {
            let body = json!({"decky_name": "web-01", "kind": "http", "generator": kind.as_str()});
            let (status, token) = api.call(&api.admin, Method::POST, "/canary/tokens", Some(body)).await;
            if kind.needs_dns() {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{}: {kind}: {token}", db.name);
                assert!(token["detail"].as_str().unwrap().contains("DNS zone"), "{token}");
                continue;
            }
            assert_eq!(status, StatusCode::CREATED, "{}: {kind}: {token}", db.name);
            assert_eq!(token["generator"], kind.as_str());
            assert_eq!(token["state"], "pending");
            assert_eq!(token["placed_at"], Value::Null);
            assert_eq!(token["trigger_count"], 0);
            assert!(token["placement_path"].as_str().unwrap().starts_with('/'), "{token}");
            assert_eq!(token["callback_token"].as_str().unwrap().len(), 32);
            made.push(token);
        }
        let with_path = api
            .create(json!({"decky_name": "web-01", "kind": "http", "generator": "env_file",
                           "placement_path": "/srv/app/.env"}))
            .await;
        assert_eq!(with_path["placement_path"], "/srv/app/.env");

        let listed = api.api.ok("/canary/tokens", &api.viewer, &[]).await;
        assert_eq!(listed["total"], made.len() + 1, "{}", db.name);
        let first = &listed["tokens"][0];
        let fields: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
        for field in [
            "uuid",
            "kind",
            "decky_name",
            "topology_id",
            "blob_uuid",
            "instrumenter",
            "generator",
            "placement_path",
            "callback_token",
            "placed_at",
            "last_triggered_at",
            "trigger_count",
            "created_by",
            "state",
            "last_error",
        ] {
            assert!(fields.contains(&field), "{field} in {first}");
        }
        let filtered = api.api.ok("/canary/tokens", &api.viewer, &[("decky_name", "nope")]).await;
        assert_eq!(filtered, json!({"tokens": [], "total": 0}));

        let uuid = made[0]["uuid"].as_str().unwrap();
        let one = api.api.ok(&format!("/canary/tokens/{uuid}"), &api.viewer, &[]).await;
        assert_eq!(one["callback_token"], made[0]["callback_token"]);
        let preview = api.api.client.get(api.api.url(&format!("/canary/tokens/{uuid}/preview")));
        let preview = preview.bearer_auth(&api.admin).send().await.unwrap();
        assert_eq!(preview.status(), StatusCode::OK);
        let bytes = preview.bytes().await.unwrap();
        let callback = made[0]["callback_token"].as_str().unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains(callback), "the bait carries its callback");

        let (status, body) = api.call(&api.admin, Method::DELETE, &format!("/canary/tokens/{uuid}"), None).await;
        assert_eq!((status, body), (StatusCode::OK, json!({"message": "ok"})));
        let revoked = api.api.ok(&format!("/canary/tokens/{uuid}"), &api.viewer, &[]).await;
        assert_eq!(revoked["state"], "revoked");
        let missing = format!("/canary/tokens/{}", uuid::Uuid::new_v4());
        let (status, body) = api.call(&api.admin, Method::DELETE, &missing, None).await;
        assert_eq!((status, body), (StatusCode::NOT_FOUND, json!({"detail": "token not found"})));

        for (body, status) in [
            (json!({"decky_name": "web-01"}), StatusCode::BAD_REQUEST),
            (json!({"decky_name": "web-01", "generator": "env_file", "blob_uuid": uuid}), StatusCode::BAD_REQUEST),
            (
                json!({"decky_name": "web-01", "generator": "env_file", "placement_path": "/a/../etc/x"}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"decky_name": "web-01", "generator": "env_file", "placement_path": "relative"}),
                StatusCode::BAD_REQUEST,
            ),
            (json!({"decky_name": "Web 01", "generator": "env_file"}), StatusCode::UNPROCESSABLE_ENTITY),
            (json!({"decky_name": "web-01", "generator": "nope"}), StatusCode::UNPROCESSABLE_ENTITY),
            (json!({"decky_name": "web-01", "blob_uuid": uuid::Uuid::new_v4()}), StatusCode::NOT_FOUND),
            (
                json!({"decky_name": "web-01", "generator": "env_file", "topology_id": uuid::Uuid::new_v4()}),
                StatusCode::NOT_FOUND,
            ),
        ] {
            let (got, answer) = api.call(&api.admin, Method::POST, "/canary/tokens", Some(body.clone())).await;
            assert_eq!(got, status, "{}: {body} → {answer}", db.name);
        }
        api.api.stop().await;
    }
}

#[tokio::test]
async fn viewers_are_refused_writes_and_blobs() {
    let db = TestDb::sqlite();
    let api = start(&db).await;
    let token = api.create(json!({"decky_name": "web-01", "generator": "aws_creds"})).await;
    let uuid = token["uuid"].as_str().unwrap();
    let body = json!({"decky_name": "web-01", "generator": "aws_creds"});
    for (method, path, body) in [
        (Method::POST, "/canary/tokens".to_string(), Some(body)),
        (Method::DELETE, format!("/canary/tokens/{uuid}"), None),
        (Method::GET, format!("/canary/tokens/{uuid}/preview"), None),
        (Method::GET, "/canary/blobs".to_string(), None),
        (Method::DELETE, format!("/canary/blobs/{uuid}"), None),
    ] {
        let (status, _) = api.call(&api.viewer, method.clone(), &path, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}");
    }
    let (status, _) = api.upload(&api.viewer, &form(), multipart("file", "a.txt", b"hello")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = api.call(&api.viewer, Method::GET, &format!("/canary/tokens/{uuid}/triggers"), None).await;
    assert_eq!(status, StatusCode::OK, "viewers read triggers");
    api.api.stop().await;
}

#[tokio::test]
async fn blobs_round_trip_as_multipart_and_bad_uploads_are_refused() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let pdf = b"%PDF-1.7\n% a report\n".to_vec();
        let (status, blob) = api.upload(&api.admin, &form(), multipart("file", "../../q3 report.pdf", &pdf)).await;
        assert_eq!(status, StatusCode::CREATED, "{}: {blob}", db.name);
        assert_eq!(blob["filename"], "q3 report.pdf", "only the base name is kept");
        assert_eq!(blob["content_type"], "application/pdf");
        assert_eq!(blob["size_bytes"], pdf.len());
        assert_eq!(blob["token_count"], 0);
        assert_eq!(blob["sha256"].as_str().unwrap().len(), 64);
        let (status, again) = api.upload(&api.admin, &form(), multipart("file", "copy.pdf", &pdf)).await;
        assert_eq!((status, &again["uuid"]), (StatusCode::CREATED, &blob["uuid"]), "the same bytes are one blob");

        let listed = api.api.ok("/canary/blobs", &api.admin, &[]).await;
        assert_eq!(listed["total"], 1);
        assert_eq!(listed["blobs"][0]["uuid"], blob["uuid"]);
        let uuid: uuid::Uuid = blob["uuid"].as_str().unwrap().parse().unwrap();
        assert_eq!(api.api.state.db.canary_blob_bytes(uuid).await.unwrap(), pdf);

        let token = api
            .create(json!({"decky_name": "web-01", "blob_uuid": uuid, "placement_path": "/home/admin/q3.pdf"}))
            .await;
        assert_eq!((&token["blob_uuid"], &token["generator"]), (&blob["uuid"], &Value::Null));
        let listed = api.api.ok("/canary/blobs", &api.admin, &[]).await;
        assert_eq!(listed["blobs"][0]["token_count"], 1);
        let path = format!("/canary/blobs/{uuid}");
        let (status, body) = api.call(&api.admin, Method::DELETE, &path, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        let preview = format!("/canary/tokens/{}/preview", token["uuid"].as_str().unwrap());
        assert_eq!(api.call(&api.admin, Method::GET, &preview, None).await.0, StatusCode::CONFLICT);

        let (status, _) = api.upload(&api.admin, &form(), multipart("file", "b.txt", b"other")).await;
        assert_eq!(status, StatusCode::CREATED);
        let other = api.api.ok("/canary/blobs", &api.admin, &[]).await["blobs"][0]["uuid"].clone();
        let (status, body) =
            api.call(&api.admin, Method::DELETE, &format!("/canary/blobs/{}", other.as_str().unwrap()), None).await;
        assert_eq!((status, body), (StatusCode::OK, json!({"message": "ok"})));
        let (status, _) =
            api.call(&api.admin, Method::DELETE, &format!("/canary/blobs/{}", other.as_str().unwrap()), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        let big = vec![b'a'; svc::http::canary::BLOB_LIMIT + 1];
        let (status, body) = api.upload(&api.admin, &form(), multipart("file", "big.txt", &big)).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{}: {body}", db.name);
        let huge = vec![b'a'; svc::http::canary::BLOB_LIMIT * 2];
        let (status, _) = api.upload(&api.admin, &form(), multipart("file", "huge.txt", &huge)).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        for (content_type, body, why) in [
            (form(), multipart("other", "a.txt", b"x"), "no file part"),
            (form(), multipart("file", "a.txt", b""), "an empty file"),
            ("application/json".to_string(), b"{\"file\": \"x\"}".to_vec(), "not multipart"),
            ("text/plain".to_string(), b"x".to_vec(), "not multipart"),
            (form(), b"garbage".to_vec(), "no boundary in the body"),
        ] {
            let (status, answer) = api.upload(&api.admin, &content_type, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {answer}");
            assert!(answer["detail"].is_string(), "{answer}");
        }
        assert_eq!(api.api.ok("/canary/blobs", &api.admin, &[]).await["total"], 1, "nothing refused was stored");
        api.api.stop().await;
    }
}

#[tokio::test]
async fn a_callback_answers_like_a_web_server_and_records_the_trigger() {
    for db in TestDb::all() {
        let api = start(&db).await;
        let token = api.create(json!({"decky_name": "web-01", "generator": "git_config"})).await;
        let callback = token["callback_token"].as_str().unwrap();
        let uuid = token["uuid"].as_str().unwrap();

        let response = api
            .api
            .client
            .get(format!("{}/c/{callback}/repo.git/info/refs?service=git-upload-pack&x=1", api.root()))
            .header("user-agent", "git/2.43.0")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{}", db.name);
        assert_eq!(response.headers()["content-type"], "image/gif");
        assert!(!response.headers().contains_key("x-content-type-options"), "none of the API's headers");
        assert!(response.bytes().await.unwrap().starts_with(b"GIF89a"));
        let head = api.api.client.head(format!("{}/c/{callback}", api.root())).send().await.unwrap();
        assert_eq!(head.status(), StatusCode::OK);
        let post = api.api.client.post(format!("{}/c/{callback}/webhook", api.root())).body("{}").send().await.unwrap();
        assert_eq!(post.status(), StatusCode::OK);

        let stored = api.api.ok(&format!("/canary/tokens/{uuid}"), &api.viewer, &[]).await;
        assert_eq!(stored["trigger_count"], 3, "{}: {stored}", db.name);
        assert!(stored["last_triggered_at"].is_string());
        let triggers = api.api.ok(&format!("/canary/tokens/{uuid}/triggers"), &api.viewer, &[]).await;
        assert_eq!(triggers["total"], 3);
        let first = triggers["triggers"].as_array().unwrap().iter().find(|t| t["method"] == "GET").unwrap();
        assert_eq!(first["src_ip"], "127.0.0.1");
        assert_eq!(first["user_agent"], "git/2.43.0");
        assert_eq!(first["request_path"], format!("/c/{callback}/repo.git/info/refs?service=git-upload-pack&x=1"));
        assert_eq!(first["headers"]["user-agent"], "git/2.43.0");
        assert_eq!(first["token_uuid"], uuid);
        let (status, _) = api.call(&api.viewer, Method::GET, &format!("/canary/tokens/{uuid}/triggers"), None).await;
        assert_eq!(status, StatusCode::OK);
        let paged = api.api.ok(&format!("/canary/tokens/{uuid}/triggers"), &api.viewer, &[("limit", "1")]).await;
        assert_eq!(paged["total"], 1);
        let reply =
            api.api.get(&format!("/canary/tokens/{uuid}/triggers"), Some(&api.viewer), &[("limit", "501")]).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);

        let lines = std::fs::read_to_string(&api.ingest).unwrap();
        let lines: Vec<_> = lines.lines().map(|line| svc::logline::parse(line).unwrap()).collect();
        assert_eq!(lines.len(), 3, "{}", db.name);
        let line = &lines[0];
        assert_eq!(
            (line.decky.as_str(), line.service.as_str(), line.event_type.as_str()),
            ("web-01", "canary", "canary_triggered")
        );
        assert_eq!(line.attacker_ip, "127.0.0.1");
        assert_eq!(line.field("token_uuid"), Some(uuid));
        assert_eq!(line.field("user_agent"), Some("git/2.43.0"));
        api.api.stop().await;
    }
}

#[tokio::test]
async fn anything_but_a_known_token_is_the_same_plain_404_and_records_nothing() {
    let db = TestDb::sqlite();
    let api = start(&db).await;
    let token = api.create(json!({"decky_name": "web-01", "generator": "env_file"})).await;
    let callback = token["callback_token"].as_str().unwrap().to_string();
    let unknown = "0123456789abcdef0123456789abcdef";
    let mut pages = Vec::new();
    for path in [
        format!("/c/{unknown}"),
        format!("/c/{unknown}/info/refs?sw=1"),
        "/c/NOT_A_TOKEN".to_string(),
        format!("/c/{}", "a".repeat(64)),
        "/c/".to_string(),
        "/c".to_string(),
    ] {
        let response = api.api.client.get(format!("{}{path}", api.root())).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(response.headers()["content-type"], "text/html", "{path}");
        pages.push(response.text().await.unwrap());
    }
    assert!(pages.windows(2).all(|pair| pair[0] == pair[1]), "one page for all");
    assert!(
        pages[0].contains("404 Not Found") && !pages[0].contains("detail") && !pages[0].to_lowercase().contains("svc")
    );

    // `..` sent as is: the segment after /c/ is the token, never resolved.
    let root = api.root();
    let (head, body) = raw(&root, "GET /c/../api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert_eq!(String::from_utf8_lossy(&body), pages[0]);
    let (head, _) =
        raw(&root, &format!("GET /c/{callback}/../../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            .await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "a known token below which `..` is still a trigger, stored as text: {head}"
    );
    // An oversized body is not read.
    let big = vec![b'x'; 4 * 1024 * 1024];
    let response = api.api.client.post(format!("{root}/c/{unknown}")).body(big.clone()).send().await;
    assert!(response.is_err() || response.unwrap().status() == StatusCode::NOT_FOUND);

    let uuid = token["uuid"].as_str().unwrap();
    let stored = api.api.ok(&format!("/canary/tokens/{uuid}"), &api.viewer, &[]).await;
    assert_eq!(stored["trigger_count"], 1, "only the known token's request counted");
    let triggers = api.api.ok(&format!("/canary/tokens/{uuid}/triggers"), &api.viewer, &[]).await;
    assert_eq!(triggers["triggers"][0]["request_path"], format!("/c/{callback}/../../../etc/passwd"));
    let lines = std::fs::read_to_string(&api.ingest).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");
    api.api.stop().await;
}
