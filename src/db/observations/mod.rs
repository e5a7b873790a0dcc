//! Observations: the behavioural records sensors and the profiler emit (the Observation envelope),
//! stored once each and read per attacker. The statements are written once in `sql.rs`; records
//! already held are skipped through the [`Dialect`](super::dialect::Dialect)'s insert-or-skip.

mod sql;

use async_trait::async_trait;
use uuid::Uuid;

use super::DbResult;
use crate::observation::Observation;

pub(super) use sql::ObservationColumns;

/// What storing observations did: every record offered is one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ObservationsStored {
    pub stored: u64,
    /// Already held: same `id`, or same (`evidence_ref`, `primitive`).
    pub duplicates: u64,
}

#[async_trait]
pub trait ObservationStore {
    /// Stores each record not held yet (by `id`, or by (`evidence_ref`, `primitive`)); a record
    /// without an `id` gets a new UUID. A record whose `identity_ref` is a UUID is attributed to
    /// that attacker. Records must have been validated by the caller.
    async fn add_observations(&self, observations: &[Observation]) -> DbResult<ObservationsStored>;

    /// Observations attributed to the attacker, newest first (window end, then ts), at most `limit`.
    async fn attacker_observations(&self, attacker: Uuid, limit: u32) -> DbResult<Vec<Observation>>;
}
