//! Reconcile: the engine brought back to the store, at startup and periodically.

use std::collections::BTreeSet;

use super::containers::{FleetContainers, by_decky};
use super::deploy::Run;
use super::{DECKY_LABEL, DEFAULT_IMAGE, Fleet, FleetError};
use crate::db::{DeckyConfig, DeployState};
use crate::runtime::ContainerInfo;

impl Fleet {
    /// Makes the engine match the store: a stored decky whose container is gone is started again
    /// (stopped) or recreated (missing); a container of this deployment the store does not name is
    /// removed. Containers of this fleet's name that another deployment made (another database
    /// on the same engine) are reported (a warning, and [`Fleet::other_deployments`] for health),
    /// never touched. Run at startup and periodically, so a restart of svc or of the engine leaves
    /// one set of containers.
    pub async fn reconcile(&self) -> Result<(), FleetError> {
        let _deciding = self.deciding.lock().await;
        let stored = self.db.fleet().await?;
        let owner = self.owner().await?;
        let FleetContainers { ours: containers, others } =
            self.own_containers(&owner, &stored).await.map_err(|err| {
                tracing::debug!(error = %err, "Reconcile: the engine cannot be reached");
                FleetError::Runtime
            })?;
        self.found_others(others);
        let names: BTreeSet<&str> = stored.deckies.iter().map(|d| d.config.name.as_str()).collect();
        for container in &containers {
            let decky = container.labels.get(DECKY_LABEL).map(String::as_str).unwrap_or_default();
            if !names.contains(decky) {
                tracing::info!(container = %container.name, "Removing a container the fleet no longer has");
                let _ = self.runtime.remove(&container.id).await;
            }
        }
        let containers = by_decky(containers);
        let stale: Vec<&DeckyConfig> = stored
            .deckies
            .iter()
            .filter(|d| d.state == DeployState::Running)
            .filter(|d| !containers.get(&d.config.name).is_some_and(ContainerInfo::is_running))
            .map(|d| &d.config)
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        let Some(network) = stored.network.clone() else { return Ok(()) };
        let run = Run { deckies: Vec::new(), lifecycles: Vec::new(), network, moved: false };
        let image = self.prepare(&run).await.map_err(|_| FleetError::Runtime)?;
        let image = if stale.iter().any(|d| d.base_image == DEFAULT_IMAGE) {
            Some(self.default_image().await.map_err(|_| FleetError::Runtime)?)
        } else {
            image
        };
        for decky in stale {
            let restarted = match containers.get(&decky.name) {
                Some(container) => self.runtime.start(&container.id).await.is_ok(),
                None => false,
            };
            if !restarted {
                tracing::info!(decky = %decky.name, "Recreating a decky whose container is gone");
                let _ = self.start_decky(decky, &image).await;
            }
        }
        Ok(())
    }

    /// Remembers (for health) and reports the containers another deployment made; a warning only
    /// when they change, not every round.
    fn found_others(&self, others: Vec<ContainerInfo>) {
        let mut names: Vec<String> = others.into_iter().map(|c| c.name).collect();
        names.sort();
        let mut known = self.others.lock().expect("the other deployments' list lock is never poisoned");
        if *known != names && !names.is_empty() {
            tracing::warn!(
                fleet = %self.settings.name,
                containers = %names.join(","),
                "Containers of this fleet's name were made by another deployment (another database on this engine); they are left alone"
            );
        }
        *known = names;
    }

    /// What health says of other deployments' containers of this fleet's name, when the last
    /// reconcile found some.
    pub fn other_deployments(&self) -> Option<String> {
        let known = self.others.lock().expect("the other deployments' list lock is never poisoned");
        (!known.is_empty()).then(|| {
            format!(
                "{} container(s) of fleet '{}' belong to another deployment on this engine and are left alone: {}",
                known.len(),
                self.settings.name,
                known.join(", ")
            )
        })
    }
}
