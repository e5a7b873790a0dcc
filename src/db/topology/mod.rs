//! Topologies (DECNET's MazeNET): a decoy network of LANs, the deckies on them and the edges that
//! attach a decky to a LAN (a decky on two LANs bridges them), the status history that the status
//! machine ([`TopologyStatus::can_move_to`]) allows, and the queue of mutations the mutator works
//! through. Every change to a topology's parts bumps its `version` (optimistic locking: a writer
//! that names an older version gets `Conflict`). Both dialects accept every statement (`sql.rs`, the queue's in `queue.rs`);
//! the claim of a mutation takes row locks on MySQL and the write lock on sqlite, so two mutators
//! never claim the same one.

mod queue;
mod rows;
mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{DbResult, Page};

/// Where a topology is in its life (reference `decnet-workers.md` §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TopologyStatus {
    Pending,
    Deploying,
    Active,
    Degraded,
    Failed,
    TearingDown,
    TornDown,
}

impl TopologyStatus {
    pub const ALL: [TopologyStatus; 7] = [
        TopologyStatus::Pending,
        TopologyStatus::Deploying,
        TopologyStatus::Active,
        TopologyStatus::Degraded,
        TopologyStatus::Failed,
        TopologyStatus::TearingDown,
        TopologyStatus::TornDown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TopologyStatus::Pending => "pending",
            TopologyStatus::Deploying => "deploying",
            TopologyStatus::Active => "active",
            TopologyStatus::Degraded => "degraded",
            TopologyStatus::Failed => "failed",
            TopologyStatus::TearingDown => "tearing_down",
            TopologyStatus::TornDown => "torn_down",
        }
    }

    /// The status machine: which moves are legal from here.
    pub fn can_move_to(self, to: TopologyStatus) -> bool {
        use TopologyStatus::*;
        matches!(
            (self, to),
            (Pending, Deploying | TornDown)
                | (Deploying, Active | Failed | Degraded | TearingDown)
                | (Active, Degraded | TearingDown)
                | (Degraded, Active | TearingDown)
                | (Failed, TearingDown)
                | (TearingDown, TornDown | Degraded)
        )
    }

    /// Mutations are accepted and applied only on a live topology.
    pub fn is_live(self) -> bool {
        matches!(self, TopologyStatus::Active | TopologyStatus::Degraded)
    }
}

impl std::str::FromStr for TopologyStatus {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TopologyStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| anyhow::anyhow!("unknown topology status `{s}`"))
    }
}

/// A topology without its parts (DECNET's `TopologySummary`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Topology {
    pub id: Uuid,
    pub name: String,
    /// `unihost` (this host's engine) or `agent`.
    pub mode: String,
    pub target_host_uuid: Option<String>,
    pub status: TopologyStatus,
    pub version: i64,
    pub needs_resync: bool,
    pub created_at: DateTime<Utc>,
    pub status_changed_at: DateTime<Utc>,
    /// JSON text, as DECNET sends it.
    pub email_personas: String,
    pub language_default: String,
    /// How it was made: the generator's parameters and seed (not listed).
    #[serde(skip, default)]
    pub config_snapshot: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Lan {
    pub id: Uuid,
    pub topology_id: Uuid,
    pub name: String,
    /// An IPv4 /24, e.g. `10.214.3.0/24`.
    pub subnet: String,
    /// A DMZ LAN reaches outside; every other LAN's network is internal.
    pub is_dmz: bool,
    /// The engine's network, while deployed.
    pub docker_network_id: Option<String>,
    pub x: Option<f64>,
    pub y: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TopologyDecky {
    pub uuid: Uuid,
    pub topology_id: Uuid,
    pub name: String,
    pub services: Vec<String>,
    pub decky_config: Option<serde_json::Value>,
    /// Its address on its home LAN (the first it was attached to).
    pub ip: Option<String>,
    /// `pending`, `running`, `failed`, `torn_down`…
    pub state: String,
    pub last_error: Option<String>,
    pub x: Option<f64>,
    pub y: Option<f64>,
}

/// A decky's attachment to a LAN, with its address there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Edge {
    pub id: Uuid,
    pub topology_id: Uuid,
    pub decky_uuid: Uuid,
    pub lan_id: Uuid,
    pub ip: Option<String>,
    /// The decky is on more than one LAN.
    pub is_bridge: bool,
    /// The decky routes between its LANs.
    pub forwards_l3: bool,
}

