//! The repository: a trait of domain verbs, one implementation per backend (`sqlite`, `mysql`), each
//! owning its SQL and its migrations. The backend is chosen once, from the configuration, by
//! [`connect`]; nothing above this module sees a sqlx type.

mod attackers;
mod config;
mod logs;
mod mysql;
mod rows;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::observation::Observation;

pub use attackers::{
    AttackerCommand, AttackerEvidence, AttackerFilter, AttackerProfile, AttackerSort, MAX_PROFILE_FINGERPRINTS,
    ObservationsStored, PROFILER_LEASE_SOURCE, ProfilerBatch,
};
pub use config::DatabaseConfig;
pub use logs::{
    BountyFilter, BountyRecord, Committed, CredentialRecord, HistogramBucket, IngestBatch, IngestCursor, LogColumn,
    LogFilter, LogRecord, LogStats, NewBounty, NewCredential, NewLog, Page, SearchTerm, parse_search,
};
pub use mysql::MysqlDb;
pub use sqlite::SqliteDb;

/// The shared handle every component holds.
pub type Db = Arc<dyn Database>;

pub type DbResult<T> = Result<T, DbError>;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("not found")]
    NotFound,
    /// A unique key already holds this value.
    #[error("conflict")]
    Conflict,
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<sqlx::Error> for DbError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::RowNotFound => DbError::NotFound,
            sqlx::Error::Database(ref db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => DbError::Conflict,
            other => DbError::Other(other.into()),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for DbError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        DbError::Other(err.into())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Viewer => "viewer",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Role::Admin),
            "viewer" => Ok(Role::Viewer),
            other => Err(anyhow::anyhow!("unknown role `{other}` (expected admin or viewer)")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub uuid: Uuid,
    pub username: String,
    pub password_hash: String,
    pub role: Role,
    pub must_change_password: bool,
    /// Tokens issued before this instant are dead (password change, role change, reset).
    pub tokens_valid_from: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug)]
pub struct NewUser {
    pub username: String,
    pub password_hash: String,
    pub role: Role,
    pub must_change_password: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LifecycleStatus {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl LifecycleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleStatus::Pending => "pending",
            LifecycleStatus::Running => "running",
            LifecycleStatus::Succeeded => "succeeded",
            LifecycleStatus::Failed => "failed",
        }
    }
}

impl std::str::FromStr for LifecycleStatus {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(LifecycleStatus::Pending),
            "running" => Ok(LifecycleStatus::Running),
            "succeeded" => Ok(LifecycleStatus::Succeeded),
            "failed" => Ok(LifecycleStatus::Failed),
            other => Err(anyhow::anyhow!("unknown lifecycle status `{other}`")),
        }
    }
}

/// One deploy or mutate operation on a decky, polled by the dashboard instead of a held request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeckyLifecycle {
    pub id: Uuid,
    pub decky_name: String,
    pub host_uuid: Option<String>,
    pub operation: String,
    pub status: LifecycleStatus,
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

/// A token denied before its expiry (logout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevokedToken {
    pub jti: String,
    pub user: Uuid,
    /// The token's own expiry: after it, the entry is useless and is pruned.
    pub expires_at: DateTime<Utc>,
}

/// The message the startup sweep leaves on every lifecycle row it fails.
pub const STRANDED_LIFECYCLE_ERROR: &str = "master restarted during operation";

