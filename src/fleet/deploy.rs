//! Deploy and teardown: a deploy is checked and stored at once ([`Fleet::deploy`]), then carried
//! out in the background (image, network, each decky's container, each lifecycle record ending
//! `succeeded` or `failed`); a teardown removes one decky and, with the last, the network. Each
//! change is announced on the bus.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use chrono::Utc;
use futures::StreamExt;
use uuid::Uuid;

use super::ini::Ini;
use super::{Accepted, DEFAULT_IMAGE, DeckyContainer, DeployFailure, Fleet, FleetError, plan};
use crate::bus::{Event, topics};
use crate::db::{
    DbError, DeckyConfig, DeckyLifecycle, DeployState, Deployment, FleetNetwork, LifecycleStatus, StoredFleet,
};
use crate::runtime::{ContainerInfo, NetworkSpec, RuntimeError};

/// How many deckies start at once during a deploy.
const PARALLEL_STARTS: usize = 4;

impl Fleet {
    /// Checks and stores a deploy of `ini_text`, then starts it in the background. Additive unless
    /// `replace`: then the INI is the whole fleet and deckies it does not name are removed.
    pub async fn deploy(&self, ini_text: &str, replace: bool) -> Result<Accepted, FleetError> {
        let ini = Ini::parse(ini_text).map_err(|e| FleetError::Refused(e.to_string()))?;
        let _deciding = self.deciding.lock().await;
        let stored = self.db.fleet().await?;
        let network = plan::network(&ini, stored.network.as_ref()).map_err(|e| FleetError::Refused(e.0))?;
        let additive = !replace && !stored.deckies.is_empty();
        if additive && stored.network.as_ref().is_some_and(|current| *current != network) {
            return Err(FleetError::Refused(format!(
                "the fleet is on {}; submit with replace_fleet=true to move it to {}",
                stored.network.as_ref().map_or("", |n| n.subnet.as_str()),
                network.subnet
            )));
        }
        let reserved: BTreeSet<Ipv4Addr> = if additive {
            stored.deckies.iter().filter_map(|d| d.config.ip.parse().ok()).collect()
        } else {
            BTreeSet::new()
        };
        let deckies = plan::deckies(&ini, &network, &reserved).map_err(|e| FleetError::Refused(e.0))?;
        // Deckies an earlier deploy left unfinished (a crash, a failure) may be deployed again;
        // they keep no address (their old container goes with the new one's name).
        let busy = self.convergence_busy();
        let unfinished: BTreeSet<&str> = stored
            .deckies
            .iter()
            .filter(|d| d.state != DeployState::Running && !busy.contains(&d.config.name))
            .map(|d| d.config.name.as_str())
            .collect();
        let again = deckies.iter().filter(|d| additive && unfinished.contains(d.name.as_str())).count();
        if additive {
            check_collisions(&stored, &deckies, &unfinished)?;
        }
        let total = if additive { stored.deckies.len() + deckies.len() - again } else { deckies.len() };
        if total > self.settings.deployment_limit {
            return Err(FleetError::Refused(format!(
                "Deployment would result in {total} deckies, exceeding the configured limit of {}",
                self.settings.deployment_limit
            )));
        }
        let now = Utc::now();
        let lifecycles: Vec<DeckyLifecycle> = deckies
            .iter()
            .map(|d| DeckyLifecycle {
                id: Uuid::new_v4(),
                decky_name: d.name.clone(),
                host_uuid: None,
                operation: "deploy".into(),
                status: LifecycleStatus::Pending,
                error: None,
                started_at: now,
                updated_at: now,
                completed_at: None,
            })
            .collect();
        let deployment = Deployment { network: &network, deckies: &deckies, replace, lifecycles: &lifecycles, at: now };
        match self.db.commit_deployment(deployment).await {
            Ok(()) => {}
            Err(DbError::Conflict) => {
                return Err(FleetError::Refused("a decky name or address was taken meanwhile; submit again".into()));
            }
            Err(err) => return Err(err.into()),
        }
        self.fleet_changed();
        let moved = stored.network.as_ref().is_some_and(|current| *current != network);
        if let Some(old) = stored.network.as_ref().filter(|_| moved) {
            self.release_host_route(old).await;
        }
        let run = Run { deckies, lifecycles: lifecycles.iter().map(|l| l.id).collect(), network, moved };
        // Reconcile leaves these to the deploy from now on (before the decision lock goes).
        let in_flight = self.in_flight(run.deckies.iter().map(|d| d.name.clone()).collect());
        let fleet = self.clone();
        tokio::spawn(async move {
            fleet.carry_out(run).await;
            drop(in_flight);
        });
        Ok(Accepted { lifecycle_ids: lifecycles.iter().map(|l| l.id).collect(), deckies: total })
    }

