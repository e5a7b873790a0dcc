//! Where a decky runs, and so where an operation on it is carried out: on this host's own fleet,
//! or, with `SVC_SWARM_ENABLED`, on the swarm. A deploy goes to the swarm's hosts when one is
//! usable (`deploy`), else to the fleet; a teardown or mutation of a decky a host reported (its
//! shard) goes to that host's agent (`remote`), else to the fleet; the list is the fleet's deckies
//! and, with the swarm on, each host's as its heartbeats left them. The decky routes call this
//! once each and never choose for themselves.

use std::collections::HashMap;
use std::path::PathBuf;

use uuid::Uuid;

use super::master::SwarmMaster;
use super::{deploy, remote};
use crate::db::{Db, DeckyConfig, ShardFilter, SwarmHost};
use crate::fleet::{Accepted, Fleet, FleetError};

/// Where a deploy's deckies went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeployMode {
    /// Every decky runs on this host's engine.
    Unihost,
    /// They went to the swarm's hosts, each decky's record carrying its host.
    Swarm,
}

impl DeployMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DeployMode::Unihost => "unihost",
            DeployMode::Swarm => "swarm",
        }
    }
}

/// A decky wherever it runs, with its state there.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedDecky {
    /// A swarm host's decky carries the host's uuid in `host_uuid`.
    pub config: DeckyConfig,
    /// The fleet's state of it, or its shard's on a swarm host.
    pub state: String,
    pub last_error: Option<String>,
    /// The swarm host that runs it; `None` for a decky of this host's own engine.
    pub host_name: Option<String>,
}

/// The fleet and the swarm behind one choice of where each operation runs. Cheap to clone.
#[derive(Clone)]
pub struct Placement {
    db: Db,
    fleet: Fleet,
    master: SwarmMaster,
    /// Where a mutated decky of this host writes its lines (`SVC_INGEST_LOG_FILE`).
    ingest_log: Option<PathBuf>,
}

impl Placement {
    pub fn new(db: Db, fleet: Fleet, master: SwarmMaster, ingest_log: Option<PathBuf>) -> Placement {
        Placement { db, fleet, master, ingest_log }
    }

    fn swarm_enabled(&self) -> bool {
        self.master.config().enabled
    }

    /// Deploys `ini_text` to the swarm's usable hosts, or to this host's fleet when the swarm is
    /// off or has none; `replace` makes the INI the whole fleet (of wherever it goes).
    pub async fn deploy(&self, ini_text: &str, replace: bool) -> Result<(Accepted, DeployMode), FleetError> {
        if self.swarm_enabled() {
            let limit = self.fleet.settings().deployment_limit;
            if let Some(accepted) = deploy::deploy(&self.db, &self.master, ini_text, replace, limit).await? {
                return Ok((accepted, DeployMode::Swarm));
            }
        }
        Ok((self.fleet.deploy(ini_text, replace).await?, DeployMode::Unihost))
    }

    /// Every decky, by name: the fleet's with their containers' states, and with the swarm on,
    /// those its hosts reported.
    pub async fn deckies(&self) -> Result<Vec<PlacedDecky>, FleetError> {
        let statuses = self.fleet.statuses().await?;
        let mut deckies: Vec<PlacedDecky> = statuses
            .into_iter()
            .map(|s| PlacedDecky { config: s.config, state: s.state, last_error: s.last_error, host_name: None })
            .collect();
        if self.swarm_enabled() {
            deckies.extend(self.swarm_deckies().await?);
            deckies.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        }
        Ok(deckies)
    }

    /// The deckies the swarm's hosts reported, as their heartbeats left them: the shard's state is
    /// the decky's, its host's uuid in the config.
    async fn swarm_deckies(&self) -> Result<Vec<PlacedDecky>, FleetError> {
        let hosts: HashMap<Uuid, String> =
            self.db.swarm_hosts(None).await?.into_iter().map(|h| (h.uuid, h.name)).collect();
        let shards = self.db.decky_shards(&ShardFilter::default()).await?;
        Ok(shards
            .into_iter()
            .filter_map(|shard| {
                let mut config = shard.decky_config?;
                config.host_uuid = Some(shard.host_uuid.to_string());
                Some(PlacedDecky {
                    config,
                    state: shard.state.as_str().to_string(),
                    last_error: shard.last_error,
                    host_name: hosts.get(&shard.host_uuid).cloned(),
                })
            })
            .collect())
    }

    /// The swarm host that runs `name`, when the swarm is on and one reported it.
    async fn host_of(&self, name: &str) -> Result<Option<SwarmHost>, FleetError> {
        if !self.swarm_enabled() {
            return Ok(None);
        }
        Ok(remote::host_of(&self.db, name).await?.map(|(_, host)| host))
    }

    /// Removes `name` where it runs: a swarm host's decky by its agent (its answer awaited), else
    /// the fleet's.
    pub async fn teardown(&self, name: &str) -> Result<(), FleetError> {
        match self.host_of(name).await? {
            Some(host) => remote::teardown(&self.db, &self.master, &host, name).await,
            None => self.fleet.teardown(name).await,
        }
    }

    /// Gives `name` a new set of services now (trigger `operator`) where it runs; the id of its
    /// lifecycle record.
    pub async fn mutate(&self, name: &str) -> Result<Uuid, FleetError> {
        match self.host_of(name).await? {
            Some(host) => remote::mutate(&self.db, &self.master, &host, name).await,
            None => self.fleet.mutate(name, "operator", self.ingest_log.clone()).await,
        }
    }
}
