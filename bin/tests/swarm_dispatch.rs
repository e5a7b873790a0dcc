//! A deploy in swarm mode between real processes: `svc api` with the swarm on spreads 8 deckies
//! over four enrolled hosts, two per host in name order, each record carrying its host; three real
//! `svc agent`s take theirs (their engines are absent, so each decky fails there, and the failure
//! comes back through the heartbeat with the fleet's own reason), and the fourth host, whose agent
//! went down after its host became `active` (the master has not yet missed it), fails its two
//! records at once as unreachable, and its deckies are on record there as `failed` though it never
//! reported them (each dispatched decky has its shard before any heartbeat). A host never heard
//! from gets nothing. A second deploy that pins a decky to another host must first have the host
//! that runs it tear it down; that agent cannot (no engine), so the new host is sent nothing.

use svc_test_support::processes as common;

use std::collections::BTreeMap;

use common::swarm::{agent_command, enroll, listening, master_command, master_store};
use common::{Proc, admin_token, api_call, eventually, free_port, start_api};
use serde_json::json;
use svc::db::{HostStatus, ShardFilter, ShardState};
use svc::swarm::pki::Ca;

const INI: &str = "[general]\nnet = 172.30.98.0/24\n\n[web]\narchetype = web-server\namount = 6\n\n\
                   [db]\nservices = ssh\n\n[mail]\nservices = smtp\n";

