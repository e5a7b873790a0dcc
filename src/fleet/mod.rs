//! The fleet: deckies deployed from a deployment INI as containers on the host's engine. `ini`
//! reads the INI's syntax, `plan` turns it into deckies with addresses, [`Fleet`] stores a deploy
//! (one store, `db::fleet`) and carries it out in the background over the container runtime,
//! tears deckies down, and keeps the engine's containers matching the store (`reconcile`).
//! Everything the engine says goes to the server log; callers get [`FleetError`]s with texts fit
//! for an operator.

pub mod catalog;
pub mod ini;
pub mod mutate;
pub mod plan;
mod recent;
pub mod subnet;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use uuid::Uuid;

use crate::bus::{Bus, Event, topics};
use crate::config::FleetConfig;
use crate::db::Db;
use crate::db::{
    DbError, DeckyConfig, DeckyLifecycle, DeployState, Deployment, FleetNetwork, LifecycleStatus, StoredFleet,
};
use crate::runtime::image::DeckyImage;
use crate::runtime::{ContainerInfo, ContainerSpec, NetworkSpec, Runtime, RuntimeError, RuntimeResult};
use ini::Ini;
use recent::Recent;

/// `base_image` of a decky that runs the default image, built locally from the svc binary.
pub const DEFAULT_IMAGE: &str = crate::runtime::image::REPOSITORY;

/// The label that marks a fleet's containers and network, valued with the fleet's name.
pub const FLEET_LABEL: &str = "svc.fleet";
/// The label naming the decky a container is.
pub const DECKY_LABEL: &str = "svc.decky";
/// The label naming the topology a container or network belongs to (absent on the flat fleet's).
pub const TOPOLOGY_LABEL: &str = "svc.topology";

/// How many deckies start at once during a deploy.
const PARALLEL_STARTS: usize = 4;
/// How long the runtime's health (is a fleet deployed, does the engine answer) is believed.
const HEALTH_CACHE: Duration = Duration::from_secs(5);
/// How long the running and deployed counts are reused: every `/stats` poll and log stream asks,
/// and each answer lists the engine's containers.
const COUNTS_REUSE: Duration = Duration::from_secs(1);

/// The generic texts a failed lifecycle record carries; the engine's own words are in the log.
const IMAGE_FAILED: &str = "the decky image could not be built";
const NETWORK_FAILED: &str = "the fleet network could not be created";
const CONTAINER_FAILED: &str = "the decky's container could not be started";

/// What a fleet operation tells its caller.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The request cannot be carried out as asked; the text says why (409).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    NotFound(String),
    /// The engine failed; its text was logged (409 with a generic detail).
    #[error("container runtime operation failed")]
    Runtime,
    #[error(transparent)]
    Store(#[from] DbError),
}

/// A deploy the fleet accepted and runs in the background.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    pub lifecycle_ids: Vec<Uuid>,
    pub deckies: usize,
}

/// A decky as stored, with what the engine says of its container now.
#[derive(Clone, Debug, PartialEq)]
pub struct DeckyStatus {
    pub config: DeckyConfig,
    /// `pending` or `failed` (the deploy's state), else the container's: `running`, `exited`,
    /// `restarting`…, `missing` when it is gone, `unknown` when the engine cannot be asked.
    pub state: String,
    pub last_error: Option<String>,
}

/// Deploys, tears down and reconciles the fleet; cheap to clone.
#[derive(Clone)]
pub struct Fleet {
    db: Db,
    /// Decky state and lifecycle changes are announced here (webhooks forward them).
    bus: Bus,
    runtime: Runtime,
    settings: Arc<FleetConfig>,
    /// One deploy decision at a time in this process (a second API replica is held off by the
    /// store's unique keys).
    deciding: Arc<tokio::sync::Mutex<()>>,
    /// The last [`Fleet::runtime_health`] answer.
    health: Arc<Recent<Option<bool>>>,
    /// The last [`Fleet::counts`] answer.
    counted: Arc<Recent<(u64, u64)>>,
    image: Arc<std::sync::Mutex<Option<CachedImage>>>,
}

/// The decky image of a binary, and the binary's size and modification time when it was read.
type CachedImage = (PathBuf, Option<(u64, Option<std::time::SystemTime>)>, DeckyImage);

