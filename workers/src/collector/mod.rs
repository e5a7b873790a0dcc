//! The collector worker: follows the stdout of every decky container of the fleet through the
//! engine API and appends the decoys' log lines to the ingest file (`SVC_INGEST_LOG_FILE`), where
//! the ingester picks them up. Containers are found from the engine's start events and a re-list
//! every `SVC_COLLECTOR_RECONCILE_S`; a container that stops is followed again when it restarts,
//! and one a redeploy recreates is a new container, followed from its first line.
//!
//! Exactly once across restarts: each container's position (`journal`) is written ahead of every
//! batch, and a follower resumes after it (DECNET replays each container's whole output on
//! re-attach). DECNET's filters apply: APP-NAMEs of system noise are dropped, and connection
//! events are kept at most once a window per (attacker, decky, service, event type).

mod filter;
mod journal;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use svc::fleet::FLEET_LABEL;
use svc::runtime::{ContainerEvent, Engine, Runtime};
use svc::worker::{WorkerBody, WorkerContext};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use filter::Filter;
use journal::{Journal, Position};

/// The worker's name.
pub const NAME: &str = "collector";
/// Lines written per batch at most, and how long a started batch waits for more.
const BATCH_LINES: usize = 2_000;
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// The pause before looking at the engine again after it failed.
const RETRY_PAUSE: Duration = Duration::from_secs(2);

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
    let writer = tokio::spawn(write_batches(ctx.clone(), journal, received, ingest, positions.clone()));
    discover(&ctx, &runtime, lines, &positions).await;
    // Every sender is gone once discovery returns: the writer drains what is left and stops.
    writer.await.context("the collector's writer panicked")?
}

/// Beyond two reconciles, how long the engine may go unanswered before the collector reads as stuck.
const PROGRESS_GRACE: Duration = Duration::from_secs(10);

/// Follows every container of the fleet until cancelled.
async fn discover(ctx: &WorkerContext, runtime: &Runtime, lines: mpsc::Sender<Line>, positions: &Positions) {
    let fleet = ctx.config.fleet.name.clone();
    let mut following: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut followers: JoinSet<String> = JoinSet::new();
    let mut reconcile = tokio::time::interval(ctx.config.collector.reconcile);
    loop {
        let mut events = runtime.events(FLEET_LABEL, &fleet);
        loop {
            tokio::select! {
                _ = ctx.cancel.cancelled() => {
                    followers.shutdown().await;
                    return;
                }
                Some(done) = followers.join_next() => {
                    if let Ok(id) = done {
                        following.remove(&id);
                    }
                }
                _ = reconcile.tick() => match runtime.list(FLEET_LABEL, &fleet).await {
                    Ok(containers) => {
                        // Health from facts: the engine answered, the fleet's containers are followed.
                        ctx.fault.worked(ctx.config.collector.reconcile * 2 + PROGRESS_GRACE);
                        for container in containers.into_iter().filter(|c| c.is_running()) {
                            follow(ctx, runtime, &lines, positions, &mut following, &mut followers, container.id);
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "Collector: cannot list the fleet's containers"),
                },
                event = events.next() => match event {
                    Some(Ok(ContainerEvent::Started { id })) => {
                        follow(ctx, runtime, &lines, positions, &mut following, &mut followers, id);
                    }
                    Some(Ok(ContainerEvent::Stopped { .. })) => {}
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
                followers.shutdown().await;
                return;
            }
            _ = tokio::time::sleep(RETRY_PAUSE) => reconcile.reset_immediately(),
        }
    }
}

fn follow(
    ctx: &WorkerContext,
    runtime: &Runtime,
    lines: &mpsc::Sender<Line>,
    positions: &Positions,
    following: &mut HashMap<String, tokio::task::AbortHandle>,
    followers: &mut JoinSet<String>,
    id: String,
) {
    if id.is_empty() || following.contains_key(&id) {
        return;
    }
    tracing::info!(container = %id, "Collector: following a container");
    let since = positions.lock().expect("positions lock").get(&id).map_or(0, Position::since_secs);
    let (runtime, lines, cancel, counters) = (runtime.clone(), lines.clone(), ctx.cancel.clone(), ctx.counters.clone());
    let handle = followers.spawn({
        let id = id.clone();
        async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = read_container(&runtime, &id, since, &lines, &counters) => {}
            }
            id
        }
    });
    following.insert(id, handle);
}

