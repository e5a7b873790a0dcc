//! [`LogTail`]: the highest committed log id, shared by every log stream of this process, so that a
//! new row reaches connected clients within a second of its commit without each stream polling.
//!
//! One task ([`LogTail::run`], started by the lifespan) keeps it current: while the bus is up it
//! follows the ingester's `system.log` `batch_committed` notices (from any replica's ingester);
//! while the bus is absent or down it asks the database twice a second, and once more when the bus
//! comes back, since notices sent meanwhile are lost. A slow poll also runs with the bus up, so a
//! lost notice delays rows by seconds, never until the next batch. Streams wait on [`LogTail::watch`]
//! and query the rows themselves.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::bus::logs::BatchCommitted;
use crate::bus::{Bus, topics};
use crate::db::Db;

/// How often the database is asked while there is no bus to hear commits on: often enough that a
/// row still reaches the streams within a second of its commit.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How often it is asked even with the bus up, in case a notice was lost.
pub const SAFETY_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// The newest committed log id; cheap to clone.
#[derive(Clone, Debug)]
pub struct LogTail {
    newest: Arc<watch::Sender<i64>>,
}

impl Default for LogTail {
    fn default() -> Self {
        LogTail { newest: Arc::new(watch::Sender::new(0)) }
    }
}

impl LogTail {
    /// The newest committed log id known, 0 before anything is known.
    pub fn newest(&self) -> i64 {
        *self.newest.borrow()
    }

    /// A receiver that wakes whenever the newest id grows.
    pub fn watch(&self) -> watch::Receiver<i64> {
        self.newest.subscribe()
    }

    /// Records that rows up to `id` are committed. Ids only grow: a late or repeated notice is
    /// ignored.
    pub fn advance(&self, id: i64) {
        self.newest.send_if_modified(|newest| {
            let grew = id > *newest;
            if grew {
                *newest = id;
            }
            grew
        });
    }

    /// Keeps the newest id current until `cancel`.
    pub async fn run(&self, db: Db, bus: Bus, cancel: CancellationToken) {
        // Subscribed before the first poll, so no commit falls between the two.
        let mut notices = bus.subscribe(topics::SYSTEM_LOG.to_string()).await;
        self.poll(&db, &cancel).await;
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut last_poll = tokio::time::Instant::now();
        let mut bus_was_up = notices.is_some() && bus.is_connected();
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                message = next_message(&mut notices) => match message {
                    Some(message) => {
                        if let Some(batch) = BatchCommitted::from_message(&message.payload) {
                            self.advance(batch.last_log_id);
                        }
                    }
                    None => {
                        tracing::warn!("Log notices subscription ended; polling the database instead");
                        notices = None;
                    }
                },
                _ = tick.tick() => {
                    let bus_up = notices.is_some() && bus.is_connected();
                    let overdue = last_poll.elapsed() >= SAFETY_POLL_INTERVAL;
                    if !bus_up || !bus_was_up || overdue {
                        self.poll(&db, &cancel).await;
                        last_poll = tokio::time::Instant::now();
                    }
                    bus_was_up = bus_up;
                }
            }
        }
    }

    async fn poll(&self, db: &Db, cancel: &CancellationToken) {
        let newest = tokio::select! {
            () = cancel.cancelled() => return,
            newest = db.last_log_id() => newest,
        };
        match newest {
            Ok(id) => self.advance(id),
            // The database being down is reported by /health; here it only delays rows.
            Err(err) => tracing::debug!(error = %err, "Cannot read the newest log id"),
        }
    }
}

/// The next message, or never when there is no subscription.
async fn next_message(notices: &mut Option<async_nats::Subscriber>) -> Option<async_nats::Message> {
    match notices {
        Some(subscriber) => subscriber.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_id_only_grows_and_wakes_watchers_when_it_does() {
        let tail = LogTail::default();
        let mut watcher = tail.watch();
        tail.advance(7);
        assert!(watcher.has_changed().unwrap());
        assert_eq!(*watcher.borrow_and_update(), 7);
        tail.advance(3);
        tail.advance(7);
        assert!(!watcher.has_changed().unwrap(), "a lower or equal id is not news");
        assert_eq!(tail.newest(), 7);
    }
}
