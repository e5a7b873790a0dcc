//! Swarm updates between real processes: `svc updater` runs its host's agent on the current
//! release. Through the master's `/swarm-updates/*` routes, a host in a network namespace of its
//! own takes a good release (its agent comes back reporting the new release), is rolled back to the
//! previous one, and refuses a broken one (an `svc` that exits at once: `rolled-back`, the old
//! release serving again); a host without a stored updater fingerprint is never dialled, and one
//! whose updater presents another certificate is refused. On the updater itself: a missing digest is
//! 400, a wrong one, `../`, an absolute path, a link or an oversize tarball is refused with the
//! release directory unchanged, and an agent's certificate on `/update` is 403. The updater starts
//! its agent again after a kill -9, and `push-self` replaces the updater in place with a release
//! that starts (`self-updated`) and refuses one that does not (`self-failed`, the old one serving).

use svc_test_support::processes as common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::netns::NetnsHost;
use common::swarm::{agent_ready, endpoint, enroll, listening, master_store, updater_command};
use common::{Proc, admin_token, api_call, api_command, eventually, free_port, start_api};
use reqwest::Method;
use serde_json::{Value, json};
use svc::swarm::client::{Answer, Endpoint};
use svc::swarm::pki::{Ca, MASTER_CN, fingerprint};
use svc::swarm::tls::PeerPin;

/// A multipart body of `fields`, as the master sends uploads.
fn multipart(fields: &[(&str, &[u8])]) -> (String, Bytes) {
    let boundary = "svc-test-boundary-3f9a";
    let mut body = Vec::new();
    for (name, value) in fields {
        let file = if *name == "tarball" { "; filename=\"tree.tgz\"" } else { "" };
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"{file}\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), Bytes::from(body))
}

/// A tar entry written as is, whatever its name or kind: what a hostile master could send.
struct Raw<'a> {
    name: &'a [u8],
    kind: tar::EntryType,
    link: Option<&'a str>,
    data: Vec<u8>,
}

