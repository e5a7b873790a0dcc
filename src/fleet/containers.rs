//! This fleet's containers on the engine: found by the fleet's label (the flat fleet's without a
//! topology's), told apart by the deployment that made them (only this deployment's are ever
//! changed: `decky_container`), by decky, located for their network namespace, and removed when
//! the store no longer names them.

use std::collections::{BTreeMap, BTreeSet};

use super::{ContainerOwner, DECKY_LABEL, FLEET_LABEL, Fleet, FleetError, TOPOLOGY_LABEL};
use crate::db::StoredFleet;
use crate::runtime::{ContainerInfo, RuntimeError, RuntimeResult};

/// The flat fleet's containers on the engine, by who made them.
pub(super) struct FleetContainers {
    /// This deployment's (and adopted ones made before identities: see `decky_container`).
    pub ours: Vec<ContainerInfo>,
    /// Of this fleet's name but another deployment's: reported, never touched.
    pub others: Vec<ContainerInfo>,
}

impl Fleet {
    /// The host process id of decky `name`'s container, for reaching its network namespace:
    /// `NotFound` when the fleet has no such decky or its container is not running.
    pub async fn locate(&self, name: &str) -> Result<u32, FleetError> {
        let stored = self.db.fleet().await?;
        if !stored.deckies.iter().any(|d| d.config.name == name) {
            return Err(FleetError::NotFound(format!("Decky {name} not found")));
        }
        match self.runtime.pid(&self.container_name(name)).await {
            Ok(Some(pid)) => Ok(pid),
            Ok(None) | Err(RuntimeError::NotFound(_)) => {
                Err(FleetError::NotFound(format!("Decky {name} is not running")))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// This fleet's containers by decky name, running or not.
    pub async fn containers(&self) -> RuntimeResult<BTreeMap<String, ContainerInfo>> {
        Ok(by_decky(self.runtime.list(FLEET_LABEL, &self.settings.name).await?))
    }

    /// The flat fleet's containers, by who made them (`stored` names the deckies an unmarked
    /// container may be adopted for). A topology's deckies carry the fleet label too (the
    /// collector follows them), but they are the topology's to manage.
    pub(super) async fn own_containers(
        &self,
        owner: &ContainerOwner,
        stored: &StoredFleet,
    ) -> Result<FleetContainers, RuntimeError> {
        let containers = self.runtime.list(FLEET_LABEL, &self.settings.name).await?;
        Ok(split_by_owner(owner, stored, containers))
    }

    /// Whether the container `name` is another deployment's (never replaced nor removed here).
    pub(super) async fn held_by_another(&self, owner: &ContainerOwner, name: &str) -> RuntimeResult<bool> {
        let containers = self.runtime.list(FLEET_LABEL, &self.settings.name).await?;
        Ok(containers.iter().any(|c| c.name == name && owner.made_by_another(&c.labels)))
    }

    /// Removes this fleet's containers that the store no longer names (a replaced fleet's).
    pub(super) async fn remove_strays(&self) {
        self.remove_containers(|names, decky| !names.contains(decky)).await;
    }

    /// Removes this deployment's containers whose decky `remove` picks, given the names the store
    /// holds.
    pub(super) async fn remove_containers(&self, remove: impl Fn(&BTreeSet<&str>, &str) -> bool) {
        let (stored, owner) = match (self.db.fleet().await, self.owner().await) {
            (Ok(stored), Ok(owner)) => (stored, owner),
            (Err(err), _) | (_, Err(err)) => {
                tracing::warn!(error = %err, "Cannot read the fleet to remove its containers");
                return;
            }
        };
        let containers = match self.own_containers(&owner, &stored).await {
            Ok(containers) => containers.ours,
            Err(err) => {
                tracing::warn!(error = %err, "Cannot list the fleet's containers");
                return;
            }
        };
        let names: BTreeSet<&str> = stored.deckies.iter().map(|d| d.config.name.as_str()).collect();
        for container in containers {
            let decky = container.labels.get(DECKY_LABEL).map(String::as_str).unwrap_or_default();
            if remove(&names, decky)
                && let Err(err) = self.runtime.remove(&container.id).await
            {
                tracing::warn!(container = %container.name, error = %err, "Could not remove a container");
            }
        }
    }
}

/// The flat fleet's among `containers` (all carrying the fleet's label), by who made them.
pub(super) fn split_by_owner(
    owner: &ContainerOwner,
    stored: &StoredFleet,
    containers: Vec<ContainerInfo>,
) -> FleetContainers {
    let named: BTreeSet<&str> = stored.deckies.iter().map(|d| d.config.name.as_str()).collect();
    let (ours, others) = containers
        .into_iter()
        .filter(|c| !c.labels.contains_key(TOPOLOGY_LABEL))
        .partition(|c| owner.owns(&c.labels, |decky| named.contains(decky)));
    FleetContainers { ours, others }
}

/// Containers by the decky they run (its label).
pub(crate) fn by_decky(containers: Vec<ContainerInfo>) -> BTreeMap<String, ContainerInfo> {
    containers.into_iter().filter_map(|c| Some((c.labels.get(DECKY_LABEL)?.clone(), c))).collect()
}
