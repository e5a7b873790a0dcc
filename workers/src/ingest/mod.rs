//! The ingest worker: tails `SVC_INGEST_LOG_FILE` and stores its RFC 5424 lines, with the bounties
//! and credentials they yield. Each batch and the file position after it are stored in one
//! transaction, so a crash or restart at any moment neither loses nor repeats a line. One ingester
//! per file works at a time: it holds a lease in the database, and every commit checks both the
//! lease and that the stored position is still the one it read from. After each commit it tells
//! the bus: `batch_committed` (wakes the log streams and the profiler) and `credential.captured` for
//! every credential stored for the first time.

pub mod derive;
pub(crate) mod follow;
mod useragent;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use serde_json::json;
use svc::bus::logs::{self as log_notices, BatchCommitted};
use svc::bus::{Event, topics};
use svc::db::{DbError, IngestBatch, IngestCursor, LogTrace, NewCredential, NewLog};
use svc::disk_watermark::DiskWatermark;
use svc::roster::counters::ingest as counter;
use svc::worker::{WorkerBody, WorkerContext};

use follow::{Follower, Line, Progress};

use crate::lease::{Held, Lease};

/// Longer lines are skipped and counted: no legitimate log line comes near it.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// How often a caught-up ingester looks at the file again.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// The pause before retrying after the database failed.
const RETRY_PAUSE: Duration = Duration::from_secs(2);
/// A step (a commit, a look at the file or the lease) ends within this, or health says ingestion
/// is not making progress: a commit stuck on a hung database included.
const PROGRESS_WITHIN: Duration = Duration::from_secs(10);

/// The worker the API always embeds and `svc worker ingest` runs.
pub fn body() -> WorkerBody {
    WorkerBody::new("ingest", run)
}

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let Some(path) = ctx.config.ingest.log_file.clone() else {
        tracing::warn!("SVC_INGEST_LOG_FILE is empty: log ingestion is off");
        ctx.cancel.cancelled().await;
        return Ok(());
    };
    tracing::info!(path = %path.display(), "Ingesting log file");
    let mut ingester = Ingester::new(ctx, &path);
    ingester.follow().await;
    Ok(())
}

/// Ingests `path` once, to its end (a last line without a newline included), and returns what it
/// read. How an operator back-fills history. The file's position is kept like a followed file's,
/// so replaying it again stores only what was appended since.
pub async fn replay(ctx: WorkerContext, path: &Path) -> anyhow::Result<Tally> {
    anyhow::ensure!(path.is_file(), "{} is not a file", path.display());
    let mut ingester = Ingester::new(ctx, path);
    let mut total = Tally::default();
    loop {
        // Renewed as it goes: a long replay outlives one lease.
        if !ingester.hold_lease().await? {
            anyhow::bail!(
                "another ingester is reading {} (its lease lasts {} s after it stops)",
                path.display(),
                ingester.ctx.config.worker.lease.as_secs_f64()
            );
        }
        let (pending, progress) = ingester.collect(true).await?;
        let tally = pending.tally;
        let more = progress == Progress::More && !ingester.ctx.cancel.is_cancelled();
        if ingester.commit(pending, more, true).await? {
            total.add(&tally);
        }
        if !more {
            break;
        }
    }
    ingester.release().await;
    Ok(total)
}

/// Lines read, by what became of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub stored: u64,
    /// Not RFC 5424 lines (or not text at all).
    pub malformed: u64,
    /// Over [`MAX_LINE_BYTES`].
    pub oversized: u64,
    /// Low-value events shed while the disk was below the watermark.
    pub shed: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.stored += other.stored;
        self.malformed += other.malformed;
        self.oversized += other.oversized;
        self.shed += other.shed;
    }

    pub(crate) fn lines(&self) -> u64 {
        self.stored + self.malformed + self.oversized + self.shed
    }
}

/// A batch being read (here, or by the swarm's log listener from a host's forwarder).
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) batch: IngestBatch,
    pub(crate) tally: Tally,
    /// The start of the first malformed line, for the log.
    pub(crate) sample: Option<String>,
    first_line_at: Option<Instant>,
    /// Set while the disk is below the watermark: its low-value events are not stored.
    shedding: Option<DiskWatermark>,
}

