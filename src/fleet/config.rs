//! `FleetConfig`: where the container engine is, what the fleet's containers and network are
//! called, how large a fleet may grow, and which binary the default decky image is built from.
//! The configuration reads it from the environment (`config/fleet.rs`); the fleet, its workers and
//! its topologies only need what it says.

use std::path::PathBuf;
use std::time::Duration;

use super::artifacts::ArtifactsPolicy;
use super::subnet::Subnet;

#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// `SVC_DOCKER_HOST`: the engine's API, `unix:///path` or `tcp://host:port` (default Docker's
    /// socket; podman's is `unix:///run/podman/podman.sock`).
    pub docker_host: String,
    /// `SVC_FLEET_NAME`, default `svc`: the prefix of the fleet's container and network names and
    /// the value of the `svc.fleet` label that marks them, so two fleets on one engine never touch
    /// each other's containers.
    pub name: String,
    /// `SVC_DEPLOYMENT_LIMIT`, default 10: the most deckies the fleet may hold.
    pub deployment_limit: usize,
    /// `SVC_DECKY_BINARY`: the svc binary the default decky image carries (default: this one).
    pub decky_binary: Option<PathBuf>,
    /// `SVC_DECKY_HOST_ISOLATION`, default true: the host refuses whatever the fleet's deckies on
    /// a bridge of this host send to any of its own addresses, replies to its own connections
    /// excepted (`fleet/host_isolation.rs`).
    pub host_isolation: bool,
    /// `SVC_TOPOLOGY_SUBNET_POOL`, default `172.16.0.0/12`: the range topologies' /24 LANs are
    /// handed out from.
    pub topology_subnet_pool: Subnet,
    /// `SVC_MUTATOR_POLL_S`, default 10: how often the mutator looks for work when nothing on
    /// the bus woke it.
    pub mutator_poll: Duration,
    /// `SVC_MUTATOR_CLAIM_TIMEOUT_S`, default 300: a mutation `applying` for longer was left by a
    /// mutator that died, and is failed.
    pub mutator_claim_timeout: Duration,
    /// `SVC_RECONCILE_S`, default 60: how often the API brings the engine back to the store (the
    /// fleet's deckies, and the live topologies' deckies, routes and NAT exemption).
    pub reconcile: Duration,
    /// Where deckies keep captured files, how much and for how long (`artifacts.rs`).
    pub artifacts: ArtifactsPolicy,
}
