//! The real `svc decky` process under hostile traffic: floods of connections, half-open ones,
//! megabyte lines and binary noise on every service; it stays up, within its memory bound, keeps
//! answering, writes only well-formed lines, and stops cleanly on SIGTERM.

use svc_test_support::processes as common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::free_port;

/// The services under test, each on a free loopback port.
fn services() -> Vec<(&'static str, u16)> {
    ["telnet", "ftp", "smtp", "http", "ssh"].into_iter().map(|name| (name, free_port())).collect()
}

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The first bytes a service answers a new connection with, within `wait` (HTTP speaks when
/// spoken to).
fn greeting(service: &str, port: u16, wait: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(wait)).unwrap();
    if service == "http" {
        stream.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
    }
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).ok()?;
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn a_decky_survives_floods_and_noise_and_keeps_answering() {
    let services = services();
    let list: Vec<String> = services.iter().map(|(name, port)| format!("{name}:{port}")).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["decky", "--name", "web-01", "--bind", "127.0.0.1", "--services", &list.join(",")])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, received) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.iter().filter(|l: &&String| l.contains(" startup ")).count() < services.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        seen.push(received.recv_timeout(left).expect("every service announces itself"));
    }
    let pid = child.id();

    // 500 connections at once, spread over the services: most are over the per-source limit.
    let flood: Vec<TcpStream> =
        (0..500).filter_map(|i| TcpStream::connect(("127.0.0.1", services[i % services.len()].1)).ok()).collect();
    // Half-open: the attacker stops writing and never reads.
    for stream in flood.iter().step_by(7) {
        let _ = stream.shutdown(Shutdown::Write);
    }
    drop(flood);
    // A megabyte without a newline and binary noise, to every service.
    let noise: Vec<u8> = (0..65_536u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for (_, port) in &services {
        for payload in [vec![b'A'; 1 << 20], noise.clone()] {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", *port)) {
                stream.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = stream.write_all(&payload);
            }
        }
    }

    assert!(child.try_wait().unwrap().is_none(), "the decky is still running");
    let rss = rss_kib(pid);
    assert!(rss < 256 * 1024, "resident memory {rss} KiB stays under 256 MiB");
    // Every service still greets a newcomer once the flood's places are given back.
    for (name, port) in &services {
        let deadline = Instant::now() + Duration::from_secs(15);
        let hello = loop {
            if let Some(hello) = greeting(name, *port, Duration::from_secs(2)).filter(|h| !h.is_empty()) {
                break hello;
            }
            assert!(Instant::now() < deadline, "{name} answers again after the flood");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(!hello.is_empty(), "{name} greets");
    }

    rustix::process::kill_process(rustix::process::Pid::from_raw(pid as i32).unwrap(), rustix::process::Signal::TERM)
        .unwrap();
    let stopped = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(stopped.elapsed() < Duration::from_secs(10), "SIGTERM stops the decky");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(child.wait().unwrap().success());
    seen.extend(received.try_iter());
    for line in &seen {
        let parsed = svc::logline::parse(line).unwrap_or_else(|e| panic!("`{line}` does not parse: {e:?}"));
        assert_eq!(parsed.decky, "web-01", "{line}");
    }
    assert!(seen.iter().any(|l| l.contains(" disconnect ")), "sessions were logged");
}

#[test]
fn decky_explains_a_bad_service_list() {
    let out = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["decky", "--services", "ssh,gopher"])
        .env_clear()
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown service `gopher`"), "{stderr}");
}
