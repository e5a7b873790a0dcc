//! The tarpit watcher's cost per poll with 100 deckies and 10,000 established connections on their
//! rules' ports, from generated tables in the kernel's `/proc/<pid>/net/tcp` and `tcp6` format (half
//! the connections IPv4, half IPv6 of which half IPv4-mapped, plus listening sockets and
//! connections on other ports to skip). Measured:
//! - `parse+diff/steady`: every table parsed and compared with the 10,000 sessions already open
//!   (the usual poll: nothing changes);
//! - `parse+diff/first`: the same with nothing open (10,000 enters decided);
//! - `poll/steady (sqlite)`: the usual poll with its store reads (rules, open sessions) added;
//! - `poll/first (sqlite)`: the poll that opens 10,000 sessions in the store and formats their
//!   `tarpit_enter` lines.
//!
//! Not measured: the kernel printing real `/proc` tables, and the engine call for a container the
//! watcher has not seen yet (one per new or restarted decky, not per poll).
//!
//!     cargo bench -p svc-workers --bench tarpit_poll
//!
//! Measured on the shared 2-core machine with other builds running (2026-11-24): parse+diff 4.5 ms
//! steady, 4.1 ms first; poll/steady (sqlite) 43–71 ms (median 56 ms, mostly reading the 10,000
//! sessions); poll/first (sqlite) 90–118 ms.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use svc::config::Config;
use svc::db::{self, Db, Enforced, Enforcement, TarpitRule, TarpitSession};
use svc::netns::conntable::{self, Connection, TABLE_HEADER, table_line};
use svc::tarpit::events::TarpitEvent;
use svc_workers::tarpit::sessions;

const DECKIES: usize = 100;
const PER_DECKY: usize = 100;
const PORTS: [u16; 2] = [22, 80];

struct Decky {
    name: String,
    tcp: String,
    tcp6: String,
}

fn deckies() -> Vec<Decky> {
    (0..DECKIES)
        .map(|d| {
            let local4: IpAddr = format!("10.213.{}.{}", d / 200, d % 200 + 2).parse().unwrap();
            let local6: IpAddr = format!("fd7a::{:x}", d + 2).parse().unwrap();
            let mut tcp = vec![TABLE_HEADER.to_string()];
            let mut tcp6 = vec![TABLE_HEADER.to_string()];
            for port in PORTS {
                tcp.push(table_line(tcp.len(), (local4, port), ("0.0.0.0".parse().unwrap(), 0), "0A"));
                tcp6.push(table_line(tcp6.len(), ("::".parse().unwrap(), port), ("::".parse().unwrap(), 0), "0A"));
            }
            for c in 0..PER_DECKY {
                let port = PORTS[c % 2];
                let client = 30_000 + c as u16;
                if c % 2 == 0 {
                    let remote: IpAddr = format!("198.51.{}.{}", c / 250, c % 250 + 1).parse().unwrap();
                    tcp.push(table_line(tcp.len(), (local4, port), (remote, client), "01"));
                } else if c % 4 == 1 {
                    let remote: IpAddr = format!("2001:db8::{c:x}").parse().unwrap();
                    tcp6.push(table_line(tcp6.len(), (local6, port), (remote, client), "01"));
                } else {
                    let remote: IpAddr = format!("::ffff:203.0.113.{}", c % 250 + 1).parse().unwrap();
                    let local: IpAddr = format!("::ffff:{local4}").parse().unwrap();
                    tcp6.push(table_line(tcp6.len(), (local, port), (remote, client), "01"));
                }
                // Traffic the rule does not cover, and a connection closing.
                if c % 5 == 0 {
                    tcp.push(table_line(tcp.len(), (local4, 8443), ("192.0.2.9".parse().unwrap(), client), "01"));
                    tcp.push(table_line(tcp.len(), (local4, port), ("192.0.2.10".parse().unwrap(), client), "06"));
                }
            }
            Decky { name: format!("decky-{d:03}"), tcp: tcp.join("\n"), tcp6: tcp6.join("\n") }
        })
        .collect()
}

