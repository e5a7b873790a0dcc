//! The loop every worker process shares: connect to the bus, send the heartbeat on
//! `system.<name>.health`, listen for `stop` on `system.<name>.control`, and turn that intent,
//! SIGTERM or SIGINT into a cancellation the worker's body answers by finishing its current batch
//! and returning, after which the process exits 0.

use std::sync::Arc;

use anyhow::Context;
use futures::StreamExt;
use svc::bus::{self, Bus, ControlRequest};
use svc::config::Config;
use svc::worker::{WorkerBody, WorkerContext};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Runs `body` as this process's worker until it returns.
pub async fn run(config: Config, body: WorkerBody) -> anyhow::Result<()> {
    // Before anything slow: a signal during startup must stop us cleanly, not kill us.
    let cancel = svc::signals::stop_on_signal()?;

    let name = body.name;
    let config = Arc::new(config);
    let bus = Bus::connect(config.bus.nats_url.as_deref(), &format!("svc-worker-{name}")).await;
    let db = svc::db::connect(&config.db).context("opening the database")?;
    let ctx = WorkerContext::new(config.clone(), db, bus.clone(), cancel.child_token());

    // The heartbeat and the control listener stop with their own token, after the body is done,
    // so the worker stays visible while it finishes its batch.
    let helpers = CancellationToken::new();
    let tasks = TaskTracker::new();
    tasks.spawn(bus::heartbeat::run(
        bus.clone(),
        name.to_string(),
        config.bus.heartbeat_interval,
        ctx.counters.clone(),
        ctx.fault.clone(),
        helpers.clone(),
    ));
    tasks.spawn(listen_for_control(bus.clone(), name, cancel.clone(), helpers.clone()));
    tasks.close();

    tracing::info!(worker = name, "Worker started");
    let result = (body.run)(ctx.clone()).await;
    helpers.cancel();
    tasks.wait().await;
    bus.close().await;
    ctx.db.close().await;
    match &result {
        Ok(()) => tracing::info!(worker = name, "Worker stopped"),
        Err(err) => tracing::error!(worker = name, error = %format!("{err:#}"), "Worker failed"),
    }
    result
}

/// Cancels `stop` when a `stop` intent arrives for `name`.
async fn listen_for_control(bus: Bus, name: &'static str, stop: CancellationToken, done: CancellationToken) {
    let mut requests = match bus::control::listen(&bus, name).await {
        Ok(Some(requests)) => requests,
        Ok(None) => return,
        Err(err) => {
            tracing::error!(worker = name, error = %err, "No control listener");
            return;
        }
    };
    loop {
        let message = tokio::select! {
            () = done.cancelled() => return,
            message = requests.next() => message,
        };
        let Some(message) = message else { return };
        match ControlRequest::from_message(&message.payload) {
            Some(request) if request.is_stop() => {
                tracing::info!(worker = name, requested_by = %request.requested_by, "Stop requested; finishing the current batch");
                stop.cancel();
            }
            Some(request) => {
                tracing::warn!(worker = name, action = %request.action, "Ignoring an unsupported control action")
            }
            None => tracing::warn!(worker = name, "Ignoring a control message that is not a control request"),
        }
    }
}
