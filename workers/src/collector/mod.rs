//! The collector worker: follows the stdout of every decky container of the fleet through the
//! engine API and appends the decoys' log lines to the ingest file (`SVC_INGEST_LOG_FILE`), where
//! the ingester picks them up. Containers are found from the engine's start events and a re-list
//! every `SVC_COLLECTOR_RECONCILE_S`; a container that starts again is followed anew at once (its
//! old stream may take long to end), and one a redeploy recreates is a new container, followed
//! from its first line. Lines the engine split into pieces are joined again (`pieces`).
//!
//! Exactly once across restarts: each container's position (`journal`) is written ahead of every
//! batch, and a follower resumes after it (DECNET replays each container's whole output on
//! re-attach). A batch that cannot be written (the disk is full) is kept and tried again, with
//! health failing meanwhile; the followers wait, and the lines wait in the engine. DECNET's
//! filters apply: APP-NAMEs of system noise are dropped, and connection events are kept at most
//! once a window per (attacker, decky, service, event type).

mod filter;
mod flood;
mod journal;
mod pieces;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use svc::fleet::FLEET_LABEL;
use svc::roster::counters::collector as counter;
use svc::runtime::{ContainerEvent, Engine, Runtime};
use svc::worker::{WorkerBody, WorkerContext};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use filter::Filter;
use flood::FloodCap;
use journal::{Journal, Position};
use pieces::LineJoiner;

/// The worker's name.
pub const NAME: &str = "collector";
/// Lines written per batch at most, and how long a started batch waits for more.
const BATCH_LINES: usize = 2_000;
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// How often ended flood windows are summarised while no line comes.
const SUMMARY_TICK: Duration = Duration::from_secs(1);
/// The pause before looking at the engine again after it failed, or writing again after a write
/// failed.
const RETRY_PAUSE: Duration = Duration::from_secs(2);
/// The longest line kept whole: the ingester's bound, past which it would skip the line.
const MAX_LINE_BYTES: usize = crate::ingest::MAX_LINE_BYTES;

/// The worker `svc worker collector` runs, and `svc api` embeds with `SVC_EMBED_COLLECTOR`.
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, run)
}

/// One line of a container's output with its engine timestamp, and how many lines of that
/// container carried the same timestamp before it.
struct Line {
    container: String,
    ts_nanos: i128,
    index: u64,
    text: String,
}

/// Each container's committed position, shared so a follower starts where the journal stands.
type Positions = Arc<Mutex<HashMap<String, Position>>>;

