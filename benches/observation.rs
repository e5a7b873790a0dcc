//! Validation throughput of `svc::observation`: what the profiler's bus intake and
//! `svc observation ingest` spend per record (aim: tens of thousands of records/s/core or better).
//!
//! Run with `cargo bench --bench observation -- --warm-up-time 1 --measurement-time 5`; criterion
//! reports elements/s, one element being one record.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use svc::observation::{read_records, validate};

/// A realistic mix: categorical, numeric, array and hash primitives, with and without the optional
/// fields, as a shell-session sensor emits them.
fn mix() -> Vec<Value> {
    let window = json!({"start_ts": 1_777_000_000.25, "end_ts": 1_777_003_600.5});
    let histogram: Vec<u32> = (0..24).map(|h| (h * 7) % 13).collect();
    vec![
        json!({"primitive": "motor.keystroke_cadence", "value": "bursty", "confidence": 0.82, "window": window,
               "source": "sensors/shell/motor/cadence.py", "id": "5f0c6d1e-8a3b-4c2d-9e1f-0a1b2c3d4e5f",
               "identity_ref": "0b7c1a52-3d4e-4f60-8a9b-c0d1e2f3a4b5", "evidence_ref": "session/42#keys",
               "ts": 1_777_003_601.0, "v": 1}),
        json!({"primitive": "cognitive.inter_command_latency_class", "value": "llm_heavyweight", "confidence": 0.6,
               "window": window, "source": "sensors/shell/cognitive/latency.py"}),
        json!({"primitive": "toolchain.c2.beacon_interval_ms", "value": 30_000, "confidence": 0.95, "window": window,
               "source": "sensors/net/c2/beacon.py", "evidence_ref": "pcap/7#flow-3"}),
        json!({"primitive": "temporal.circadian.hour_histogram", "value": histogram, "confidence": 0.7,
               "window": window, "source": "sensors/shell/temporal/circadian.py",
               "identity_ref": "0b7c1a52-3d4e-4f60-8a9b-c0d1e2f3a4b5"}),
        json!({"primitive": "toolchain.tls.ja4_client", "value": "t13d1516h2_8daaf6152771_b0da82dd1658",
               "confidence": 1.0, "window": {"start_ts": 1_777_000_000.0, "end_ts": 1_777_000_000.0},
               "source": "sensors/net/tls/ja4.py", "id": "9d2f4a6b-1c3e-4f5a-8b7c-6d5e4f3a2b1c"}),
        json!({"primitive": "toolchain.ssh.kex_algorithm_order",
               "value": ["curve25519-sha256", "ecdh-sha2-nistp256", "diffie-hellman-group14-sha256"],
               "confidence": 0.9, "window": window, "source": "sensors/net/ssh/kex.py"}),
    ]
}

fn validation(c: &mut Criterion) {
    let records = mix();
    for record in &records {
        validate(record).expect("the benchmark's records are valid");
    }
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    let mut group = c.benchmark_group("observation");
    group.throughput(Throughput::Elements(records.len() as u64));
    // Parsed records, as the bus intake holds them.
    group.bench_function("validate_mix", |b| {
        b.iter(|| {
            for record in &records {
                let _ = black_box(validate(black_box(record)));
            }
        })
    });
    // From JSON Lines text, as `svc observation validate|ingest` reads a file.
    group.bench_function("read_records_mix", |b| {
        b.iter(|| {
            for record in read_records(black_box(text.as_bytes())) {
                let _ = black_box(record);
            }
        })
    });
    // A refused record, which pays for error reporting.
    let mut bad = records[0].clone();
    bad["confidence"] = json!(1.5);
    bad["value"] = json!("fast");
    group.throughput(Throughput::Elements(1));
    group.bench_function("validate_invalid", |b| b.iter(|| black_box(validate(black_box(&bad)))));
    group.finish();
}

criterion_group!(benches, validation);
criterion_main!(benches);
