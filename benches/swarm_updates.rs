//! Swarm updates end to end: `SWARM_UPDATE_HOSTS` hosts (default 3), each a network namespace
//! (`svc-t-250`…) running `svc updater` (the binary `SVC_BIN` names, through the test-support
//! helpers) which runs its agent. This process is the master: it builds one release of that svc
//! (a copy with bytes appended, so its digest differs) and pushes it to every host in parallel over
//! the pinned mutual-TLS client, `SWARM_UPDATE_ROUNDS` times (default 5). Prints the time until
//! every host answered `updated` (each updater answers once its agent is healthy on the release),
//! and the longest time one host's agent stopped answering `/health` (polled every 10 ms) during a
//! round. Needs root (namespaces). Run by `benches/swarm-updates.sh`.

use std::time::{Duration, Instant};

use chrono::Utc;
use svc::db::{HostStatus, SwarmHost};
use svc::swarm::master::SwarmMaster;
use svc::swarm::pki::{Ca, MASTER_CN};
use svc::swarm::tls::PeerPin;
use svc::swarm::updates::{build_release, push};
use svc_test_support::processes::netns::NetnsHost;
use svc_test_support::processes::swarm::{endpoint, updater_command};
use svc_test_support::processes::{Proc, env_or, svc_binary};
use tokio::sync::watch;
use uuid::Uuid;

const AGENT_PORT: u16 = 18765;
const UPDATER_PORT: u16 = 18766;

fn summary(mut values: Vec<Duration>) -> String {
    values.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.0} ms, min {:.0} ms, max {:.0} ms",
        ms(values[values.len() / 2]),
        ms(values[0]),
        ms(values[values.len() - 1])
    )
}

#[tokio::main]
async fn main() {
    let count: u8 = env_or("SWARM_UPDATE_HOSTS", 3);
    let rounds: usize = env_or("SWARM_UPDATE_ROUNDS", 5);
    let dir = tempfile::tempdir().unwrap();
    let swarm_dir = dir.path().join("swarm");
    let ca = Ca::load_or_create(&swarm_dir.join("ca")).unwrap();
    let vars = [
        ("SVC_DATA_DIR".to_string(), dir.path().join("data").display().to_string()),
        ("SVC_SWARM_DIR".to_string(), swarm_dir.display().to_string()),
        ("SVC_UPDATER_PORT".to_string(), UPDATER_PORT.to_string()),
    ];
    let config = svc::config::Config::from_vars(vars).unwrap();
    let caller = SwarmMaster::new(&config.swarm).caller().await.unwrap();
    let master_leaf = ca.issue(MASTER_CN, &[]).unwrap();

    let mut hosts = Vec::new();
    let (mut nets, mut keep) = (Vec::new(), Vec::new());
    for i in 0..count {
        let net = NetnsHost::create(250 + i);
        let address = net.address.to_string();
        let name = format!("bench-{i}");
        let agent = ca.issue(&name, std::slice::from_ref(&address)).unwrap();
        let updater = ca.issue(&format!("updater@{name}"), std::slice::from_ref(&address)).unwrap();
        let mut command =
            updater_command(&dir.path().join(&name), &ca, &agent, &updater, "0.0.0.0", (AGENT_PORT, UPDATER_PORT));
        command.env("RUST_LOG", "warn");
        keep.push(Proc::spawn(net.wrap(&command)));
        let probe = endpoint(
            &address,
            AGENT_PORT,
            ca.cert_pem(),
            &master_leaf,
            PeerPin::Fingerprint(Some(agent.fingerprint.clone())),
            true,
        );
        hosts.push((
            SwarmHost {
                uuid: Uuid::new_v4(),
                name,
                address,
                agent_port: AGENT_PORT,
                status: HostStatus::Active,
                last_heartbeat: None,
                client_cert_fingerprint: Some(agent.fingerprint.clone()),
                updater_cert_fingerprint: Some(updater.fingerprint.clone()),
                enrolled_at: Utc::now(),
                notes: None,
                use_ipvlan: false,
            },
            probe,
        ));
        nets.push(net);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for (_, probe) in &hosts {
        while probe.get("/health").await.is_err() {
            assert!(Instant::now() < deadline, "an agent never came up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let release_binary = dir.path().join("svc-release");
    let mut bytes = std::fs::read(svc_binary()).unwrap();
    bytes.extend_from_slice(b"svc-bench-release");
    std::fs::write(&release_binary, bytes).unwrap();
    let started = Instant::now();
    let release = build_release(&release_binary, &[]).unwrap();
    let build = started.elapsed();

    let (mut totals, mut downtimes) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (stop_tx, stop_rx) = watch::channel(false);
        let probe = hosts[0].1.clone();
        let watcher = tokio::spawn(async move {
            let (mut longest, mut down_since) = (Duration::ZERO, None::<Instant>);
            while !*stop_rx.borrow() {
                let up = tokio::time::timeout(Duration::from_millis(500), probe.get("/health"))
                    .await
                    .is_ok_and(|answer| answer.is_ok());
                match (up, down_since) {
                    (false, None) => down_since = Some(Instant::now()),
                    (true, Some(since)) => {
                        longest = longest.max(since.elapsed());
                        down_since = None;
                    }
                    _ => {}
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            longest
        });
        let started = Instant::now();
        let pushes = hosts.iter().map(|(host, _)| push(&caller, host, &release, false));
        let results = futures::future::join_all(pushes).await;
        totals.push(started.elapsed());
        for result in &results {
            assert_eq!(result.status, "updated", "{result:?}");
        }
        // The agent answers again by now: its updater probed it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop_tx.send(true).unwrap();
        downtimes.push(watcher.await.unwrap());
    }
    println!("release: {} MiB gzipped, built in {} ms", release.tgz.len() / (1024 * 1024), build.as_millis());
    println!("push to {count} hosts in parallel until all healthy ({rounds} rounds): {}", summary(totals));
    println!("one host's agent unanswering during an update: {}", summary(downtimes));
    // The processes before their namespaces.
    drop(keep);
    drop(nets);
}