/// Set while the writer cannot write: discovery then does not report the collector's work as
/// done, which would clear the writer's fault from health.
type WriteFailing = Arc<AtomicBool>;

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let Some(ingest) = ctx.config.ingest.log_file.clone() else {
        tracing::warn!("SVC_INGEST_LOG_FILE is empty: the collector has nowhere to write and does not start");
        return Ok(());
    };
    let runtime: Runtime = Arc::new(Engine::new(&ctx.config.fleet.docker_host));
    let state_file = ctx.config.collector.state_file.clone();
    if let Some(dir) = state_file.parent().filter(|d| !d.as_os_str().is_empty()) {
        svc::file_modes::create_private_dirs(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let journal = Journal::open(&state_file, &ingest).with_context(|| format!("opening {}", state_file.display()))?;
    tracing::info!(ingest = %ingest.display(), fleet = %ctx.config.fleet.name, "Collector started");
    let positions: Positions = Arc::new(Mutex::new(journal.positions()));
    let (lines, received) = mpsc::channel::<Line>(BATCH_LINES * 4);
    let write_failing = WriteFailing::default();
    let writer =
        tokio::spawn(write_batches(ctx.clone(), journal, received, ingest, positions.clone(), write_failing.clone()));
    discover(&ctx, &runtime, lines, &positions, &write_failing).await;
    // Every sender is gone once discovery returns: the writer drains what is left and stops.
    writer.await.context("the collector's writer panicked")?
}

/// Beyond two reconciles, how long the engine may go unanswered before the collector reads as stuck.
const PROGRESS_GRACE: Duration = Duration::from_secs(10);

/// Follows every container of the fleet until cancelled.
async fn discover(
    ctx: &WorkerContext,
    runtime: &Runtime,
    lines: mpsc::Sender<Line>,
    positions: &Positions,
    write_failing: &WriteFailing,
) {
    let fleet = ctx.config.fleet.name.clone();
    let mut followers = Followers::default();
    let mut reconcile = tokio::time::interval(ctx.config.collector.reconcile);
    loop {
        let mut events = runtime.events(FLEET_LABEL, &fleet, None);
        loop {
            tokio::select! {
                _ = ctx.cancel.cancelled() => {
                    followers.tasks.shutdown().await;
                    return;
                }
                Some(done) = followers.tasks.join_next_with_id() => {
                    if let Ok((task, id)) = done {
                        followers.ended(task, &id);
                    }
                }
                _ = reconcile.tick() => match runtime.list(FLEET_LABEL, &fleet).await {
                    Ok(containers) => {
                        // Health from facts: the engine answered, the fleet's containers are followed
                        // (and, unless the writer says otherwise, their lines are written).
                        if !write_failing.load(Ordering::Relaxed) {
                            ctx.fault.worked(ctx.config.collector.reconcile * 2 + PROGRESS_GRACE);
                        }
                        for container in containers.into_iter().filter(|c| c.is_running()) {
                            followers.follow(ctx, runtime, &lines, positions, container.id, false);
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "Collector: cannot list the fleet's containers"),
                },
                event = events.next() => match event {
                    // A (re)started container is followed anew at once: the stream of its last
                    // run may not end for a long while, and would not show what it writes now.
                    Some(Ok(ContainerEvent::Started { id, .. })) => {
                        followers.follow(ctx, runtime, &lines, positions, id, true);
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "Collector: the engine's event stream failed");
                        break;
                    }
                    None => break,
                },
            }
        }
        // The event stream ended (engine restart): look again soon, then listen anew.
        tokio::select! {
            _ = ctx.cancel.cancelled() => {
                followers.tasks.shutdown().await;
                return;
            }
            _ = tokio::time::sleep(RETRY_PAUSE) => reconcile.reset_immediately(),
        }
    }
}

/// The task following each container, by container id.
#[derive(Default)]
struct Followers {
    following: HashMap<String, tokio::task::AbortHandle>,
    tasks: JoinSet<String>,
}

impl Followers {
    /// Follows container `id` unless it is followed already; `anew` replaces a follower it has.
    fn follow(
        &mut self,
        ctx: &WorkerContext,
        runtime: &Runtime,
        lines: &mpsc::Sender<Line>,
        positions: &Positions,
        id: String,
        anew: bool,
    ) {
        if id.is_empty() {
            return;
        }
        if let Some(old) = self.following.get(&id) {
            if !anew {
                return;
            }
            // What the old follower sent and the new one sends again is skipped by the writer:
            // the journal's position covers it.
            old.abort();
        }
        tracing::info!(container = %id, "Collector: following a container");
        let since = positions.lock().expect("positions lock").get(&id).map_or(0, Position::since_secs);
        let (runtime, lines, cancel, counters) =
            (runtime.clone(), lines.clone(), ctx.cancel.clone(), ctx.counters.clone());
        let handle = self.tasks.spawn({
            let id = id.clone();
            async move {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = read_container(&runtime, &id, since, &lines, &counters) => {}
                }
                id
            }
        });
        self.following.insert(id, handle);
    }

    /// The follower task `task` of container `id` ended; one that replaced it stays.
    fn ended(&mut self, task: tokio::task::Id, id: &str) {
        if self.following.get(id).is_some_and(|handle| handle.id() == task) {
            self.following.remove(id);
        }
    }
}

/// Reads one container's output from the second before its position's, until it stops; the
/// writer skips the lines taken before. The second before: a line split into pieces is stamped by
/// its first piece, which may be a second older than its last.
async fn read_container(
    runtime: &Runtime,
    id: &str,
    since: i64,
    lines: &mpsc::Sender<Line>,
    counters: &svc::bus::Counters,
) {
    let mut stream = runtime.stdout(id, (since - 1).max(0), true);
    let mut joiner = LineJoiner::new(MAX_LINE_BYTES);
    let mut last = Position::default();
    while let Some(frame) = stream.next().await {
        let frame: Bytes = match frame {
            Ok(frame) => frame,
            Err(err) => {
                tracing::warn!(container = %id, error = %err, "Collector: a container's output stream failed");
                return;
            }
        };
        let joined = joiner.push(&frame);
        counters.add(counter::LINES_UNSTAMPED, joined.unstamped);
        if joined.unstamped > 0 {
            // A piece the engine handed over without its stamp cannot be placed in a line.
            tracing::warn!(container = %id, pieces = joined.unstamped, "Collector: pieces of output without a stamp were dropped");
        }
        for line in joined.lines {
            if line.cut {
                counters.add(counter::LINES_CUT, 1);
                tracing::warn!(container = %id, limit = MAX_LINE_BYTES, "Collector: a line over the length limit was cut");
            }
            let index = if last.ts_nanos == line.ts_nanos { last.at_ts } else { 0 };
            last.advance(line.ts_nanos);
            let line = Line { container: id.to_string(), ts_nanos: line.ts_nanos, index, text: line.text };
            if lines.send(line).await.is_err() {
                return;
            }
        }
    }
}

