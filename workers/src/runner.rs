//! The loop every worker process shares: connect to the bus, send the heartbeat on
//! `system.<name>.health` and the bus's own on `system.bus.health`, listen for `stop` on `system.<name>.control`, and turn that intent,
//! SIGTERM or SIGINT into a cancellation the worker's body answers by finishing its current batch
//! and returning, after which the process exits 0.

use std::sync::Arc;

use anyhow::Context;
use svc::bus::Bus;
use svc::config::Config;
use svc::worker::{Attendance, WorkerBody, WorkerContext};

/// Runs `body` as this process's worker until it returns.
pub async fn run(config: Config, body: WorkerBody) -> anyhow::Result<()> {
    // Before anything slow: a signal during startup must stop us cleanly, not kill us.
    let cancel = svc::signals::stop_on_signal()?;

    let name = body.name;
    let config = Arc::new(config);
    let connection = format!("svc-worker-{name}");
    let bus = Bus::connect(config.bus.nats_url.as_deref(), &connection).await;
    let bus_health = tokio::spawn(svc::bus::bus_health::run(
        bus.clone(),
        connection,
        config.bus.heartbeat_interval,
        cancel.child_token(),
    ));
    let db = svc::db::connect(&config.db).context("opening the database")?;
    // A fresh database gets its schema from whichever process comes first, a worker included.
    if let Err(err) = db.migrate().await {
        tracing::warn!(worker = name, error = %format!("{err:#}"), "Could not migrate the database; the worker retries its work");
    }
    let ctx = WorkerContext::new(config.clone(), db, bus.clone(), cancel.child_token());

    // Attended from the start; the heartbeat stops only after the body is done, so the worker
    // stays visible while it finishes its batch.
    let attendance = Attendance::begin(name, &ctx).await;
    tracing::info!(worker = name, "Worker started");
    let result = (body.run)(ctx.clone()).await;
    attendance.end().await;
    bus_health.abort();
    bus.close().await;
    ctx.db.close().await;
    match &result {
        Ok(()) => tracing::info!(worker = name, "Worker stopped"),
        Err(err) => tracing::error!(worker = name, error = %format!("{err:#}"), "Worker failed"),
    }
    result
}
