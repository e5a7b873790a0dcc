//! Rate-limit windows: the fixed-window counts of the API's limits, kept in the database so that
//! every replica of one deployment counts against the same total (issue 37). A window is named by
//! its limit, its key (client address or username) and its index (`now / window length`); each
//! attempt adds one to its row, and rows whose window has closed are pruned in the background.

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::DbResult;

/// One window of one limit for one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitWindow<'a> {
    /// The limit's own name (`login_by_address`, …).
    pub limit: &'a str,
    pub key: &'a str,
    /// Which window: the time since the epoch divided by the window's length.
    pub index: i64,
    /// When the window closes, after which its row is pruned.
    pub closes_at: DateTime<Utc>,
}

#[async_trait]
pub trait LimitStore {
    /// Counts one attempt in `window` and returns the attempts counted in it so far, this one
    /// included, as every replica counted them.
    async fn count_attempt(&self, window: &LimitWindow<'_>) -> DbResult<u32>;

    /// Forgets the windows closed before `now`; returns how many.
    async fn prune_limit_windows(&self, now: DateTime<Utc>) -> DbResult<u64>;
}