    /// The background half of a deploy: image, network, then each decky's container; each
    /// lifecycle record ends `succeeded` or `failed`, so no one polls it forever. Where the engine
    /// was away the decky stays stored, `failed` with that reason, and reconcile retries it until
    /// it runs (its state then moves to `running`; the record keeps the deploy's outcome).
    async fn carry_out(&self, run: Run) {
        for (decky, id) in run.deckies.iter().zip(&run.lifecycles) {
            self.record(*id, &decky.name, LifecycleStatus::Running, None).await;
        }
        let outcome = self.prepare(&run).await;
        let count = run.deckies.len();
        let starts: Vec<_> = run
            .deckies
            .into_iter()
            .zip(run.lifecycles)
            .map(|(decky, id)| {
                let outcome = outcome.clone();
                async move {
                    let result = match outcome {
                        Ok(image) => self.start_decky(&decky, &image).await,
                        Err(reason) => Err(reason),
                    };
                    let at = Utc::now();
                    let transient = result.as_ref().is_err_and(DeployFailure::is_transient);
                    let (status, state, error) = match result {
                        Ok(()) => (LifecycleStatus::Succeeded, DeployState::Running, None),
                        Err(reason) => (LifecycleStatus::Failed, DeployState::Failed, Some(reason.to_string())),
                    };
                    let error = error.as_deref();
                    if let Err(err) = self.db.set_deploy_state(&decky.name, state, error, at).await {
                        tracing::error!(decky = %decky.name, error = %err, "Could not record the decky's deploy state");
                    }
                    self.announce_state(&decky.name, state.as_str(), error).await;
                    self.record(id, &decky.name, status, error).await;
                    transient
                }
            })
            .collect();
        let transient: Vec<bool> = futures::stream::iter(starts).buffer_unordered(PARALLEL_STARTS).collect().await;
        self.remove_strays().await;
        tracing::info!(deckies = count, "Deploy finished");
        if transient.contains(&true) {
            self.keep_converging();
        }
    }

    /// The image (when a decky runs the default one) and the network; why not when either fails.
    pub(super) async fn prepare(&self, run: &Run) -> Result<Option<String>, DeployFailure> {
        let image = if run.deckies.iter().any(|d| d.base_image == DEFAULT_IMAGE) {
            Some(self.default_image().await?)
        } else {
            None
        };
        if run.moved {
            // A network moved to another subnet cannot keep its containers.
            self.remove_containers(|_, _| true).await;
            if let Err(err) = self.runtime.remove_network(&self.network_name()).await {
                tracing::warn!(error = %err, "Could not remove the fleet's old network");
            }
        }
        let spec = NetworkSpec {
            name: self.network_name(),
            driver: if run.network.interface.is_some() { "macvlan".into() } else { "bridge".into() },
            parent: run.network.interface.clone(),
            subnet: run.network.subnet.clone(),
            gateway: run.network.gateway.clone(),
            internal: false,
            labels: self.owner_for_deploy().await?.labels(None, None),
        };
        if let Err(err) = self.runtime.ensure_network(&spec).await {
            tracing::error!(error = %err, network = %spec.name, "Could not create the fleet network");
            return Err(match err {
                RuntimeError::SubnetInUse(_) => DeployFailure::SubnetInUse(spec.subnet),
                RuntimeError::NetworkOnAnotherSubnet { existing, .. } => {
                    DeployFailure::NetworkOnAnotherSubnet(existing)
                }
                other => DeployFailure::unless_away(&other, DeployFailure::Network),
            });
        }
        self.hold_host_route().await;
        Ok(image)
    }