/// What the watcher does with the tables it read: connections per decky.
fn parse(deckies: &[Decky]) -> HashMap<String, Vec<Connection>> {
    let wanted = |port: u16| PORTS.contains(&port);
    deckies
        .iter()
        .map(|d| {
            let mut found = Vec::new();
            conntable::established(&d.tcp, wanted, &mut found);
            conntable::established(&d.tcp6, wanted, &mut found);
            (d.name.clone(), found)
        })
        .collect()
}

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn all_open(deckies: &[Decky]) -> Vec<TarpitSession> {
    let ruled = HashSet::new();
    let mut open = sessions::diff(&[], &parse(deckies), &ruled, now()).open;
    open.sort_by(|a, b| (&a.decky_name, &a.attacker_ip, a.port).cmp(&(&b.decky_name, &b.attacker_ip, b.port)));
    open
}

async fn store(deckies: &[Decky]) -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::from_vars([("SVC_DATA_DIR".to_string(), dir.path().display().to_string())]).unwrap();
    let db = db::connect(&config.db).unwrap();
    db.migrate().await.unwrap();
    for d in deckies {
        let rule = TarpitRule {
            id: uuid::Uuid::new_v4(),
            decky_name: d.name.clone(),
            ports: PORTS.to_vec(),
            delay_ms: 1000,
            created_at: now(),
            created_by: uuid::Uuid::new_v4().to_string(),
        };
        let enforced = Enforced { enforcement: Enforcement::Delay, namespace: Some("b/1".into()), at: now() };
        db.put_tarpit_rule(&rule, &enforced).await.unwrap();
    }
    (db, dir)
}

fn bench(c: &mut Criterion) {
    let deckies = deckies();
    let open = all_open(&deckies);
    assert_eq!(open.len(), DECKIES * PER_DECKY, "every generated connection is one session");
    let names: Vec<String> = deckies.iter().map(|d| d.name.clone()).collect();
    let ruled: HashSet<&str> = names.iter().map(String::as_str).collect();

    let mut group = c.benchmark_group("parse+diff");
    group.bench_function("steady", |b| {
        b.iter(|| {
            let changes = sessions::diff(&open, &parse(&deckies), &ruled, now());
            assert!(changes.open.is_empty() && changes.close.is_empty());
        })
    });
    group.bench_function("first", |b| {
        b.iter(|| assert_eq!(sessions::diff(&[], &parse(&deckies), &ruled, now()).open.len(), open.len()))
    });
    group.finish();

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (db, _dir) = runtime.block_on(store(&deckies));
    let mut group = c.benchmark_group("poll");
    group.sample_size(10);
    group.bench_function("first (sqlite)", |b| {
        b.iter_batched(
            || runtime.block_on(db.close_tarpit_sessions(&open)).unwrap(),
            |_| {
                runtime.block_on(async {
                    let rules = db.tarpit_rules().await.unwrap();
                    let held = db.tarpit_sessions().await.unwrap();
                    let ruled: HashSet<&str> = rules.iter().map(|r| r.rule.decky_name.as_str()).collect();
                    let changes = sessions::diff(&held, &parse(&deckies), &ruled, now());
                    let opened = db.open_tarpit_sessions(&changes.open).await.unwrap();
                    let lines: usize = opened
                        .iter()
                        .map(|s| {
                            let event = TarpitEvent::Enter {
                                decky: s.decky_name.clone(),
                                attacker_ip: s.attacker_ip.clone(),
                                port: s.port,
                            };
                            event.line(now()).len()
                        })
                        .sum();
                    assert_eq!(opened.len(), open.len());
                    lines
                })
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("steady (sqlite)", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let rules = db.tarpit_rules().await.unwrap();
                let held = db.tarpit_sessions().await.unwrap();
                let ruled: HashSet<&str> = rules.iter().map(|r| r.rule.decky_name.as_str()).collect();
                let changes = sessions::diff(&held, &parse(&deckies), &ruled, now());
                assert!(changes.open.is_empty() && changes.close.is_empty());
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
