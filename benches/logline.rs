//! Parse and format throughput of `svc::logline`, the ingest hot path (target: the pipeline
//! handles ≥ 100,000 lines/s end to end, so the parser should manage well over 1M lines/s/core).
//!
//! Run with `cargo bench --bench logline -- --measurement-time 5`; criterion reports elements/s,
//! one element being one line.

use std::hint::black_box;

use chrono::Utc;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use svc::logline::{Entry, Severity, format, parse};

/// A realistic mix: DECNET's literal test lines (auth attempts, connects, a double-wrapped shell
/// command, a request with MSG, native sshd prose) and the wider lines the sniffer and the HTTP
/// fingerprint socket write.
const MIX: &[&str] = &[
    r#"<134>1 2026-05-02T06:00:25.453826+00:00 omega-decky smtp - disconnect [relay@55555 src_ip="192.168.1.5"]"#,
    r#"<134>1 2026-05-02T06:22:48.089309+00:00 omega-decky auth-helper - auth_attempt [relay@55555 username="root" src_ip="192.168.1.5"]"#,
    r#"<14>1 2026-05-02T06:22:48.089309+00:00 omega-decky 1 - - -  2026-05-02T06:22:48.089286+00:00 SRV-DELTA-77 bash - command [timeQuality tzKnown="1" isSynced="1" syncAccuracy="326228"] CMD uid=0 user=root src=192.168.1.5 pwd=/root cmd=ls /var/www/html"#,
    r#"<134>1 2024-01-15T12:00:00+00:00 decky-01 http - request [relay@55555 src_ip="1.2.3.4"] login attempt"#,
    r#"<38>1 2026-04-27T03:08:46+00:00 dmz-gateway sshd 940 - - pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=157.66.144.16 user=root"#,
    r#"<134>1 2026-05-02T06:22:49.000120+00:00 omega-decky ssh - auth_attempt [relay@55555 src_ip="203.0.113.77" src_port="51544" username="admin" principal="admin" secret_kind="plaintext" secret_printable="hunter2" secret_b64="aHVudGVyMg==" outcome="failure"]"#,
    r#"<132>1 2026-05-02T06:22:50.314159+00:00 omega-decky sniffer - tls_session [relay@55555 src_ip="203.0.113.77" src_port="51550" dst_ip="10.0.0.12" dst_port="443" ja3="771,4865-4866-4867,0-23-65281,29-23-24,0" ja3s="e35df3e00ca4ef31d42b34bebaa2f86e" ja4="t13d1516h2_8daaf6152771_e5627efa2ab1" ja4s="t130200_1301_234ea6891581" tls_version="TLS 1.3" sni="mail.example.com" alpn="h2,http/1.1"]"#,
    r#"<134>1 2026-05-02T06:22:51.271828+00:00 web-01 http - http_request_fingerprint [relay@55555 remote_addr="198.51.100.23:40112" proto="HTTP/1.1" method="GET" path="/wp-login.php?redirect_to=%2F" ja4h="ge11nn05enus_9ed1ff1f7b03_000000000000_000000000000" headers="{\"Host\": \"web-01\", \"User-Agent\": \"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36\"}"]"#,
];

fn parse_mix(c: &mut Criterion) {
    let mut group = c.benchmark_group("logline");
    group.throughput(Throughput::Elements(MIX.len() as u64));
    group.bench_function("parse_mix", |b| {
        b.iter(|| {
            for line in MIX {
                let _ = black_box(parse(black_box(line)));
            }
        })
    });

    // Each line alone, to see which shapes cost what.
    group.throughput(Throughput::Elements(1));
    for (n, line) in MIX.iter().enumerate() {
        group.bench_function(format!("parse_line_{n}"), |b| b.iter(|| black_box(parse(black_box(line)))));
    }

    let entries: Vec<Entry> = MIX
        .iter()
        .filter_map(|line| parse(line).ok())
        .map(|parsed| Entry {
            severity: Severity::Info,
            timestamp: parsed.timestamp.unwrap_or_else(Utc::now),
            hostname: parsed.decky,
            app_name: parsed.service,
            msgid: parsed.event_type,
            fields: parsed.fields,
            msg: parsed.msg,
        })
        .collect();
    group.throughput(Throughput::Elements(entries.len() as u64));
    group.bench_function("format_mix", |b| {
        b.iter(|| {
            for entry in &entries {
                black_box(format(black_box(entry)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, parse_mix);
criterion_main!(benches);
