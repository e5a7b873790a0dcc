//! Retention: deleting the oldest log rows in small transactions, each of which also takes its
//! rows out of the counters the log views read (`log_totals`, `log_minutes`, `log_column_totals`,
//! `log_attackers`), so `/logs` totals, the histogram and `/stats` always agree with the rows
//! left. One pruner works at a time across replicas: it holds the worker lease on
//! [`RETENTION_LEASE_SOURCE`], and every batch checks it. Bounties, credentials and attacker
//! profiles are not log rows and are kept.

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::DbResult;

/// The worker lease the pruner holds (in `ingest_leases`, as every worker lease).
pub const RETENTION_LEASE_SOURCE: &str = "retention";

#[async_trait]
pub trait RetentionStore {
    /// In one transaction: checks that `holder` holds the lease on [`RETENTION_LEASE_SOURCE`],
    /// deletes at most `limit` (and at most 1000) of the oldest log rows (by timestamp), only those older than
    /// `older_than` when given, and takes them out of the counters. Returns how many rows went
    /// (0: none was old enough). `Conflict`, with nothing deleted, when the lease is not held.
    async fn prune_oldest_logs(&self, holder: &str, older_than: Option<DateTime<Utc>>, limit: u32) -> DbResult<u64>;
}
