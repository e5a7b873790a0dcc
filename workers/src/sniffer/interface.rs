//! Which interface a live capture listens on, followed while the sniffer runs. `SVC_SNIFFER_IFACE`
//! when set; otherwise the fleet network's host interface, from the source the decky addresses
//! come from (the fleet store, read again while running): a macvlan network's parent interface, a
//! bridge network's bridge — the host interface holding the network's gateway address, whatever
//! the engine named it (podman's `podman1` or `cni-podman1`, Docker's `br-…`; podman's
//! Docker-compatible inspect does not name it) — and, with no fleet network, one of DECNET's
//! helper interfaces present on this host. So a fleet deployed, torn down or moved to another
//! network after the sniffer started is followed without a restart.
//!
//! While there is nothing to capture on, the capture waits and its health detail says for what:
//! "waiting for a fleet network: none deployed", "waiting for the bridge of fleet network …",
//! "interface … of fleet network … absent".

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use std::sync::Arc;
use svc::config::FLEET_INTERFACES;
use svc::db::{Db, FleetNetwork};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// The health detail while no fleet network exists and no DECNET helper interface is present.
pub const NO_FLEET_NETWORK: &str = "waiting for a fleet network: none deployed";
/// How often the host's interfaces are looked at, and the fleet store read while the capture waits:
/// a first deploy's bridge is captured within about this long of its first container starting.
const RECHECK: Duration = Duration::from_secs(1);

/// Where a live capture should listen now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Capture on this interface.
    Interface(String),
    /// Nothing to capture on yet; what is awaited, as the health detail says it.
    Waiting(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Interface(name) => write!(f, "interface {name}"),
            Target::Waiting(detail) => f.write_str(detail),
        }
    }
}

/// How the capture's interface is found.
#[derive(Clone)]
pub enum Interfaces {
    /// `SVC_SNIFFER_IFACE`: always this one (the capture waits for it when it is absent).
    Fixed(String),
    /// The fleet network's, from the fleet store and this host's interfaces.
    Fleet(Db),
}

/// What this host has, as far as choosing an interface needs.
pub trait Host {
    /// An interface of this name exists.
    fn has(&self, name: &str) -> bool;
    /// The interface holding address `ip`, if one does.
    fn holding(&self, ip: IpAddr) -> Option<String>;
}

/// This host's interfaces, as the kernel lists them now.
struct ThisHost(Vec<pcap::Device>);

impl ThisHost {
    fn now() -> ThisHost {
        ThisHost(pcap::Device::list().unwrap_or_else(|err| {
            tracing::warn!(error = %err, "Cannot list this host's interfaces");
            Vec::new()
        }))
    }
}

impl Host for ThisHost {
    fn has(&self, name: &str) -> bool {
        Path::new("/sys/class/net").join(name).exists()
    }

    fn holding(&self, ip: IpAddr) -> Option<String> {
        self.0.iter().find(|d| d.addresses.iter().any(|a| a.addr == ip)).map(|d| d.name.clone())
    }
}

/// The interface for the fleet network `network` (`None`: none deployed) on `host`.
pub fn choose(network: Option<&FleetNetwork>, host: &dyn Host) -> Target {
    let Some(network) = network else {
        return match FLEET_INTERFACES.iter().find(|name| host.has(name)) {
            Some(helper) => Target::Interface(helper.to_string()),
            None => Target::Waiting(NO_FLEET_NETWORK.into()),
        };
    };
    match &network.interface {
        // A macvlan network: its deckies' frames cross the parent interface.
        Some(parent) if host.has(parent) => Target::Interface(parent.clone()),
        Some(parent) => Target::Waiting(format!("interface {parent} of fleet network {} absent", network.subnet)),
        // A bridge: the engine gives it the gateway's address when it creates it (with the
        // network's first container).
        None => match network.gateway.parse::<IpAddr>().ok().and_then(|gateway| host.holding(gateway)) {
            Some(bridge) => Target::Interface(bridge),
            None => Target::Waiting(format!("waiting for the bridge of fleet network {}", network.subnet)),
        },
    }
}

/// The fleet store's network: `Ok(None)` when none is deployed, `Err` when the store cannot say.
async fn fleet_network(db: &Db) -> Result<Option<FleetNetwork>, ()> {
    match db.fleet().await {
        Ok(fleet) => Ok(fleet.network),
        Err(err) => {
            tracing::warn!(error = %format!("{err:#}"), "Cannot read the fleet network; keeping the last one");
            Err(())
        }
    }
}

