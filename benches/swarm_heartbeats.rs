//! The master's cost of heartbeats: `svc api` (the binary `SVC_BIN` names) with its swarm listener
//! on loopback, `SWARM_HOSTS` hosts (default 100) enrolled in its store, and as many simulated
//! agents in this process, each with its own certificate from the master's CA, posting a heartbeat
//! with two deckies every `SWARM_INTERVAL_S` seconds (default 1, thirty times DECNET's pace) for
//! `SWARM_SECONDS` (default 30). Prints the API process's CPU share and resident memory (from
//! `/proc`), before and after. Run by `benches/swarm-heartbeats.sh`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use svc::swarm::pki::Ca;
use svc::swarm::tls::PeerPin;
use svc_test_support::processes::swarm::{endpoint, enroll, master_store};
use svc_test_support::processes::{Proc, cpu_ticks, env_or, free_port, path, start_api};

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::main]
async fn main() {
    let hosts: usize = env_or("SWARM_HOSTS", 100);
    let interval = Duration::from_secs_f64(env_or("SWARM_INTERVAL_S", 1.0));
    let seconds: u64 = env_or("SWARM_SECONDS", 30);
    let binary = PathBuf::from(std::env::var("SVC_BIN").expect("SVC_BIN names the svc binary"));
    let dir = tempfile::tempdir().unwrap();
    let (api_port, swarm_port) = (free_port(), free_port());
    let mut command = Command::new(&binary);
    command.arg("api").current_dir(dir.path()).env_clear().env("PATH", path());
    command
        .env("SVC_DATA_DIR", dir.path().join("data"))
        .env("RUST_LOG", "warn")
        .env("SVC_JWT_SECRET", svc_test_support::processes::JWT_SECRET)
        .env("SVC_ADMIN_PASSWORD", svc_test_support::processes::ADMIN_PASSWORD)
        .env("SVC_API_PORT", api_port.to_string())
        .env("SVC_SWARM_ENABLED", "true")
        .env("SVC_SWARM_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_SWARM_DIR", dir.path().join("swarm"));
    let api: Proc = start_api(command, api_port).await;
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));
    let mut agents = Vec::new();
    for i in 0..hosts {
        let name = format!("sim-{i:04}");
        let leaf = ca.issue(&name, &[]).unwrap();
        let host = enroll(&db, &name, "127.0.0.1", 8765, &leaf.fingerprint).await;
        let to_master = endpoint("127.0.0.1", swarm_port, ca.cert_pem(), &leaf, PeerPin::CaSigned, false);
        let decky = |n: u32| {
            json!({"name": format!("{name}-d{n}"), "ip": format!("172.29.0.{}", n + 2), "services": ["ssh", "http"],
                   "distro": "debian", "base_image": "svc-decky", "build_base": "debian:bookworm-slim",
                   "hostname": format!("{name}-d{n}"), "archetype": null, "service_config": {}, "nmap_os": "linux",
                   "mutate_interval": null, "last_mutated": 0.0, "last_login_attempt": 0.0, "host_uuid": null})
        };
        let running = json!({"running": true, "services": {"ssh": "running", "http": "running"}});
        let body = json!({"host_uuid": host.uuid, "agent_version": "bench", "status": {
            "deployed": true, "mode": "swarm", "deckies": [decky(0), decky(1)],
            "runtime": {format!("{name}-d0"): running.clone(), format!("{name}-d1"): running}}});
        agents.push((to_master, body));
    }
    let (pid, ticks_per_s) = (api.pid(), 100.0);
    let rss_before = rss_kib(pid);
    let (cpu_before, started) = (cpu_ticks(pid), Instant::now());
    let mut tasks = Vec::new();
    for (i, (to_master, body)) in agents.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            // Spread the agents over the interval, as real ones drift apart.
            tokio::time::sleep(interval.mul_f64(i as f64 / hosts as f64)).await;
            let (mut sent, mut refused) = (0u64, 0u64);
            let deadline = Instant::now() + Duration::from_secs(seconds);
            while Instant::now() < deadline {
                match to_master.post("/swarm/heartbeat", &body).await {
                    Ok(answer) if answer.status.as_u16() == 204 => sent += 1,
                    _ => refused += 1,
                }
                tokio::time::sleep(interval).await;
            }
            (sent, refused)
        }));
    }
    let (mut sent, mut refused) = (0, 0);
    for task in tasks {
        let (s, r) = task.await.unwrap();
        sent += s;
        refused += r;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - cpu_before) as f64 / ticks_per_s;
    println!("{hosts} hosts, one heartbeat each every {:.1} s, {elapsed:.0} s:", interval.as_secs_f64());
    println!("  heartbeats accepted {sent}, refused or failed {refused} ({:.0}/s)", sent as f64 / elapsed);
    println!(
        "  master CPU {:.1}% of one core ({:.2} ms per heartbeat)",
        100.0 * cpu / elapsed,
        1000.0 * cpu / sent.max(1) as f64
    );
    println!("  master RSS {} MiB before, {} MiB after", rss_before / 1024, rss_kib(pid) / 1024);
    db.close().await;
}
