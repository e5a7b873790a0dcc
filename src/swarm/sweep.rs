//! The silence sweep: a host whose agent has not heart-beaten for [`SILENT_BEATS`] intervals
//! becomes `unreachable` by itself, whether or not anyone lists hosts (DECNET only noticed when the
//! dashboard probed them), and its next heartbeat makes it `active` again. The sweep reads and
//! writes the store only: it dials no host, so its cost does not grow with dashboards, and every
//! API replica may run it (the store marks each host once). `/health` and `/workers` say
//! which hosts are down from the same records. The same loop forgets enrollment bundles that
//! expired unfetched.

use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, DbResult, SwarmHost};

/// Heartbeat intervals without one after which a host is `unreachable`.
pub const SILENT_BEATS: u32 = 3;

/// How often the sweep looks: a third of an interval, between 100 ms and 10 s, so a host is marked
/// within a few seconds of its third missed beat.
fn sweep_every(heartbeat: Duration) -> Duration {
    (heartbeat / 3).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// Marks the hosts silent for [`SILENT_BEATS`] heartbeat intervals; returns them.
pub async fn sweep_once(db: &Db, heartbeat: Duration) -> DbResult<Vec<SwarmHost>> {
    let silence = chrono::Duration::from_std(heartbeat * SILENT_BEATS).unwrap_or(chrono::Duration::MAX);
    let silent = db.mark_silent_swarm_hosts(Utc::now() - silence).await?;
    for host in &silent {
        tracing::warn!(
            host = %host.name,
            uuid = %host.uuid,
            address = %host.address,
            last_heartbeat = ?host.last_heartbeat,
            "Swarm host unreachable: no heartbeat for {SILENT_BEATS} intervals"
        );
    }
    Ok(silent)
}

/// Sweeps until `cancel`, agents beating every `heartbeat`.
pub async fn run(db: Db, heartbeat: Duration, cancel: CancellationToken) {
    let mut every = tokio::time::interval(sweep_every(heartbeat));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = every.tick() => {
                if let Err(err) = sweep_once(&db, heartbeat).await {
                    tracing::debug!(error = %err, "Swarm silence sweep skipped");
                }
                // Bundles never fetched are dead weight once expired (reads already ignore them).
                if let Err(err) = db.forget_expired_enrollments(Utc::now()).await {
                    tracing::debug!(error = %err, "Expired enrollment bundles not forgotten");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_looks_often_enough_and_not_too_often() {
        assert_eq!(sweep_every(Duration::from_secs(30)), Duration::from_secs(10));
        assert_eq!(sweep_every(Duration::from_secs(3)), Duration::from_secs(1));
        assert_eq!(sweep_every(Duration::from_millis(30)), Duration::from_millis(100));
    }
}
