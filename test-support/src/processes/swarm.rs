//! What the swarm's process tests share: `svc agent` and `svc updater` commands with certificates from a test CA,
//! the master's side of a call to an agent or to the heartbeat listener, and enrolling a host
//! straight into the master's store.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use chrono::Utc;
use svc::db::{Db, HostStatus, SwarmHost};
use svc::swarm::client::Endpoint;
use svc::swarm::pki::{Ca, Leaf};
use svc::swarm::tls::{Identity, PeerPin, client_config};
use uuid::Uuid;

use super::{api_command, eventually, free_port, svc};

/// `svc api` in `dir` as a swarm master: its heartbeat listener on `listener` at a free port, its
/// CA and certificates under `dir/swarm`. The command, the API's port and the swarm port.
pub fn master_command(dir: &Path, listener: &str) -> (Command, u16, u16) {
    let swarm_port = free_port();
    let (mut api, api_port) = api_command(dir, None);
    api.env("SVC_SWARM_ENABLED", "true")
        .env("SVC_SWARM_HOST", listener)
        .env("SVC_SWARM_PORT", swarm_port.to_string())
        .env("SVC_SWARM_DIR", dir.join("swarm"))
        // Not DECNET's 6514, which tests running side by side would contend for (a test that ships
        // lines sets its own).
        .env("SVC_SWARM_SYSLOG_PORT", free_port().to_string());
    (api, api_port, swarm_port)
}

/// The agent's certificate, key and CA written under `dir/certs`, as `SVC_AGENT_*` settings.
fn agent_files(dir: &Path, ca: &Ca, leaf: &Leaf) -> [(&'static str, PathBuf); 3] {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let files = [
        ("SVC_AGENT_CERT", certs.join("agent.crt"), leaf.cert_pem.as_str()),
        ("SVC_AGENT_KEY", certs.join("agent.key"), leaf.key_pem.as_str()),
        ("SVC_AGENT_CA", certs.join("ca.crt"), ca.cert_pem()),
    ];
    files.map(|(var, path, text)| {
        std::fs::write(&path, text).unwrap();
        (var, path)
    })
}

/// `svc agent` in `dir` on `host:port` with `leaf`, an engine socket that does not exist (nothing
/// is deployed for real: a deploy fails at the engine), a stand-in for the decky binary (its image
/// digest is read at once, not from hundreds of MB of debug build) and its install root at
/// `dir/root`.
pub fn agent_command(dir: &Path, ca: &Ca, leaf: &Leaf, host: &str, port: u16) -> Command {
    host_command(dir, ca, leaf, host, port, "agent")
}

/// `svc updater` in `dir` on `host:updater_port` with `updater` (releases under `dir/opt`), running
/// the agent (`agent`, on `host:agent_port`, as [`agent_command`] would) itself.
pub fn updater_command(dir: &Path, ca: &Ca, agent: &Leaf, updater: &Leaf, host: &str, ports: (u16, u16)) -> Command {
    let (agent_port, updater_port) = ports;
    let mut command = host_command(dir, ca, agent, host, agent_port, "updater");
    let certs = dir.join("certs");
    for (var, name, text) in [
        ("SVC_UPDATER_CERT", "updater.crt", updater.cert_pem.as_str()),
        ("SVC_UPDATER_KEY", "updater.key", updater.key_pem.as_str()),
        ("SVC_UPDATER_CA", "updater-ca.crt", ca.cert_pem()),
    ] {
        std::fs::write(certs.join(name), text).unwrap();
        command.env(var, certs.join(name));
    }
    command
        .env("SVC_UPDATER_HOST", host)
        .env("SVC_UPDATER_PORT", updater_port.to_string())
        .env("SVC_UPDATER_DIR", dir.join("opt"));
    command
}

fn host_command(dir: &Path, ca: &Ca, leaf: &Leaf, host: &str, port: u16, subcommand: &str) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut command = svc(dir, &[subcommand]);
    for (var, path) in agent_files(dir, ca, leaf) {
        command.env(var, path);
    }
    let decky_binary = dir.join("decky-binary");
    std::fs::write(&decky_binary, "not a real decky: the engine is absent").unwrap();
    command
        .env("SVC_MODE", "agent")
        .env("SVC_DECKY_BINARY", decky_binary)
        .env("SVC_AGENT_HOST", host)
        .env("SVC_AGENT_PORT", port.to_string())
        .env("SVC_DOCKER_HOST", format!("unix://{}", dir.join("no-engine.sock").display()))
        .env("SVC_INSTALL_ROOT", dir.join("root"));
    command
}

/// `svc worker forwarder` in `dir` presenting `leaf`: ships `log_file` to the log listener at
/// `master:syslog_port`.
pub fn forwarder_command(dir: &Path, ca: &Ca, leaf: &Leaf, master: &str, syslog_port: u16, log_file: &Path) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut command = svc(dir, &["worker", "forwarder"]);
    for (var, path) in agent_files(dir, ca, leaf) {
        command.env(var, path);
    }
    command
        .env("SVC_MODE", "agent")
        .env("SVC_MASTER_HOST", master)
        .env("SVC_SWARM_SYSLOG_PORT", syslog_port.to_string())
        .env("SVC_INGEST_LOG_FILE", log_file);
    command
}

/// A client of `host:port` presenting `leaf`, trusting `ca_pem`.
pub fn endpoint(host: &str, port: u16, ca_pem: &str, leaf: &Leaf, pin: PeerPin, verify_hostname: bool) -> Endpoint {
    let identity = Identity::from_pem(&leaf.cert_pem, &leaf.key_pem).unwrap();
    Endpoint {
        host: host.to_string(),
        port,
        tls: client_config(&identity, ca_pem, pin, verify_hostname).unwrap(),
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(15),
    }
}

/// Waits until the updater behind `updater` reports its agent healthy: the first start copies the
/// binary as the first release and the agent migrates its store, which on a loaded machine takes
/// longer than [`super::DEADLINE`].
pub async fn agent_ready(updater: &Endpoint) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if updater.get("/health").await.is_ok_and(|answer| answer.json()["agent_status"] == "ok") {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the updater's agent never became healthy");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until something accepts connections on `host:port`.
pub async fn listening(host: &str, port: u16) {
    let addr = format!("{host}:{port}");
    eventually("the agent listens", || async { tokio::net::TcpStream::connect(&addr).await.is_ok() }).await;
}

/// Enrols a host straight into the master's store, as the enrollment route leaves it once its
/// bundle was fetched: `enrolled`, its address, the agent certificate's fingerprint.
pub async fn enroll(db: &Db, name: &str, address: &str, agent_port: u16, fingerprint: &str) -> SwarmHost {
    let host = SwarmHost {
        uuid: Uuid::new_v4(),
        name: name.into(),
        address: address.into(),
        agent_port,
        status: HostStatus::Enrolled,
        last_heartbeat: None,
        client_cert_fingerprint: Some(fingerprint.into()),
        updater_cert_fingerprint: None,
        enrolled_at: Utc::now(),
        notes: None,
        use_ipvlan: false,
    };
    db.add_swarm_host(&host).await.unwrap();
    host
}

/// The store of the `svc api` whose data directory is `data_dir` (sqlite), opened beside it.
pub fn master_store(data_dir: &Path) -> Db {
    let vars = [("SVC_DATA_DIR".to_string(), data_dir.display().to_string())];
    let config = svc::config::Config::from_vars(vars).unwrap();
    svc::db::connect(&config.db).unwrap()
}
