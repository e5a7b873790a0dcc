//! Retention: how long log rows are kept (`SVC_RETENTION_DAYS`, `SVC_RETENTION_MAX_ROWS`) and the
//! background pruner that enforces it. Every API replica runs the pruner; the worker lease on
//! [`RETENTION_LEASE_SOURCE`] lets one prune at a time. A pass deletes the oldest rows in
//! transactions of at most [`BATCH`] rows, each of which takes its rows out of the counters the
//! log views read ([`RetentionStore`]), so reads never wait on a long delete and ingest commits
//! between two batches. Off by default: a honeypot's rows are evidence, and the free-disk
//! watermark already keeps a flood from filling the disk.

use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, DbError, DbResult, RETENTION_LEASE_SOURCE};

/// Rows deleted per transaction at most.
pub const BATCH: u32 = 1000;

/// How long log rows are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Rows older than this are pruned; `None`: kept whatever their age.
    pub max_age: Option<chrono::Duration>,
    /// The oldest rows beyond this many are pruned; `None`: no limit.
    pub max_rows: Option<u64>,
    /// How often the pruner looks.
    pub interval: Duration,
}

impl Retention {
    pub fn is_off(&self) -> bool {
        self.max_age.is_none() && self.max_rows.is_none()
    }

    /// How long the pruner's lease lasts unless renewed: a standby replica takes over after it.
    fn lease(&self) -> Duration {
        (self.interval * 3).max(Duration::from_secs(30))
    }
}

/// What one pass pruned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Rows older than the age limit.
    pub aged: u64,
    /// The oldest rows beyond the row limit.
    pub over_limit: u64,
}

/// One pass: the rows past the age limit, then the oldest beyond the row limit, batch by batch
/// until none is left, another replica holds the lease, or `cancel` is cancelled. The lease is
/// renewed before each batch and checked inside it.
pub async fn prune(db: &Db, retention: &Retention, holder: &str, cancel: &CancellationToken) -> DbResult<Pruned> {
    let mut pruned = Pruned::default();
    if let Some(max_age) = retention.max_age {
        let cutoff = Utc::now() - max_age;
        while !cancel.is_cancelled() && hold(db, retention, holder).await? {
            let n = db.prune_oldest_logs(holder, Some(cutoff), BATCH).await?;
            pruned.aged += n;
            if n < u64::from(BATCH) {
                break;
            }
        }
    }
    if let Some(max_rows) = retention.max_rows {
        while !cancel.is_cancelled() && hold(db, retention, holder).await? {
            let excess = db.log_stats().await?.total_logs.saturating_sub(max_rows);
            let limit = u32::try_from(excess).unwrap_or(BATCH).min(BATCH);
            if limit == 0 {
                break;
            }
            let n = db.prune_oldest_logs(holder, None, limit).await?;
            pruned.over_limit += n;
            if n == 0 {
                break;
            }
        }
    }
    Ok(pruned)
}

async fn hold(db: &Db, retention: &Retention, holder: &str) -> DbResult<bool> {
    db.acquire_worker_lease(RETENTION_LEASE_SOURCE, holder, Utc::now(), retention.lease()).await
}

/// Prunes every `retention.interval` until `cancel` is cancelled, logging what each pass pruned;
/// returns at once when retention is off.
pub async fn run(db: Db, retention: Retention, cancel: CancellationToken) {
    if retention.is_off() {
        return;
    }
    let holder = format!("retention:{}:{}", std::process::id(), uuid::Uuid::new_v4().simple());
    let days = retention.max_age.map(|age| age.num_days());
    tracing::info!(max_age_days = ?days, max_rows = ?retention.max_rows, "Log retention on");
    let mut every = tokio::time::interval(retention.interval);
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = every.tick() => {}
        }
        match prune(&db, &retention, &holder, &cancel).await {
            Ok(Pruned { aged: 0, over_limit: 0 }) => {}
            Ok(pruned) => tracing::info!(
                older_than_days = ?days,
                aged = pruned.aged,
                max_rows = ?retention.max_rows,
                over_limit = pruned.over_limit,
                "Retention pruned log rows"
            ),
            // Another replica took the lease between the renewal and the batch.
            Err(DbError::Conflict) => {}
            Err(err) => tracing::warn!(error = %err, "Retention pass failed; retried at the next"),
        }
    }
    if let Err(err) = db.release_worker_lease(RETENTION_LEASE_SOURCE, &holder).await {
        tracing::debug!(error = %err, "Retention lease not released; it expires by itself");
    }
}