impl Fleet {
    pub fn new(db: Db, runtime: Runtime, settings: FleetConfig, bus: Bus) -> Fleet {
        Fleet {
            db,
            bus,
            runtime,
            settings: Arc::new(settings),
            deciding: Arc::default(),
            health: Arc::default(),
            counted: Arc::default(),
            image: Arc::default(),
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    pub fn settings(&self) -> &FleetConfig {
        &self.settings
    }

    fn network_name(&self) -> String {
        format!("{}-fleet", self.settings.name)
    }

    fn container_name(&self, decky: &str) -> String {
        format!("{}-{decky}", self.settings.name)
    }

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
        if additive {
            check_collisions(&stored, &deckies)?;
        }
        let total = if additive { stored.deckies.len() + deckies.len() } else { deckies.len() };
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
        let run = Run { deckies, lifecycles: lifecycles.iter().map(|l| l.id).collect(), network, moved };
        let fleet = self.clone();
        tokio::spawn(async move { fleet.carry_out(run).await });
        Ok(Accepted { lifecycle_ids: lifecycles.iter().map(|l| l.id).collect(), deckies: total })
    }

    /// The background half of a deploy: image, network, then each decky's container; each
    /// lifecycle record ends `succeeded` or `failed`.
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
                    let (status, state, error) = match result {
                        Ok(()) => (LifecycleStatus::Succeeded, DeployState::Running, None),
                        Err(reason) => (LifecycleStatus::Failed, DeployState::Failed, Some(reason)),
                    };
                    if let Err(err) = self.db.set_deploy_state(&decky.name, state, error, at).await {
                        tracing::error!(decky = %decky.name, error = %err, "Could not record the decky's deploy state");
                    }
                    self.announce_state(&decky.name, state.as_str(), error).await;
                    self.record(id, &decky.name, status, error).await;
                }
            })
            .collect();
        futures::stream::iter(starts).buffer_unordered(PARALLEL_STARTS).collect::<()>().await;
        self.remove_strays().await;
        tracing::info!(deckies = count, "Deploy finished");
    }

    /// The image (when a decky runs the default one) and the network; a generic reason when either
    /// fails.
    async fn prepare(&self, run: &Run) -> Result<Option<String>, &'static str> {
        let image = if run.deckies.iter().any(|d| d.base_image == DEFAULT_IMAGE) {
            Some(self.default_image().await?)
        } else {
            None
        };
        if run.moved {
            // A network moved to another subnet cannot keep its containers.
            self.remove_containers(|_| true).await;
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
            labels: BTreeMap::from([(FLEET_LABEL.to_string(), self.settings.name.clone())]),
        };
        if let Err(err) = self.runtime.ensure_network(&spec).await {
            tracing::error!(error = %err, network = %spec.name, "Could not create the fleet network");
            return Err(NETWORK_FAILED);
        }
        Ok(image)
    }

    /// The default image's reference, built first when the engine lacks it.
    pub(crate) async fn default_image(&self) -> Result<String, &'static str> {
        let binary = match &self.settings.decky_binary {
            Some(path) => path.clone(),
            None => std::env::current_exe().unwrap_or_else(|_| PathBuf::from("svc")),
        };
        let image = self.decky_image(binary).await?;
        image.ensure(self.runtime.as_ref()).await.map_err(|err| {
            tracing::error!(image = image.reference(), error = %err, "Could not build the decky image");
            IMAGE_FAILED
        })?;
        Ok(image.reference().to_string())
    }

    /// The image `binary` makes; its digest (a read of the whole binary, hundreds of MB in a debug
    /// build) is remembered while the file's size and modification time stay the same, so a
    /// mutation does not read it again.
    async fn decky_image(&self, binary: PathBuf) -> Result<DeckyImage, &'static str> {
        let stamp = std::fs::metadata(&binary).ok().map(|m| (m.len(), m.modified().ok()));
        let cached = self.image.lock().expect("the image cache lock is never poisoned").clone();
        if let Some((path, seen, image)) = cached
            && path == binary
            && stamp.is_some()
            && seen == stamp
        {
            return Ok(image);
        }
        let path = binary.clone();
        let image = tokio::task::spawn_blocking(move || DeckyImage::for_binary(&path))
            .await
            .map_err(|_| IMAGE_FAILED)?
            .map_err(|err| {
                tracing::error!(binary = %binary.display(), error = %err, "Cannot read the binary for the decky image");
                IMAGE_FAILED
            })?;
        *self.image.lock().expect("the image cache lock is never poisoned") = Some((binary, stamp, image.clone()));
        Ok(image)
    }

    async fn start_decky(&self, decky: &DeckyConfig, default_image: &Option<String>) -> Result<(), &'static str> {
        let image = match default_image {
            Some(reference) if decky.base_image == DEFAULT_IMAGE => reference.clone(),
            _ => decky.base_image.clone(),
        };
        let mut env =
            vec![format!("NODE_NAME={}", decky.name), format!("SVC_DECKY_SERVICES={}", decky.services.join(","))];
        if !decky.service_config.is_empty() {
            env.push(format!("SVC_DECKY_INI_TEXT={}", service_sections(decky)));
        }
        let spec = ContainerSpec {
            name: self.container_name(&decky.name),
            image,
            cmd: Vec::new(),
            env,
            hostname: decky.hostname.clone(),
            network: self.network_name(),
            ip: decky.ip.clone(),
            labels: BTreeMap::from([
                (FLEET_LABEL.to_string(), self.settings.name.clone()),
                (DECKY_LABEL.to_string(), decky.name.clone()),
            ]),
            sysctls: BTreeMap::new(),
        };
        match self.runtime.run(&spec).await {
            Ok(id) => {
                tracing::info!(decky = %decky.name, container = %id, ip = %decky.ip, "Decky started");
                Ok(())
            }
            Err(err) => {
                tracing::error!(decky = %decky.name, error = %err, "Could not start the decky's container");
                Err(CONTAINER_FAILED)
            }
        }
    }

    async fn record(&self, id: Uuid, decky: &str, status: LifecycleStatus, error: Option<&str>) {
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
    async fn announce_state(&self, decky: &str, state: &str, error: Option<&str>) {
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
        if let Err(err) = self.runtime.remove(&self.container_name(name)).await {
            tracing::error!(decky = name, error = %err, "Could not remove the decky's container");
            return Err(FleetError::Runtime);
        }
        self.db.remove_decky(name).await?;
        self.fleet_changed();
        self.announce_state(name, "removed", None).await;
        if stored.deckies.len() == 1
            && let Err(err) = self.runtime.remove_network(&self.network_name()).await
        {
            tracing::warn!(error = %err, "Could not remove the fleet network");
        }
        tracing::info!(decky = name, "Decky torn down");
        Ok(())
    }

    /// Every stored decky with its container's state now.
    pub async fn statuses(&self) -> Result<Vec<DeckyStatus>, FleetError> {
        let stored = self.db.fleet().await?;
        if stored.deckies.is_empty() {
            // Nothing to ask the engine about (and no warning each `/stats` where there is none).
            return Ok(Vec::new());
        }
        let containers = match self.own_containers().await {
            Ok(containers) => Some(by_decky(containers)),
            Err(err) => {
                tracing::warn!(error = %err, "Cannot list the fleet's containers");
                None
            }
        };
        Ok(stored
            .deckies
            .into_iter()
            .map(|d| {
                let state = match (d.state, &containers) {
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
    fn fleet_changed(&self) {
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

    /// The flat fleet's containers: a topology's deckies carry the fleet label too (the collector
    /// follows them), but they are the topology's to manage.
    async fn own_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let containers = self.runtime.list(FLEET_LABEL, &self.settings.name).await?;
        Ok(containers.into_iter().filter(|c| !c.labels.contains_key(TOPOLOGY_LABEL)).collect())
    }

    /// Removes this fleet's containers that the store no longer names (a replaced fleet's).
    async fn remove_strays(&self) {
        let names: BTreeSet<String> = match self.db.fleet().await {
            Ok(stored) => stored.deckies.into_iter().map(|d| d.config.name).collect(),
            Err(err) => {
                tracing::warn!(error = %err, "Cannot read the fleet to remove stray containers");
                return;
            }
        };
        self.remove_containers(|decky| !names.contains(decky)).await;
    }

    async fn remove_containers(&self, remove: impl Fn(&str) -> bool) {
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

/// What the background half of a deploy works on.
struct Run {
    deckies: Vec<DeckyConfig>,
    lifecycles: Vec<Uuid>,
    network: FleetNetwork,
    /// The fleet's network changed subnet or interface: the old one goes first.
    moved: bool,
}

/// DECNET's additive-deploy name conflict, in its words (`plan` refuses a stored address).
fn check_collisions(stored: &StoredFleet, deckies: &[DeckyConfig]) -> Result<(), FleetError> {
    for decky in deckies {
        if stored.deckies.iter().any(|d| d.config.name == decky.name) {
            return Err(FleetError::Refused(format!(
                "decky '{}' already exists; submit with replace_fleet=true to overwrite the fleet",
                decky.name
            )));
        }
    }
    Ok(())
}

/// Containers by the decky they run (its label).
pub(crate) fn by_decky(containers: Vec<ContainerInfo>) -> BTreeMap<String, ContainerInfo> {
    containers.into_iter().filter_map(|c| Some((c.labels.get(DECKY_LABEL)?.clone(), c))).collect()
}

/// The decky's `[<decky>.<service>]` sections, as `svc decky --ini-text` reads them.
fn service_sections(decky: &DeckyConfig) -> String {
    let mut text = String::new();
    for (service, settings) in &decky.service_config {
        text.push_str(&format!("[{}.{service}]\n", decky.name));
        for (key, value) in settings {
            // A multi-line value keeps its continuation lines indented.
            text.push_str(&format!("{key} = {}\n", value.replace('\n', "\n  ")));
        }
    }
    text
}

impl From<RuntimeError> for FleetError {
    fn from(err: RuntimeError) -> FleetError {
        tracing::error!(error = %err, "Container runtime operation failed");
        FleetError::Runtime
    }
}