/// The target now, as the capture starts.
pub async fn first(interfaces: &Interfaces) -> Target {
    match interfaces {
        Interfaces::Fixed(name) => Target::Interface(name.clone()),
        Interfaces::Fleet(db) => match fleet_network(db).await {
            Ok(network) => choose(network.as_ref(), &ThisHost::now()),
            Err(()) => Target::Waiting("waiting for the fleet store".into()),
        },
    }
}

/// Publishes each change of the target until `cancel`: this host's interfaces are looked at every
/// second, the fleet store read every `refresh` (every second while the capture waits). A change
/// means the fleet did: `fleet_changed` is notified (the decky addresses are read again at once).
/// A fixed interface never changes.
pub async fn follow(
    interfaces: Interfaces,
    refresh: Duration,
    targets: watch::Sender<Target>,
    fleet_changed: Arc<Notify>,
    cancel: CancellationToken,
) {
    let Interfaces::Fleet(db) = interfaces else { return };
    let mut network = fleet_network(&db).await.unwrap_or(None);
    let mut read_at = Instant::now();
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(RECHECK) => {}
        }
        let waiting = matches!(*targets.borrow(), Target::Waiting(_));
        if (waiting || read_at.elapsed() >= refresh)
            && let Ok(read) = fleet_network(&db).await
        {
            network = read;
            read_at = Instant::now();
        }
        let host = tokio::task::spawn_blocking(ThisHost::now).await.unwrap_or(ThisHost(Vec::new()));
        let target = choose(network.as_ref(), &host);
        let changed = targets.send_if_modified(|current| {
            let changed = *current != target;
            if changed {
                tracing::info!(from = %current, to = %target, "The capture interface changed");
                *current = target;
            }
            changed
        });
        if changed {
            fleet_changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A host with these interfaces, each holding these addresses.
    struct FakeHost(BTreeMap<&'static str, Vec<IpAddr>>);

    impl Host for FakeHost {
        fn has(&self, name: &str) -> bool {
            self.0.contains_key(name)
        }

        fn holding(&self, ip: IpAddr) -> Option<String> {
            self.0.iter().find(|(_, addrs)| addrs.contains(&ip)).map(|(name, _)| name.to_string())
        }
    }

    fn host(interfaces: &[(&'static str, &[&str])]) -> FakeHost {
        FakeHost(
            interfaces
                .iter()
                .map(|(name, addrs)| (*name, addrs.iter().map(|a| a.parse().unwrap()).collect()))
                .collect(),
        )
    }

    fn network(interface: Option<&str>) -> FleetNetwork {
        FleetNetwork {
            subnet: "10.213.210.0/24".into(),
            gateway: "10.213.210.1".into(),
            interface: interface.map(str::to_string),
        }
    }

    #[test]
    fn with_no_fleet_network_the_capture_waits_and_says_so() {
        let bare = host(&[("lo", &["127.0.0.1"]), ("eth0", &["192.0.2.7"])]);
        assert_eq!(choose(None, &bare), Target::Waiting("waiting for a fleet network: none deployed".into()));
        let decnet = host(&[("eth0", &[]), ("decnet_ipvlan0", &[])]);
        assert_eq!(choose(None, &decnet), Target::Interface("decnet_ipvlan0".into()), "a DECNET fleet's helper");
    }

    #[test]
    fn a_bridge_network_is_captured_on_the_interface_holding_its_gateway() {
        let before = host(&[("eth0", &["192.0.2.7"])]);
        assert_eq!(
            choose(Some(&network(None)), &before),
            Target::Waiting("waiting for the bridge of fleet network 10.213.210.0/24".into()),
            "deployed, its first container not started yet"
        );
        let after = host(&[("eth0", &["192.0.2.7"]), ("podman3", &["10.213.210.1"])]);
        assert_eq!(choose(Some(&network(None)), &after), Target::Interface("podman3".into()));
    }

    #[test]
    fn a_macvlan_network_is_captured_on_its_parent() {
        let lan = host(&[("eth1", &[])]);
        assert_eq!(choose(Some(&network(Some("eth1"))), &lan), Target::Interface("eth1".into()));
        assert_eq!(
            choose(Some(&network(Some("eth9"))), &lan),
            Target::Waiting("interface eth9 of fleet network 10.213.210.0/24 absent".into())
        );
    }
}
