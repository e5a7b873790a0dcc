//! The worker lease in the database that lets one worker at a time work on a source (one ingester
//! per file, one profiler, one webhook deliverer), across processes and replicas. It is renewed
//! every third of its length; a worker that does not hold it stands by and takes over once the
//! holder stops or dies.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use svc::db::Db;

pub struct Lease {
    source: String,
    /// This process's name on the lease: host, pid and a random part, unique per worker.
    holder: String,
    ttl: Duration,
    /// When the lease was last taken or renewed; `None` while we do not hold it.
    leased_at: Option<Instant>,
    standing_by: bool,
}

/// What a call to [`Lease::hold`] found, for the worker to act on and log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Held before and still held.
    Kept,
    /// Newly held; `took_over` when another worker held it while we stood by.
    Taken { took_over: bool },
    /// Held before, now another worker's: what we read ahead of the store is stale.
    Lost,
    /// Another worker holds it; first time we see so.
    StandingBy,
    /// Another worker still holds it.
    StillStandingBy,
}

impl Held {
    pub fn is_held(self) -> bool {
        matches!(self, Held::Kept | Held::Taken { .. })
    }
}

impl Lease {
    pub fn new(source: impl Into<String>, ttl: Duration) -> Lease {
        let holder = format!(
            "{}:{}:{}",
            rustix::system::uname().nodename().to_string_lossy(),
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        Lease { source: source.into(), holder, ttl, leased_at: None, standing_by: false }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Takes or renews the lease when due (a third of its length after the last time).
    pub async fn hold(&mut self, db: &Db) -> anyhow::Result<Held> {
        if self.leased_at.is_some_and(|at| at.elapsed() < self.ttl / 3) {
            return Ok(Held::Kept);
        }
        let held = db
            .acquire_worker_lease(&self.source, &self.holder, Utc::now(), self.ttl)
            .await
            .with_context(|| format!("taking the lease on {}", self.source))?;
        let outcome = match (held, self.leased_at.is_some()) {
            (true, true) => Held::Kept,
            (true, false) => Held::Taken { took_over: std::mem::take(&mut self.standing_by) },
            (false, true) => Held::Lost,
            (false, false) if self.standing_by => Held::StillStandingBy,
            (false, false) => {
                self.standing_by = true;
                Held::StandingBy
            }
        };
        self.leased_at = held.then(Instant::now);
        Ok(outcome)
    }

    /// Renews at the next [`hold`](Lease::hold): a commit found the lease or the cursor moved.
    pub fn recheck(&mut self) {
        self.leased_at = None;
    }

    /// Gives the lease up at once, if held, so a standby need not wait for it to expire.
    pub async fn release(&mut self, db: &Db) {
        if self.leased_at.take().is_some()
            && let Err(err) = db.release_worker_lease(&self.source, &self.holder).await
        {
            tracing::warn!(source = %self.source, error = %err, "Could not release the lease; it expires by itself");
        }
    }
}