/// Takes lines in batches, skips what the journal says was written, filters, and commits each
/// batch through the journal.
async fn write_batches(
    ctx: WorkerContext,
    mut journal: Journal,
    mut received: mpsc::Receiver<Line>,
    ingest: PathBuf,
    positions: Positions,
    write_failing: WriteFailing,
) -> anyhow::Result<()> {
    let mut filter = Filter::new(&ctx.config.collector);
    let config = &ctx.config.collector;
    let mut cap = FloodCap::new(config.flood_cap_per_s, config.flood_window);
    let watermark = ctx.config.disk_watermark();
    let mut low_disk = false;
    // Summaries of ended windows are written within a second even when no line comes.
    let mut summary_tick = tokio::time::interval(SUMMARY_TICK);
    let mut open = true;
    while open {
        let mut batch = Vec::new();
        tokio::select! {
            first = received.recv() => match first {
                Some(first) => batch.push(first),
                // Every follower is gone (stopping): what the windows counted is written now.
                None => open = false,
            },
            _ = summary_tick.tick() => {}
        }
        let deadline = tokio::time::Instant::now() + BATCH_WAIT;
        while !batch.is_empty() && batch.len() < BATCH_LINES {
            match tokio::time::timeout_at(deadline, received.recv()).await {
                Ok(Some(line)) => batch.push(line),
                _ => break,
            }
        }
        let low = watermark.low();
        if low.is_some() != low_disk {
            low_disk = low.is_some();
            match &low {
                Some(low) => tracing::warn!(detail = %watermark.detail(low), "Collector: disk low, shedding"),
                None => tracing::info!("Collector: disk space back above the watermark, shedding stopped"),
            }
        }
        let mut bytes = Vec::new();
        let mut reached: BTreeMap<String, Position> = BTreeMap::new();
        let (mut written, mut skipped, mut suppressed) = (0u64, 0u64, 0u64);
        for line in batch {
            let at = reached.get(&line.container).copied().unwrap_or_else(|| journal.position(&line.container));
            if at.covers(line.ts_nanos, line.index) {
                skipped += 1;
                continue;
            }
            // A dropped line is passed too: its position moves on all the same.
            reached.insert(line.container, Position { ts_nanos: line.ts_nanos, at_ts: line.index + 1 });
            let Some(parsed) = filter.keep(&line.text) else { continue };
            if !cap.admit(&parsed, line.ts_nanos, low_disk && watermark.is_low_value(&parsed.event_type)) {
                suppressed += 1;
                continue;
            }
            // With traces on, the line carries its trace on to the ingester.
            let traced = svc::traces::line_written().and_then(|tp| svc::logline::with_trace_context(&line.text, &tp));
            bytes.extend_from_slice(traced.as_deref().unwrap_or(&line.text).as_bytes());
            bytes.push(b'\n');
            written += 1;
        }
        let now = chrono::Utc::now().timestamp_nanos_opt().map_or(i128::MAX, i128::from);
        for summary in cap.due(now, !open) {
            bytes.extend_from_slice(summary.as_bytes());
            bytes.push(b'\n');
            written += 1;
        }
        if bytes.is_empty() && reached.is_empty() {
            continue;
        }
        // A batch that cannot be written is kept and tried again until it is: the followers wait
        // meanwhile (the channel is full), and their lines wait in the engine.
        loop {
            let committed = {
                let (reached, bytes) = (reached.clone(), bytes.clone());
                tokio::task::spawn_blocking(move || {
                    let result = journal.commit(&bytes, &reached);
                    (journal, result)
                })
            };
            let (returned, result) = committed.await.context("the collector's journal write panicked")?;
            journal = returned;
            match result {
                Ok(()) => break,
                Err(err) => {
                    write_failing.store(true, Ordering::Relaxed);
                    ctx.fault.set(if err.kind() == std::io::ErrorKind::StorageFull {
                        "cannot write the ingest file: no space left"
                    } else {
                        "cannot write the ingest file"
                    });
                    tracing::error!(path = %ingest.display(), error = %err, "Collector: writing failed; paused, retrying");
                    tokio::select! {
                        () = ctx.cancel.cancelled() => return Ok(()),
                        () = tokio::time::sleep(RETRY_PAUSE) => {}
                    }
                }
            }
        }
        if write_failing.swap(false, Ordering::Relaxed) {
            ctx.fault.worked(ctx.config.collector.reconcile * 2 + PROGRESS_GRACE);
            tracing::info!(path = %ingest.display(), "Collector: writing works again");
        }
        positions.lock().expect("positions lock").extend(reached);
        ctx.counters.add(counter::LINES_WRITTEN, written);
        ctx.counters.add(counter::LINES_REPEATED_SKIPPED, skipped);
        ctx.counters.add(counter::LINES_SUPPRESSED, suppressed);
        ctx.counters.add(counter::FLOOD_SOURCES_UNTRACKED, std::mem::take(&mut cap.untracked));
    }
    Ok(())
}
