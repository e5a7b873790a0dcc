//! The fleet's settings from `SVC_DOCKER_HOST`, `SVC_FLEET_NAME` and the rest, as the fleet's own
//! [`FleetConfig`] (`fleet/config.rs`: the fleet knows what it is given, not where that came from).
//! `CollectorConfig`: what the collector worker reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::env::Env;
use crate::fleet::FleetConfig;
use crate::fleet::artifacts::{ArtifactsPolicy, DEFAULT_QUOTA_MB, DEFAULT_RETENTION_DAYS};
use crate::fleet::subnet::Subnet;

/// Where Docker listens when nothing else is configured.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

impl FleetConfig {
    pub(super) fn read(env: &mut Env, data_dir: &Path) -> FleetConfig {
        let name = env.non_empty_or("SVC_FLEET_NAME", "svc");
        if name.len() > 32 || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            env.report("SVC_FLEET_NAME", "must be 1 to 32 of a-z, 0-9 and '-'");
        }
        let pool = env.non_empty_or("SVC_TOPOLOGY_SUBNET_POOL", "172.16.0.0/12");
        let topology_subnet_pool = match pool.parse::<Subnet>() {
            Ok(subnet) if pool.rsplit_once('/').and_then(|(_, p)| p.parse::<u8>().ok()).is_some_and(|p| p <= 24) => {
                subnet
            }
            _ => {
                env.report("SVC_TOPOLOGY_SUBNET_POOL", "must be an IPv4 subnet of prefix 8 to 24, like 172.16.0.0/12");
                "172.16.0.0/12".parse().expect("the default pool parses")
            }
        };
        FleetConfig {
            topology_subnet_pool,
            mutator_poll: env.seconds("SVC_MUTATOR_POLL_S", 10.0),
            mutator_claim_timeout: env.seconds("SVC_MUTATOR_CLAIM_TIMEOUT_S", 300.0),
            reconcile: env.seconds("SVC_RECONCILE_S", 60.0),
            docker_host: env.non_empty_or("SVC_DOCKER_HOST", DEFAULT_DOCKER_HOST),
            name,
            deployment_limit: env.count("SVC_DEPLOYMENT_LIMIT", 10, 1..=1000),
            decky_binary: env.non_empty("SVC_DECKY_BINARY").map(PathBuf::from),
            host_isolation: env.flag("SVC_DECKY_HOST_ISOLATION", true),
            artifacts: ArtifactsPolicy {
                dir: env.path_or("SVC_ARTIFACTS_DIR", data_dir.join("artifacts")),
                quota_mb: env.count("SVC_ARTIFACTS_QUOTA_MB", DEFAULT_QUOTA_MB as usize, 1..=1_000_000) as u64,
                retention_days: env.count("SVC_ARTIFACTS_RETENTION_DAYS", DEFAULT_RETENTION_DAYS as usize, 1..=3650)
                    as u64,
            },
        }
    }
}

/// Application names whose lines the collector drops (system noise, not decoy events).
const DROP_APPS: &str = "sshd,pam_unix,sudo,su,CRON,cron,systemd,kernel,rsyslogd,dbus-daemon";
/// Event types the collector rate-limits per attacker, decky and service.
const RATE_LIMITED_EVENTS: &str = "connect,disconnect,connection,accept,close";

#[derive(Clone, Debug)]
pub struct CollectorConfig {
    /// `SVC_COLLECTOR_RECONCILE_S`, default 30: how often the engine's container list is re-read in
    /// case an event was missed.
    pub reconcile: Duration,
    /// `SVC_COLLECTOR_DROP_APPS`: APP-NAMEs whose lines are dropped.
    pub drop_apps: Vec<String>,
    /// `SVC_COLLECTOR_RL_EVENT_TYPES`: event types kept at most once per window per
    /// (attacker, decky, service, type).
    pub rate_limited_events: Vec<String>,
    /// `SVC_COLLECTOR_RL_WINDOW_SEC`, default 1.0.
    pub rate_limit_window: Duration,
    /// `SVC_COLLECTOR_STATE_FILE`, default `$SVC_DATA_DIR/collector.state`: how far each
    /// container's output has been written, so a restart neither repeats nor loses a line.
    pub state_file: PathBuf,
    /// `SVC_FLOOD_CAP_PER_S`, default 50 (0: no cap): lines kept per second per (attacker, decky),
    /// counted over `flood_window`; the rest are counted into `flood_suppressed` summary lines.
    pub flood_cap_per_s: usize,
    /// `SVC_FLOOD_WINDOW_S`, default 10: the window the cap is counted over, and the longest a
    /// summary waits.
    pub flood_window: Duration,
}

pub(super) fn list(value: String) -> Vec<String> {
    value.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

impl CollectorConfig {
    pub(super) fn read(env: &mut Env, data_dir: &Path) -> CollectorConfig {
        CollectorConfig {
            reconcile: env.seconds("SVC_COLLECTOR_RECONCILE_S", 30.0),
            drop_apps: list(env.get_or("SVC_COLLECTOR_DROP_APPS", DROP_APPS)),
            rate_limited_events: list(env.get_or("SVC_COLLECTOR_RL_EVENT_TYPES", RATE_LIMITED_EVENTS)),
            rate_limit_window: env.seconds("SVC_COLLECTOR_RL_WINDOW_SEC", 1.0),
            state_file: env.path_or("SVC_COLLECTOR_STATE_FILE", data_dir.join("collector.state")),
            flood_cap_per_s: env.count("SVC_FLOOD_CAP_PER_S", 50, 0..=1_000_000),
            flood_window: env.seconds("SVC_FLOOD_WINDOW_S", 10.0),
        }
    }
}
