//! `BusConfig`: how a process reaches the NATS bus and how the heartbeats on it are paced and judged.
//! Every process reads it: the API, each worker, `svc supervise` (which starts a private bus when no
//! URL is set) and `svc ingest-replay`.

use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct BusConfig {
    /// `SVC_NATS_URL`; `None`: no bus, and heartbeats and notices are no-ops.
    pub nats_url: Option<String>,
    /// How often a process sends its heartbeat (`SVC_HEARTBEAT_SECS`).
    pub heartbeat_interval: Duration,
    /// A worker not heard from for this long is `stale` (`SVC_WORKER_STALE_SECS`).
    pub worker_stale_after: Duration,
}

impl BusConfig {
    pub(super) fn read(env: &mut Env) -> BusConfig {
        BusConfig {
            nats_url: env.non_empty("SVC_NATS_URL"),
            heartbeat_interval: env.seconds("SVC_HEARTBEAT_SECS", 30.0),
            worker_stale_after: env.seconds("SVC_WORKER_STALE_SECS", 90.0),
        }
    }
}
