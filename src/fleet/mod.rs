//! The fleet: deckies deployed from a deployment INI as containers on the host's engine. `ini`
//! reads the INI's syntax, `plan` turns it into deckies with addresses (each named as
//! `decky_name` says), [`Fleet`] stores a deploy
//! (one store, `db::fleet`) and carries it out in the background over the container runtime
//! (`deploy`, with the decky image from `image`), tears deckies down, finds its containers
//! (`containers`), says what runs (`status`, from the engine's events: `events`), keeps the
//! engine's containers matching the store (`reconcile`, at once when an event asks) and the fleet's
//! subnet on the host (`host_routes`), the host's own services out of the deckies' reach
//! (`host_isolation`).
//! Everything the engine says goes to the server log; callers get [`FleetError`]s with texts fit
//! for an operator.

pub mod artifacts;
pub mod catalog;
mod config;
mod containers;
pub mod decky_container;
pub mod decky_name;
mod deploy;
mod events;
pub mod file_drop;
pub mod host_isolation;
mod host_routes;
mod image;
pub mod ini;
pub mod mutate;
pub mod plan;
mod reconcile;
mod status;
pub mod subnet;

use std::sync::Arc;

use uuid::Uuid;

use crate::bus::Bus;
use crate::db::Db;
use crate::db::{DbError, DeckyConfig};
use crate::recent::Recent;
use crate::runtime::{ContainerInfo, Engine, Runtime, RuntimeError};
pub use config::FleetConfig;
pub(crate) use containers::by_decky;
pub use decky_container::{ContainerOwner, DECKY_LABEL, DEPLOYMENT_LABEL, DeckyContainer, FLEET_LABEL, TOPOLOGY_LABEL};
use image::CachedImage;

/// The container starts a [`Fleet::container_starts`] receiver may fall behind by.
const STARTS_KEPT: usize = 256;

/// `base_image` of a decky that runs the default image, built locally from the svc binary.
pub const DEFAULT_IMAGE: &str = crate::runtime::image::REPOSITORY;

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

/// Why a decky could not be made to run. Its text is what the decky's lifecycle record and
/// `last_error` say, fit for an operator; the engine's own words are in the server log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeployFailure {
    #[error("the decky image could not be built")]
    Image,
    #[error("the fleet network could not be created")]
    Network,
    /// The subnet is the host's or another network's.
    #[error(
        "the fleet network could not be created: subnet {0} is in use (on the host or by another network); choose another"
    )]
    SubnetInUse(String),
    /// A network of the fleet's name is left on another subnet (a changed `net`, or a leftover).
    #[error("the fleet network exists with another subnet ({0}): tear down or choose another")]
    NetworkOnAnotherSubnet(String),
    /// The container's name is held by another deployment's container (the same fleet name on
    /// one engine), which is never replaced.
    #[error("another deployment on this engine holds the decky's container name: choose another fleet name")]
    NameTaken,
    /// This deployment's identity could not be read from the store.
    #[error("the deployment's identity could not be read")]
    Identity,
    #[error("the decky's container could not be started")]
    Container,
    /// The engine did not answer: the deploy is retried (`reconcile`) once it does.
    #[error("the container engine could not be reached; the deploy is retried when it answers")]
    EngineAway,
    /// The engine holds the decky's address for a container that is gone (its start cut short by
    /// an engine crash). Podman keeps such an address even across a new network of the same
    /// name, so no retry frees it: the operator must.
    #[error(
        "the engine holds the decky's address for a container that is gone (an engine crash); free it on the engine, then redeploy"
    )]
    AddressLeaked,
}

impl DeployFailure {
    /// Whether the failure passes by itself (the engine comes back), so the fleet retries it;
    /// every other one waits for the operator.
    pub fn is_transient(&self) -> bool {
        matches!(self, DeployFailure::EngineAway)
    }