/// A topology with all its parts, as stored at one moment (what the master sends a swarm host
/// that applies it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopologyDetail {
    pub topology: Topology,
    pub lans: Vec<Lan>,
    pub deckies: Vec<TopologyDecky>,
    pub edges: Vec<Edge>,
}

impl TopologyDetail {
    pub fn lan_named(&self, name: &str) -> Option<&Lan> {
        self.lans.iter().find(|l| l.name == name)
    }

    pub fn decky_named(&self, name: &str) -> Option<&TopologyDecky> {
        self.deckies.iter().find(|d| d.name == name)
    }

    /// The decky's edges, home LAN first (the edge with the decky's own address).
    pub fn edges_of(&self, decky: &TopologyDecky) -> Vec<&Edge> {
        let mut edges: Vec<&Edge> = self.edges.iter().filter(|e| e.decky_uuid == decky.uuid).collect();
        edges.sort_by_key(|e| e.ip != decky.ip);
        edges
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StatusEvent {
    pub id: Uuid,
    pub topology_id: Uuid,
    pub from_status: TopologyStatus,
    pub to_status: TopologyStatus,
    pub at: DateTime<Utc>,
    pub reason: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MutationState {
    Pending,
    Applying,
    Applied,
    Failed,
}

impl MutationState {
    pub fn as_str(self) -> &'static str {
        match self {
            MutationState::Pending => "pending",
            MutationState::Applying => "applying",
            MutationState::Applied => "applied",
            MutationState::Failed => "failed",
        }
    }
}

impl std::str::FromStr for MutationState {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [MutationState::Pending, MutationState::Applying, MutationState::Applied, MutationState::Failed]
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| anyhow::anyhow!("unknown mutation state `{s}`"))
    }
}

/// A change asked of a live topology, applied by the mutator.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Mutation {
    pub id: Uuid,
    pub topology_id: Uuid,
    pub op: String,
    pub payload: serde_json::Value,
    pub state: MutationState,
    pub requested_at: DateTime<Utc>,
    pub applied_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

/// One change to a topology's parts.
#[derive(Clone, Debug, PartialEq)]
pub enum TopologyEdit {
    AddLan(Lan),
    UpdateLan(Lan),
    RemoveLan(Uuid),
    /// A decky and its edges.
    AddDecky(TopologyDecky, Vec<Edge>),
    UpdateDecky(TopologyDecky),
    RemoveDecky(Uuid),
    AddEdge(Edge),
    UpdateEdge(Edge),
    RemoveEdge(Uuid),
}

/// When an edit may happen: the topology's status must be one of `statuses`, and its version
/// `version` when one is named. `bump`: whether the edit moves the version on. Every change asked
/// for bumps it once (a child edit, or a mutation when it is queued); applying a queued mutation
/// does not bump it again.
#[derive(Clone, Copy, Debug)]
pub struct EditGuard<'a> {
    pub statuses: &'a [TopologyStatus],
    pub version: Option<i64>,
    pub bump: bool,
}

impl<'a> EditGuard<'a> {
    /// A change asked for now: bumps the version (only from `version`, when one is named).
    pub fn change(statuses: &'a [TopologyStatus], version: Option<i64>) -> EditGuard<'a> {
        EditGuard { statuses, version, bump: true }
    }

    /// A queued mutation being applied: its enqueue bumped the version already.
    pub fn queued(statuses: &'a [TopologyStatus]) -> EditGuard<'a> {
        EditGuard { statuses, version: None, bump: false }
    }
}

/// Mutations a dead mutator left `applying`, failed by the claim that found them.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub mutation: Option<Mutation>,
    pub abandoned: Vec<Mutation>,
}

/// The reason a mutation abandoned by a stopped mutator is failed with.
pub const ABANDONED_MUTATION: &str = "the mutator stopped while applying it";

#[async_trait]
pub trait TopologyStore {
    /// Stores a new topology with its parts, and its first status event. `Conflict` when the name
    /// is taken.
    async fn create_topology(&self, detail: &TopologyDetail) -> DbResult<()>;

