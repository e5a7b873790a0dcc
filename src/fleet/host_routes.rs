//! The host route that keeps a fleet's subnet on the host. While the only container on a fleet
//! network restarts, the engine removes the network's bridge, and with it the connected route;
//! packets for a decky's address would then follow the host's default route off the machine. An
//! `unreachable` route for the subnet with a high metric is held for as long as the fleet exists:
//! the bridge's own connected route (metric 0) wins while it exists, and without it the host
//! refuses the packet. Only for a bridge on a local engine: a macvlan subnet is a real LAN the host
//! may reach through its router, and a remote engine's bridge is not on this host.
//!
//! A decky started again comes back on a new interface with a new hardware address while the
//! bridge (held by other deckies) lives on; the host's neighbour entry for its address still names
//! the old one, and the host sends the decky's traffic nowhere until that entry ages out (about 45
//! s). The entry is forgotten when the decky's container starts.

use tokio::process::Command;

use super::Fleet;
use crate::db::FleetNetwork;

/// The metric of the route: above any route a network manager or the engine makes for a subnet,
/// and ours alone, so we remove only what we added.
pub const HOST_ROUTE_METRIC: &str = "4040";

impl Fleet {
    /// Whether this fleet's network has its bridge on this host.
    pub(super) fn bridge_on_this_host(&self) -> bool {
        self.settings.docker_host.starts_with("unix://")
    }

    /// Holds the route for the stored fleet network's subnet, and the host's isolation from it,
    /// when it is a bridge on this host (again, after a host restart or someone removing them).
    pub(super) async fn hold_host_route(&self) {
        let network = match self.db.fleet().await {
            Ok(stored) if !stored.deckies.is_empty() => stored.network,
            _ => None,
        };
        if let Some(network) = network
            && network.interface.is_none()
            && self.bridge_on_this_host()
        {
            route(&["replace", "unreachable", &network.subnet, "metric", HOST_ROUTE_METRIC]).await;
            self.isolate_host(Some(&network.subnet)).await;
        } else if self.bridge_on_this_host() {
            self.isolate_host(None).await;
        }
    }

    /// Drops the route and the isolation held for `network` (the fleet is gone or moved off it).
    pub(super) async fn release_host_route(&self, network: &FleetNetwork) {
        if network.interface.is_none() && self.bridge_on_this_host() {
            route(&["del", "unreachable", &network.subnet, "metric", HOST_ROUTE_METRIC]).await;
            self.isolate_host(None).await;
        }
    }
}

/// `ip neigh flush to ADDRESS`: forgets what the host knew of a decky's hardware address.
pub(super) async fn forget_neighbour(address: &str) {
    let output = Command::new("ip").args(["neigh", "flush", "to", address]).env("LC_ALL", "C").output().await;
    if let Err(err) = output {
        tracing::warn!(address, error = %err, "Could not run ip neigh");
    }
}

/// `ip route ARGS`; a failure (no privilege, no such route to delete) is logged and left: the
/// fleet works without the route, only less safely.
async fn route(args: &[&str]) {
    let output = Command::new("ip").arg("route").args(args).env("LC_ALL", "C").output().await;
    match output {
        Ok(output) if output.status.success() => tracing::debug!(?args, "Host route changed"),
        Ok(output) => tracing::warn!(
            ?args,
            error = %String::from_utf8_lossy(&output.stderr).trim(),
            "Could not change the fleet subnet's host route"
        ),
        Err(err) => tracing::warn!(?args, error = %err, "Could not run ip route"),
    }
}
