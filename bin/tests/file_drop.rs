//! File drop on a real engine (podman's Docker-compatible service, started by the test): a file
//! dropped into a running decky lands with its content, mode, owner (the decky's user) and time,
//! as the container sees it; a path with `..`, outside the writable directories, or under a
//! symlink that leaves them is refused; a removal removes it; bad base64, an unknown decky, a
//! viewer and a file over the cap are refused.

use svc_test_support::processes as common;

use std::process::Command;
use std::time::Duration;

use common::podman::Podman;
use common::{admin_token, api_call, api_command, deploy_and_wait, start_api};
use reqwest::Method;
use serde_json::{Value, json};

const DEPLOY_DEADLINE: Duration = Duration::from_secs(180);

/// The file at `path` in `container`: (mode, uid, gid, mtime, content); `None` when there is none.
fn read_back(podman: &Podman, container: &str, path: &str) -> Option<(u32, u64, u64, u64, Vec<u8>)> {
    let file = podman.read_file(container, path)?;
    Some((file.mode, file.uid, file.gid, file.mtime, file.content))
}

/// Plants a symlink `name` → `target` in `dir` of `container`, through the engine's archive API
/// (the decky has no shell to make one with).
fn plant_symlink(podman: &Podman, container: &str, dir: &str, name: &str, target: &str) {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    header.set_mode(0o777);
    builder.append_link(&mut header, name, target).unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), builder.into_inner().unwrap()).unwrap();
    let status = Command::new("curl")
        .args(["-sf", "--unix-socket", &podman.socket().display().to_string(), "-H", "Content-Type: application/x-tar"])
        .arg("-T")
        .arg(file.path())
        .arg(format!("http://d/v1.41/containers/{container}/archive?path={dir}"))
        .status()
        .unwrap();
    assert!(status.success(), "the symlink is planted");
}

/// Standard base64 with padding (what a dashboard sends).
fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            let c = if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' };
            text.push(c);
        }
    }
    text
}

