//! What the fleet is now: each stored decky with its container's state, the running and deployed
//! counts, and whether the engine answers (health); the last two reused for a while. The
//! containers' states come from what the engine's events keep (`events`) while they are followed,
//! so `/deckies` costs a store read and no engine call; otherwise from a listing.

use std::collections::BTreeMap;
use std::time::Duration;

use super::containers::{by_decky, split_by_owner};
use super::{DeckyStatus, FLEET_LABEL, Fleet, FleetError};
use crate::db::{DbError, DeployState};
use crate::runtime::{ContainerInfo, RuntimeResult};

/// How long the runtime's health (is a fleet deployed, does the engine answer) is believed.
const HEALTH_CACHE: Duration = Duration::from_secs(5);
/// How long the running and deployed counts are reused: every `/stats` poll and log stream asks,
/// and each answer lists the engine's containers.
const COUNTS_REUSE: Duration = Duration::from_secs(1);

impl Fleet {
    /// Every stored decky with its container's state now.
    pub async fn statuses(&self) -> Result<Vec<DeckyStatus>, FleetError> {
        let stored = self.db.fleet().await?;
        if stored.deckies.is_empty() {
            // Nothing to ask the engine about (and no warning each `/stats` where there is none).
            return Ok(Vec::new());
        }
        let owner = self.owner().await?;
        let ours = |containers| by_decky(split_by_owner(&owner, &stored, containers).ours);
        let mut observed = self.observed_containers().await.map(ours);
        // A container made a moment ago may be in the store before its `start` event is here:
        // what looks missing is asked of the engine itself.
        if let Ok(containers) = &observed
            && stored
                .deckies
                .iter()
                .any(|d| d.state == DeployState::Running && !containers.contains_key(&d.config.name))
        {
            observed = self.runtime.list(FLEET_LABEL, &self.settings.name).await.map(ours);
        }
        let containers = match observed {
            Ok(containers) => Some(containers),
            Err(err) => {
                tracing::warn!(error = %err, "Cannot list the fleet's containers");
                None
            }
        };
        Ok(stored
            .deckies
            .into_iter()
            .map(|d| {
                let runs = |c: &BTreeMap<String, ContainerInfo>| c.get(&d.config.name).is_some_and(|c| c.is_running());
                let state = match (d.state, &containers) {
                    // A running container is the truth even before a deploy (or reconcile) records it.
                    (_, Some(containers)) if runs(containers) => "running".to_string(),
                    (DeployState::Pending, _) => "pending".to_string(),
                    (DeployState::Failed, _) => "failed".to_string(),
                    (DeployState::Running, None) => "unknown".to_string(),
                    (DeployState::Running, Some(containers)) => {
                        containers.get(&d.config.name).map_or_else(|| "missing".to_string(), |c| c.state.clone())
                    }
                };
                DeckyStatus { config: d.config, state, last_error: d.last_error }
            })
            .collect())
    }

    /// Every container carrying the fleet's label: as the engine's events keep them, or listed
    /// (and kept, unless an event came meanwhile) while they are not followed yet.
    async fn observed_containers(&self) -> RuntimeResult<Vec<ContainerInfo>> {
        let (containers, generation) = self.observed.current();
        if let Some(containers) = containers {
            return Ok(containers);
        }
        let listing = self.runtime.list(FLEET_LABEL, &self.settings.name).await?;
        self.observed.listed(generation, listing.clone());
        Ok(listing)
    }

    /// How many deckies run now, and how many are deployed: found at most once a second (a deploy
    /// or teardown here finds them again at once).
    pub async fn counts(&self) -> Result<(u64, u64), DbError> {
        let finding = match self.counted.get(COUNTS_REUSE) {
            Ok(counts) => return Ok(counts),
            Err(finding) => finding,
        };
        let statuses = match self.statuses().await {
            Ok(statuses) => statuses,
            Err(FleetError::Store(err)) => return Err(err),
            Err(_) => Vec::new(),
        };
        let running = statuses.iter().filter(|s| s.state == "running").count() as u64;
        let counts = (running, statuses.len() as u64);
        self.counted.found(finding, counts);
        Ok(counts)
    }

    /// Whether the engine answers, once a fleet is deployed; `None` while there is none (or the
    /// store cannot tell), when the engine matters to nothing. Found at most every 5 s (a deploy
    /// or teardown here finds it again at once), so `/health` polls cost neither a store read nor
    /// a ping each.
    pub async fn runtime_health(&self) -> Option<bool> {
        let finding = match self.health.get(HEALTH_CACHE) {
            Ok(health) => return health,
            Err(finding) => finding,
        };
        let deployed = self.db.fleet().await.is_ok_and(|f| !f.deckies.is_empty());
        let health = if deployed { Some(self.ping().await) } else { None };
        self.health.found(finding, health);
        health
    }

    /// Forgets the cached runtime health and counts: the fleet changed.
    pub(super) fn fleet_changed(&self) {
        self.health.forget();
        self.counted.forget();
    }

    /// Whether the engine answers a ping within 2 s.
    pub async fn ping(&self) -> bool {
        match tokio::time::timeout(Duration::from_secs(2), self.runtime.ping()).await {
            Ok(Ok(())) => true,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "Container runtime ping failed");
                false
            }
            Err(_) => {
                tracing::warn!("Container runtime ping timed out");
                false
            }
        }
    }
}
