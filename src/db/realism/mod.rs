//! Realism settings: what operators tune on DECNET's Realism pages (the planner's weights, the
//! global persona pool, the LLM provider), one row per setting. The value is JSON text the
//! `realism` module reads and writes; the repository does not look inside it. A setting's secret
//! (the LLM provider's API key) is sealed on the way in and opened on the way out (`seal`), so the
//! database alone never holds it readable. Both dialects accept every statement (`sql.rs`).

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::DbResult;
use crate::secret::Secret;

/// One stored setting: its JSON text and, when it has one, its secret.
#[derive(Clone, Debug, PartialEq)]
pub struct RealismSetting {
    pub value: String,
    pub secret: Option<Secret>,
}

#[async_trait]
pub trait RealismStore {
    /// The setting stored under `key`, `None` when nothing was ever stored (the defaults apply).
    async fn realism_setting(&self, key: &str) -> DbResult<Option<RealismSetting>>;

    /// Stores `setting` under `key`, whole, replacing what was there (last write wins).
    async fn put_realism_setting(&self, key: &str, setting: &RealismSetting, now: DateTime<Utc>) -> DbResult<()>;
}
