//! The canary's DNS channel through the real server and the real `dig`, on every backend under
//! test: with `SVC_CANARY_DNS_ZONE` the `ssh_key` and `mysql_dump` generators are accepted, a lookup
//! of `{token}.{zone}` (any case) is answered with `SVC_CANARY_DNS_ANSWER` and recorded as a
//! trigger (method `DNS`, the name, the resolver), other names under the zone get NXDOMAIN and names
//! outside it REFUSED; a listener that cannot bind stops startup naming its address; and
//! `SVC_CANARY_TRIGGERS_PER_MINUTE` caps what a token records while its callback answers as ever.

use svc_test_support::in_process as common;

use common::{RoleTokens, TestApi, TestDb, user_token};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::db::Role;

const ZONE: &str = "trap.example.test";
const ANSWER: &str = "127.0.0.2";

struct Api {
    api: TestApi,
    admin: String,
    viewer: String,
    ingest: std::path::PathBuf,
    dns_port: u16,
    _dir: tempfile::TempDir,
}

/// A loopback UDP port nothing listens on (the API binds it right after).
fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn start(db: &TestDb, extra: &[(&str, &str)]) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let ingest = dir.path().join("ingest.log");
    let dns_port = free_udp_port();
    let listen = format!("127.0.0.1:{dns_port}");
    let mut vars = vec![("SVC_INGEST_LOG_FILE", ingest.to_str().unwrap()), ("SVC_CANARY_DNS_LISTEN", &listen)];
    vars.extend_from_slice(extra);
    let (api, RoleTokens { admin, viewer }) = TestApi::start_with_users(db.api_config(&vars)).await;
    Api { api, admin, viewer, ingest, dns_port, _dir: dir }
}

impl Api {
    async fn create(&self, generator: &str) -> (StatusCode, Value) {
        let body = json!({"decky_name": "db-01", "kind": "dns", "generator": generator});
        let reply = self.api.call(Method::POST, "/canary/tokens", &self.admin, Some(body)).await;
        (reply.status, reply.body)
    }