/// Reads one container's output from the second its position is in, until it stops; the writer
/// skips the lines of that second taken before.
async fn read_container(
    runtime: &Runtime,
    id: &str,
    since: i64,
    lines: &mpsc::Sender<Line>,
    counters: &svc::bus::Counters,
) {
    let mut stream = runtime.stdout(id, since, true);
    let mut last = Position::default();
    while let Some(frame) = stream.next().await {
        let frame: Bytes = match frame {
            Ok(frame) => frame,
            Err(err) => {
                tracing::warn!(container = %id, error = %err, "Collector: a container's output stream failed");
                return;
            }
        };
        for raw in frame.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let text = String::from_utf8_lossy(raw);
            let Some((ts_nanos, text)) = stamped(&text) else {
                counters.add("lines_unstamped", 1);
                continue;
            };
            let index = if last.ts_nanos == ts_nanos { last.at_ts } else { 0 };
            last.advance(ts_nanos);
            let line = Line { container: id.to_string(), ts_nanos, index, text: text.trim_end().to_string() };
            if lines.send(line).await.is_err() {
                return;
            }
        }
    }
}

/// Splits `2026-11-23T23:50:44.123456789Z text` into the stamp (nanoseconds) and the text.
fn stamped(line: &str) -> Option<(i128, &str)> {
    let (stamp, text) = line.split_once(' ')?;
    let at = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    Some((i128::from(at.timestamp()) * 1_000_000_000 + i128::from(at.timestamp_subsec_nanos()), text))
}

/// Takes lines in batches, skips what the journal says was written, filters, and commits each
/// batch through the journal.
async fn write_batches(
    ctx: WorkerContext,
    mut journal: Journal,
    mut received: mpsc::Receiver<Line>,
    ingest: PathBuf,
    positions: Positions,
) -> anyhow::Result<()> {
    let mut filter = Filter::new(&ctx.config.collector);
    while let Some(first) = received.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + BATCH_WAIT;
        while batch.len() < BATCH_LINES {
            match tokio::time::timeout_at(deadline, received.recv()).await {
                Ok(Some(line)) => batch.push(line),
                _ => break,
            }
        }
        let mut bytes = Vec::new();
        let mut reached: BTreeMap<String, Position> = BTreeMap::new();
        let (mut written, mut skipped) = (0u64, 0u64);
        for line in batch {
            let at = reached.get(&line.container).copied().unwrap_or_else(|| journal.position(&line.container));
            if at.covers(line.ts_nanos, line.index) {
                skipped += 1;
                continue;
            }
            // A dropped line is passed too: its position moves on all the same.
            reached.insert(line.container, Position { ts_nanos: line.ts_nanos, at_ts: line.index + 1 });
            if filter.keep(&line.text) {
                bytes.extend_from_slice(line.text.as_bytes());
                bytes.push(b'\n');
                written += 1;
            }
        }
        let committed = {
            let reached = reached.clone();
            tokio::task::spawn_blocking(move || {
                let result = journal.commit(&bytes, &reached);
                (journal, result)
            })
        };
        let (returned, result) = committed.await.context("the collector's journal write panicked")?;
        journal = returned;
        if let Err(err) = result {
            // Nothing more can be written safely; the runner restarts the worker.
            return Err(anyhow::Error::new(err).context(format!("writing to {}", ingest.display())));
        }
        positions.lock().expect("positions lock").extend(reached);
        ctx.counters.add("lines_written", written);
        ctx.counters.add("lines_repeated_skipped", skipped);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_stamps_split_from_the_line() {
        let (ts, text) = stamped("2026-11-23T23:50:44Z <13>1 - d ssh - - hi").unwrap();
        assert_eq!(ts, 1_795_477_844_000_000_000);
        assert_eq!(text, "<13>1 - d ssh - - hi");
        let (ts, _) = stamped("2026-11-23T23:50:44.000000123Z x").unwrap();
        assert_eq!(ts, 1_795_477_844_000_000_123);
        assert!(stamped("no stamp here").is_none());
    }
}
