//! The container runtime: one trait, [`ContainerRuntime`], over the Docker Engine API, answered
//! by Docker or by podman's Docker-compatible service ([`engine::Engine`], through `bollard`), and
//! the decky image built locally from the svc binary (`image`). The fleet deploys through it and
//! the collector reads container output through it. Its errors carry the engine's raw text for the
//! server log; nothing here decides what a client is told.

pub mod engine;
pub mod image;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

pub use engine::Engine;

/// A shared handle to the runtime.
pub type Runtime = Arc<dyn ContainerRuntime>;

/// What went wrong talking to the engine, with its raw text (for the log only). The failures an
/// operator can act on are recognised here, where the engine's words are seen, so callers can
/// say what to do without repeating them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("container engine unreachable: {0}")]
    Unavailable(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// A network cannot be made on its subnet: the host or another network already uses it.
    #[error("subnet in use: {0}")]
    SubnetInUse(String),
    /// A network of that name already exists, on another subnet.
    #[error("network {name} exists with subnet {existing}, not {wanted}")]
    NetworkOnAnotherSubnet { name: String, existing: String, wanted: String },
    /// A container's address is held by another container, `holder` (its id as the engine
    /// says): often one whose start an engine crash cut short, gone but for its address.
    #[error("address held by container {holder}: {message}")]
    AddressHeld { holder: String, message: String },
    #[error("container engine error: {0}")]
    Engine(String),
}

pub type RuntimeResult<T> = Result<T, RuntimeError>;

/// A network to create when it does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkSpec {
    pub name: String,
    /// `bridge`, or `macvlan` on `parent` (a host interface on a real LAN).
    pub driver: String,
    pub parent: Option<String>,
    pub subnet: String,
    pub gateway: String,
    /// No route out of the network (a topology's inner LANs).
    pub internal: bool,
    pub labels: BTreeMap<String, String>,
}

/// A container to run: created, started, restarted by the engine if it stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub hostname: String,
    pub network: String,
    pub ip: String,
    pub labels: BTreeMap<String, String>,
    /// Kernel settings of the container's network namespace (`net.ipv4.ip_forward` of a bridge).
    pub sysctls: BTreeMap<String, String>,
    /// What the container may do and hold.
    pub confinement: Confinement,
}

/// How tightly a container is held: who it runs as, what it may change, what it may use, and how
/// much of its output the engine keeps. The engine is told all of it at creation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    /// `uid:gid` to run as (`None`: the image's user).
    pub user: Option<String>,
    /// Capabilities kept after every other is dropped.
    pub capabilities: Vec<String>,
    /// The root filesystem is read-only.
    pub read_only_root: bool,
    /// Writable in-memory mounts: path → mount options (`size=…`).
    pub tmpfs: BTreeMap<String, String>,
    /// Writable host directories: host path → path inside.
    pub binds: BTreeMap<String, String>,
    /// `no-new-privileges`: nothing it runs gains privileges (setuid, file capabilities).
    pub no_new_privileges: bool,
    /// Memory (bytes) and processes it may use; 0 is the engine's default (none).
    pub memory_bytes: i64,
    pub pids: i64,
    /// The engine's log of its output: at most `log_files` files of `log_max_bytes` each.
    pub log_max_bytes: u64,
    pub log_files: u32,
}

/// A container as the engine lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: String,
    pub name: String,
    /// `running`, `exited`, `created`, `restarting`, `paused`…
    pub state: String,
    pub labels: BTreeMap<String, String>,
}

impl ContainerInfo {
    pub fn is_running(&self) -> bool {
        self.state == "running"
    }
}

/// What the engine reported of a container's life. `attributes` are what the engine says of the
/// container with the event: its labels, and its `name` and `image`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerEvent {
    /// `start` or `restart`.
    Started { id: String, attributes: BTreeMap<String, String> },
    /// `die` or `stop`: the container exists, not running.
    Stopped { id: String },
    /// `destroy` (Docker) or `remove` (podman): the container is gone.
    Removed { id: String },
    /// `oom`: a process of the container was killed for memory; a `die` follows if it was the
    /// container's own.
    OutOfMemory { id: String },
}

