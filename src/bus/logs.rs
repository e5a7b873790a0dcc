//! `system.log`, type `batch_committed`: the ingester stored a batch. A wake-up hint for the log
//! streams of every replica; losing one only delays a stream until its next poll.

use serde::{Deserialize, Serialize};

use super::{Bus, BusError, Event, topics};

pub const BATCH_COMMITTED_TYPE: &str = "batch_committed";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchCommitted {
    /// Always `ingester`.
    pub component: String,
    /// Log rows the batch stored.
    pub flushed: u64,
    /// The byte offset the source's cursor moved to.
    pub position: u64,
    /// The highest log id stored after the batch.
    pub last_log_id: i64,
}

impl BatchCommitted {
    /// Reads a `system.log` message; `None` for other kinds of message on that subject.
    pub fn from_message(body: &[u8]) -> Option<BatchCommitted> {
        let event: Event = serde_json::from_slice(body).ok()?;
        if event.kind != BATCH_COMMITTED_TYPE {
            return None;
        }
        serde_json::from_value(event.payload).ok()
    }
}

pub async fn publish(bus: &Bus, batch: &BatchCommitted) -> Result<(), BusError> {
    let payload = serde_json::to_value(batch).expect("a batch summary serialises");
    bus.publish(&Event::new(topics::SYSTEM_LOG, BATCH_COMMITTED_TYPE, payload)).await
}
