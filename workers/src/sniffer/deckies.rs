//! Which decky an address belongs to. The sniffer asks a [`DeckyDirectory`] for the fleet's deckies
//! every refresh interval, at once when told the fleet changed (its network did), and every second
//! while it knows none (so a first deploy is followed at once); it hands the capture thread a new [`DeckyMap`] when the answer changed, so deploys and
//! teardowns are followed without a restart. A failed refresh keeps the last map.
//! The fleet store ([`FleetDeckies`]) is the directory; a list given by hand ([`StaticDeckies`],
//! `SVC_SNIFFER_DECKIES`) replaces it on a capture host that watches addresses of its own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use svc::db::Db;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// How often the directory is read while it lists no decky.
const WHILE_EMPTY: Duration = Duration::from_secs(1);

/// One decky as the sniffer needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decky {
    pub name: String,
    pub ip: IpAddr,
}

/// Where the fleet's deckies are listed.
#[async_trait]
pub trait DeckyDirectory: Send + Sync {
    async fn deckies(&self) -> anyhow::Result<Vec<Decky>>;
}

/// Address → decky name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeckyMap(HashMap<IpAddr, String>);

impl DeckyMap {
    pub fn new(deckies: impl IntoIterator<Item = Decky>) -> DeckyMap {
        DeckyMap(deckies.into_iter().map(|d| (d.ip, d.name)).collect())
    }

    pub fn decky(&self, ip: &IpAddr) -> Option<&str> {
        self.0.get(&canonical(ip)).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address.
fn canonical(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(*ip, IpAddr::V4),
        IpAddr::V4(_) => *ip,
    }
}

/// A directory held in memory and changed by its owner: what tests (and a static deployment) fill.
#[derive(Clone, Default)]
pub struct StaticDeckies(Arc<Mutex<Vec<Decky>>>);

impl StaticDeckies {
    pub fn new(deckies: Vec<Decky>) -> StaticDeckies {
        StaticDeckies(Arc::new(Mutex::new(deckies)))
    }

    pub fn set(&self, deckies: Vec<Decky>) {
        *self.0.lock().expect("deckies lock") = deckies;
    }
}

#[async_trait]
impl DeckyDirectory for StaticDeckies {
    async fn deckies(&self) -> anyhow::Result<Vec<Decky>> {
        Ok(self.0.lock().expect("deckies lock").clone())
    }
}

/// The deckies the fleet store holds, whatever their deploy state (a teardown removes them).
pub struct FleetDeckies(pub Db);

#[async_trait]
impl DeckyDirectory for FleetDeckies {
    async fn deckies(&self) -> anyhow::Result<Vec<Decky>> {
        let fleet = self.0.fleet().await.context("reading the fleet")?;
        let mut deckies = Vec::with_capacity(fleet.deckies.len());
        for stored in fleet.deckies {
            match stored.config.ip.parse::<IpAddr>() {
                Ok(ip) => deckies.push(Decky { name: stored.config.name, ip }),
                Err(_) => {
                    tracing::warn!(decky = %stored.config.name, "A decky without a usable address is not watched")
                }
            }
        }
        Ok(deckies)
    }
}

/// Reads the directory now and then every `interval` (at most a second apart while the map is
/// empty, and at once when `changed` is notified) until `cancel`, publishing each changed map.
pub async fn follow(
    directory: Arc<dyn DeckyDirectory>,
    interval: Duration,
    changed: Arc<Notify>,
    maps: watch::Sender<Arc<DeckyMap>>,
    cancel: CancellationToken,
) {
    loop {
        match directory.deckies().await {
            Ok(deckies) => {
                let map = DeckyMap::new(deckies);
                maps.send_if_modified(|current| {
                    let changed = **current != map;
                    if changed {
                        tracing::info!(deckies = map.len(), "Decky addresses changed");
                        *current = Arc::new(map);
                    }
                    changed
                });
            }
            Err(err) => tracing::warn!(error = %format!("{err:#}"), "Cannot list the deckies; keeping the last map"),
        }
        let pause = if maps.borrow().is_empty() { interval.min(WHILE_EMPTY) } else { interval };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
            () = changed.notified() => {}
        }
    }
}
