//! The swarm's settings (`SVC_SWARM_*`, `SVC_AGENT_*`, `SVC_MASTER_HOST`, `SVC_HOST_UUID`,
//! `SVC_VERIFY_HOSTNAME`), read into the swarm's own [`SwarmConfig`] (`swarm/config.rs`).

use std::path::{Path, PathBuf};

use super::env::Env;
use crate::swarm::config::{
    AGENT_CA, AGENT_CERT, AGENT_KEY, AGENT_PORT_VAR, AgentConfig, BINARY_PATH, HOST_UUID_VAR, HostFile,
    INSTALL_ROOT_VAR, MASTER_HOST_VAR, RestartMode, SWARM_PORT_VAR, SYSLOG_PORT_VAR, SwarmConfig, UPDATER_CA,
    UPDATER_CERT, UPDATER_KEY, UpdaterConfig,
};

/// The root a host's files are under when the settings do not name them: an enrolled host's own
/// layout, installed at `/` (the bundle installs them there).
const DEFAULT_ROOT: &str = "/";

/// The path `file`'s setting names, else where an enrolled host installed at `/` keeps it.
fn host_file(env: &mut Env, file: HostFile) -> PathBuf {
    env.path_or(file.var, file.under(Path::new(DEFAULT_ROOT)))
}

impl SwarmConfig {
    pub(super) fn read(env: &mut Env, data_dir: &Path) -> SwarmConfig {
        let enabled = env.flag("SVC_SWARM_ENABLED", false);
        let dir = env.path_or("SVC_SWARM_DIR", data_dir.join("swarm"));
        let listen_host = env.non_empty_or("SVC_SWARM_HOST", "0.0.0.0");
        let listen_port = env.port(SWARM_PORT_VAR, 8770);
        let syslog_port = env.count(SYSLOG_PORT_VAR, 6514, 0..=65535) as u16;
        let verify_hostname = env.flag("SVC_VERIFY_HOSTNAME", true);
        let connect_timeout = env.seconds("SVC_AGENT_CONNECT_TIMEOUT_S", 5.0);
        let read_timeout = env.seconds("SVC_AGENT_READ_TIMEOUT_S", 15.0);
        let host_uuid = env.non_empty(HOST_UUID_VAR).and_then(|text| match uuid::Uuid::parse_str(text.trim()) {
            Ok(uuid) => Some(uuid),
            Err(_) => {
                env.report(HOST_UUID_VAR, "must be a UUID");
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
            port: env.port(AGENT_PORT_VAR, 8765),
            cert: host_file(env, AGENT_CERT),
            key: host_file(env, AGENT_KEY),
            ca: host_file(env, AGENT_CA),
            master_host: env.non_empty(MASTER_HOST_VAR),
            master_port: listen_port,
            host_uuid,
            heartbeat: env.seconds("SVC_AGENT_HEARTBEAT_S", 30.0),
            install_root: env.path_or(INSTALL_ROOT_VAR, PathBuf::from(DEFAULT_ROOT)),
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
            cert: host_file(env, UPDATER_CERT),
            key: host_file(env, UPDATER_KEY),
            ca: host_file(env, UPDATER_CA),
            dir: env.path_or("SVC_UPDATER_DIR", install_root.join("opt/svc")),
            restart,
            installed_binary: install_root.join(BINARY_PATH),
            probe_for: env.seconds("SVC_UPDATER_PROBE_S", 10.0),
            max_bytes: env.count("SVC_UPDATER_MAX_MIB", 256, 1..=4096) as u64 * 1024 * 1024,
            read_timeout: env.seconds("SVC_UPDATER_READ_TIMEOUT_S", 180.0),
        }
    }
}
