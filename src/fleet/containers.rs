//! This fleet's containers on the engine: found by the fleet's label (the flat fleet's without a
//! topology's), by decky, located for their network namespace, and removed when the store no
//! longer names them.

use std::collections::{BTreeMap, BTreeSet};

use super::{DECKY_LABEL, FLEET_LABEL, Fleet, FleetError, TOPOLOGY_LABEL};
use crate::runtime::{ContainerInfo, RuntimeError, RuntimeResult};

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

    /// The flat fleet's containers: a topology's deckies carry the fleet label too (the collector
    /// follows them), but they are the topology's to manage.
    pub(super) async fn own_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let containers = self.runtime.list(FLEET_LABEL, &self.settings.name).await?;
        Ok(containers.into_iter().filter(|c| !c.labels.contains_key(TOPOLOGY_LABEL)).collect())
    }

    /// Removes this fleet's containers that the store no longer names (a replaced fleet's).
    pub(super) async fn remove_strays(&self) {
        let names: BTreeSet<String> = match self.db.fleet().await {
            Ok(stored) => stored.deckies.into_iter().map(|d| d.config.name).collect(),
            Err(err) => {
                tracing::warn!(error = %err, "Cannot read the fleet to remove stray containers");
                return;
            }
        };
        self.remove_containers(|decky| !names.contains(decky)).await;
    }

    pub(super) async fn remove_containers(&self, remove: impl Fn(&str) -> bool) {
        let containers = match self.own_containers().await {
            Ok(containers) => containers,
            Err(err) => {
                tracing::warn!(error = %err, "Cannot list the fleet's containers");
                return;
            }
        };
        for container in containers {
            let decky = container.labels.get(DECKY_LABEL).map(String::as_str).unwrap_or_default();
            if remove(decky)
                && let Err(err) = self.runtime.remove(&container.id).await
            {
                tracing::warn!(container = %container.name, error = %err, "Could not remove a container");
            }
        }
    }
}

/// Containers by the decky they run (its label).
pub(crate) fn by_decky(containers: Vec<ContainerInfo>) -> BTreeMap<String, ContainerInfo> {
    containers.into_iter().filter_map(|c| Some((c.labels.get(DECKY_LABEL)?.clone(), c))).collect()
}