    /// This deployment's [`ContainerOwner`](super::ContainerOwner), or why a deploy cannot go on.
    async fn owner_for_deploy(&self) -> Result<super::ContainerOwner, DeployFailure> {
        self.owner().await.map_err(|err| {
            tracing::error!(error = %err, "Cannot read the deployment's identity");
            DeployFailure::Identity
        })
    }

    pub(super) async fn start_decky(
        &self,
        decky: &DeckyConfig,
        default_image: &Option<String>,
    ) -> Result<(), DeployFailure> {
        let image = match default_image {
            Some(reference) if decky.base_image == DEFAULT_IMAGE => reference.clone(),
            _ => decky.base_image.clone(),
        };
        let owner = self.owner_for_deploy().await?;
        let spec = owner.spec(&DeckyContainer {
            container: self.container_name(&decky.name),
            name: &decky.name,
            hostname: &decky.hostname,
            image,
            services: &decky.services,
            service_config: &decky.service_config,
            network: self.network_name(),
            ip: decky.ip.clone(),
            topology: None,
            forwards: false,
            artifacts: self.settings.artifacts.prepare(&decky.name),
        });
        match self.held_by_another(&owner, &spec.name).await {
            Ok(false) => {}
            Ok(true) => {
                tracing::warn!(decky = %decky.name, container = %spec.name, "Another deployment's container holds the decky's name; left alone");
                return Err(DeployFailure::NameTaken);
            }
            Err(err) => {
                tracing::error!(decky = %decky.name, error = %err, "Cannot list the fleet's containers");
                return Err(DeployFailure::unless_away(&err, DeployFailure::Container));
            }
        }
        let mut result = self.runtime.run(&spec).await;
        if let Err(RuntimeError::AddressHeld { holder, message }) = &result {
            tracing::warn!(decky = %decky.name, %holder, error = %message, "The decky's address is held");
            self.free_address(&owner, holder).await?;
            result = self.runtime.run(&spec).await;
        }
        match result {
            Ok(id) => {
                tracing::info!(decky = %decky.name, container = %id, ip = %decky.ip, "Decky started");
                let made = ContainerInfo { id, name: spec.name, state: "running".into(), labels: spec.labels };
                self.observed.made(made);
                Ok(())
            }
            Err(RuntimeError::AddressHeld { .. }) => Err(DeployFailure::AddressLeaked),
            Err(err) => {
                tracing::error!(decky = %decky.name, error = %err, "Could not start the decky's container");
                Err(DeployFailure::unless_away(&err, DeployFailure::Container))
            }
        }
    }

    /// Frees an address `holder` holds when the holder is this deployment's leftover (removed);
    /// one that is gone leaves the address to the engine ([`DeployFailure::AddressLeaked`]), one
    /// of another's is left alone.
    async fn free_address(&self, owner: &super::ContainerOwner, holder: &str) -> Result<(), DeployFailure> {
        let away = |err: RuntimeError| DeployFailure::unless_away(&err, DeployFailure::Container);
        let containers = self.runtime.list(super::FLEET_LABEL, &self.settings.name).await.map_err(away)?;
        let held_by = containers.iter().find(|c| !holder.is_empty() && c.id.starts_with(holder));
        match held_by {
            Some(container) if !owner.made_by_another(&container.labels) => {
                tracing::info!(container = %container.name, "Removing a leftover container that holds a decky's address");
                self.runtime.remove(&container.id).await.map_err(away)
            }
            Some(_) => Err(DeployFailure::Container),
            None => match self.runtime.pid(holder).await {
                Err(RuntimeError::NotFound(_)) => Err(DeployFailure::AddressLeaked),
                Err(err) => Err(away(err)),
                // Someone else's container, outside this fleet: not ours to touch.
                Ok(_) => Err(DeployFailure::Container),
            },
        }
    }

