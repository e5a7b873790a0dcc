//! `svc ingest-replay FILE`: one pass of the ingest worker over an existing file.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use svc::bus::Bus;
use svc::config::Config;
use svc::worker::WorkerContext;

pub async fn replay(file: &Path, config: Config) -> anyhow::Result<()> {
    let cancel = svc::signals::stop_on_signal()?;
    let db = svc::db::connect(&config.db).context("opening the database")?;
    db.migrate().await.context("applying migrations")?;
    // Streams on the API are told about each batch when a bus is configured.
    let bus = Bus::connect(config.bus.nats_url.as_deref(), "svc-ingest-replay").await;
    let ctx = WorkerContext::new(Arc::new(config), db.clone(), bus.clone(), cancel);
    let result = svc_workers::ingest::replay(ctx, file).await;
    bus.close().await;
    db.close().await;
    let tally = result?;
    println!(
        "{}: stored {} lines; skipped {} malformed and {} over {} bytes",
        file.display(),
        tally.stored,
        tally.malformed,
        tally.oversized,
        svc_workers::ingest::MAX_LINE_BYTES
    );
    Ok(())
}
