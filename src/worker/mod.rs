//! What a worker is: a named body of background work ([`WorkerBody`]) run with a [`WorkerContext`]
//! (the configuration, the database, the bus, its counters and the token that tells it to stop)
//! until that token is cancelled, when it finishes the batch in hand and returns. A worker needs no
//! API: the API's lifespan embeds some (`startup`), `svc worker` runs one as its own process under
//! the runner in `svc-workers`, and `svc ingest-replay` runs the ingester once; each builds the
//! context with [`WorkerContext::new`]. Wherever it runs, a worker is attended the same way
//! ([`Attendance`]): a heartbeat from its first moment and a listener for its stop intents. Which
//! workers this project runs, and their facts, is written once in the [`roster`] (beneath `bus`,
//! whose registry reads it; re-exported here, where workers have always found it); which of them
//! `svc api` embeds under a configuration, in [`embedded_in_api`].

mod embedding;

pub use crate::roster::{self, KNOWN_WORKERS, KnownWorker, WORKERS};
pub use embedding::embedded_in_api;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bus::{self, Bus, ControlRequest, Counters, Fault};
use crate::config::Config;
use crate::db::Db;

/// What a worker receives: what it needs to work, and when to stop.
#[derive(Clone)]
pub struct WorkerContext {
    pub config: Arc<Config>,
    pub db: Db,
    pub bus: Bus,
    /// Reported in the worker's heartbeat when it runs as its own process.
    pub counters: Counters,
    /// Set while the worker cannot do its work (reported in its heartbeat and by `/health`).
    pub fault: Fault,
    pub cancel: CancellationToken,
}

impl WorkerContext {
    /// A context whose counters start empty and with no fault; clone them to read them from outside.
    pub fn new(config: Arc<Config>, db: Db, bus: Bus, cancel: CancellationToken) -> WorkerContext {
        WorkerContext { config, db, bus, counters: Counters::default(), fault: Fault::default(), cancel }
    }
}

type WorkerFuture = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// A worker's work, run until its context's token is cancelled (then it finishes the batch in hand
/// and returns). The API runs some in-process (startup step 8; the `svc api` command decides
/// which), and `svc worker` runs one as its own process under the runner.
pub struct WorkerBody {
    pub name: &'static str,
    pub run: Box<dyn FnOnce(WorkerContext) -> WorkerFuture + Send>,
}

impl WorkerBody {
    pub fn new<F, Fut>(name: &'static str, run: F) -> Self
    where
        F: FnOnce(WorkerContext) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        WorkerBody { name, run: Box::new(move |ctx| Box::pin(run(ctx))) }
    }
}

/// What every running worker has beside its body, embedded in the API or in a process of its own:
/// its heartbeat on `system.<name>.health` (counters and fault from its context) from the start,
/// and a listener that turns a `stop` intent on `system.<name>.control` into the cancellation of
/// its context, which stops only this worker. Begun before the body runs and ended after it
/// returns, so the worker stays visible while it finishes its batch:
///
/// ```ignore
/// let attendance = Attendance::begin(body.name, &ctx).await;
/// let result = (body.run)(ctx).await;
/// attendance.end().await;
/// ```
#[derive(Debug)]
pub struct Attendance {
    done: CancellationToken,
    tasks: TaskTracker,
}

impl Attendance {
    /// Starts the heartbeat and, once the bus has the subscription (bounded), the stop listener.
    pub async fn begin(name: &'static str, ctx: &WorkerContext) -> Attendance {
        let (done, tasks) = (CancellationToken::new(), TaskTracker::new());
        match bus::control::listen(&ctx.bus, name).await {
            Ok(Some(requests)) => {
                tasks.spawn(obey_stop_intents(requests, name, ctx.cancel.clone(), done.clone()));
            }
            Ok(None) => {}
            Err(err) => tracing::error!(worker = name, error = %err, "No control listener"),
        }
        tasks.spawn(bus::heartbeat::run(
            ctx.bus.clone(),
            name.to_string(),
            ctx.config.bus.heartbeat_interval,
            ctx.counters.clone(),
            ctx.fault.clone(),
            done.clone(),
        ));
        tasks.close();
        Attendance { done, tasks }
    }

    /// Stops the heartbeat and the listener, once the body has returned.
    pub async fn end(self) {
        self.done.cancel();
        self.tasks.wait().await;
    }
}

/// Cancels `stop` when a `stop` intent arrives for `name`.
async fn obey_stop_intents(
    mut requests: async_nats::Subscriber,
    name: &'static str,
    stop: CancellationToken,
    done: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            () = done.cancelled() => return,
            message = requests.next() => message,
        };
        let Some(message) = message else { return };
        let _handling = bus::received(&message).entered();
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
