//! What the decoys cost: connections per second a service accepts and answers with the decoy on
//! one core (its own single-threaded runtime; the clients on the other core), and resident memory
//! per idle session. Lines go to a sink, so the figures are the decoys', not the terminal's.
//!
//!     cargo bench -p svc-decoy --bench decoys
//!
//! `SVC_BENCH_CONNECTIONS` (default 5000) connections are made per service by 4 client threads;
//! `SVC_BENCH_IDLE` (default 1000) idle sessions are held open for the memory figure. Without
//! `--bench` (as under `cargo test --benches`) it runs a small smoke round.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use svc_decoy::Decky;
use svc_decoy::emit::Emitter;
use svc_decoy::session::{Limits, Shared};
use svc_decoy::settings::{ServiceSpec, Settings};
use tokio_util::sync::CancellationToken;

fn var(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Starts `services` on loopback in a thread of their own with a single-threaded runtime: one core.
fn start(services: &[&'static str]) -> (Vec<(&'static str, SocketAddr)>, CancellationToken) {
    let specs: Vec<ServiceSpec> =
        services.iter().map(|&name| ServiceSpec { name, port: 0, settings: Settings::default() }).collect();
    // Room for the idle sessions, all from one address.
    let limits = Limits { max_connections: 100_000, max_per_source: 100_000, ..Limits::default() };
    let cancel = CancellationToken::new();
    let (ready, addresses) = std::sync::mpsc::channel();
    let stop = cancel.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let shared = Shared::new(Emitter::to_writer("bench-01", Box::new(std::io::sink())), limits);
            let decky = Decky::bind(&specs, IpAddr::from([127, 0, 0, 1]), shared).await.unwrap();
            ready.send(decky.addresses()).unwrap();
            decky.serve(stop).await;
        });
    });
    (addresses.recv().unwrap(), cancel)
}

/// One HTTP exchange on a new connection: the request, then the answer to its end.
fn http_exchange(addr: SocketAddr) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench/1.0\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..answer.len().min(80)]));
}

/// A new connection that reads the service's greeting (SSH's banner) and leaves.
fn greeting_exchange(addr: SocketAddr) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    assert!(stream.read(&mut buf).unwrap() > 0);
}

/// A full SSH handshake on a new connection: key exchange, a password login (one of the default
/// weak ones; a refused one would wait a second, as OpenSSH does), goodbye.
fn ssh_exchange(addr: SocketAddr) {
    struct Client;
    impl russh::client::Handler for Client {
        type Error = russh::Error;
        async fn check_server_key(&mut self, _key: &russh::keys::PublicKeyOrCertificate) -> Result<bool, Self::Error> {
            Ok(true)
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let config = std::sync::Arc::new(russh::client::Config::default());
        let mut ssh = russh::client::connect(config, addr, Client).await.unwrap();
        let auth = ssh.authenticate_password("root", "root").await.unwrap();
        assert!(auth.success());
        let _ = ssh.disconnect(russh::Disconnect::ByApplication, "", "en").await;
    });
}

/// Connections per second, `total` made by 4 threads each running `exchange` in turn.
fn rate(total: usize, addr: SocketAddr, exchange: fn(SocketAddr)) -> f64 {
    let started = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..total / 4 {
                    exchange(addr);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    (total / 4 * 4) as f64 / started.elapsed().as_secs_f64()
}

/// Resident memory per session of `n` connections held open, each having said nothing.
fn idle_kib(n: usize, addr: SocketAddr) -> f64 {
    let before = rss_kib();
    let held: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Let the decoy accept them all and reach its first read.
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib();
    drop(held);
    (after.saturating_sub(before)) as f64 / n as f64
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let connections = if full { var("SVC_BENCH_CONNECTIONS", 5000) } else { 40 };
    let idle = if full { var("SVC_BENCH_IDLE", 1000) } else { 20 };
    // Each memory figure in a fresh process: memory freed by one service's sessions would
    // otherwise be reused by the next one's and hide it.
    if let Ok(service) = std::env::var("SVC_BENCH_IDLE_SERVICE") {
        let service: &'static str = Box::leak(service.into_boxed_str());
        let (addresses, cancel) = start(&[service]);
        println!("{service}: {:.1} KiB resident per idle session ({idle} held)", idle_kib(idle, addresses[0].1));
        cancel.cancel();
        return;
    }
    let (addresses, cancel) = start(&["http", "ssh"]);
    let addr = |name: &str| addresses.iter().find(|(n, _)| *n == name).unwrap().1;
    println!(
        "http: {:.0} connections/s (GET / to the end of the answer)",
        rate(connections, addr("http"), http_exchange)
    );
    println!("ssh: {:.0} connections/s (to the server's banner)", rate(connections, addr("ssh"), greeting_exchange));
    let handshakes = (connections / 10).max(8);
    println!("ssh: {:.0} logins/s (key exchange and a password login)", rate(handshakes, addr("ssh"), ssh_exchange));
    cancel.cancel();
    for service in ["http", "ssh", "telnet"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(std::env::args().skip(1))
            .env("SVC_BENCH_IDLE_SERVICE", service)
            .output()
            .unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}
