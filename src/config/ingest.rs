//! `IngestConfig`: what the ingest worker reads: the log file it tails, how it batches the lines into
//! transactions, what it sheds when the disk runs low, and how long the rows it stores are kept (its
//! lease on the file lasts as long as every worker's, `WorkerConfig::lease`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// `SVC_INGEST_LOG_FILE`; `None` when set to the empty
    /// string: ingestion is then off.
    pub log_file: Option<PathBuf>,
    /// Lines stored per transaction at most (`SVC_INGEST_BATCH_SIZE`).
    pub batch_size: usize,
    /// How long a started batch may wait for more lines while the file keeps growing
    /// (`SVC_INGEST_BATCH_MAX_WAIT_MS`).
    pub batch_wait: Duration,
    /// `SVC_DISK_MIN_FREE_MB`, default 512 (0: off): below this much free space on the ingest
    /// file's or the database's filesystem, the collector and the ingester shed `low_value_events`.
    pub disk_min_free_bytes: u64,
    /// `SVC_DISK_LOW_VALUE_EVENTS`: the event types shed first (connections, requests);
    /// credentials, commands and files are never among them by default.
    pub low_value_events: Vec<String>,
    /// `SVC_RETENTION_DAYS`, default 0 (off): log rows older than this many days are pruned.
    pub retention_days: u64,
    /// `SVC_RETENTION_MAX_ROWS`, default 0 (off): the oldest log rows beyond this many are pruned.
    pub retention_max_rows: u64,
    /// `SVC_RETENTION_INTERVAL_S`, default 60: how often the pruner looks for rows to prune.
    pub retention_interval: Duration,
}

/// Connections and requests: what a flood is made of, and what says least of an attacker.
const LOW_VALUE_EVENTS: &str =
    "connect,disconnect,connection,accept,close,request,bad_request,tls_error,tls_client_hello,tls_session";

impl IngestConfig {
    pub(super) fn read(env: &mut Env, data_dir: &Path) -> IngestConfig {
        let log_file = env.get_or("SVC_INGEST_LOG_FILE", &data_dir.join("ingest.log").to_string_lossy());
        let log_file = (!log_file.trim().is_empty()).then(|| PathBuf::from(log_file));
        IngestConfig {
            log_file,
            batch_size: env.count("SVC_INGEST_BATCH_SIZE", 20_000, 1..=100_000),
            batch_wait: env.millis("SVC_INGEST_BATCH_MAX_WAIT_MS", 250, 1..=60_000),
            disk_min_free_bytes: env.count("SVC_DISK_MIN_FREE_MB", 512, 0..=16 << 20) as u64 * (1 << 20),
            low_value_events: super::fleet::list(env.get_or("SVC_DISK_LOW_VALUE_EVENTS", LOW_VALUE_EVENTS)),
            retention_days: env.count("SVC_RETENTION_DAYS", 0, 0..=36_500) as u64,
            retention_max_rows: env.count("SVC_RETENTION_MAX_ROWS", 0, 0..=1_000_000_000_000) as u64,
            retention_interval: env.seconds("SVC_RETENTION_INTERVAL_S", 60.0),
        }
    }
}
