//! Test fixture, compiled only with the `test-fixture` feature (dev-dependencies): worker bodies
//! that do no work at all. They exist so the runner, `svc worker` and the supervisor can be tested
//! as real processes before any real worker has landed; they are never part of a release build.

use std::time::Duration;

use svc::roster::Counter;
use svc::worker::{WorkerBody, WorkerContext};

/// Not a worker of the roster, so it declares its one counter itself.
const IDLE_BATCHES: Counter = Counter::new("idle_batches");

/// The names the fixture answers to: two, so tests can tell workers apart.
pub fn bodies() -> Vec<WorkerBody> {
    vec![WorkerBody::new("fixture-a", idle), WorkerBody::new("fixture-b", idle)]
}

/// Counts its idle "batches" until asked to stop, so heartbeats carry a changing counter.
async fn idle(ctx: WorkerContext) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            () = ctx.cancel.cancelled() => return Ok(()),
            () = tokio::time::sleep(Duration::from_millis(100)) => ctx.counters.add(IDLE_BATCHES, 1),
        }
    }
}
