//! Decky lifecycle: one record per deploy or mutate operation on a decky, which the dashboard
//! polls instead of holding a request open, the open records reconcile resolves by what it finds,
//! and the startup sweep of records nothing could resolve.
//! Both dialects accept every statement (`sql.rs`).

mod sql;

pub(super) use sql::insert_lifecycle;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::DbResult;

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
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
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

/// The message the startup sweep leaves on every lifecycle row it fails.
pub const STRANDED_LIFECYCLE_ERROR: &str = "master restarted during operation";

#[async_trait]
pub trait LifecycleStore {
    async fn add_lifecycle(&self, record: &DeckyLifecycle) -> DbResult<()>;

    /// Moves a record that is not yet terminal to `status`, with `error` when it failed; a
    /// terminal status stamps `completed_at`. A terminal record is left as it is.
    async fn set_lifecycle_status(
        &self,
        id: Uuid,
        status: LifecycleStatus,
        error: Option<&str>,
        at: DateTime<Utc>,
    ) -> DbResult<()>;

    /// The newest record of `operation` on `decky` on swarm host `host_uuid` that is not yet
    /// terminal: what a heartbeat's outcome moves. `None` when there is none.
    async fn open_lifecycle(&self, decky: &str, operation: &str, host_uuid: &str) -> DbResult<Option<Uuid>>;

    /// The records with these ids; unknown ids are left out.
    async fn lifecycles(&self, ids: &[Uuid]) -> DbResult<Vec<DeckyLifecycle>>;

    /// Every record of `operation` (`deploy`, `mutate`) that is still `pending` or `running`,
    /// oldest first: what reconcile resolves by what it finds on the engine.
    async fn open_lifecycles(&self, operation: &str) -> DbResult<Vec<DeckyLifecycle>>;

    /// Marks every `pending` or `running` record started before `cutoff` as failed with
    /// [`STRANDED_LIFECYCLE_ERROR`]; returns how many it changed.
    async fn fail_stranded_lifecycles(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> DbResult<u64>;
}
