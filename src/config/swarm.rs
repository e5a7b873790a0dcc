//! The swarm's settings (`SVC_SWARM_*`, `SVC_AGENT_*`, `SVC_MASTER_HOST`, `SVC_HOST_UUID`,
//! `SVC_VERIFY_HOSTNAME`), read into the swarm's own [`SwarmConfig`] (`swarm/config.rs`).

use std::path::{Path, PathBuf};

use super::env::Env;
use crate::swarm::config::{AgentConfig, RestartMode, SwarmConfig, UpdaterConfig};

/// Where an enrolled host keeps its agent's certificates (the bundle installs them there).
const AGENT_CERT_DIR: &str = "/etc/svc/agent";
/// Where an enrolled host keeps its updater's certificates.
const UPDATER_CERT_DIR: &str = "/etc/svc/updater";

impl SwarmConfig {
    pub(super) fn read(env: &mut Env, data_dir: &Path) -> SwarmConfig {
        let enabled = env.flag("SVC_SWARM_ENABLED", false);
        let dir = env.path_or("SVC_SWARM_DIR", data_dir.join("swarm"));
        let listen_host = env.non_empty_or("SVC_SWARM_HOST", "0.0.0.0");
        let listen_port = env.port("SVC_SWARM_PORT", 8770);
        let syslog_port = env.count("SVC_SWARM_SYSLOG_PORT", 6514, 0..=65535) as u16;
        let verify_hostname = env.flag("SVC_VERIFY_HOSTNAME", true);
        let connect_timeout = env.seconds("SVC_AGENT_CONNECT_TIMEOUT_S", 5.0);
        let read_timeout = env.seconds("SVC_AGENT_READ_TIMEOUT_S", 15.0);
        let cert_dir = PathBuf::from(AGENT_CERT_DIR);
        let host_uuid = env.non_empty("SVC_HOST_UUID").and_then(|text| match uuid::Uuid::parse_str(text.trim()) {
            Ok(uuid) => Some(uuid),
            Err(_) => {
                env.report("SVC_HOST_UUID", "must be a UUID");
                None
            }
        });
        let decky_net = env.non_empty("SVC_AGENT_DECKY_NET").and_then(|text| match text.trim().parse() {
            Ok(subnet) => Some(subnet),
            Err(_) => {
                env.report("SVC_AGENT_DECKY_NET", "must be an IPv4 subnet in CIDR form, e.g. 10.20.0.0/24");
                None
            }
        });
        let agent = AgentConfig {
            host: env.non_empty_or("SVC_AGENT_HOST", "0.0.0.0"),
            port: env.port("SVC_AGENT_PORT", 8765),
            cert: env.path_or("SVC_AGENT_CERT", cert_dir.join("agent.crt")),
            key: env.path_or("SVC_AGENT_KEY", cert_dir.join("agent.key")),
            ca: env.path_or("SVC_AGENT_CA", cert_dir.join("ca.crt")),
            master_host: env.non_empty("SVC_MASTER_HOST"),
            master_port: listen_port,
            host_uuid,
            heartbeat: env.seconds("SVC_AGENT_HEARTBEAT_S", 30.0),
            install_root: env.path_or("SVC_INSTALL_ROOT", PathBuf::from("/")),
            decky_net,
        };
        let updater = UpdaterConfig::read(env, &agent.install_root);
        SwarmConfig {
            enabled,
            dir,
            listen_host,
            listen_port,
            syslog_port,
            verify_hostname,
            connect_timeout,
            read_timeout,
            agent,
            updater,
        }
    }
}

impl UpdaterConfig {
    fn read(env: &mut Env, install_root: &Path) -> UpdaterConfig {
        let cert_dir = PathBuf::from(UPDATER_CERT_DIR);
        let restart = match env.get_or("SVC_UPDATER_RESTART", "supervise").trim().to_ascii_lowercase().as_str() {
            "supervise" => RestartMode::Supervise,
            "systemd" => RestartMode::Systemd,
            _ => {
                env.report("SVC_UPDATER_RESTART", "must be `supervise` or `systemd`");
                RestartMode::Supervise
            }
        };
        UpdaterConfig {
            host: env.non_empty_or("SVC_UPDATER_HOST", "0.0.0.0"),
            port: env.port("SVC_UPDATER_PORT", 8766),
            cert: env.path_or("SVC_UPDATER_CERT", cert_dir.join("updater.crt")),
            key: env.path_or("SVC_UPDATER_KEY", cert_dir.join("updater.key")),
            ca: env.path_or("SVC_UPDATER_CA", cert_dir.join("ca.crt")),
            dir: env.path_or("SVC_UPDATER_DIR", install_root.join("opt/svc")),
            restart,
            installed_binary: install_root.join(crate::swarm::bundle::BINARY_PATH),
            probe_for: env.seconds("SVC_UPDATER_PROBE_S", 10.0),
            max_bytes: env.count("SVC_UPDATER_MAX_MIB", 256, 1..=4096) as u64 * 1024 * 1024,
            read_timeout: env.seconds("SVC_UPDATER_READ_TIMEOUT_S", 180.0),
        }
    }
}
