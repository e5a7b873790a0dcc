//! What the swarm's processes are given: the master's swarm listener and its certificate store,
//! and an agent's own API, identity, master and install root. `config/swarm.rs` reads them from
//! `SVC_*`; the swarm knows what it is given, not where that came from. An enrolled host's layout
//! (the files its bundle installs and the settings that name them) is written here once: the
//! bundle writes it, and `config/` reads the same names with the same files as defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use uuid::Uuid;

pub use super::updater::agent::RestartMode;
use crate::fleet::subnet::Subnet;

#[derive(Clone, Debug)]
pub struct SwarmConfig {
    /// `SVC_SWARM_ENABLED`: `svc api` runs the heartbeat listener (and may dispatch to agents).
    pub enabled: bool,
    /// `SVC_SWARM_DIR`, default `$SVC_DATA_DIR/swarm`: the CA (`ca/`), the master's identity
    /// (`master/`) and the bundles issued.
    pub dir: PathBuf,
    /// `SVC_SWARM_HOST`: where the heartbeat listener binds.
    pub listen_host: String,
    /// `SVC_SWARM_PORT`: the heartbeat listener's port (DECNET's swarm controller's).
    pub listen_port: u16,
    /// `SVC_SWARM_SYSLOG_PORT`: the log listener's port on the master (RFC 5425 over mutual TLS,
    /// DECNET's 6514), and where an agent host's forwarder ships to; 0 turns both off.
    pub syslog_port: u16,
    /// `SVC_VERIFY_HOSTNAME`: the master checks an agent's certificate names the address it dials.
    pub verify_hostname: bool,
    /// `SVC_AGENT_CONNECT_TIMEOUT_S` and `SVC_AGENT_READ_TIMEOUT_S`: the master's calls to agents.
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub agent: AgentConfig,
    pub updater: UpdaterConfig,
}

impl SwarmConfig {
    /// The swarm CA's directory (`SVC_SWARM_DIR/ca`): its key and certificate.
    pub fn ca_dir(&self) -> PathBuf {
        self.dir.join("ca")
    }

    /// The master's own identity (`SVC_SWARM_DIR/master`), CN `svc-master`.
    pub fn master_dir(&self) -> PathBuf {
        self.dir.join("master")
    }
}

#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// `SVC_AGENT_HOST`, `SVC_AGENT_PORT`: where `svc agent` serves its mTLS API.
    pub host: String,
    pub port: u16,
    /// `SVC_AGENT_CERT`, `SVC_AGENT_KEY`, `SVC_AGENT_CA`: the agent's identity and the swarm CA.
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// `SVC_MASTER_HOST`: where heartbeats go (`https://<it>:<SVC_SWARM_PORT>/swarm/heartbeat`);
    /// unset: none are sent.
    pub master_host: Option<String>,
    /// The master's swarm listener port: `SVC_SWARM_PORT`, as on the master.
    pub master_port: u16,
    /// `SVC_HOST_UUID`: the master's id for this host, sent in every heartbeat.
    pub host_uuid: Option<Uuid>,
    /// `SVC_AGENT_HEARTBEAT_S`: seconds between heartbeats.
    pub heartbeat: Duration,
    /// `SVC_INSTALL_ROOT`: the root the agent's files were installed under; self-destruct removes
    /// them from there.
    pub install_root: PathBuf,
    /// `SVC_AGENT_DECKY_NET`: the subnet this host's deckies go on, whatever network a deploy's
    /// `[general]` names (unset: the deploy's).
    pub decky_net: Option<Subnet>,
}

#[derive(Clone, Debug)]
pub struct UpdaterConfig {
    /// `SVC_UPDATER_HOST`, `SVC_UPDATER_PORT`: where `svc updater` serves its mTLS API; the
    /// master dials the same port on every host.
    pub host: String,
    pub port: u16,
    /// `SVC_UPDATER_CERT`, `SVC_UPDATER_KEY`, `SVC_UPDATER_CA`: the updater's identity
    /// (`updater@<host>`) and the swarm CA.
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// `SVC_UPDATER_DIR`, default `<SVC_INSTALL_ROOT>/opt/svc`: the release slots.
    pub dir: PathBuf,
    /// `SVC_UPDATER_RESTART`: how the agent is restarted on a new release.
    pub restart: RestartMode,
    /// `<SVC_INSTALL_ROOT>/usr/local/bin/svc`: what the units start (pointed at the current
    /// release under systemd).
    pub installed_binary: PathBuf,
    /// `SVC_UPDATER_PROBE_S`: how long the agent gets to answer `/health` on a new release.
    pub probe_for: Duration,
    /// `SVC_UPDATER_MAX_MIB`: the cap on a release's unpacked size (and its upload).
    pub max_bytes: u64,
    /// `SVC_UPDATER_READ_TIMEOUT_S`: how long the master waits for an update's answer (it
    /// includes the agent's restart and probes).
    pub read_timeout: Duration,
}

/// One file an enrolled host keeps, relative to its install root, and the setting that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFile {
    pub var: &'static str,
    pub path: &'static str,
}

impl HostFile {
    /// The file on a host installed under `root`.
    pub fn under(&self, root: &Path) -> PathBuf {
        root.join(self.path)
    }
}

/// The agent's certificate, key and the swarm CA (`SVC_AGENT_CERT`, `SVC_AGENT_KEY`, `SVC_AGENT_CA`).
pub const AGENT_CERT: HostFile = HostFile { var: "SVC_AGENT_CERT", path: "etc/svc/agent/agent.crt" };
pub const AGENT_KEY: HostFile = HostFile { var: "SVC_AGENT_KEY", path: "etc/svc/agent/agent.key" };
pub const AGENT_CA: HostFile = HostFile { var: "SVC_AGENT_CA", path: "etc/svc/agent/ca.crt" };
/// The updater's certificate (`updater@<host>`), key and the swarm CA.
pub const UPDATER_CERT: HostFile = HostFile { var: "SVC_UPDATER_CERT", path: "etc/svc/updater/updater.crt" };
pub const UPDATER_KEY: HostFile = HostFile { var: "SVC_UPDATER_KEY", path: "etc/svc/updater/updater.key" };
pub const UPDATER_CA: HostFile = HostFile { var: "SVC_UPDATER_CA", path: "etc/svc/updater/ca.crt" };
/// The svc binary, relative to the install root.
pub const BINARY_PATH: &str = "usr/local/bin/svc";
/// The host's settings (every unit's `EnvironmentFile`), relative to the install root.
pub const SETTINGS_PATH: &str = "etc/svc/env";
/// The services INI an enrollment may carry, relative to the install root.
pub const SERVICES_INI_PATH: &str = "etc/svc/services.ini";

/// The settings an enrolled host's settings file gives besides its files' paths: its role, that it
/// refuses to run the master API, its id, its master (heartbeat and log ports), its agent's port,
/// and its install root.
pub const MODE_VAR: &str = "SVC_MODE";
pub const DISALLOW_MASTER_VAR: &str = "SVC_DISALLOW_MASTER";
pub const HOST_UUID_VAR: &str = "SVC_HOST_UUID";
pub const MASTER_HOST_VAR: &str = "SVC_MASTER_HOST";
pub const SWARM_PORT_VAR: &str = "SVC_SWARM_PORT";
pub const SYSLOG_PORT_VAR: &str = "SVC_SWARM_SYSLOG_PORT";
pub const AGENT_PORT_VAR: &str = "SVC_AGENT_PORT";
pub const INSTALL_ROOT_VAR: &str = "SVC_INSTALL_ROOT";
