//! `WorkerConfig`: what every worker reads alike: how long the lease lasts that lets one process at
//! a time do a worker's work (the ingester's on its file, the profiler's, the webhook deliverer's,
//! the swarm log listener's on each host's lines).

use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// How long a worker's lease lasts unless renewed (`SVC_INGEST_LEASE_SECS`, named for the
    /// first worker that held one): the longest a standby waits after the holder died. A holder
    /// renews at a third of it.
    pub lease: Duration,
}

impl WorkerConfig {
    pub(super) fn read(env: &mut Env) -> WorkerConfig {
        WorkerConfig { lease: env.seconds("SVC_INGEST_LEASE_SECS", 15.0) }
    }
}