    /// The failure a runtime error is, when it is the engine being away; else `otherwise`.
    pub(crate) fn unless_away(err: &RuntimeError, otherwise: DeployFailure) -> DeployFailure {
        if matches!(err, RuntimeError::Unavailable(_)) { DeployFailure::EngineAway } else { otherwise }
    }
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
    /// This deployment's identity, read (or made) once.
    deployment: Arc<tokio::sync::OnceCell<Uuid>>,
    /// Containers of this fleet's name that another deployment made, as the last reconcile found
    /// them: reported, never touched.
    others: Arc<std::sync::Mutex<Vec<String>>>,
    /// The fleet's containers as the engine's events keep them, and the reconcile pass they ask for.
    observed: Arc<events::Observed>,
    /// What reconcile leaves alone and when it retries: see `reconcile`.
    convergence: Arc<reconcile::Convergence>,
    /// Each start of one of the fleet's containers the engine's events report: see
    /// [`Fleet::container_starts`].
    starts: tokio::sync::broadcast::Sender<ContainerStart>,
}

/// A start the engine's events report: one container's id, or `Unknown` when the events were
/// (re)joined and any container may have started unseen meanwhile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerStart {
    Container(String),
    Unknown,
}

impl Fleet {
    /// The fleet `settings` describe, on the engine at their `docker_host` (contacted on first
    /// use), stored in `db`, announcing its changes on `bus` (`Bus::absent()` where nothing
    /// listens).
    pub fn new(db: Db, bus: Bus, settings: FleetConfig) -> Fleet {
        Fleet {
            db,
            bus,
            runtime: Arc::new(Engine::new(&settings.docker_host)),
            settings: Arc::new(settings),
            deciding: Arc::default(),
            health: Arc::default(),
            counted: Arc::default(),
            image: Arc::default(),
            deployment: Arc::default(),
            others: Arc::default(),
            observed: Arc::default(),
            convergence: Arc::default(),
            starts: tokio::sync::broadcast::channel(STARTS_KEPT).0,
        }
    }

    /// The starts of the fleet's containers from now on, while the engine's events are followed
    /// (`follow_engine`): a restarted decky has lost what its in-memory directories held (a
    /// planted bait). A receiver that lagged has missed some: it should take that as `Unknown`.
    pub fn container_starts(&self) -> tokio::sync::broadcast::Receiver<ContainerStart> {
        self.starts.subscribe()
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    pub fn settings(&self) -> &FleetConfig {
        &self.settings
    }

    /// Who the containers and networks this fleet makes belong to: every label comes from it.
    pub async fn owner(&self) -> Result<ContainerOwner, DbError> {
        let deployment = *self.deployment.get_or_try_init(|| self.db.deployment_id()).await?;
        Ok(ContainerOwner { fleet: self.settings.name.clone(), deployment })
    }

    fn network_name(&self) -> String {
        format!("{}-fleet", self.settings.name)
    }

    /// How this host's deckies keep captured files.
    pub fn artifacts(&self) -> &artifacts::ArtifactsPolicy {
        &self.settings.artifacts
    }

    /// The container of decky `name` of this deployment's flat fleet (`topology` `None`) or of
    /// `topology`, as the engine lists it; `None` when there is none.
    pub async fn decky_container(
        &self,
        topology: Option<Uuid>,
        name: &str,
    ) -> Result<Option<ContainerInfo>, FleetError> {
        let key = (topology.map(|id| id.to_string()), name.to_string());
        Ok(self.decky_containers().await?.remove(&key))
    }

    /// Every decky container of this deployment, keyed by its topology (`None` for the flat
    /// fleet's) and decky name.
    pub async fn decky_containers(
        &self,
    ) -> Result<std::collections::HashMap<(Option<String>, String), ContainerInfo>, FleetError> {
        let owner = self.owner().await?;
        let containers = self.runtime.list(FLEET_LABEL, &self.settings.name).await?;
        let mut deckies = std::collections::HashMap::new();
        for container in containers.into_iter().filter(|c| !owner.made_by_another(&c.labels)) {
            let Some(name) = container.labels.get(DECKY_LABEL) else { continue };
            let key = (container.labels.get(TOPOLOGY_LABEL).cloned(), name.clone());
            // Of two of one decky (one being replaced), the running one.
            let keep = deckies.get(&key).is_none_or(|kept: &ContainerInfo| !kept.is_running());
            if keep {
                deckies.insert(key, container);
            }
        }
        Ok(deckies)
    }

    fn container_name(&self, decky: &str) -> String {
        format!("{}-{decky}", self.settings.name)
    }
}

impl From<RuntimeError> for FleetError {
    fn from(err: RuntimeError) -> FleetError {
        tracing::error!(error = %err, "Container runtime operation failed");
        FleetError::Runtime
    }
}
