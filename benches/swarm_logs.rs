//! Log shipping from one worker host to the master: `svc api` (the binary `SVC_BIN` names) with its
//! log listener on loopback, one host enrolled in its store, and `svc worker forwarder` presenting
//! that host's certificate. First `SWARM_LINES` lines (default 300,000) written to the host's file
//! at once: lines per second until the master has stored the last one (its stored position reaches
//! the file's end), and the API process's CPU meanwhile (from `/proc`), as a share of one core per
//! 10,000 lines/s. Then `SWARM_SAMPLES` lines (default 200) written one at a time: the time from the
//! write to the row being readable in `GET /logs` (p50, p99). Run by `benches/swarm-logs.sh`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use svc::swarm::pki::Ca;
use svc_test_support::processes::swarm::{enroll, forwarder_command, master_store};
use svc_test_support::processes::{Proc, admin_token, api_call, cpu_ticks, env_or, free_port, path, start_api};

fn line(at: chrono::DateTime<chrono::Utc>, seq: u64) -> String {
    format!(
        "<134>1 {} bench-decky ssh - login_attempt [relay@55555 src_ip=\"10.{}.{}.{}\" username=\"root\" seq=\"{seq}\"] login attempt {seq}\n",
        at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        seq / 65536 % 256,
        seq / 256 % 256,
        seq % 256,
    )
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

#[tokio::main]
async fn main() {
    let lines: u64 = env_or("SWARM_LINES", 300_000);
    let samples: usize = env_or("SWARM_SAMPLES", 200);
    let binary = PathBuf::from(std::env::var("SVC_BIN").expect("SVC_BIN names the svc binary"));
    let dir = tempfile::tempdir().unwrap();
    let (api_port, swarm_port, syslog_port) = (free_port(), free_port(), free_port());
    let mut command = Command::new(&binary);
    command.arg("api").current_dir(dir.path()).env_clear().env("PATH", path());
    command
        .env("SVC_DATA_DIR", dir.path().join("data"))
        .env("RUST_LOG", "warn")
        .env("SVC_JWT_SECRET", svc_test_support::processes::JWT_SECRET)
        .env("SVC_ADMIN_PASSWORD", svc_test_support::processes::ADMIN_PASSWORD)
        .env("SVC_API_PORT", api_port.to_string())
        .env("SVC_READ_CACHE_MS", "0")
        .env("SVC_SWARM_ENABLED", "true")
        .env("SVC_SWARM_HOST", "127.0.0.1")
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_SWARM_SYSLOG_PORT", syslog_port.to_string())
        .env("SVC_SWARM_DIR", dir.path().join("swarm"));
    let api: Proc = start_api(command, api_port).await;
    let ca = Ca::load_or_create(&dir.path().join("swarm/ca")).unwrap();
    let db = master_store(&dir.path().join("data"));
    let leaf = ca.issue("bench-host", &[]).unwrap();
    let host = enroll(&db, "bench-host", "127.0.0.1", 8765, &leaf.fingerprint).await;
    let source = format!("swarm:{}", host.uuid);

    let host_dir = dir.path().join("host");
    std::fs::create_dir_all(&host_dir).unwrap();
    let log = host_dir.join("ingest.log");
    let old = chrono::Utc::now() - chrono::Duration::hours(1);
    let mut text = String::new();
    for seq in 0..lines {
        text.push_str(&line(old + chrono::Duration::milliseconds(seq as i64), seq));
        if text.len() > 8 << 20 {
            append(&log, &text);
            text.clear();
        }
    }
    append(&log, &text);
    let size = std::fs::metadata(&log).unwrap().len();

    // The test support's forwarder command, run with the binary measured.
    let settings = forwarder_command(&host_dir, &ca, &leaf, "127.0.0.1", syslog_port, &log);
    let mut forwarder = Command::new(&binary);
    forwarder.args(settings.get_args()).current_dir(&host_dir).env_clear();
    for (key, value) in settings.get_envs() {
        if let Some(value) = value {
            forwarder.env(key, value);
        }
    }
    let mut forwarder = forwarder.env("RUST_LOG", "warn").spawn().unwrap();
    let pid = api.pid();
    let (cpu_before, started) = (cpu_ticks(pid), Instant::now());
    loop {
        if db.ingest_cursor(&source).await.unwrap().is_some_and(|cursor| cursor.offset >= size) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "the master did not catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - cpu_before) as f64 / 100.0;
    let rate = lines as f64 / elapsed;
    println!("{lines} lines ({} MiB) from one host over TLS: {elapsed:.2} s, {rate:.0} lines/s", size >> 20);
    println!(
        "  master CPU {:.0}% of one core meanwhile: {:.2} of a core per 10,000 lines/s",
        100.0 * cpu / elapsed,
        cpu / elapsed / (rate / 10_000.0)
    );

    let token = admin_token(api_port).await;
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let seq = lines + i as u64;
        let written = Instant::now();
        append(&log, &line(chrono::Utc::now(), seq));
        loop {
            let (_, body) = api_call(api_port, &token, reqwest::Method::GET, "/logs?limit=1", None).await;
            let newest = body["data"][0]["fields"].as_str().unwrap_or("{}").to_string();
            let fields: serde_json::Value = serde_json::from_str(&newest).unwrap();
            if fields["seq"].as_str().and_then(|s| s.parse::<u64>().ok()) == Some(seq) {
                break;
            }
            assert!(written.elapsed() < Duration::from_secs(30), "line {seq} never became readable");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        latencies.push(written.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "  write on the host -> readable in /logs, {samples} lines one at a time: p50 {:.1} ms, p99 {:.1} ms",
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0
    );
    let _ = forwarder.kill();
    let _ = forwarder.wait();
    db.close().await;
}
