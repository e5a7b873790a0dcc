//! Canary tokens end to end, on a real engine (podman's Docker-compatible service) and a real
//! attacker host (a network namespace): every kind's bait is planted in a running decky, read back
//! there as its preview's bytes, planted again after the decky's container restarts (its drop
//! directories are in memory), and removed when the token is revoked. From the namespace each
//! calls home with a real client: curl on the URL a bait names, git on the planted repository
//! configuration, dig against the canary's DNS listener for the name an SSH key or a dump makes
//! its client look up. Each is a trigger on its token and at a webhook; the first is followed to
//! a `canary_triggered` line in `/logs` and the namespace's attacker profile.

use svc_test_support::processes as common;

use std::time::Duration;

use common::netns::NetnsHost;
use common::podman::Podman;
use common::{Nats, admin_token, api_call, api_command, deploy_and_wait, eventually, start_api};
use reqwest::Method;
use serde_json::{Value, json};
use svc_test_support::in_process::receiver::Receiver;

const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);
/// Every generator that calls home over HTTP.
const HTTP_KINDS: [&str; 8] = [
    "env_file",
    "git_config",
    "aws_creds",
    "honeydoc",
    "honeydoc_docx",
    "honeydoc_pdf",
    "fingerprint_html",
    "fingerprint_svg",
];

/// Every generator that calls home by a DNS lookup.
const DNS_KINDS: [&str; 2] = ["ssh_key", "mysql_dump"];
const ZONE: &str = "cdn-telemetry.example";