#[async_trait]
pub trait Database: Send + Sync + 'static {
    /// `sqlite` or `mysql`, for logs.
    fn backend(&self) -> &'static str;

    /// Applies every pending migration of this backend.
    async fn migrate(&self) -> DbResult<()>;

    /// A round trip to the server: cheap, used by health checks.
    async fn ping(&self) -> DbResult<()>;

    /// Closes the pool, waiting for connections in use to be returned.
    async fn close(&self);

    /// `Conflict` when the username is taken, in any letter case.
    async fn add_user(&self, user: NewUser, now: DateTime<Utc>) -> DbResult<User>;

    /// Matches the username in any letter case.
    async fn user_by_name(&self, username: &str) -> DbResult<User>;

    /// Ordered by username.
    async fn list_users(&self) -> DbResult<Vec<User>>;

    async fn user_by_uuid(&self, uuid: Uuid) -> DbResult<User>;

    /// `NotFound` when no such user exists. Their tokens die with them: a token's user must exist.
    async fn delete_user(&self, uuid: Uuid) -> DbResult<()>;

    /// Replaces the hash and kills every token issued before `tokens_valid_from`.
    async fn set_password(
        &self,
        user: Uuid,
        password_hash: &str,
        must_change_password: bool,
        tokens_valid_from: DateTime<Utc>,
    ) -> DbResult<()>;

    /// Changes the role and kills every token issued before `tokens_valid_from`.
    async fn set_role(&self, user: Uuid, role: Role, tokens_valid_from: DateTime<Utc>) -> DbResult<()>;

    /// Adds the token to the denylist (again is a no-op) and forgets entries that expired before `now`.
    async fn revoke_token(&self, token: &RevokedToken, now: DateTime<Utc>) -> DbResult<()>;

    async fn is_token_revoked(&self, jti: &str) -> DbResult<bool>;

    /// Stores a stream ticket by its hash; the ticket itself is never stored.
    async fn add_sse_ticket(&self, ticket_hash: &str, user: Uuid, expires_at: DateTime<Utc>) -> DbResult<()>;

    /// Removes the ticket and returns its user when it had not expired at `now`: a ticket opens one
    /// stream, even when two replicas redeem it at once. Also forgets expired tickets.
    async fn take_sse_ticket(&self, ticket_hash: &str, now: DateTime<Utc>) -> DbResult<Option<Uuid>>;

    async fn add_lifecycle(&self, record: &DeckyLifecycle) -> DbResult<()>;

    /// The records with these ids; unknown ids are left out.
    async fn lifecycles(&self, ids: &[Uuid]) -> DbResult<Vec<DeckyLifecycle>>;

    /// Marks every `pending` or `running` record started before `cutoff` as failed with
    /// [`STRANDED_LIFECYCLE_ERROR`]; returns how many it changed.
    async fn fail_stranded_lifecycles(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> DbResult<u64>;

    /// Takes, or renews, the lease on ingest source `source` for `holder` until `now + ttl`: true
    /// when `holder` holds it afterwards. Another holder's lease is taken only once it has expired,
    /// so one ingester per source works at a time, across processes and replicas.
    async fn acquire_ingest_lease(
        &self,
        source: &str,
        holder: &str,
        now: DateTime<Utc>,
        ttl: std::time::Duration,
    ) -> DbResult<bool>;

    /// Gives the lease up at once (on a clean stop), if `holder` holds it.
    async fn release_ingest_lease(&self, source: &str, holder: &str) -> DbResult<()>;

    /// Where ingestion of `source` stands; `None` before its first batch.
    async fn ingest_cursor(&self, source: &str) -> DbResult<Option<IngestCursor>>;

    /// In one transaction: checks that `holder` still holds the lease on `source` and that its
    /// cursor is still `expected`, stores the batch (logs; bounties not stored before; credentials
    /// inserted or their attempt counted) and moves the cursor to `batch.cursor`. `Conflict`, with
    /// nothing stored, when the lease or the cursor moved meanwhile. A crash at any moment leaves
    /// either all of the batch and its cursor, or none.
    async fn commit_ingest(
        &self,
        source: &str,
        holder: &str,
        expected: Option<&IngestCursor>,
        batch: &IngestBatch,
    ) -> DbResult<Committed>;

    /// Newest first (timestamp, then id, descending), with the total that match.
    async fn logs(&self, filter: &LogFilter, limit: u32, offset: u64) -> DbResult<Page<LogRecord>>;

    /// Rows with an id above `after_id` that match, oldest first (id ascending), at most `limit`.
    async fn logs_after(&self, after_id: i64, filter: &LogFilter, limit: u32) -> DbResult<Vec<LogRecord>>;

    /// The highest log id stored, 0 when there is none.
    async fn last_log_id(&self) -> DbResult<i64>;

    /// Matching rows counted per bucket of `bucket_minutes`, buckets aligned to the epoch, oldest
    /// first, empty buckets left out.
    async fn log_histogram(&self, filter: &LogFilter, bucket_minutes: u32) -> DbResult<Vec<HistogramBucket>>;

    async fn log_stats(&self) -> DbResult<LogStats>;

    /// Newest first (timestamp, then id, descending), with the total that match.
    async fn bounties(&self, filter: &BountyFilter, limit: u32, offset: u64) -> DbResult<Page<BountyRecord>>;

    /// Most recently seen first, at most `limit`.
    async fn credentials(&self, limit: u32) -> DbResult<Vec<CredentialRecord>>;

    /// The highest log id the profiler has folded in, 0 before its first batch.
    async fn profiler_cursor(&self) -> DbResult<i64>;

    /// The stored profiles of these addresses; addresses without one are left out.
    async fn attackers_by_ip(&self, ips: &[String]) -> DbResult<Vec<AttackerProfile>>;

    /// Bounty and credential tallies of these addresses, one entry per address asked for (zero
    /// counts and no fingerprints when nothing is stored).
    async fn attacker_evidence(&self, ips: &[String]) -> DbResult<Vec<AttackerEvidence>>;

    /// In one transaction: checks that `holder` holds the lease `profiler` (the ingest lease table,
    /// source [`PROFILER_LEASE_SOURCE`]) and that the profiler cursor is still `expected_cursor`, then
    /// upserts the profiles by uuid (every column but `command_count` replaced), inserts the commands
    /// (skipping log ids stored already), adds to each attacker's `command_count` the rows it gained
    /// (the caller's tally is ignored, so the count is always the rows'),
    /// upserts the observations by (`evidence_ref`, `primitive`) and moves the cursor to
    /// `batch.last_log_id`. `Conflict`, with nothing stored, when the lease or the cursor moved
    /// meanwhile, or when a profile's address is stored under another uuid (someone else profiled
    /// it meanwhile: read `attackers_by_ip` again). Two profiles of one address in a batch are an
    /// error.
    async fn commit_profiles(&self, holder: &str, expected_cursor: i64, batch: &ProfilerBatch) -> DbResult<()>;

    /// One page of profiles in the filter's order, with the total that match.
    async fn attackers(&self, filter: &AttackerFilter, limit: u32, offset: u64) -> DbResult<Page<AttackerProfile>>;

    /// `NotFound` when no profile has this uuid.
    async fn attacker(&self, uuid: Uuid) -> DbResult<AttackerProfile>;

    /// Those of `services` the attacker ran commands on, in the order given.
    async fn services_with_commands(&self, attacker: Uuid, services: &[String]) -> DbResult<Vec<String>>;

    /// The attacker's commands, newest first (timestamp, then log id, descending), optionally of
    /// one service, with the total that match. Paged in SQL; the total of all of them is the
    /// profile's `command_count`, which every commit keeps exact, so no count walks the list.
    async fn attacker_commands(
        &self,
        attacker: Uuid,
        service: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> DbResult<Page<AttackerCommand>>;

    /// Stores each record not held yet (by `id`, or by (`evidence_ref`, `primitive`)); a record
    /// without an `id` gets a new UUID. A record whose `identity_ref` is a UUID is attributed to
    /// that attacker. Records must have been validated by the caller.
    async fn add_observations(&self, observations: &[Observation]) -> DbResult<ObservationsStored>;

    /// Observations attributed to the attacker, newest first (window end, then ts), at most `limit`.
    async fn attacker_observations(&self, attacker: Uuid, limit: u32) -> DbResult<Vec<Observation>>;
}

/// Opens the configured backend without touching the server: a failure to reach it shows up on
/// first use, so startup can retry and the API can serve degraded meanwhile.
pub fn connect(config: &DatabaseConfig) -> DbResult<Db> {
    Ok(match config {
        DatabaseConfig::Sqlite { path } => Arc::new(SqliteDb::open(path)?),
        DatabaseConfig::Mysql { url } => Arc::new(MysqlDb::open(url.expose())?),
    })
}
