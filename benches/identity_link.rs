//! Identity linking (`svc::identity::link::link`) over many attackers: the time per run at 10,000,
//! 30,000 and 100,000 attackers (it must grow about linearly, never with the square), and the peak
//! memory one run at 100,000 adds, printed before criterion starts.
//!
//! The attackers look like a real fleet's: most use one of 200 common TLS clients and 100 common SSH
//! clients (shared by hundreds each: too common to link anyone), a tenth are actors of three
//! addresses each sharing a JA3 and an SSH client of their own, and a fifth were probed (one of 800
//! JARMs, so actors that share one are campaigns).
//! Run with `cargo bench --bench identity_link`.

use std::hint::black_box;

use chrono::DateTime;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use svc::identity::link::{Member, Primitive, link};
use uuid::Uuid;

fn attackers(n: usize) -> Vec<Member> {
    (0..n)
        .map(|i| {
            let at = DateTime::from_timestamp(1_800_000_000 + i as i64, 0).unwrap();
            let mut primitives = Vec::new();
            if i % 10 == 0 {
                let actor = i / 30;
                primitives.push((Primitive::Ja3, format!("actor-ja3-{actor}")));
                primitives.push((Primitive::SshClient, format!("SSH-2.0-actor{actor} kex")));
            } else {
                primitives.push((Primitive::Ja3, format!("common-ja3-{}", i % 200)));
                primitives.push((Primitive::SshClient, format!("SSH-2.0-common{} kex", i % 100)));
            }
            if i % 5 == 0 {
                primitives.push((Primitive::Jarm, format!("jarm-{}", i % 4000)));
            }
            Member {
                uuid: Uuid::from_u128(i as u128 + 1),
                ip: format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255),
                first_seen: at,
                last_seen: at,
                updated_at: at,
                primitives,
            }
        })
        .collect()
}

/// The process's peak resident memory so far, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn linking(c: &mut Criterion) {
    let input = attackers(100_000);
    let before = peak_kib();
    let linked = link(input.clone());
    eprintln!(
        "100,000 attackers: {} identities, {} campaigns; peak memory {} MiB more than the input's",
        linked.identities.len(),
        linked.campaigns.len(),
        (peak_kib() - before) / 1024
    );
    let mut group = c.benchmark_group("identity_link");
    group.sample_size(10);
    for n in [10_000, 30_000, 100_000] {
        let input = attackers(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| black_box(link(input.clone())))
        });
    }
    group.finish();
}

criterion_group!(benches, linking);
criterion_main!(benches);
