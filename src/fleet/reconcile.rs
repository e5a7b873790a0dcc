//! Reconcile: the engine brought back to the store, at startup and periodically.

use std::collections::BTreeSet;

use super::containers::by_decky;
use super::deploy::Run;
use super::{DECKY_LABEL, DEFAULT_IMAGE, Fleet, FleetError};
use crate::db::{DeckyConfig, DeployState};
use crate::runtime::ContainerInfo;

impl Fleet {
    /// Makes the engine match the store: a stored decky whose container is gone is started again
    /// (stopped) or recreated (missing); a container of this fleet the store does not name is
    /// removed. Run at startup and periodically, so a restart of svc or of the engine leaves one
    /// set of containers.
    pub async fn reconcile(&self) -> Result<(), FleetError> {
        let _deciding = self.deciding.lock().await;
        let stored = self.db.fleet().await?;
        let containers = self.own_containers().await.map_err(|err| {
            tracing::debug!(error = %err, "Reconcile: the engine cannot be reached");
            FleetError::Runtime
        })?;
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
}