#[tokio::test]
async fn a_swarm_deploy_lands_two_deckies_per_host_and_a_down_host_fails_its_own_fast() {
    let dir = tempfile::tempdir().unwrap();
    let (api, api_port, swarm_port) = master_command(dir.path(), "127.0.0.1");
    let api = start_api(api, api_port).await;
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));

    let mut hosts = BTreeMap::new();
    let mut agents: Vec<Proc> = Vec::new();
    for name in ["alpha", "bravo", "charlie", "delta"] {
        let leaf = ca.issue(name, &["127.0.0.1".to_string()]).unwrap();
        let port = free_port();
        let host = enroll(&db, name, "127.0.0.1", port, &leaf.fingerprint).await;
        let mut command = agent_command(&dir.path().join(name), &ca, &leaf, "127.0.0.1", port);
        command
            .env("SVC_MASTER_HOST", "127.0.0.1")
            .env("SVC_SWARM_PORT", swarm_port.to_string())
            .env("SVC_HOST_UUID", host.uuid.to_string())
            .env("SVC_AGENT_HEARTBEAT_S", "0.5");
        agents.push(Proc::spawn(command));
        listening("127.0.0.1", port).await;
        hosts.insert(host.uuid.to_string(), name);
    }
    // Enrolled but never heard from: not a host deckies go to.
    let leaf = ca.issue("echo", &["127.0.0.1".to_string()]).unwrap();
    enroll(&db, "echo", "127.0.0.1", free_port(), &leaf.fingerprint).await;
    eventually("the four agents' heartbeats make their hosts active", || async {
        db.swarm_hosts(Some(HostStatus::Active)).await.is_ok_and(|active| active.len() == 4)
    })
    .await;
    // Delta's agent dies; the master misses it only after three of its own 30 s intervals.
    drop(agents.pop());

    let token = admin_token(api_port).await;
    let body = json!({"ini_content": INI});
    let (status, accepted) = api_call(api_port, &token, reqwest::Method::POST, "/deckies/deploy", Some(body)).await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["mode"], "swarm");
    let ids: Vec<String> =
        accepted["lifecycle_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    assert_eq!(ids.len(), 8);
    let query: Vec<String> = ids.iter().map(|id| format!("ids={id}")).collect();
    let path = format!("/deckies/lifecycle?{}", query.join("&"));
    let rows = || async {
        let (_, body) = api_call(api_port, &token, reqwest::Method::GET, &path, None).await;
        body["rows"].as_array().cloned().unwrap_or_default()
    };
    eventually("every record ends", || async {
        let rows = rows().await;
        rows.len() == 8 && rows.iter().all(|r| r["status"] == "failed" || r["status"] == "succeeded")
    })
    .await;

    // Config order web-01..06, db, mail over alpha, bravo, charlie, delta: two each.
    let mut per_host: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for row in rows().await {
        let host = hosts[row["host_uuid"].as_str().expect("each record names its host")];
        let error = row["error"].as_str().unwrap_or_default().to_string();
        per_host.entry(host).or_default().push((row["decky_name"].as_str().unwrap().to_string(), error));
    }
    let names = |host: &str| -> Vec<String> {
        let mut names: Vec<String> = per_host[host].iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        names
    };
    assert_eq!(names("alpha"), ["web-01", "web-05"]);
    assert_eq!(names("bravo"), ["web-02", "web-06"]);
    assert_eq!(names("charlie"), ["db", "web-03"]);
    assert_eq!(names("delta"), ["mail", "web-04"]);
    for (_, error) in &per_host["delta"] {
        assert_eq!(error, "host unreachable");
    }
    for host in ["alpha", "bravo", "charlie"] {
        for (decky, error) in &per_host[host] {
            // The agent's own fleet tried, on an engine that is not there; its reason came back.
            assert_eq!(
                error, "the container engine could not be reached; the deploy is retried when it answers",
                "{host}/{decky}"
            );
        }
    }
    // One shard per decky, on its host: the live hosts' reported by their heartbeats, delta's
    // written at dispatch and failed with its records.
    eventually("the live hosts' deckies are reported", || async {
        db.decky_shards(&ShardFilter::default())
            .await
            .is_ok_and(|shards| shards.len() == 8 && shards.iter().filter(|s| s.last_seen.is_some()).count() == 6)
    })
    .await;
    let shards = db.decky_shards(&ShardFilter::default()).await.unwrap();
    for shard in &shards {
        let host = hosts[&shard.host_uuid.to_string()];
        assert!(names(host).contains(&shard.decky_name), "{} recorded on {host}", shard.decky_name);
        if host == "delta" {
            assert_eq!((shard.state, shard.last_error.as_deref()), (ShardState::Failed, Some("host unreachable")));
        }
    }
    assert!(api.output().contains("Deploy not delivered to the agent"), "the unreachable host is logged");

    // `db` runs on charlie; pinned to alpha, it must leave charlie first. Charlie's agent cannot
    // remove it (no engine), so alpha is sent nothing and db's record says why: one decky, one host.
    let moved = "[general]\nnet = 172.30.98.0/24\n\n[db]\nservices = ssh\nhost = alpha\n";
    let (status, accepted) =
        api_call(api_port, &token, reqwest::Method::POST, "/deckies/deploy", Some(json!({"ini_content": moved}))).await;
    assert_eq!(status, 202, "{accepted}");
    let path = format!("/deckies/lifecycle?ids={}", accepted["lifecycle_ids"][0].as_str().unwrap());
    eventually("the move's record fails", || async {
        let (_, body) = api_call(api_port, &token, reqwest::Method::GET, &path, None).await;
        body["rows"][0]["status"] == "failed"
    })
    .await;
    let (_, body) = api_call(api_port, &token, reqwest::Method::GET, &path, None).await;
    assert_eq!(body["rows"][0]["error"], "a decky could not be removed from the host that runs it");
    let filter = ShardFilter { decky_name: Some("db".into()), ..ShardFilter::default() };
    let charlie = db.swarm_host_by_name("charlie").await.unwrap();
    assert_eq!(db.decky_shards(&filter).await.unwrap()[0].host_uuid, charlie.uuid, "db stays on charlie");
    assert!(api.output().contains("Decky not moved: its old host did not tear it down"), "the refusal is logged");

    // A decky recorded on delta, whose agent is down: mutating or deleting it through the fleet
    // routes reaches for delta, and says plainly that it could not.
    let delta = db.swarm_host_by_name("delta").await.unwrap();
    let mut stranded = shards[0].clone();
    (stranded.decky_name, stranded.host_uuid) = ("stranded".into(), delta.uuid);
    stranded.decky_config.as_mut().expect("the agent reported its config").name = "stranded".into();
    db.upsert_decky_shards(std::slice::from_ref(&stranded)).await.unwrap();
    let (status, body) = api_call(api_port, &token, reqwest::Method::POST, "/deckies/stranded/mutate", None).await;
    assert_eq!(
        (status, &body["detail"]),
        (409, &json!("Swarm host 'delta' did not mutate 'stranded': host unreachable")),
        "{body}"
    );
    let (_, mine) = api_call(api_port, &token, reqwest::Method::GET, "/deckies", None).await;
    let listed = mine.as_array().unwrap().iter().find(|d| d["name"] == "stranded").cloned().unwrap();
    assert_eq!((&listed["host_name"], &listed["host_uuid"]), (&json!("delta"), &json!(delta.uuid.to_string())));
    let (status, body) = api_call(api_port, &token, reqwest::Method::DELETE, "/deckies/stranded", None).await;
    assert_eq!(
        (status, &body["detail"]),
        (409, &json!("agent teardown failed on swarm host 'delta': host unreachable")),
        "{body}"
    );
    let filter = ShardFilter { decky_name: Some("stranded".into()), ..ShardFilter::default() };
    let left = db.decky_shards(&filter).await.unwrap();
    assert_eq!(
        (left[0].state, left[0].last_error.as_deref()),
        (ShardState::TeardownFailed, Some("agent teardown failed"))
    );
    db.close().await;
}
