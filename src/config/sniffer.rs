//! `SnifferConfig`: what the sniffer worker reads: where it captures, how much of each flow it keeps,
//! its windows, and whether the API embeds it (`SVC_EMBED_SNIFFER`, spec startup step 8).

use std::net::IpAddr;
use std::time::Duration;

use super::env::Env;

/// DECNET's host-side helper interfaces, captured on (the first present) when `SVC_SNIFFER_IFACE`
/// is unset and no fleet network is deployed.
pub const FLEET_INTERFACES: [&str; 2] = ["decnet_macvlan0", "decnet_ipvlan0"];

#[derive(Clone, Debug)]
pub struct SnifferConfig {
    /// `SVC_EMBED_SNIFFER`, default false: the sniffer runs inside the API.
    pub embed: bool,
    /// `SVC_SNIFFER_IFACE`; by default the fleet network's host interface (a bridge's, or a
    /// macvlan's parent), followed as the fleet is deployed, torn down or moved; with no fleet
    /// network, the first of [`FLEET_INTERFACES`] present.
    pub iface: Option<String>,
    /// `SVC_SNIFFER_FILTER`, default `tcp`: the BPF filter of a live capture.
    pub filter: String,
    /// `SVC_SNIFFER_MAX_FLOWS`, default 200000: flows tracked at once; more are refused and counted.
    pub max_flows: usize,
    /// `SVC_SNIFFER_FLOW_BYTES`, default 16384: bytes kept from the start of each direction.
    pub flow_bytes: usize,
    /// `SVC_SNIFFER_FLOW_IDLE_SECS`, default 60: an idle flow is forgotten after this.
    pub flow_idle: Duration,
    /// `SVC_SNIFFER_DEDUP_SECS`, default 300: one event per attacker and fingerprint in this window.
    pub dedup_window: Duration,
    /// `SVC_SNIFFER_REFRESH_SECS`, default 30: how often the decky addresses and the fleet network
    /// are read again (every second while there are none).
    pub refresh: Duration,
    /// `SVC_SNIFFER_DECKIES` (`name=address,…`): decky addresses listed by hand, used instead of the
    /// fleet store's (a capture host watching addresses of its own; the process tests).
    pub deckies: Vec<(String, IpAddr)>,
}

impl SnifferConfig {
    pub(super) fn read(env: &mut Env) -> SnifferConfig {
        SnifferConfig {
            embed: env.flag("SVC_EMBED_SNIFFER", false),
            iface: env.non_empty("SVC_SNIFFER_IFACE"),
            filter: env.non_empty_or("SVC_SNIFFER_FILTER", "tcp"),
            max_flows: env.count("SVC_SNIFFER_MAX_FLOWS", 200_000, 1..=10_000_000),
            flow_bytes: env.count("SVC_SNIFFER_FLOW_BYTES", 16_384, 512..=1_048_576),
            flow_idle: env.seconds("SVC_SNIFFER_FLOW_IDLE_SECS", 60.0),
            dedup_window: env.seconds("SVC_SNIFFER_DEDUP_SECS", 300.0),
            refresh: env.seconds("SVC_SNIFFER_REFRESH_SECS", 30.0),
            deckies: deckies(env),
        }
    }
}

fn deckies(env: &mut Env) -> Vec<(String, IpAddr)> {
    let Some(listed) = env.non_empty("SVC_SNIFFER_DECKIES") else { return Vec::new() };
    let mut deckies = Vec::new();
    for item in listed.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once('=').map(|(name, ip)| (name.trim(), ip.trim().parse::<IpAddr>())) {
            Some((name, Ok(ip))) if !name.is_empty() => deckies.push((name.to_string(), ip)),
            _ => env.report("SVC_SNIFFER_DECKIES", "must be a comma-separated list of name=address"),
        }
    }
    deckies
}