/// A token's preview: the bait's bytes as its generator makes them.
async fn preview(port: u16, admin: &str, uuid: &str) -> Vec<u8> {
    let url = format!("http://127.0.0.1:{port}/api/v1/canary/tokens/{uuid}/preview");
    let response = reqwest::Client::new().get(url).bearer_auth(admin).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

/// The first `http://…/c/{callback}…` URL in `text`, to the next quote, space or bracket.
fn callback_url(text: &str, callback: &str) -> Option<String> {
    let at = text.find(&format!("/c/{callback}"))?;
    let start = text[..at].rfind("http://")?;
    let end = text[at..].find(['"', '\'', ' ', '\n', '<', ')', ']']).map_or(text.len(), |e| at + e);
    Some(text[start..end].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_bait_calls_home_from_an_attacker_host_to_the_logs_the_attacker_and_a_webhook() {
    let podman = Podman::start("canary", 237);
    let attacker = NetnsHost::create(237);
    let nats = Nats::start();
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), Some(&nats));
    podman.configure(&mut command, &dir.path().join("ingest.log"));
    // Bound to every address so the attacker's namespace reaches the callback over its link (a
    // test's relaxation of the public-binding rules, which want an https:// callback base).
    let base = format!("http://{}:{port}", attacker.master_side);
    let dns_port = common::free_port().to_string();
    let dns = format!("{}:{dns_port}", attacker.master_side);
    command
        .env("SVC_TESTING", "1")
        .env("SVC_API_HOST", "0.0.0.0")
        .env("SVC_CANARY_HTTP_BASE", &base)
        .env("SVC_EMBED_PROFILER", "true")
        .env("SVC_EMBED_WEBHOOK", "true")
        .env("SVC_WEBHOOK_ALLOW_PRIVATE", "true")
        .env("SVC_CANARY_DNS_ZONE", ZONE)
        .env("SVC_CANARY_DNS_LISTEN", &dns)
        .env("SVC_CANARY_DNS_ANSWER", attacker.master_side.to_string());
    let api = start_api(command, port).await;
    let admin = admin_token(port).await;
    let call = |method: Method, path: String, body: Option<Value>| {
        let token = admin.clone();
        async move { api_call(port, &token, method, &path, body).await }
    };
    let gateway = podman.subnet.replace(".0/24", ".1");
    let ini = format!("[general]\nnet = {}\ngw = {gateway}\n[bait]\nservices = http\n", podman.subnet);
    let rows = deploy_and_wait(port, &admin, &ini, DEPLOY_DEADLINE).await;
    assert_eq!(rows[0]["status"], "succeeded", "{rows:?}\n{}", api.output());
    let container = format!("{}-bait", podman.fleet);
    let hook = json!({"name": "siem", "url": receiver.url("/in"), "topic_patterns": ["canary.>"]});
    let (status, body) = call(Method::POST, "/webhooks/".into(), Some(hook)).await;
    assert_eq!(status, 201, "{body}");

    // Each kind planted where its token says, byte for byte what its preview shows, the text ones
    // with their callback in sight.
    let mut tokens = Vec::new();
    for generator in HTTP_KINDS.into_iter().chain(DNS_KINDS) {
        let body = json!({"decky_name": "bait", "generator": generator});
        let (status, created) = call(Method::POST, "/canary/tokens".into(), Some(body)).await;
        assert_eq!(status, 201, "{generator}: {created}");
        tokens.push(created);
    }
    let planted = |uuid: String| async move {
        let (_, token) = call(Method::GET, format!("/canary/tokens/{uuid}"), None).await;
        token["state"] == "planted" && token["placed_at"].is_string()
    };
    for token in &tokens {
        let uuid = token["uuid"].as_str().unwrap().to_string();
        eventually("the bait is planted", || planted(uuid.clone())).await;
        let path = token["placement_path"].as_str().unwrap();
        let file = podman.read_file(&container, path).unwrap_or_else(|| panic!("{path} is in the decky"));
        assert_eq!(file.content, preview(port, &admin, &uuid).await, "{path} is its preview");
        assert_eq!((file.uid, file.gid), (65534, 65534), "{path} is the decky user's");
        // (The documents are compressed; an SSH key names its host in the configuration beside it.)
        let opaque = ["honeydoc_docx", "honeydoc_pdf", "ssh_key"].contains(&token["generator"].as_str().unwrap());
        let callback = token["callback_token"].as_str().unwrap();
        assert!(opaque || String::from_utf8_lossy(&file.content).contains(callback), "{path} carries its callback");
    }
    let env = &tokens[0];
    let env_path = env["placement_path"].as_str().unwrap().to_string();
    let env_callback = env["callback_token"].as_str().unwrap().to_string();
    let env_uuid = env["uuid"].as_str().unwrap().to_string();

    // The decky restarts: its in-memory directories come back empty, and the bait is planted again.
    let placed_at = |uuid: String| async move {
        call(Method::GET, format!("/canary/tokens/{uuid}"), None).await.1["placed_at"].clone()
    };
    let first_placed = placed_at(env_uuid.clone()).await;
    let before = podman.started_at(&container);
    podman.restart_container(&[], &container);
    assert_ne!(podman.started_at(&container), before, "the container restarted");
    eventually("the bait is planted again after the restart", || async {
        placed_at(env_uuid.clone()).await != first_placed && podman.read_file(&container, &env_path).is_some()
    })
    .await;

    // The attacker reads the .env and calls its URL with curl, from its own host.
    let file = podman.read_file(&container, &env_path).unwrap();
    let url = callback_url(&String::from_utf8_lossy(&file.content), &env_callback).expect("a callback URL in the .env");
    assert!(url.starts_with(&base), "{url} is under {base}");
    let mut curl = std::process::Command::new("curl");
    curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-A", "curl/8.5.0 attacker", &url]);
    let output = attacker.wrap(&curl).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "200", "{}", String::from_utf8_lossy(&output.stderr));
    let ip = attacker.address.to_string();

    // On the token: the trigger, who and what.
    let (status, triggers) = call(Method::GET, format!("/canary/tokens/{env_uuid}/triggers"), None).await;
    assert_eq!(status, 200);
    let trigger = &triggers["triggers"][0];
    assert_eq!(
        (trigger["src_ip"].as_str(), trigger["user_agent"].as_str()),
        (Some(ip.as_str()), Some("curl/8.5.0 attacker"))
    );
    let (_, token) = call(Method::GET, format!("/canary/tokens/{env_uuid}"), None).await;
    assert_eq!(token["trigger_count"], 1);
    // In the logs, as the decky's canary event.
    eventually("the trigger is in /logs", || async {
        let (_, logs) = call(Method::GET, "/logs?limit=100".into(), None).await;
        logs["data"].as_array().is_some_and(|rows| {
            rows.iter().any(|r| {
                r["attacker_ip"] == ip.as_str()
                    && r["decky"] == "bait"
                    && r["service"] == "canary"
                    && r["event_type"] == "canary_triggered"
            })
        })
    })
    .await;
    // On the attacker's profile.
    eventually("the attacker has a profile with the canary", || async {
        let (_, rows) = call(Method::GET, "/attackers".into(), None).await;
        rows["data"].as_array().is_some_and(|rows| {
            rows.iter().any(|r| {
                r["ip"] == ip.as_str() && r["services"].as_array().is_some_and(|s| s.contains(&json!("canary")))
            })
        })
    })
    .await;
    // At the webhook, once, naming the token and the caller.
    eventually("the webhook has the trigger", || async {
        receiver.hits().iter().any(|h| h.json()["topic"] == format!("canary.{env_uuid}.triggered"))
    })
    .await;
    let delivered: Vec<Value> = receiver.hits().iter().map(|h| h.json()).filter(|e| e["type"] == "triggered").collect();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(
        (delivered[0]["payload"]["token_id"].as_str(), delivered[0]["payload"]["src_ip"].as_str()),
        (Some(env_uuid.as_str()), Some(ip.as_str()))
    );

    // Every other bait calls home too: the planted git configuration through git's own client, the
    // SSH key and the dump by the name they make their client look up, the rest through the URL
    // they name (a document's, compressed, is its token's callback).
    for token in &tokens[1..] {
        let path = token["placement_path"].as_str().unwrap();
        let callback = token["callback_token"].as_str().unwrap();
        let content = podman.read_file(&container, path).unwrap().content;
        let repo = tempfile::tempdir_in(dir.path()).unwrap();
        let fetch = if DNS_KINDS.contains(&token["generator"].as_str().unwrap()) {
            // The name the bait makes its client look up (the SSH configuration's host; the dump
            // wraps its replication source in base64), asked of the canary's DNS listener as a
            // resolver would.
            let name = format!("{callback}.{ZONE}");
            if token["generator"] == "ssh_key" {
                let config = podman.read_file(&container, &path.replace("id_ed25519", "config")).unwrap().content;
                assert!(String::from_utf8_lossy(&config).contains(&format!("HostName {name}")), "{path}'s host");
            }
            let mut dig = std::process::Command::new("dig");
            dig.args([&format!("@{}", attacker.master_side), "-p", &dns_port, "+short", "+tries=1", &name, "A"]);
            dig
        } else if token["generator"] == "git_config" {
            assert!(
                std::process::Command::new("git")
                    .args(["init", "-q"])
                    .current_dir(repo.path())
                    .status()
                    .unwrap()
                    .success()
            );
            std::fs::write(repo.path().join(".git/config"), &content).unwrap();
            let mut git = std::process::Command::new("git");
            git.args(["ls-remote", "origin"]).current_dir(repo.path()).env("GIT_TERMINAL_PROMPT", "0");
            git
        } else {
            let url = callback_url(&String::from_utf8_lossy(&content), callback)
                .unwrap_or_else(|| format!("{base}/c/{callback}"));
            let mut curl = std::process::Command::new("curl");
            curl.args(["-s", "-o", "/dev/null", &url]);
            curl
        };
        let output = attacker.wrap(&fetch).output().unwrap();
        let said = format!("{} said: {}", token["generator"], String::from_utf8_lossy(&output.stderr));
        if fetch.get_program() == "dig" {
            let answer = String::from_utf8_lossy(&output.stdout);
            assert_eq!(answer.trim(), attacker.master_side.to_string(), "the listener's answer; {said}");
        }
        let uuid = token["uuid"].as_str().unwrap().to_string();
        eventually(&format!("the bait's callback is a trigger; {said}"), || async {
            call(Method::GET, format!("/canary/tokens/{uuid}"), None).await.1["trigger_count"].as_u64() >= Some(1)
        })
        .await;
    }
    let (_, triggers) =
        call(Method::GET, format!("/canary/tokens/{}/triggers", tokens[1]["uuid"].as_str().unwrap()), None).await;
    assert!(triggers["triggers"][0]["user_agent"].as_str().unwrap().starts_with("git/"), "{triggers}");
    let ssh = tokens.iter().find(|t| t["generator"] == "ssh_key").unwrap()["uuid"].as_str().unwrap();
    let (_, triggers) = call(Method::GET, format!("/canary/tokens/{ssh}/triggers"), None).await;
    let trigger = &triggers["triggers"][0];
    assert_eq!(
        (trigger["method"].as_str(), trigger["src_ip"].as_str()),
        (Some("DNS"), Some(attacker.address.to_string().as_str()))
    );
    assert!(trigger["dns_qname"].as_str().unwrap().ends_with(ZONE), "{trigger}");
    // (git asks twice: for the smart protocol's refs, then, dumb, for HEAD.)
    let mut triggered = 0;
    for token in &tokens {
        let uuid = token["uuid"].as_str().unwrap();
        triggered +=
            call(Method::GET, format!("/canary/tokens/{uuid}"), None).await.1["trigger_count"].as_u64().unwrap();
    }
    eventually("every trigger reached the webhook", || async {
        receiver.hits().iter().filter(|h| h.json()["type"] == "triggered").count() as u64 == triggered
    })
    .await;

    // Revoked: the bait leaves the decky; the token and its trigger stay.
    let (status, _) = call(Method::DELETE, format!("/canary/tokens/{env_uuid}"), None).await;
    assert_eq!(status, 200);
    assert!(podman.read_file(&container, &env_path).is_none(), "the revoked bait is gone");
    let (_, token) = call(Method::GET, format!("/canary/tokens/{env_uuid}"), None).await;
    assert_eq!((token["state"].as_str(), &token["trigger_count"]), (Some("revoked"), &json!(1)));
    let git_path = tokens[1]["placement_path"].as_str().unwrap();
    assert!(podman.read_file(&container, git_path).is_some(), "the others stay");

    // A token for a decky this host does not run fails, and says why.
    let (status, lost) =
        call(Method::POST, "/canary/tokens".into(), Some(json!({"decky_name": "nowhere", "generator": "env_file"})))
            .await;
    assert_eq!(status, 201);
    let uuid = lost["uuid"].as_str().unwrap().to_string();
    eventually("the token for a missing decky failed", || async {
        let (_, token) = call(Method::GET, format!("/canary/tokens/{uuid}"), None).await;
        token["state"] == "failed" && token["last_error"] == "decky nowhere is not running on this host"
    })
    .await;
}