impl Pending {
    pub(crate) fn add(&mut self, line: Line<'_>, now: chrono::DateTime<Utc>) {
        self.first_line_at.get_or_insert_with(Instant::now);
        let bytes = match line {
            Line::Oversized(_) => {
                self.tally.oversized += 1;
                return;
            }
            Line::Text(bytes) => bytes,
        };
        let text = String::from_utf8_lossy(bytes);
        if text.trim().is_empty() {
            return;
        }
        let parsed = match svc::logline::parse(&text) {
            Ok(parsed) => parsed,
            Err(_) => {
                self.tally.malformed += 1;
                self.sample.get_or_insert_with(|| text.chars().take(120).flat_map(char::escape_debug).collect());
                return;
            }
        };
        if self.shedding.as_ref().is_some_and(|watermark| watermark.is_low_value(&parsed.event_type)) {
            self.tally.shed += 1;
            return;
        }
        // A line the collector carried a trace in: its row stores the trace, its raw line does not.
        let trace = svc::logline::trace_context(&text).map(|carried| {
            let (trace_id, span_id) =
                svc::traces::line_stored(&carried, &parsed.decky, &parsed.service, &parsed.event_type);
            LogTrace { trace_id, span_id }
        });
        let raw_line = match trace {
            Some(_) => svc::logline::without_trace_context(&text).into_owned(),
            None => text.into_owned(),
        };
        let timestamp = parsed.timestamp.unwrap_or(now);
        let derived = derive::derive(&parsed, timestamp);
        self.batch.bounties.extend(derived.bounties);
        self.batch.credentials.extend(derived.credential);
        self.batch.logs.push(NewLog {
            timestamp,
            fields: parsed.fields_json(),
            decky: parsed.decky,
            service: parsed.service,
            event_type: parsed.event_type,
            attacker_ip: parsed.attacker_ip,
            msg: parsed.msg,
            raw_line,
            trace,
        });
        self.tally.stored += 1;
    }
}

/// `credential.captured`, type `captured`, in DECNET's shape: which secret (its hash, never the
/// secret), of which kind, from whom, where.
fn captured(credential: &NewCredential) -> Event {
    let payload = json!({
        "secret_sha256": credential.secret_sha256,
        "secret_kind": credential.secret_kind,
        "attacker_ip": credential.attacker_ip,
        "decky": credential.decky,
        "service": credential.service,
    });
    Event::new(topics::CREDENTIAL_CAPTURED, "captured", payload)
}

/// Reads up to a batch from `follower` (opened): until it is full, or, once the file is caught up,
/// until its first line has waited the batch time (at once with `to_end`).
async fn read_batch(
    follower: &mut Option<Follower>,
    ctx: &WorkerContext,
    to_end: bool,
) -> anyhow::Result<(Pending, Progress)> {
    let (size, wait) = (ctx.config.ingest.batch_size, ctx.config.ingest.batch_wait);
    let watermark = ctx.config.disk_watermark();
    let shedding = watermark.low().map(|low| {
        tracing::debug!(detail = %watermark.detail(&low), "Ingest: disk low, shedding");
        watermark
    });
    let mut pending = Pending { shedding, ..Pending::default() };
    loop {
        let room = size - pending.tally.lines() as usize;
        let mut reader = follower.take().expect("an open follower");
        let (reader, pending_back, progress) = tokio::task::spawn_blocking(move || {
            let now = Utc::now();
            let progress = reader.read(room, to_end, &mut |line| pending.add(line, now));
            (reader, pending, progress)
        })
        .await
        .context("the reader panicked")?;
        let path = reader.path().display().to_string();
        *follower = Some(reader);
        pending = pending_back;
        let progress = progress.with_context(|| format!("reading {path}"))?;
        let waited = pending.first_line_at.is_none_or(|at| at.elapsed() >= wait);
        if progress == Progress::More || to_end || waited || ctx.cancel.is_cancelled() {
            return Ok((pending, progress));
        }
        tokio::time::sleep(IDLE_POLL).await;
    }
}

/// Who stores a batch: the component its bus notice names, and the source and holder of the lease
/// it is stored under.
pub(crate) struct Writer<'a> {
    pub(crate) component: &'static str,
    pub(crate) source: &'a str,
    pub(crate) holder: &'a str,
}

