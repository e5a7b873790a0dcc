//! The background workers of svc, one module per worker (ingest, collector, profiler, sniffer,
//! prober, tarpit, mutator, webhook, and the swarm's log listener and forwarder) sharing one runner. Each builds on the `svc` library; the `svc` command chooses
//! which run embedded in the API and which run as their own processes.

pub mod collector;
#[cfg(feature = "test-fixture")]
mod fixture;
pub mod forwarder;
pub mod ingest;
pub mod lease;
pub mod listener;
pub mod mutator;
pub mod prober;
pub mod profiler;
pub mod runner;
pub mod sniffer;
pub mod tarpit;
pub mod webhook;

pub use svc::worker::WorkerBody;

/// Every worker this build can run with `svc worker <name>`: the project's, in the order of
/// [`svc::worker::WORKERS`] (tested), then the test fixture's when it is built in.
pub fn bodies() -> Vec<WorkerBody> {
    #[allow(unused_mut)]
    let mut bodies = Vec::from(project_bodies());
    #[cfg(feature = "test-fixture")]
    bodies.extend(fixture::bodies());
    bodies
}

fn project_bodies() -> [WorkerBody; svc::worker::WORKERS.len()] {
    [
        ingest::body(),
        collector::body(),
        profiler::body(),
        sniffer::body(),
        prober::body(),
        tarpit::body(),
        mutator::body(),
        webhook::body(),
        listener::body(),
        forwarder::body(),
    ]
}

/// The worker called `name`, if this build has it.
pub fn body(name: &str) -> Option<WorkerBody> {
    bodies().into_iter().find(|body| body.name == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_runnable_workers_are_the_known_ones() {
        let runnable = super::project_bodies().map(|body| body.name);
        assert_eq!(runnable, svc::worker::WORKERS.map(|worker| worker.name));
    }
}
