//! The swarm: the worker hosts enrolled into this master, the deckies each one reports running
//! ("shards", one per decky name), and the enrollment bundles not yet fetched. A host's status is
//! written by heartbeats (`active`) and by the silence sweep (`unreachable`), never by a list call,
//! so reading hosts costs one query however many there are. Both dialects accept every statement
//! (`sql.rs`).

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::DbResult;
use super::fleet::DeckyConfig;

/// Where a host stands. DECNET also filters on `decommissioned`, which nothing writes: a
/// decommissioned host's row is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostStatus {
    /// Enrolled, never heard from since.
    Enrolled,
    /// Its last heartbeat is recent.
    Active,
    /// Silent for three heartbeat intervals.
    Unreachable,
}

impl HostStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HostStatus::Enrolled => "enrolled",
            HostStatus::Active => "active",
            HostStatus::Unreachable => "unreachable",
        }
    }
}

impl std::str::FromStr for HostStatus {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "enrolled" => Ok(HostStatus::Enrolled),
            "active" => Ok(HostStatus::Active),
            "unreachable" => Ok(HostStatus::Unreachable),
            other => Err(anyhow::anyhow!("unknown swarm host status `{other}`")),
        }
    }
}

/// An enrolled worker host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwarmHost {
    pub uuid: Uuid,
    pub name: String,
    /// Where the master dials its agent; empty until the enrollment bundle is fetched.
    pub address: String,
    pub agent_port: u16,
    pub status: HostStatus,
    pub last_heartbeat: Option<DateTime<Utc>>,
    /// Lowercase hex SHA-256 of the agent certificate's DER; `None` until it is issued.
    pub client_cert_fingerprint: Option<String>,
    /// The same for the updater certificate, when one was asked for.
    pub updater_cert_fingerprint: Option<String>,
    pub enrolled_at: DateTime<Utc>,
    pub notes: Option<String>,
    pub use_ipvlan: bool,
}

impl SwarmHost {
    /// Whether deckies may be sent to it: `active` (its agent has heart-beaten and not fallen
    /// silent since), with an address. DECNET also sends to an `enrolled` host; one that fetched its
    /// bundle but never came up would fail every deploy sent its way.
    pub fn is_usable(&self) -> bool {
        self.status == HostStatus::Active && !self.address.is_empty()
    }
}

/// Where a decky on a worker host stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShardState {
    Pending,
    /// Every service container of the decky runs.
    Running,
    Failed,
    TornDown,
    /// Some of its service containers do not run.
    Degraded,
    TearingDown,
    TeardownFailed,
}

impl ShardState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Pending => "pending",
            ShardState::Running => "running",
            ShardState::Failed => "failed",
            ShardState::TornDown => "torn_down",
            ShardState::Degraded => "degraded",
            ShardState::TearingDown => "tearing_down",
            ShardState::TeardownFailed => "teardown_failed",
        }
    }
}

impl std::str::FromStr for ShardState {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(ShardState::Pending),
            "running" => Ok(ShardState::Running),
            "failed" => Ok(ShardState::Failed),
            "torn_down" => Ok(ShardState::TornDown),
            "degraded" => Ok(ShardState::Degraded),
            "tearing_down" => Ok(ShardState::TearingDown),
            "teardown_failed" => Ok(ShardState::TeardownFailed),
            other => Err(anyhow::anyhow!("unknown decky shard state `{other}`")),
        }
    }
}

/// One decky on one worker host.
#[derive(Clone, Debug, PartialEq)]
pub struct DeckyShard {
    pub decky_name: String,
    pub host_uuid: Uuid,
    pub services: Vec<String>,
    /// The decky as last dispatched or reported.
    pub decky_config: Option<DeckyConfig>,
    pub decky_ip: Option<String>,
    pub state: ShardState,
    /// Why it failed (generic; the engine's text stays in the agent's log).
    pub last_error: Option<String>,
    pub compose_hash: Option<String>,
    /// The last heartbeat that reported it.
    pub last_seen: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// Which shards a listing or a change is about: `None` matches any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardFilter {
    pub host_uuid: Option<Uuid>,
    pub decky_name: Option<String>,
    pub state: Option<ShardState>,
}