/// Stores `batch` (its cursor set) in one transaction and tells what it stored: counters, log and
/// bus. `Ok(false)`, nothing stored, when the lease or the stored position moved meanwhile.
pub(crate) async fn store(
    ctx: &WorkerContext,
    writer: &Writer<'_>,
    expected: Option<&IngestCursor>,
    batch: &IngestBatch,
    tally: &Tally,
    sample: Option<&str>,
) -> Result<bool, DbError> {
    let committed = match ctx.db.commit_ingest(writer.source, writer.holder, expected, batch).await {
        Ok(committed) => committed,
        Err(DbError::Conflict) => return Ok(false),
        Err(err) => return Err(err),
    };
    let counters = &ctx.counters;
    counters.add(counter::LINES_STORED, committed.logs);
    counters.add(counter::LINES_MALFORMED, tally.malformed);
    counters.add(counter::LINES_OVERSIZED, tally.oversized);
    counters.add(counter::LINES_SHED_DISK_LOW, tally.shed);
    counters.add(counter::BOUNTIES_NEW, committed.new_bounties);
    counters.add(counter::CREDENTIALS_NEW, committed.new_credentials);
    counters.add(counter::BATCHES, 1);
    if tally.malformed > 0 {
        tracing::warn!(count = tally.malformed, first = sample.unwrap_or(""), "Skipped lines that are not RFC 5424");
    }
    if tally.oversized > 0 {
        tracing::warn!(count = tally.oversized, limit = MAX_LINE_BYTES, "Skipped lines over the length limit");
    }
    tracing::debug!(
        lines = committed.logs,
        bounties = committed.new_bounties,
        credentials = committed.new_credentials,
        last_log_id = committed.last_log_id,
        "Stored a batch"
    );
    if committed.logs > 0 {
        let notice = BatchCommitted {
            component: writer.component.into(),
            flushed: committed.logs,
            position: batch.cursor.as_ref().map_or(0, |c| c.offset),
            last_log_id: committed.last_log_id,
        };
        // A hint for the streams, which poll without it.
        if let Err(err) = log_notices::publish(&ctx.bus, &notice).await {
            tracing::debug!(error = %err, "Batch notice not published");
        }
    }
    // Best-effort like the notice: the credentials are stored whatever the bus does.
    for &i in &committed.captured {
        if let Err(err) = ctx.bus.publish(&captured(&batch.credentials[i])).await {
            tracing::debug!(error = %err, "Credential event not published");
            break;
        }
    }
    Ok(true)
}

struct Ingester {
    ctx: WorkerContext,
    path: PathBuf,
    /// Keyed by the file's absolute path, like the cursor.
    lease: Lease,
    follower: Option<Follower>,
    /// The stored cursor, as of our last read or commit.
    committed: Option<IngestCursor>,
    /// The batch read while the last one was stored, ending at the follower's position.
    read_ahead: Option<(Pending, Progress)>,
}

impl Ingester {
    fn new(ctx: WorkerContext, path: &Path) -> Ingester {
        let source = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string();
        let lease = Lease::new(source, ctx.config.worker.lease);
        Ingester { ctx, path: path.to_path_buf(), lease, follower: None, committed: None, read_ahead: None }
    }

