//! The sniffer's engine on a replayed capture, one core: 100,000 TLS handshakes from 100,000
//! attacker addresses (SYN, SYN-ACK, ACK, ClientHello, ServerHello: 500,000 frames), all left open,
//! so the table ends holding 100,000 concurrent flows. Reports frames/s (criterion's throughput;
//! handshakes/s is a fifth of it) and, once, the resident memory the engine holds with those flows.
//!
//!     cargo bench -p svc-workers --bench sniffer_replay
//!
//! Measured on the shared 2-core build machine (another build running): 3.0–3.6 s an iteration,
//! about 150k frames/s (30k handshakes/s); 100,000 open flows hold about 68 MiB.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use svc_workers::sniffer::deckies::{Decky, DeckyMap};
use svc_workers::sniffer::engine::{Limits, Sniffer};
use svc_workers::sniffer::packet::{ACK, LinkType, SYN};
use svc_workers::sniffer::samples::{client_hello, frame, server_hello};

const FLOWS: u32 = 100_000;
const DECKY: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Every frame of the capture, with its time in microseconds.
fn capture() -> Vec<(i64, Vec<u8>)> {
    let (hello, server) = (client_hello(), server_hello());
    let decky = SocketAddr::new(IpAddr::V4(DECKY), 443);
    let mut frames = Vec::with_capacity(FLOWS as usize * 5);
    for n in 0..FLOWS {
        let client = SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x6440_0000 + n)), 40_000 + (n % 20_000) as u16);
        let at = i64::from(n) * 10;
        frames.push((at, frame(client, decky, SYN, 1000, 0, &[])));
        frames.push((at + 1, frame(decky, client, SYN | ACK, 5000, 1001, &[])));
        frames.push((at + 2, frame(client, decky, ACK, 1001, 5001, &[])));
        frames.push((at + 3, frame(client, decky, ACK, 1001, 5001, &hello)));
        frames.push((at + 4, frame(decky, client, ACK, 5001, 1001 + hello.len() as u32, &server)));
    }
    frames
}

fn engine() -> Sniffer {
    let limits =
        Limits { max_flows: 200_000, flow_bytes: 16_384, flow_idle_us: 60_000_000, dedup_window_us: 300_000_000 };
    Sniffer::new(limits, Arc::new(DeckyMap::new([Decky { name: "decky-a".into(), ip: IpAddr::V4(DECKY) }])))
}

fn replay(sniffer: &mut Sniffer, frames: &[(i64, Vec<u8>)]) -> usize {
    let mut out = Vec::new();
    let mut events = 0;
    for (at, bytes) in frames {
        sniffer.on_frame(*at, LinkType::Raw, bytes, &mut out);
        events += out.len();
        out.clear();
    }
    events
}

/// Resident set size in kB, from `/proc/self/status`.
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn bench(c: &mut Criterion) {
    let frames = capture();
    let before = rss_kb();
    let mut sniffer = engine();
    let events = replay(&mut sniffer, &frames);
    let after = rss_kb();
    assert_eq!(sniffer.flows(), FLOWS as usize);
    assert_eq!(sniffer.stats().handshakes, u64::from(FLOWS));
    println!(
        "{} concurrent flows, {events} events: engine holds about {} MiB resident ({} bytes a flow)",
        sniffer.flows(),
        (after - before) / 1024,
        (after - before) * 1024 / u64::from(FLOWS),
    );
    drop(sniffer);

    let mut group = c.benchmark_group("sniffer_replay");
    group.sample_size(10);
    group.throughput(Throughput::Elements(frames.len() as u64));
    group.bench_function("100k_handshakes", |b| {
        b.iter_batched(engine, |mut sniffer| replay(&mut sniffer, &frames), BatchSize::LargeInput)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