/// An enrollment bundle waiting to be fetched. The token itself is never stored, only its hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enrollment {
    /// Lowercase hex SHA-256 of the token.
    pub token_hash: String,
    pub host_uuid: Uuid,
    /// The master's address as the operator gave it: what the agent will dial.
    pub master_host: String,
    pub with_updater: bool,
    pub services_ini: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Bytes of a shard's stored `last_error`.
pub const MAX_SHARD_ERROR_CHARS: usize = 512;

#[async_trait]
pub trait SwarmStore {
    /// `Conflict` when the name is taken.
    async fn add_swarm_host(&self, host: &SwarmHost) -> DbResult<()>;

    /// Adds the host and its enrollment bundle together; `Conflict` when the name is taken
    /// (nothing stored then).
    async fn enroll_swarm_host(&self, host: &SwarmHost, enrollment: &Enrollment) -> DbResult<()>;

    async fn swarm_host(&self, uuid: Uuid) -> DbResult<SwarmHost>;

    async fn swarm_host_by_name(&self, name: &str) -> DbResult<SwarmHost>;

    /// The host whose agent certificate has this fingerprint (lowercase hex SHA-256 of its DER):
    /// how the log listener knows who is shipping. `NotFound` when no enrolled host has it (a
    /// decommissioned host's row is gone).
    async fn swarm_host_by_fingerprint(&self, fingerprint: &str) -> DbResult<SwarmHost>;

    /// Every host, or those of one status, ordered by name.
    async fn swarm_hosts(&self, status: Option<HostStatus>) -> DbResult<Vec<SwarmHost>>;

    async fn set_swarm_host_address(&self, uuid: Uuid, address: &str) -> DbResult<()>;

    /// Stores the fingerprints of the certificates issued to the host.
    async fn set_swarm_host_fingerprints(&self, uuid: Uuid, client: &str, updater: Option<&str>) -> DbResult<()>;

    /// The host was heard from: `active`, last heartbeat `at`.
    async fn record_swarm_heartbeat(&self, uuid: Uuid, at: DateTime<Utc>) -> DbResult<()>;

    /// Marks `unreachable` every active host whose last heartbeat is older than `cutoff`, and
    /// returns them (as they are now). A host that heart-beats meanwhile is not marked.
    async fn mark_silent_swarm_hosts(&self, cutoff: DateTime<Utc>) -> DbResult<Vec<SwarmHost>>;

    /// Deletes the host with its shards and bundles; `NotFound` when there is none.
    async fn delete_swarm_host(&self, uuid: Uuid) -> DbResult<()>;

    /// Inserts the shards or replaces those of the same decky name (which may move host).
    async fn upsert_decky_shards(&self, shards: &[DeckyShard]) -> DbResult<()>;

    /// The matching shards, ordered by decky name.
    async fn decky_shards(&self, filter: &ShardFilter) -> DbResult<Vec<DeckyShard>>;

    /// Moves the matching shards to `state` with `last_error` (cut to [`MAX_SHARD_ERROR_CHARS`]);
    /// returns how many.
    async fn set_decky_shard_state(
        &self,
        filter: &ShardFilter,
        state: ShardState,
        last_error: Option<&str>,
        at: DateTime<Utc>,
    ) -> DbResult<u64>;

    /// Deletes the matching shards; returns how many.
    async fn delete_decky_shards(&self, filter: &ShardFilter) -> DbResult<u64>;

    /// The bundle with this token hash if it has not expired at `now`; `NotFound` otherwise.
    async fn enrollment(&self, token_hash: &str, now: DateTime<Utc>) -> DbResult<Enrollment>;

    /// Takes the bundle for its one fetch: returns it and deletes it, so of two concurrent
    /// fetches only one gets it. `NotFound` when it is gone or expired at `now`.
    async fn claim_enrollment(&self, token_hash: &str, now: DateTime<Utc>) -> DbResult<Enrollment>;

    /// Forgets bundles expired before `now`; returns how many.
    async fn forget_expired_enrollments(&self, now: DateTime<Utc>) -> DbResult<u64>;
}
