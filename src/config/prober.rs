//! `ProberConfig`: what the prober worker reads: whether the API embeds it (`SVC_EMBED_PROBER`),
//! whether private addresses may be probed, how often targets are found and probed again, how many
//! probes run at once, its time limits and packet ceiling, its de-duplication window and the ports
//! each probe tries (DECNET's lists by default).

use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct ProberConfig {
    /// `SVC_EMBED_PROBER`, default false: the prober runs inside the API.
    pub embed: bool,
    /// `SVC_PROBER_ALLOW_PRIVATE=true`: private (RFC 1918, unique-local, CGNAT…) attackers are
    /// probed too. Loopback, link-local, multicast, the fleet's and this host's addresses never are.
    pub allow_private: bool,
    /// `SVC_PROBER_POLL_SECS`: how often new attackers (and the fleet's addresses) are looked for.
    pub poll: Duration,
    /// `SVC_PROBER_INTERVAL_SECS`: every known attacker is probed again after this.
    pub interval: Duration,
    /// `SVC_PROBER_CONCURRENCY`: targets probed at once (each target's probes run one after another).
    pub concurrency: usize,
    /// `SVC_PROBER_TIMEOUT_SECS`: one connection, connect to answer.
    pub timeout: Duration,
    /// `SVC_PROBER_TARGET_BUDGET_SECS`: all the probes of one target, at most.
    pub target_budget: Duration,
    /// `SVC_PROBER_TARGET_GAP_MS`: the pause between two connections to the same target.
    pub target_gap: Duration,
    /// `SVC_PROBER_MAX_PPS`: packets per second the whole prober sends at most.
    pub max_pps: usize,
    /// `SVC_PROBER_DEDUP_SECS`: one line per target and fingerprint within this window.
    pub dedup_window: Duration,
    /// `SVC_PROBER_TLS_PORTS`: ports JARM and the certificate probe try.
    pub tls_ports: Vec<u16>,
    /// `SVC_PROBER_SSH_PORTS`: ports the HASSH probe tries.
    pub ssh_ports: Vec<u16>,
    /// `SVC_PROBER_TCPFP_PORTS`: ports whose SYN-ACK is fingerprinted.
    pub tcpfp_ports: Vec<u16>,
}

impl ProberConfig {
    pub(super) fn read(env: &mut Env) -> ProberConfig {
        ProberConfig {
            embed: env.flag("SVC_EMBED_PROBER", false),
            allow_private: env.flag("SVC_PROBER_ALLOW_PRIVATE", false),
            poll: env.seconds("SVC_PROBER_POLL_SECS", 5.0),
            interval: env.seconds("SVC_PROBER_INTERVAL_SECS", 300.0),
            concurrency: env.count("SVC_PROBER_CONCURRENCY", 8, 1..=256),
            timeout: env.seconds("SVC_PROBER_TIMEOUT_SECS", 5.0),
            target_budget: env.seconds("SVC_PROBER_TARGET_BUDGET_SECS", 120.0),
            target_gap: env.millis("SVC_PROBER_TARGET_GAP_MS", 100, 0..=60_000),
            max_pps: env.count("SVC_PROBER_MAX_PPS", 500, 1..=100_000),
            dedup_window: env.seconds("SVC_PROBER_DEDUP_SECS", 3600.0),
            tls_ports: ports(env, "SVC_PROBER_TLS_PORTS", "443,8443,8080,4443,50050,2222,993,995,8888,9001"),
            ssh_ports: ports(env, "SVC_PROBER_SSH_PORTS", "22,2222,22222,2022"),
            tcpfp_ports: ports(env, "SVC_PROBER_TCPFP_PORTS", "22,80,443,8080,8443,445,3389"),
        }
    }
}

/// A comma-separated port list; empty turns the probe off.
fn ports(env: &mut Env, var: &'static str, default: &str) -> Vec<u16> {
    let listed = env.get_or(var, default);
    let mut ports = Vec::new();
    for item in listed.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.parse::<u16>() {
            Ok(port) if port > 0 => {
                if !ports.contains(&port) {
                    ports.push(port);
                }
            }
            _ => env.report(var, "must be a comma-separated list of ports (1..65535)"),
        }
    }
    ports
}