    /// A page of topologies, newest first, optionally of one status.
    async fn topologies(&self, status: Option<TopologyStatus>, limit: u32, offset: u64) -> DbResult<Page<Topology>>;

    async fn topology(&self, id: Uuid) -> DbResult<Topology>;

    /// Replaces the topology's email personas (JSON text); `NotFound` when there is no such topology.
    async fn set_email_personas(&self, id: Uuid, personas: &str) -> DbResult<()>;

    /// The live (active or degraded) topologies targeted at swarm host `host`, oldest first: what
    /// each of its heartbeats is checked against.
    async fn live_topologies_on_host(&self, host: Uuid) -> DbResult<Vec<Topology>>;

    /// The topology and all its parts, read in one transaction.
    async fn topology_detail(&self, id: Uuid) -> DbResult<TopologyDetail>;

    /// Removes the topology and everything of it, when its status is one of `statuses`
    /// (`Conflict` otherwise).
    async fn delete_topology(&self, id: Uuid, statuses: &[TopologyStatus]) -> DbResult<()>;

    /// Moves the topology to `to` if the status machine allows it from where it is (and, when
    /// `from` is given, only from one of those), recording the event; `Conflict` otherwise.
    /// Returns the status it left.
    async fn set_topology_status(
        &self,
        id: Uuid,
        from: Option<&[TopologyStatus]>,
        to: TopologyStatus,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> DbResult<TopologyStatus>;

    /// The newest `limit` status events, newest first.
    async fn status_events(&self, id: Uuid, limit: u32) -> DbResult<Vec<StatusEvent>>;

    /// Applies `edits` in one transaction if `guard` holds, bumping the version once when the guard
    /// says so; `Conflict`
    /// when the guard fails or a name or attachment is taken, `NotFound` when a part to change is
    /// gone. Returns the topology after the edits.
    async fn edit_topology(&self, id: Uuid, guard: EditGuard<'_>, edits: &[TopologyEdit]) -> DbResult<Topology>;

    /// Records what the engine made of a LAN (its network id, `None` once removed).
    async fn set_lan_network(&self, lan: Uuid, network_id: Option<&str>) -> DbResult<()>;

    /// Records a decky's deploy state.
    async fn set_topology_decky_state(
        &self,
        decky: Uuid,
        state: &str,
        error: Option<&str>,
        at: DateTime<Utc>,
    ) -> DbResult<()>;

    /// Queues a mutation if `guard` holds, bumping the version, in one transaction.
    async fn enqueue_mutation(
        &self,
        id: Uuid,
        guard: EditGuard<'_>,
        op: &str,
        payload: &serde_json::Value,
        at: DateTime<Utc>,
    ) -> DbResult<Mutation>;

    /// A topology's mutations, newest first, optionally of one state.
    async fn mutations(&self, id: Uuid, state: Option<MutationState>) -> DbResult<Vec<Mutation>>;

    /// Claims the oldest pending mutation of a live topology that has none `applying`, marking it
    /// `applying` by `holder`; at most one claimer wins a mutation. First fails every `applying`
    /// mutation claimed before `stale_before` (its mutator died) and reports them.
    async fn claim_mutation(&self, holder: &str, now: DateTime<Utc>, stale_before: DateTime<Utc>) -> DbResult<Claim>;

    /// Ends an `applying` mutation as `applied` or `failed`; `NotFound` when it is not applying
    /// (a claim that went stale and was failed meanwhile).
    async fn finish_mutation(
        &self,
        id: Uuid,
        state: MutationState,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> DbResult<()>;

    /// Whether any live topology has a pending mutation (the mutator's cheap poll).
    async fn has_pending_mutations(&self) -> DbResult<bool>;
}