/// A viewer's token: created by the admin, its first password change done.
async fn viewer_token(port: u16, admin: &str) -> String {
    let create = json!({"username": "watcher", "password": "a first viewer password", "role": "viewer"});
    let (status, body) = api_call(port, admin, Method::POST, "/config/users", Some(create)).await;
    assert!(status < 300, "{status} {body}");
    let login = |password: &'static str| async move {
        let url = format!("http://127.0.0.1:{port}/api/v1/auth/login");
        let body = json!({"username": "watcher", "password": password});
        let response: Value = reqwest::Client::new().post(url).json(&body).send().await.unwrap().json().await.unwrap();
        response["access_token"].as_str().unwrap().to_string()
    };
    let first = login("a first viewer password").await;
    let change = json!({"old_password": "a first viewer password", "new_password": "the viewer's own password"});
    let (status, body) = api_call(port, &first, Method::POST, "/auth/change-password", Some(change)).await;
    assert!(status < 300, "{status} {body}");
    login("the viewer's own password").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_is_dropped_into_a_decky_with_its_mode_owner_and_time_and_removed_again() {
    let podman = Podman::start("fdrop", 248);
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    podman.configure(&mut command, &dir.path().join("ingest.log"));
    let api = start_api(command, port).await;
    let token = admin_token(port).await;
    let gateway = podman.subnet.replace(".0/24", ".1");
    let ini = format!("[general]\nnet = {}\ngw = {gateway}\n[bait]\nservices = http\n", podman.subnet);
    let rows = deploy_and_wait(port, &token, &ini, DEPLOY_DEADLINE).await;
    assert_eq!(rows[0]["status"], "succeeded", "{rows:?}\n{}", api.output());
    let container = format!("{}-bait", podman.fleet);
    let call = |method: Method, body: Value| {
        let token = token.clone();
        async move { api_call(port, &token, method, "/deckies/files", Some(body)).await }
    };

    // A key, private, a day old, owned by the decky's user, in a directory the drop makes.
    let key = b"-----BEGIN OPENSSH PRIVATE KEY-----\nbait\n";
    let path = "/home/admin/.ssh/id_rsa";
    let drop = json!({"decky_name": "bait", "topology_id": null, "path": path, "content_b64": b64(key),
        "mode": 0o600, "mtime_offset": -86400});
    let now = chrono::Utc::now().timestamp() as u64;
    let (status, body) = call(Method::POST, drop.clone()).await;
    assert_eq!((status, &body), (201, &json!({"message": "ok"})), "{}", api.output());
    assert_eq!(b64(b"ab"), "YWI=");
    let (mode, uid, gid, mtime, content) = read_back(&podman, &container, path).expect("the file is there");
    assert_eq!((mode, uid, gid, content.as_slice()), (0o600, 65534, 65534, &key[..]));
    assert!(mtime.abs_diff(now - 86_400) < 60, "a day old: {mtime} against {now}");
    // The default mode, and a file replaced in place.
    let (status, _) = call(Method::POST, json!({"decky_name": "bait", "path": path, "content_b64": b64(b"v2")})).await;
    assert_eq!(status, 201);
    let (mode, _, _, _, content) = read_back(&podman, &container, path).unwrap();
    assert_eq!((mode, content.as_slice()), (0o644, &b"v2"[..]));

    // Paths refused: `..`, outside the writable directories, a directory's.
    for bad in ["/home/admin/../../etc/passwd", "/etc/cron.d/x", "/home/admin/", "relative/x", "/home/a\nb"] {
        let (status, body) =
            call(Method::POST, json!({"decky_name": "bait", "path": bad, "content_b64": "eA=="})).await;
        assert_eq!(status, 422, "{bad}: {body}");
    }
    // A symlink in a writable directory pointing out of them (at the decky's artifacts, a host
    // directory) is refused, for a write and a removal; nothing lands where it points.
    plant_symlink(&podman, &container, "/home/admin", "escape", "/var/lib/svc/artifacts");
    let through = "/home/admin/escape/pwned.txt";
    let (status, body) =
        call(Method::POST, json!({"decky_name": "bait", "path": through, "content_b64": "eA=="})).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (422, Some("path is under a symlink or names a directory")),
        "{}",
        api.output()
    );
    let (status, _) = call(Method::DELETE, json!({"decky_name": "bait", "path": through})).await;
    assert_eq!(status, 422);
    assert!(read_back(&podman, &container, "/var/lib/svc/artifacts/pwned.txt").is_none());

    // Removal: the file is gone; removing it again is done already.
    let remove = json!({"decky_name": "bait", "topology_id": null, "path": path});
    let (status, body) = call(Method::DELETE, remove.clone()).await;
    assert_eq!((status, &body), (200, &json!({"message": "ok"})), "{}", api.output());
    assert!(read_back(&podman, &container, path).is_none(), "removed");
    assert_eq!(call(Method::DELETE, remove).await.0, 200);

    // DECNET's 400 for bad base64; an unknown decky; a topology that does not exist; a viewer.
    let (status, body) =
        call(Method::POST, json!({"decky_name": "bait", "path": "/root/x", "content_b64": "not base64!"})).await;
    assert_eq!((status, body["detail"].as_str()), (400, Some("content_b64 is not valid base64")));
    let (status, _) =
        call(Method::POST, json!({"decky_name": "ghost", "path": "/root/x", "content_b64": "eA=="})).await;
    assert_eq!(status, 422);
    let topology =
        json!({"decky_name": "bait", "topology_id": uuid::Uuid::new_v4(), "path": "/root/x", "content_b64": "eA=="});
    assert_eq!(call(Method::POST, topology).await.0, 404);
    let viewer = viewer_token(port, &token).await;
    let (status, _) = api_call(port, &viewer, Method::POST, "/deckies/files", Some(drop)).await;
    assert_eq!(status, 403);

    // Over the cap: a file over 1 MiB, and a body over the route's limit.
    let big = b64(&vec![b'x'; (1 << 20) + 1]);
    let (status, _) = call(Method::POST, json!({"decky_name": "bait", "path": "/root/big", "content_b64": big})).await;
    assert_eq!(status, 422);
    let huge = "A".repeat(3 << 20);
    let (status, _) = call(Method::POST, json!({"decky_name": "bait", "path": "/root/big", "content_b64": huge})).await;
    assert_eq!(status, 413);
    assert!(read_back(&podman, &container, "/root/big").is_none());
}
