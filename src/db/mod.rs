//! The repository: one folder per area (`users`, `sessions`, `lifecycle`, `fleet`, `ingest`,
//! `logs`, `attackers`, `observations`, `webhooks`, `topology`, `tarpit`, `swarm`, `limits`, `retention`, `realism`, `canary`), each with its trait of domain verbs and its types in `mod.rs`,
//! its SQL written once for both backends in `sql.rs`, and, where the dialects differ, the
//! difference in `sqlite.rs` / `mysql.rs` side by side (`dialect.rs` says how and which servers
//! are supported). Here: the [`Db`] handle, chosen once from the configuration by [`connect`],
//! the [`Database`] every backend is (the areas' traits plus migrate, ping, close), and
//! [`DbError`]. Nothing above this module sees a sqlx or rusqlite type.
//!
//! Supported servers: sqlite (bundled), MySQL 8.0 and MariaDB 10.11.

pub mod attackers;
pub mod canary;
mod codec;
mod config;
mod dialect;
mod fault;
pub mod fleet;
pub mod ingest;
pub mod lifecycle;
pub mod limits;
pub mod logs;
mod mysql;
pub mod observations;
pub mod realism;
pub mod retention;
pub mod seal;
pub mod sessions;
mod sqlite;
mod statement;
pub mod swarm;
pub mod tarpit;
pub mod topology;
pub mod users;
pub mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;
use dialect::both_backends;
use seal::Seal;

pub use attackers::{
    AttackerCommand, AttackerEvidence, AttackerFilter, AttackerProfile, AttackerSort, AttackerStore, AttackerWindow,
    ChangePosition, MAX_PROFILE_FINGERPRINTS, PROFILER_LEASE_SOURCE, ProfilerBatch,
};
pub use canary::{
    CanaryBlob, CanaryStore, CanaryToken, CanaryTokenFilter, CanaryTokenState, CanaryTrigger, NewCanaryBlob,
};
pub use codec::Page;
pub use config::DatabaseConfig;
pub use fault::faults_seen as store_faults_seen;
pub use fleet::{DeckyConfig, DeployState, Deployment, FleetDecky, FleetNetwork, FleetStore, StoredFleet};
pub use ingest::{Committed, IngestBatch, IngestCursor, IngestStore, LogTrace, NewBounty, NewCredential, NewLog};
pub use lifecycle::{DeckyLifecycle, LifecycleStatus, LifecycleStore, STRANDED_LIFECYCLE_ERROR};
pub use limits::{LimitStore, LimitWindow};
pub use logs::{
    ADMIN_ONLY_FIELDS, BountyFilter, BountyRecord, CountedColumns, CredentialFilter, CredentialRecord, CredentialReuse,
    HistogramBucket, LogColumn, LogFilter, LogRecord, LogStats, LogStore, MIN_REUSE_TARGETS, RECIPIENT_EVENTS,
    SearchTerm, log_commits, parse_search,
};
pub use mysql::MysqlDb;
pub use observations::{ObservationStore, ObservationsStored};
pub use realism::{RealismSetting, RealismStore};
pub use retention::{RETENTION_LEASE_SOURCE, RetentionStore};
pub use sessions::{RevokedToken, SessionStore, SseTicket};
pub use sqlite::SqliteDb;
pub use swarm::{DeckyShard, Enrollment, HostStatus, ShardFilter, ShardState, SwarmHost, SwarmStore};
pub use tarpit::{Enforced, Enforcement, StoredRule, TarpitRule, TarpitSession, TarpitStore};
pub use topology::{
    ABANDONED_MUTATION, Claim, Edge, EditGuard, Lan, Mutation, MutationState, StatusEvent, Topology, TopologyDecky,
    TopologyDetail, TopologyEdit, TopologyStatus, TopologyStore,
};
pub use users::{NewUser, Role, User, UserStore};
pub use webhooks::{Delivery, DeliveryFailure, FailureOutcome, NewDelivery, Webhook, WebhookChange, WebhookStore};

/// The shared handle every component holds.
pub type Db = Arc<dyn Database>;

pub type DbResult<T> = Result<T, DbError>;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("not found")]
    NotFound,
    /// A unique key already holds this value, or what a transaction checked moved meanwhile.
    #[error("conflict")]
    Conflict,
    /// The store cannot serve anyone now (unreachable, full, read-only, its file gone): answered
    /// 503, and what was attempted may succeed once it is back.
    #[error("database unavailable: {0}")]
    Unavailable(anyhow::Error),
    /// A stored value no longer decodes into the model (a row edited by hand, a migration gone
    /// wrong): neither the request's fault nor the store's. The cause says which row.
    #[error("stored data does not decode: {0}")]
    Corrupt(anyhow::Error),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl DbError {
    /// Whether this says the store is unavailable, not the request wrong.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, DbError::Unavailable(_))
    }
}