    /// Follows the file until cancelled, then stores what it has read and gives the lease up.
    async fn follow(&mut self) {
        while !self.ctx.cancel.is_cancelled() {
            let pause = match self.step().await {
                Ok(pause) => {
                    if self.ctx.fault.worked(PROGRESS_WITHIN + pause.unwrap_or_default()).is_some() {
                        tracing::info!(path = %self.path.display(), "Ingestion works again");
                    }
                    pause
                }
                Err(err) => {
                    // The lines stay in the file: reading resumes at the stored position once the
                    // database takes them again.
                    let unavailable =
                        err.chain().any(|c| c.downcast_ref::<DbError>().is_some_and(DbError::is_unavailable));
                    self.ctx.fault.set(if unavailable {
                        "cannot store: database unavailable"
                    } else {
                        "ingestion failing"
                    });
                    tracing::error!(path = %self.path.display(), error = %format!("{err:#}"), "Ingestion failed; paused, retrying");
                    self.forget_position();
                    Some(RETRY_PAUSE)
                }
            };
            if let Some(pause) = pause {
                tokio::select! {
                    () = self.ctx.cancel.cancelled() => {}
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
        // What was read while the last batch was stored is stored too before the lease goes.
        if let Some((pending, _)) = self.read_ahead.take()
            && pending.tally.lines() > 0
            && let Err(err) = self.commit(pending, false, false).await
        {
            tracing::warn!(path = %self.path.display(), error = %format!("{err:#}"), "The last lines read were not stored; they are read again at the next start");
        }
        self.release().await;
    }

    /// One batch, or a look at the lease; returns how long to wait before the next step.
    async fn step(&mut self) -> anyhow::Result<Option<Duration>> {
        if !self.hold_lease().await? {
            return Ok(Some(self.ctx.config.worker.lease / 3));
        }
        let (pending, _) = self.collect(false).await?;
        let moved = self.follower.as_ref().and_then(Follower::cursor) != self.committed;
        if pending.tally.lines() == 0 && !moved {
            return Ok(Some(IDLE_POLL));
        }
        self.commit(pending, true, false).await?;
        Ok(None)
    }

    /// The batch read while the last one was stored, or else reads up to a batch ([`read_batch`]).
    async fn collect(&mut self, to_end: bool) -> anyhow::Result<(Pending, Progress)> {
        if let Some(read) = self.read_ahead.take() {
            return Ok(read);
        }
        if self.follower.is_none() {
            let cursor = self.ctx.db.ingest_cursor(self.lease.source()).await.context("reading the ingest cursor")?;
            self.follower = Some(Follower::new(self.path.clone(), cursor.clone(), MAX_LINE_BYTES));
            self.committed = cursor;
        }
        read_batch(&mut self.follower, &self.ctx, to_end).await
    }

    /// Stores the batch and the position after it in one transaction; false when nothing was stored
    /// because the lease or the stored position moved meanwhile (reading then starts again from the
    /// stored position). With `read_on`, the next batch is read while this one is stored, one thread
    /// parsing as the database writes, and kept for the next step once this one is stored.
    async fn commit(&mut self, pending: Pending, read_on: bool, to_end: bool) -> anyhow::Result<bool> {
        let Pending { mut batch, tally, sample, .. } = pending;
        batch.cursor = self.follower.as_ref().and_then(Follower::cursor);
        if batch.cursor.is_none() {
            return Ok(false);
        }
        let writer = Writer { component: "ingester", source: self.lease.source(), holder: self.lease.holder() };
        let store = store(&self.ctx, &writer, self.committed.as_ref(), &batch, &tally, sample.as_deref());
        let (stored, read) = if read_on {
            let (stored, read) = tokio::join!(store, read_batch(&mut self.follower, &self.ctx, to_end));
            (stored, Some(read))
        } else {
            (store.await, None)
        };
        if !stored.context("storing a batch")? {
            tracing::warn!(path = %self.path.display(), "The lease or the stored position moved; re-reading from the stored position");
            self.forget_position();
            self.lease.recheck();
            return Ok(false);
        }
        self.committed = batch.cursor;
        self.read_ahead = read.transpose()?;
        Ok(true)
    }

    /// Takes or renews the lease when due; false while another ingester holds it.
    async fn hold_lease(&mut self) -> anyhow::Result<bool> {
        let path = self.path.display();
        let held = self.lease.hold(&self.ctx.db).await?;
        match held {
            Held::Taken { .. } => tracing::info!(%path, "Holding the ingest lease"),
            Held::Lost => tracing::warn!(%path, "Lost the ingest lease to another ingester"),
            Held::StandingBy => tracing::info!(%path, "Another ingester holds the lease on this file; standing by"),
            Held::Kept | Held::StillStandingBy => {}
        }
        if held == Held::Lost {
            self.forget_position();
        }
        Ok(held.is_held())
    }

    /// Reading starts again from the stored position.
    fn forget_position(&mut self) {
        self.follower = None;
        self.read_ahead = None;
        self.committed = None;
    }

    async fn release(&mut self) {
        self.lease.release(&self.ctx.db).await;
    }
}