/// The Docker Engine API as svc uses it. Every call is bounded by the engine client's timeout
/// except the two streams, which last as long as their subject.
#[async_trait]
pub trait ContainerRuntime: Send + Sync {
    async fn ping(&self) -> RuntimeResult<()>;

    async fn image_exists(&self, reference: &str) -> RuntimeResult<bool>;

    /// Loads an image archive (the `docker save` format) with the tags its manifest names.
    async fn load_image(&self, archive: Bytes) -> RuntimeResult<()>;

    /// The tags of every image of `repository` (e.g. `localhost/svc-decky`).
    async fn image_tags(&self, repository: &str) -> RuntimeResult<Vec<String>>;

    /// Removes an image; one in use by a container, or already gone, is left as it is.
    async fn remove_image(&self, reference: &str) -> RuntimeResult<()>;

    /// Creates the network unless one of that name exists; one that exists on another subnet is
    /// [`RuntimeError::NetworkOnAnotherSubnet`] (it cannot hold the spec's addresses), a subnet
    /// the host or another network holds is [`RuntimeError::SubnetInUse`].
    async fn ensure_network(&self, spec: &NetworkSpec) -> RuntimeResult<()>;

    /// Removes the network; one that does not exist is already removed.
    async fn remove_network(&self, name: &str) -> RuntimeResult<()>;

    /// Creates and starts a container, replacing any container of the same name; returns its id.
    async fn run(&self, spec: &ContainerSpec) -> RuntimeResult<String>;

    /// Attaches a running container to one more network, at `ip`.
    async fn connect(&self, network: &str, container: &str, ip: &str) -> RuntimeResult<()>;

    /// Detaches a container from a network; one not attached (or gone) is already detached.
    async fn disconnect(&self, network: &str, container: &str) -> RuntimeResult<()>;

    /// Starts an existing, stopped container.
    async fn start(&self, name_or_id: &str) -> RuntimeResult<()>;

    /// Removes a container, running or not; one that does not exist is already removed.
    async fn remove(&self, name_or_id: &str) -> RuntimeResult<()>;

    /// The host process id of a container's first process while it runs; `None` when it does not.
    /// (The tarpit reaches the container's network namespace through it.)
    async fn pid(&self, name_or_id: &str) -> RuntimeResult<Option<u32>>;

    /// Unpacks `archive` (a tar stream) into directory `dir` of a running container, through the
    /// engine's archive API (`PUT /containers/{id}/archive`): each entry lands with the name,
    /// mode, owner and time its header carries. The engine resolves `dir` in the container's
    /// view, following its symlinks; a read-only filesystem is refused.
    async fn put_archive(&self, container: &str, dir: &str, archive: Bytes) -> RuntimeResult<()>;

    /// Runs `argv` in a running container as `user` (`uid:gid`), through the engine's exec API,
    /// with no shell: each element is one argument as given. Returns the program's exit code.
    async fn exec(&self, container: &str, user: &str, argv: &[String]) -> RuntimeResult<i64>;

    /// Every container, running or not, carrying label `key=value`.
    async fn list(&self, key: &str, value: &str) -> RuntimeResult<Vec<ContainerInfo>>;

    /// A container's stdout from `since` (epoch seconds, inclusive) as raw frames, each line
    /// prefixed by its RFC 3339 timestamp; with `follow`, until the container stops.
    fn stdout(&self, id: &str, since: i64, follow: bool) -> BoxStream<'static, RuntimeResult<Bytes>>;

    /// Starts, stops, removals and out-of-memory kills of containers carrying label `key=value`,
    /// from `since` (epoch seconds; the engine replays what it recorded since then) or from now.
    /// Ends when the engine goes away.
    fn events(&self, key: &str, value: &str, since: Option<i64>) -> BoxStream<'static, RuntimeResult<ContainerEvent>>;
}