    pub(super) async fn record(&self, id: Uuid, decky: &str, status: LifecycleStatus, error: Option<&str>) {
        let at = Utc::now();
        if let Err(err) = self.db.set_lifecycle_status(id, status, error, at).await {
            tracing::error!(lifecycle = %id, error = %err, "Could not update a lifecycle record");
        }
        let payload = serde_json::json!({
            "id": id, "decky_name": decky, "operation": "deploy", "status": status.as_str(), "error": error,
        });
        self.announce(topics::decky_lifecycle(decky), status.as_str(), payload).await;
    }

    /// `decky.<name>.state`: a decky is now `running`, `failed` or `removed`.
    pub(super) async fn announce_state(&self, decky: &str, state: &str, error: Option<&str>) {
        let payload = serde_json::json!({"decky_name": decky, "state": state, "error": error});
        self.announce(topics::decky_state(decky), state, payload).await;
    }

    /// Fire and forget: the store is the record, the bus only tells.
    async fn announce(&self, topic: Result<String, topics::BadToken>, kind: &str, payload: serde_json::Value) {
        let Ok(topic) = topic else { return };
        if let Err(err) = self.bus.publish(&Event::new(topic, kind, payload)).await {
            tracing::debug!(error = %err, "Decky event not published");
        }
    }

    /// Removes a decky and its container. The last decky takes the fleet's network with it.
    pub async fn teardown(&self, name: &str) -> Result<(), FleetError> {
        let _deciding = self.deciding.lock().await;
        let stored = self.db.fleet().await?;
        if stored.deckies.is_empty() {
            return Err(FleetError::NotFound("No active deployment".into()));
        }
        if !stored.deckies.iter().any(|d| d.config.name == name) {
            return Err(FleetError::NotFound(format!("Decky {name} not found")));
        }
        let owner = self.owner().await?;
        let container = self.container_name(name);
        if self.held_by_another(&owner, &container).await? {
            // The store's decky goes; the container of that name is another deployment's.
            tracing::warn!(decky = name, %container, "Another deployment's container holds the decky's name; left alone");
        } else if let Err(err) = self.runtime.remove(&container).await {
            tracing::error!(decky = name, error = %err, "Could not remove the decky's container");
            return Err(FleetError::Runtime);
        }
        self.db.remove_decky(name).await?;
        self.fleet_changed();
        self.announce_state(name, "removed", None).await;
        if stored.deckies.len() == 1 {
            if let Err(err) = self.runtime.remove_network(&self.network_name()).await {
                tracing::warn!(error = %err, "Could not remove the fleet network");
            }
            if let Some(network) = &stored.network {
                self.release_host_route(network).await;
            }
        }
        tracing::info!(decky = name, "Decky torn down");
        Ok(())
    }
}

/// What the background half of a deploy works on.
pub(super) struct Run {
    pub(super) deckies: Vec<DeckyConfig>,
    pub(super) lifecycles: Vec<Uuid>,
    pub(super) network: FleetNetwork,
    /// The fleet's network changed subnet or interface: the old one goes first.
    pub(super) moved: bool,
}

/// DECNET's additive-deploy name conflict, in its words (`plan` refuses a stored address); a
/// decky an earlier deploy left `unfinished` may be deployed again.
fn check_collisions(
    stored: &StoredFleet,
    deckies: &[DeckyConfig],
    unfinished: &BTreeSet<&str>,
) -> Result<(), FleetError> {
    for decky in deckies {
        if !unfinished.contains(decky.name.as_str()) && stored.deckies.iter().any(|d| d.config.name == decky.name) {
            return Err(FleetError::Refused(format!(
                "decky '{}' already exists; submit with replace_fleet=true to overwrite the fleet",
                decky.name
            )));
        }
    }
    Ok(())
}
