//! The background workers of svc, one module per worker (ingest, collector, profiler, sniffer,
//! tarpit, mutator, webhook) sharing one runner. Each builds on the `svc` library; the `svc` command chooses
//! which run embedded in the API and which run as their own processes.

pub mod collector;
#[cfg(feature = "test-fixture")]
mod fixture;
pub mod ingest;
pub mod lease;
pub mod mutator;
pub mod profiler;
pub mod runner;
pub mod sniffer;
pub mod tarpit;
pub mod webhook;

pub use svc::worker::WorkerBody;

/// Every worker this build can run with `svc worker <name>`.
pub fn bodies() -> Vec<WorkerBody> {
    #[allow(unused_mut)]
    let mut bodies = vec![
        ingest::body(),
        profiler::body(),
        collector::body(),
        webhook::body(),
        sniffer::body(),
        mutator::body(),
        tarpit::body(),
    ];
    #[cfg(feature = "test-fixture")]
    bodies.extend(fixture::bodies());
    bodies
}

/// The worker called `name`, if this build has it.
pub fn body(name: &str) -> Option<WorkerBody> {
    bodies().into_iter().find(|body| body.name == name)
}