fn tgz(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(entry.data.len() as u64);
        header.set_mode(0o755);
        header.set_entry_type(entry.kind);
        header.as_old_mut().name[..entry.name.len()].copy_from_slice(entry.name);
        if let Some(link) = entry.link {
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        tar.append(&header, entry.data.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn file(name: &str, data: &[u8]) -> Raw<'static> {
    Raw { name: name.as_bytes().to_vec().leak(), kind: tar::EntryType::Regular, link: None, data: data.to_vec() }
}

async fn upload(updater: &Endpoint, path: &str, fields: &[(&str, &[u8])]) -> Answer {
    updater.send(Method::POST, path, Some(multipart(fields))).await.unwrap()
}

/// Every name under `dir`, recursively (links not followed), sorted.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut names = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap().flatten() {
            names.push(entry.path());
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    names.sort();
    names
}

#[tokio::test]
async fn the_updater_refuses_unverified_or_unsafe_releases_and_other_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::load_or_create(&dir.path().join("ca")).unwrap();
    let agent_leaf = ca.issue("worker-u", &["127.0.0.1".to_string()]).unwrap();
    let updater_leaf = ca.issue("updater@worker-u", &["127.0.0.1".to_string()]).unwrap();
    let (agent_port, updater_port) = (free_port(), free_port());
    let host = dir.path().join("host");
    let mut command = updater_command(&host, &ca, &agent_leaf, &updater_leaf, "127.0.0.1", (agent_port, updater_port));
    command.env("SVC_UPDATER_MAX_MIB", "1");
    let updater_proc = Proc::spawn(command);
    listening("127.0.0.1", updater_port).await;

    let master_leaf = ca.issue(MASTER_CN, &[]).unwrap();
    let pin = PeerPin::Fingerprint(Some(updater_leaf.fingerprint.clone()));
    let master = endpoint("127.0.0.1", updater_port, ca.cert_pem(), &master_leaf, pin.clone(), true);
    agent_ready(&master).await;
    let health = master.get("/health").await.unwrap().json();
    assert_eq!(health["role"], "updater");
    assert_eq!(health["releases"].as_array().unwrap().len(), 1, "the running binary is the first release: {health}");

    // No previous release: nothing to roll back to.
    let answer = master.post("/rollback", &json!({})).await.unwrap();
    assert_eq!(
        (answer.status.as_u16(), answer.json()),
        (404, json!({"detail": "no previous release to roll back to"}))
    );

    let releases = host.join("opt");
    let before = tree(&releases);
    let good = tgz(&[file("svc", b"#!/bin/sh\nexit 0\n")]);
    let digest = fingerprint(&good);

    for path in ["/update", "/update-self"] {
        let answer = upload(&master, path, &[("tarball", &good), ("sha", b"x")]).await;
        assert_eq!(
            (answer.status.as_u16(), answer.json()),
            (400, json!({"detail": "sha256 of the tarball is required"})),
            "{path}"
        );
    }
    let answer = upload(&master, "/update-self", &[("tarball", &good), ("sha256", digest.as_bytes())]).await;
    assert_eq!(
        (answer.status.as_u16(), answer.json()),
        (400, json!({"detail": "self-update requires confirm_self=true (no auto-rollback)"}))
    );

    // A digest of other bytes, and one that is not a digest: refused before anything is written.
    let other = fingerprint(b"other bytes");
    for wrong in [other.as_str(), "zz", &digest[..63]] {
        let answer = upload(&master, "/update", &[("tarball", &good), ("sha256", wrong.as_bytes())]).await;
        assert_eq!(answer.status.as_u16(), 400, "{wrong}");
        assert_eq!(answer.json()["detail"]["error"], "sha256 mismatch: refused before extraction");
        assert_eq!(tree(&releases), before, "the release directory changed");
    }

    // Unsafe tarballs, each with its right digest.
    let oversize = tgz(&[file("svc", b"#!/bin/sh\n"), file("padding", &vec![0u8; 2 * 1024 * 1024])]);
    let hostile: Vec<(&str, Vec<u8>, &str)> = vec![
        ("dot-dot", tgz(&[file("svc", b"x"), file("../escaped", b"x")]), "tarball entry escapes the release directory"),
        ("absolute", tgz(&[file("/tmp/svc-updater-absolute", b"x")]), "tarball entry has an absolute path"),
        (
            "symlink",
            tgz(&[Raw { name: b"svc", kind: tar::EntryType::Symlink, link: Some("/bin/sh"), data: Vec::new() }]),
            "tarball entry is a link",
        ),
        (
            "hard link",
            tgz(&[Raw { name: b"svc", kind: tar::EntryType::Link, link: Some("/etc/passwd"), data: Vec::new() }]),
            "tarball entry is a link",
        ),
        (
            "device",
            tgz(&[Raw { name: b"null", kind: tar::EntryType::Char, link: None, data: Vec::new() }]),
            "tarball entry is not a regular file or directory",
        ),
        ("oversize", oversize, "tarball exceeds the size cap"),
        ("no binary", tgz(&[file("README", b"x")]), "tarball holds no svc binary"),
    ];
    for (what, archive, error) in &hostile {
        let sum = fingerprint(archive);
        let answer = upload(&master, "/update", &[("tarball", archive), ("sha256", sum.as_bytes())]).await;
        assert_eq!(answer.status.as_u16(), 400, "{what}: {}", answer.json());
        assert_eq!(answer.json()["detail"]["error"], *error, "{what}");
        assert_eq!(tree(&releases), before, "{what}: the release directory changed");
    }
    assert!(!host.join("opt/releases/escaped").exists() && !Path::new("/tmp/svc-updater-absolute").exists());

    // The agent's certificate (signed by the same CA) may read the health, never change a release.
    let as_agent = endpoint("127.0.0.1", updater_port, ca.cert_pem(), &agent_leaf, pin.clone(), true);
    assert_eq!(as_agent.get("/health").await.unwrap().status.as_u16(), 200);
    for path in ["/update", "/update-self"] {
        let answer = upload(&as_agent, path, &[("tarball", &good), ("sha256", digest.as_bytes())]).await;
        assert_eq!((answer.status.as_u16(), answer.json()), (403, json!({"detail": "master certificate required"})));
    }
    let answer = as_agent.post("/rollback", &json!({})).await.unwrap();
    assert_eq!(answer.status.as_u16(), 403);
    assert_eq!(tree(&releases), before);

    // An updater presenting another certificate (the agent's, on the updater's port) is refused by
    // the master's pin.
    let agent_pin = PeerPin::Fingerprint(Some(agent_leaf.fingerprint.clone()));
    let misled = endpoint("127.0.0.1", updater_port, ca.cert_pem(), &master_leaf, agent_pin, true);
    assert!(misled.get("/health").await.is_err(), "a wrong pin was accepted");
    eventually("the refusals are logged", || async {
        updater_proc.output().matches("Refused a master-only agent route").count() >= 3
    })
    .await;
}