    /// `dig`'s status (`NOERROR`, `NXDOMAIN`…) and its answer section's addresses.
    async fn dig(&self, name: &str, qtype: &str) -> (String, Vec<String>) {
        let output = tokio::process::Command::new("dig")
            .args(["@127.0.0.1", "-p", &self.dns_port.to_string(), "+tries=1", "+time=3", "+norecurse"])
            .args([name, qtype])
            .output()
            .await
            .expect("dig is installed (scripts/lib.sh's ensure_canary_test_tools)");
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(output.status.success(), "dig {name} {qtype}: {text}");
        let status = text
            .split("status: ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("no status: {text}"))
            .to_string();
        let answers: Vec<Vec<&str>> = text
            .split(";; ANSWER SECTION:\n")
            .nth(1)
            .map(|section| {
                section
                    .lines()
                    .take_while(|line| !line.is_empty())
                    .map(|line| line.split_whitespace().collect())
                    .collect()
            })
            .unwrap_or_default();
        for record in &answers {
            assert_eq!((record[1], record[2], record[3]), ("0", "IN", "A"), "TTL 0: {text}");
            assert!(text.contains(";; flags: qr aa"), "authoritative: {text}");
        }
        (status, answers.iter().map(|record| record[4].to_string()).collect())
    }
}

#[tokio::test]
async fn a_lookup_of_a_known_token_is_answered_and_recorded() {
    for db in TestDb::all() {
        let api = start(&db, &[("SVC_CANARY_DNS_ZONE", "Trap.Example.TEST."), ("SVC_CANARY_DNS_ANSWER", ANSWER)]).await;
        let (status, token) = api.create("ssh_key").await;
        assert_eq!(status, StatusCode::CREATED, "{}: {token}", db.name);
        let (status, dump) = api.create("mysql_dump").await;
        assert_eq!(status, StatusCode::CREATED, "{}: {dump}", db.name);
        let (callback, uuid) = (token["callback_token"].as_str().unwrap(), token["uuid"].as_str().unwrap());
        let name = format!("{callback}.{ZONE}");

        assert_eq!(api.dig(&name, "A").await, ("NOERROR".to_string(), vec![ANSWER.to_string()]), "{}", db.name);
        let shouted = format!("{}.{}", callback.to_uppercase(), ZONE.to_uppercase());
        assert_eq!(api.dig(&shouted, "A").await, ("NOERROR".to_string(), vec![ANSWER.to_string()]));
        assert_eq!(api.dig(&format!("www.{name}"), "AAAA").await, ("NOERROR".to_string(), vec![]), "no data");
        let unknown = format!("0123456789abcdef0123456789abcdef.{ZONE}");
        assert_eq!(api.dig(&unknown, "A").await.0, "NXDOMAIN");
        assert_eq!(api.dig(ZONE, "A").await, ("NOERROR".to_string(), vec![]), "the apex exists");
        assert_eq!(api.dig(&format!("{callback}.example.org"), "A").await.0, "REFUSED");

        let stored = api.api.ok(&format!("/canary/tokens/{uuid}"), &api.viewer, &[]).await;
        assert_eq!(stored["trigger_count"], 3, "{}: {stored}", db.name);
        let triggers = api.api.ok(&format!("/canary/tokens/{uuid}/triggers"), &api.viewer, &[]).await;
        let triggers = triggers["triggers"].as_array().unwrap();
        let mut names: Vec<&str> = triggers.iter().map(|t| t["dns_qname"].as_str().unwrap()).collect();
        names.sort();
        assert_eq!(names, [name.clone(), name.clone(), format!("www.{name}")]);
        for trigger in triggers {
            assert_eq!((&trigger["method"], &trigger["src_ip"]), (&json!("DNS"), &json!("127.0.0.1")));
            assert_eq!((&trigger["user_agent"], &trigger["request_path"]), (&Value::Null, &Value::Null));
        }

        let lines = std::fs::read_to_string(&api.ingest).unwrap();
        let lines: Vec<_> = lines.lines().map(|line| svc::logline::parse(line).unwrap()).collect();
        assert_eq!(lines.len(), 3, "{}", db.name);
        assert_eq!((lines[0].decky.as_str(), lines[0].event_type.as_str()), ("db-01", "canary_triggered"));
        assert_eq!((lines[0].field("dns_qname"), lines[0].field("method")), (Some(name.as_str()), Some("DNS")));
        assert_eq!(lines[0].field("path"), None);
        api.api.stop().await;
    }
}

#[tokio::test]
async fn a_listener_that_cannot_bind_stops_startup_naming_its_address() {
    let db = TestDb::sqlite();
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let config = db.api_config(&[("SVC_CANARY_DNS_ZONE", ZONE), ("SVC_CANARY_DNS_LISTEN", &address)]);
    let Err(err) = svc::startup::Lifespan::start(config, vec![]).await else { panic!("started on a taken port") };
    let text = format!("{err:#}");
    assert!(text.contains("canary DNS") && text.contains(&address), "{text}");
}

#[tokio::test]
async fn a_token_past_its_limit_still_answers_but_records_nothing_more() {
    for db in TestDb::all() {
        let dir = tempfile::tempdir().unwrap();
        let ingest = dir.path().join("ingest.log");
        let vars = [("SVC_INGEST_LOG_FILE", ingest.to_str().unwrap()), ("SVC_CANARY_TRIGGERS_PER_MINUTE", "3")];
        let api = TestApi::start(db.api_config(&vars)).await;
        let admin = user_token(&api.state, "root", Role::Admin).await;
        let body = json!({"decky_name": "db-01", "generator": "ssh_key"});
        let reply = api.call(Method::POST, "/canary/tokens", &admin, Some(body)).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "no zone, no DNS bait: {}", reply.body);
        let body = json!({"decky_name": "web-01", "generator": "env_file"});
        let token = api.call(Method::POST, "/canary/tokens", &admin, Some(body)).await.body;
        let (callback, uuid) = (token["callback_token"].as_str().unwrap(), token["uuid"].as_str().unwrap());

        let root = api.base.trim_end_matches("/api/v1").to_string();
        for _ in 0..5 {
            let response = api.client.get(format!("{root}/c/{callback}")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{}", db.name);
            assert!(response.bytes().await.unwrap().starts_with(b"GIF89a"));
        }
        let stored = api.ok(&format!("/canary/tokens/{uuid}"), &admin, &[]).await;
        assert_eq!(stored["trigger_count"], 3, "{}: {stored}", db.name);
        let triggers = api.ok(&format!("/canary/tokens/{uuid}/triggers"), &admin, &[]).await;
        assert_eq!(triggers["total"], 3);
        assert_eq!(std::fs::read_to_string(&ingest).unwrap().lines().count(), 3);
        api.stop().await;
    }
}
