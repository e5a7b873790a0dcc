//! What a worker is: a named body of background work ([`WorkerBody`]) run with a [`WorkerContext`]
//! (the configuration, the database, the bus, its counters and the token that tells it to stop)
//! until that token is cancelled, when it finishes the batch in hand and returns. A worker needs no
//! API: the API's lifespan embeds some (`startup`), `svc worker` runs one as its own process under
//! the runner in `svc-workers`, and `svc ingest-replay` runs the ingester once; each builds the
//! context with [`WorkerContext::new`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, Counters, Fault};
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