/// The good release: this svc with bytes appended (an ELF runs the same), so its provenance
/// differs from the running one's. The broken one exits at once.
fn release_binaries(dir: &Path) -> (PathBuf, PathBuf) {
    let good = dir.join("svc-good");
    let mut bytes = std::fs::read(common::svc_binary()).unwrap();
    bytes.extend_from_slice(b"svc-test-release-marker");
    std::fs::write(&good, &bytes).unwrap();
    let broken = dir.join("svc-broken");
    std::fs::write(&broken, "#!/bin/sh\nexit 3\n").unwrap();
    for binary in [&good, &broken] {
        std::fs::set_permissions(binary, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    (good, broken)
}

/// The master's API (and its port), pushing `binary` as its release to updaters on `updater_port`.
fn master_command(dir: &Path, swarm_dir: &Path, updater_port: u16, binary: &Path) -> (std::process::Command, u16) {
    let (mut api, api_port) = api_command(dir, None);
    api.env("SVC_SWARM_DIR", swarm_dir)
        .env("SVC_UPDATER_PORT", updater_port.to_string())
        .env("SVC_SWARM_BUNDLE_BIN", binary);
    (api, api_port)
}

/// The master's routes against a real updater in its own namespace.
#[tokio::test]
async fn the_master_pushes_a_release_rolls_back_and_refuses_a_broken_one() {
    let net = NetnsHost::create(220);
    let dir = tempfile::tempdir().unwrap();
    let address = net.address.to_string();
    let swarm_dir = dir.path().join("swarm");
    let ca = Ca::load_or_create(&swarm_dir.join("ca")).unwrap();
    let agent_leaf = ca.issue("worker-1", std::slice::from_ref(&address)).unwrap();
    let updater_leaf = ca.issue("updater@worker-1", &[address.clone(), "127.0.0.1".to_string()]).unwrap();
    let (agent_port, updater_port) = (free_port(), free_port());
    let host = dir.path().join("host");
    let command = updater_command(&host, &ca, &agent_leaf, &updater_leaf, "0.0.0.0", (agent_port, updater_port));
    let mut command = command;
    // An agent's start (its store's migrations) on a loaded machine can take long.
    command.env("SVC_UPDATER_PROBE_S", "90");
    let _updater = Proc::spawn(net.wrap(&command));

    let (good, broken) = release_binaries(dir.path());
    let start = |binary: &Path| master_command(dir.path(), &swarm_dir, updater_port, binary);
    let (api, api_port) = start(&good);
    let api = start_api(api, api_port).await;
    let token = admin_token(api_port).await;
    let db = master_store(&dir.path().join("data"));
    let worker = enroll(&db, "worker-1", &address, agent_port, &agent_leaf.fingerprint).await;
    db.set_swarm_host_fingerprints(worker.uuid, &agent_leaf.fingerprint, Some(&updater_leaf.fingerprint))
        .await
        .unwrap();
    let call = |method: Method, path: &'static str, body: Option<Value>| {
        let token = token.clone();
        async move { api_call(api_port, &token, method, path, body).await }
    };

    // A host without an updater fingerprint is never dialled: a listener on its address counts.
    let trap = std::net::TcpListener::bind(("127.0.0.1", updater_port)).unwrap();
    trap.set_nonblocking(true).unwrap();
    let bare = enroll(&db, "worker-bare", "127.0.0.1", free_port(), &agent_leaf.fingerprint).await;
    let (status, body) = call(Method::POST, "/swarm-updates/push", Some(json!({"host_uuids": [bare.uuid]}))).await;
    assert_eq!((status, body), (404, json!({"detail": format!("Unknown or updater-less host(s): ['{}']", bare.uuid)})));
    let (status, body) = call(Method::POST, "/swarm-updates/rollback", Some(json!({"host_uuid": bare.uuid}))).await;
    assert_eq!(
        (status, body),
        (400, json!({"detail": "Host 'worker-bare' has no updater bundle — nothing to roll back."}))
    );
    assert!(trap.accept().is_err(), "the updater-less host was dialled");
    for body in [json!({}), json!({"host_uuids": [], "all": false}), json!({"host_uuids": [worker.uuid], "all": true})]
    {
        let (status, answer) = call(Method::POST, "/swarm-updates/push", Some(body)).await;
        assert_eq!((status, answer), (400, json!({"detail": "Specify exactly one of host_uuids or all=true."})));
    }

    let master_leaf = ca.issue(MASTER_CN, &[]).unwrap();
    let updater_pin = PeerPin::Fingerprint(Some(updater_leaf.fingerprint.clone()));
    agent_ready(&endpoint(&address, updater_port, ca.cert_pem(), &master_leaf, updater_pin, true)).await;
    eventually("the host's agent is healthy behind its updater", || async {
        let (_, body) = call(Method::GET, "/swarm-updates/hosts", None).await;
        body["hosts"]
            .as_array()
            .is_some_and(|hosts| hosts.len() == 1 && hosts[0]["reachable"] == true && hosts[0]["agent_status"] == "ok")
    })
    .await;
    let (_, hosts) = call(Method::GET, "/swarm-updates/hosts", None).await;
    let initial = hosts["hosts"][0]["current_sha"].as_str().unwrap().to_string();
    assert_eq!(hosts["hosts"][0]["previous_sha"], Value::Null);
    let agent_pin = PeerPin::Fingerprint(Some(agent_leaf.fingerprint.clone()));
    let agent = endpoint(&address, agent_port, ca.cert_pem(), &master_leaf, agent_pin, true);
    let release = || async { agent.get("/health").await.map(|answer| answer.json()["release"].clone()).ok() };
    assert_eq!(release().await, Some(json!(initial)), "the agent runs the first release");

    let (status, body) = call(Method::POST, "/swarm-updates/rollback", Some(json!({"host_uuid": worker.uuid}))).await;
    assert_eq!((status, body), (404, json!({"detail": "no previous release to roll back to"})));

    // The good release: updated, and the agent reports it.
    let (status, pushed) = call(Method::POST, "/swarm-updates/push", Some(json!({"host_uuids": [worker.uuid]}))).await;
    assert_eq!(status, 200, "{pushed}");
    let sha = pushed["sha"].as_str().unwrap().to_string();
    assert_ne!(sha, initial);
    assert!(pushed["tarball_bytes"].as_u64().unwrap() > 1000);
    let result = &pushed["results"][0];
    assert_eq!((result["status"].as_str(), result["http_status"].as_u64()), (Some("updated"), Some(200)), "{pushed}");
    assert_eq!(result["sha"], json!(sha));
    assert_eq!(release().await, Some(json!(sha)), "the agent came back on the new release");
    let (_, hosts) = call(Method::GET, "/swarm-updates/hosts", None).await;
    assert_eq!((&hosts["hosts"][0]["current_sha"], &hosts["hosts"][0]["previous_sha"]), (&json!(sha), &json!(initial)));

    // Rollback: the first release serves again.
    let (status, body) = call(Method::POST, "/swarm-updates/rollback", Some(json!({"host_uuid": worker.uuid}))).await;
    assert_eq!((status, &body["status"], &body["http_status"]), (200, &json!("rolled-back"), &json!(200)), "{body}");
    assert_eq!(release().await, Some(json!(initial)));

    // An updater presenting another certificate than the one stored is refused.
    db.set_swarm_host_fingerprints(worker.uuid, &agent_leaf.fingerprint, Some(&agent_leaf.fingerprint)).await.unwrap();
    let (status, body) = call(Method::POST, "/swarm-updates/push", Some(json!({"all": true}))).await;
    assert_eq!(status, 200);
    assert_eq!(
        (&body["results"][0]["status"], &body["results"][0]["detail"]),
        (&json!("failed"), &json!("transport failure"))
    );
    assert_eq!(release().await, Some(json!(initial)), "nothing was pushed");
    db.set_swarm_host_fingerprints(worker.uuid, &agent_leaf.fingerprint, Some(&updater_leaf.fingerprint))
        .await
        .unwrap();

    // The broken release: rolled back, the previous release serving again.
    drop(api);
    let (api, api_port_2) = start(&broken);
    let _api = start_api(api, api_port_2).await;
    let token = admin_token(api_port_2).await;
    let (status, pushed) =
        api_call(api_port_2, &token, Method::POST, "/swarm-updates/push", Some(json!({"host_uuids": [worker.uuid]})))
            .await;
    assert_eq!(status, 200, "{pushed}");
    let result = &pushed["results"][0];
    assert_eq!(
        (result["status"].as_str(), result["http_status"].as_u64()),
        (Some("rolled-back"), Some(409)),
        "{pushed}"
    );
    let stderr = result["stderr"].as_str().unwrap();
    assert!(stderr.starts_with("forward-probe: agent exited") && stderr.contains("rollback-probe: ok"), "{stderr}");
    assert_eq!(release().await, Some(json!(initial)), "the old release serves again");
}

/// The updater restarts its agent after the agent's own crash (kill -9). `push-self`: the updater
/// replaces itself with the pushed release and comes back on it (its agent healthy again); a release
/// that does not start is `self-failed`, and the old updater serves on.
#[tokio::test]
async fn the_updater_revives_its_agent_replaces_itself_and_keeps_serving_when_the_new_one_does_not_start() {
    let net = NetnsHost::create(253);
    let dir = tempfile::tempdir().unwrap();
    let address = net.address.to_string();
    let swarm_dir = dir.path().join("swarm");
    let ca = Ca::load_or_create(&swarm_dir.join("ca")).unwrap();
    let agent_leaf = ca.issue("worker-2", std::slice::from_ref(&address)).unwrap();
    let updater_leaf = ca.issue("updater@worker-2", std::slice::from_ref(&address)).unwrap();
    let (agent_port, updater_port) = (free_port(), free_port());
    let host = dir.path().join("host");
    let mut command = updater_command(&host, &ca, &agent_leaf, &updater_leaf, "0.0.0.0", (agent_port, updater_port));
    command.env("SVC_UPDATER_PROBE_S", "90");
    let updater_process = Proc::spawn(net.wrap(&command));
    let (good, broken) = release_binaries(dir.path());

    let master_leaf = ca.issue(MASTER_CN, &[]).unwrap();
    let updater_pin = PeerPin::Fingerprint(Some(updater_leaf.fingerprint.clone()));
    let updater = endpoint(&address, updater_port, ca.cert_pem(), &master_leaf, updater_pin, true);
    agent_ready(&updater).await;
    let health = || async { updater.get("/health").await.map(|answer| answer.json()).ok() };
    assert_eq!(health().await.unwrap()["updater_running"], Value::Null, "the updater runs as installed");

    // The agent's own crash: killed, it is started again by its updater.
    let agents = common::children_of(updater_process.pid());
    assert_eq!(agents.len(), 1, "the updater runs one agent: {agents:?}");
    rustix::process::kill_process(rustix::process::Pid::from_raw(agents[0]).unwrap(), rustix::process::Signal::KILL)
        .unwrap();
    eventually("the updater started another agent", || async {
        common::children_of(updater_process.pid()).iter().any(|pid| *pid != agents[0])
    })
    .await;
    agent_ready(&updater).await;

    let (api, api_port) = master_command(dir.path(), &swarm_dir, updater_port, &good);
    let api = start_api(api, api_port).await;
    let db = master_store(&dir.path().join("data"));
    let worker = enroll(&db, "worker-2", &address, agent_port, &agent_leaf.fingerprint).await;
    db.set_swarm_host_fingerprints(worker.uuid, &agent_leaf.fingerprint, Some(&updater_leaf.fingerprint))
        .await
        .unwrap();
    let push_self = |api_port: u16| async move {
        let token = admin_token(api_port).await;
        let body = json!({"host_uuids": [worker.uuid]});
        let (status, pushed) = api_call(api_port, &token, Method::POST, "/swarm-updates/push-self", Some(body)).await;
        assert_eq!(status, 200, "{pushed}");
        pushed
    };

    // The good release: the same process (pid) re-executes itself on it and runs its agent again.
    let pushed = push_self(api_port).await;
    let sha = pushed["sha"].as_str().unwrap().to_string();
    assert_eq!(pushed["results"][0]["status"], "self-updated", "{pushed}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while health().await.is_none_or(|health| health["updater_running"] != json!(sha)) {
        assert!(std::time::Instant::now() < deadline, "the updater never came back on its new release");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(common::alive(updater_process.pid()), "the updater was replaced in place");
    agent_ready(&updater).await;
    let health_now = health().await.unwrap();
    assert_eq!(health_now["updater_releases"][0]["sha"], json!(sha), "{health_now}");

    // A release that does not start: refused before it is installed, the updater serves on.
    drop(api);
    let (api, api_port) = master_command(dir.path(), &swarm_dir, updater_port, &broken);
    let _api = start_api(api, api_port).await;
    let pushed = push_self(api_port).await;
    let result = &pushed["results"][0];
    assert_eq!(
        (result["status"].as_str(), result["http_status"].as_u64()),
        (Some("self-failed"), Some(500)),
        "{pushed}"
    );
    let health_now = health().await.expect("the old updater still serves");
    assert_eq!(health_now["updater_running"], json!(sha), "{health_now}");
    assert_eq!(health_now["updater_releases"][0]["sha"], json!(sha), "nothing was installed: {health_now}");
    assert_eq!(health_now["agent_status"], "ok");
}