impl From<sqlx::Error> for DbError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::RowNotFound => DbError::NotFound,
            sqlx::Error::Database(ref db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => DbError::Conflict,
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => DbError::Corrupt(err.into()),
            other if fault::is_store_fault(&other) => {
                // A pool that timed out holds no broken connection (under load, discarding them
                // all would only add reconnects).
                if !matches!(other, sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed) {
                    fault::record();
                }
                DbError::Unavailable(other.into())
            }
            other => DbError::Other(other.into()),
        }
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(err: rusqlite::Error) -> Self {
        match err {
            rusqlite::Error::QueryReturnedNoRows => DbError::NotFound,
            rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..) => DbError::Corrupt(err.into()),
            rusqlite::Error::SqliteFailure(ref failure, _)
                if fault::is_sqlite_store_fault(i64::from(failure.extended_code)) =>
            {
                fault::record();
                DbError::Unavailable(err.into())
            }
            other => DbError::Other(other.into()),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for DbError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        DbError::Other(err.into())
    }
}

/// A backend: every area's verbs, and the server itself.
#[async_trait]
pub trait Database:
    UserStore
    + SessionStore
    + LifecycleStore
    + FleetStore
    + IngestStore
    + LogStore
    + AttackerStore
    + ObservationStore
    + WebhookStore
    + TopologyStore
    + TarpitStore
    + SwarmStore
    + LimitStore
    + RetentionStore
    + RealismStore
    + CanaryStore
    + Send
    + Sync
    + 'static
{
    /// `sqlite` or `mysql`, for logs.
    fn backend(&self) -> &'static str;

    /// Applies every pending migration of this backend.
    async fn migrate(&self) -> DbResult<()>;

    /// A round trip to the server: cheap, used by health checks.
    async fn ping(&self) -> DbResult<()>;

    /// Closes the pool, waiting for connections in use to be returned.
    async fn close(&self);

    /// The connections of the main pool right now, for `/metrics`.
    fn pool_use(&self) -> PoolUse;
}

/// How many pooled connections exist, and how many of them wait idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUse {
    pub open: u32,
    pub idle: u32,
}

both_backends! {
    #[async_trait]
    impl Database for Backend {
        fn backend(&self) -> &'static str {
            Backend::NAME
        }

        async fn migrate(&self) -> DbResult<()> {
            self.prepare().await?;
            Backend::MIGRATOR.run(&self.pool).await?;
            self.opened();
            Ok(())
        }

        async fn ping(&self) -> DbResult<()> {
            self.check_store()?;
            sqlx::query("select 1").execute(&self.pool).await?;
            Ok(())
        }

        async fn close(&self) {
            self.writer.close().await;
            self.pool.close().await;
            self.close_reads().await;
        }

        fn pool_use(&self) -> PoolUse {
            PoolUse { open: self.pool.size(), idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX) }
        }
    }
}

/// `verb` of the `backend` store in a client span, while traces are exported: a child of the span
/// it is awaited in (the request's, the ingester's), so a request's trace shows its store verbs.
/// Off, no span is made ([`tracing::Span::none`] costs a branch). Every verb of [`both_backends!`]
/// runs in one.
pub(crate) fn in_verb_span<T, F: std::future::Future<Output = T>>(
    verb: &'static str,
    backend: &'static str,
    future: F,
) -> tracing::instrument::Instrumented<F> {
    use tracing::Instrument as _;
    let span = if crate::traces::enabled() {
        tracing::info_span!(
            "store",
            otel.name = %format_args!("store.{verb}"),
            otel.kind = "client",
            db.system.name = backend,
            db.operation.name = verb,
        )
    } else {
        tracing::Span::none()
    };
    future.instrument(span)
}

/// Opens the configured backend without touching the server: a failure to reach it shows up on
/// first use, so startup can retry and the API can serve degraded meanwhile.
pub fn connect(config: &DatabaseConfig) -> DbResult<Db> {
    Ok(match config {
        DatabaseConfig::Sqlite { path, writer_cache_mib, secrets_key } => {
            Arc::new(SqliteDb::open(path, *writer_cache_mib, Seal::new(secrets_key))?)
        }
        DatabaseConfig::Mysql { url, secrets_key } => Arc::new(MysqlDb::open(url.expose(), Seal::new(secrets_key))?),
    })
}
