//! Memory bounds of a real `svc api` process, read from `/proc`: a bound, not a speed, so a test
//! (the speed of the same run is in `benches/login_rss.sh`).

use svc_test_support::processes as common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;

/// Resident set size of `pid`, in bytes.
fn rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib * 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn rss_after_1000_logins_at_16_concurrent_clients_stays_within_64_mb_of_idle() {
    const LOGINS: usize = 1000;
    const CLIENTS: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command.env("SVC_LIMITER_ENABLED", "false");
    let api = start_api(command, port).await;
    let idle = rss(api.pid());

    let next = Arc::new(AtomicUsize::new(0));
    let url = format!("http://127.0.0.1:{port}/api/v1/auth/login");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (next, url) = (next.clone(), url.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                while next.fetch_add(1, Ordering::Relaxed) < LOGINS {
                    let body = serde_json::json!({"username": "admin", "password": ADMIN_PASSWORD});
                    let reply = client.post(&url).json(&body).send().await.unwrap();
                    assert_eq!(reply.status(), 200);
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let after = rss(api.pid());
    let grown = after.saturating_sub(idle);
    eprintln!("RSS idle {} MiB, after {LOGINS} logins {} MiB", idle >> 20, after >> 20);
    assert!(grown <= 64 << 20, "RSS grew by {} MiB (idle {} MiB, after {} MiB)", grown >> 20, idle >> 20, after >> 20);
    drop(api);
}
