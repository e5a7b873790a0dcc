//! The profiler worker: folds stored log rows into one profile per attacker address (counts,
//! services, deckies, commands, behaviour class, phases) and derives shell observations, and
//! stores observations other sensors publish on the bus. Profiles are accumulated in the database:
//! each batch's profiles, commands, observations and the log cursor after them are stored in one
//! transaction, so a restart at any moment neither loses nor repeats a row (DECNET starts empty
//! after a restart and overwrites its profiles with partial counts). One profiler works at a time:
//! it holds the lease `profiler`, and every commit checks both the lease and the cursor.

mod classify;
mod events;
pub mod fold;
mod intake;
pub mod shell;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use futures::StreamExt;
use svc::bus::logs::BatchCommitted;
use svc::bus::{Event, topics};
use svc::db::{AttackerEvidence, AttackerProfile, DbError, LogFilter, LogRecord, PROFILER_LEASE_SOURCE, ProfilerBatch};
use svc::roster::counters::profiler as counter;
use svc::worker::{WorkerBody, WorkerContext};

use crate::lease::{Held, Lease};

/// The worker's name.
pub const NAME: &str = "profiler";
/// Log rows folded per transaction at most.
pub const PAGE: u32 = 5_000;
/// The pause before retrying after the database failed.
const RETRY_PAUSE: Duration = Duration::from_secs(2);
/// Beyond two polls, how long a step (a page folded and committed) may take before the profiler
/// reads as stuck.
const PROGRESS_GRACE: Duration = Duration::from_secs(60);

/// The worker `svc worker profiler` runs, and `svc api` embeds with `SVC_EMBED_PROFILER`.
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, run)
}

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    // Only the lease holder stores what arrives on the bus: two profilers would store a record
    // without an id twice.
    let leading = Arc::new(AtomicBool::new(false));
    let profiler = Profiler::new(ctx.clone(), leading.clone());
    tokio::join!(profiler.run(), intake::run(ctx, leading));
    Ok(())
}

/// What one step did.
enum Step {
    /// A full page was folded: there may be more.
    More,
    CaughtUp,
    StandingBy,
}

/// What one committed batch held, for the log and the counters.
#[derive(Default)]
struct Tally {
    rows: usize,
    skipped: usize,
    profiles: usize,
    commands: usize,
    observations: usize,
}

struct Profiler {
    ctx: WorkerContext,
    lease: Lease,
    /// The stored cursor, as of our last read or commit; `None` to read it again.
    cursor: Option<i64>,
    caught_up: bool,
    leading: Arc<AtomicBool>,
}

impl Profiler {
    fn new(ctx: WorkerContext, leading: Arc<AtomicBool>) -> Profiler {
        let lease = Lease::new(PROFILER_LEASE_SOURCE, ctx.config.worker.lease);
        Profiler { ctx, lease, cursor: None, caught_up: false, leading }
    }

    /// Folds until cancelled, then gives the lease up.
    async fn run(mut self) {
        let mut notices = self.ctx.bus.subscribe(topics::SYSTEM_LOG.to_string()).await;
        tracing::info!("Profiling attackers from the stored logs");
        while !self.ctx.cancel.is_cancelled() {
            let step = self.step().await;
            if step.is_ok() {
                // Health from facts: a page folded, caught up or standing by are all its work.
                self.ctx.fault.worked(self.ctx.config.profiler.poll * 2 + PROGRESS_GRACE);
            }
            let wait = match step {
                Ok(Step::More) => continue,
                Ok(Step::CaughtUp) => self.ctx.config.profiler.poll,
                Ok(Step::StandingBy) => self.ctx.config.worker.lease / 3,
                Err(err) => {
                    tracing::error!(error = %format!("{err:#}"), "Profiling failed; retrying");
                    self.cursor = None;
                    RETRY_PAUSE
                }
            };
            tokio::select! {
                () = self.ctx.cancel.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
                () = next_batch_notice(&mut notices) => {}
            }
        }
        self.release().await;
    }

    /// One page, or a look at the lease.
    async fn step(&mut self) -> anyhow::Result<Step> {
        if !self.hold_lease().await? {
            return Ok(Step::StandingBy);
        }
        let db = &self.ctx.db;
        let cursor = match self.cursor {
            Some(cursor) => cursor,
            None => *self.cursor.insert(db.profiler_cursor().await.context("reading the profiler cursor")?),
        };
        let rows = db.logs_after(cursor, &LogFilter::default(), PAGE).await.context("reading log rows")?;
        let Some(last) = rows.last() else {
            self.note_caught_up(cursor);
            return Ok(Step::CaughtUp);
        };
        let started = Instant::now();
        let (batch, tally, first_sightings) = self.fold_page(&rows, last.id).await?;
        match db.commit_profiles(self.lease.holder(), cursor, &batch).await {
            Ok(()) => {}
            Err(DbError::Conflict) => {
                tracing::warn!("The lease or the profiler cursor moved; re-reading from the stored cursor");
                self.cursor = None;
                self.lease.recheck();
                return Ok(Step::More);
            }
            Err(err) => return Err(err).context("storing profiles"),
        }
        self.cursor = Some(batch.last_log_id);
        self.count(&tally);
        tracing::info!(
            rows = tally.rows,
            skipped = tally.skipped,
            profiles = tally.profiles,
            commands = tally.commands,
            observations = tally.observations,
            last_log_id = batch.last_log_id,
            took_ms = started.elapsed().as_millis() as u64,
            "Folded a batch"
        );
        let events = first_sightings
            .into_iter()
            .chain(batch.profiles.iter().map(events::scored))
            .chain(batch.observations.iter().filter_map(events::observation));
        publish(&self.ctx, events).await;
        if rows.len() < PAGE as usize {
            self.note_caught_up(batch.last_log_id);
            return Ok(Step::CaughtUp);
        }
        self.caught_up = false;
        Ok(Step::More)
    }

    /// Says so once each time the profiler catches up after falling behind.
    fn note_caught_up(&mut self, last_log_id: i64) {
        if !self.caught_up {
            tracing::info!(last_log_id, "Profiles are caught up with the logs");
            self.caught_up = true;
        }
    }

    /// Folds a page into a batch whose cursor is `last_id`, even when every row was skipped, and
    /// the `attacker.observed` events of the addresses it profiles for the first time.
    async fn fold_page(&self, rows: &[LogRecord], last_id: i64) -> anyhow::Result<(ProfilerBatch, Tally, Vec<Event>)> {
        // Keyed as the store tells addresses apart, each group named by its first row's address.
        let folds = self.ctx.db.backend() == "mysql";
        let key = |ip: &str| address_key(ip, folds);
        let mut by_ip: BTreeMap<String, (&str, Vec<&LogRecord>)> = BTreeMap::new();
        for row in rows.iter().filter(|row| fold::counts(row)) {
            by_ip.entry(key(&row.attacker_ip)).or_insert_with(|| (&row.attacker_ip, Vec::new())).1.push(row);
        }
        let mut tally = Tally { rows: rows.len(), ..Tally::default() };
        tally.skipped = rows.len() - by_ip.values().map(|(_, rows)| rows.len()).sum::<usize>();
        let mut batch = ProfilerBatch { last_log_id: last_id, ..ProfilerBatch::default() };
        let mut first_sightings = Vec::new();
        if by_ip.is_empty() {
            return Ok((batch, tally, first_sightings));
        }
        let ips: Vec<String> = by_ip.values().map(|(ip, _)| ip.to_string()).collect();
        let db = &self.ctx.db;
        let stored: HashMap<String, AttackerProfile> =
            db.attackers_by_ip(&ips).await.context("reading profiles")?.into_iter().map(|p| (key(&p.ip), p)).collect();
        let evidence: HashMap<String, AttackerEvidence> = db
            .attacker_evidence(&ips)
            .await
            .context("reading evidence")?
            .into_iter()
            .map(|e| (key(&e.ip), e))
            .collect();
        let now = Utc::now();
        let none = AttackerEvidence::default();
        for (key, (ip, rows)) in &by_ip {
            let evidence = evidence.get(key).unwrap_or(&none);
            let stored = stored.get(key);
            let Some(folded) = fold::fold(ip, stored, rows, evidence, now) else { continue };
            if stored.is_none()
                && let Some(first) = rows.iter().min_by_key(|row| (row.timestamp, row.id))
            {
                first_sightings.push(events::observed(&folded.profile, first));
            }
            let uuid = folded.profile.uuid;
            batch.commands.extend(folded.commands.into_iter().map(|command| (uuid, command)));
            batch.observations.extend(folded.observations);
            batch.profiles.push(folded.profile);
        }
        tally.profiles = batch.profiles.len();
        tally.commands = batch.commands.len();
        tally.observations = batch.observations.len();
        Ok((batch, tally, first_sightings))
    }

    fn count(&self, tally: &Tally) {
        let counters = &self.ctx.counters;
        counters.add(counter::ROWS_FOLDED, tally.rows as u64);
        counters.add(counter::ROWS_SKIPPED, tally.skipped as u64);
        counters.add(counter::PROFILES_UPDATED, tally.profiles as u64);
        counters.add(counter::COMMANDS_FOUND, tally.commands as u64);
        counters.add(counter::OBSERVATIONS_DERIVED, tally.observations as u64);
        counters.add(counter::BATCHES, 1);
    }

    /// Takes or renews the lease when due; false while another profiler holds it.
    async fn hold_lease(&mut self) -> anyhow::Result<bool> {
        let held = self.lease.hold(&self.ctx.db).await?;
        match held {
            Held::Taken { took_over } => {
                let verb = if took_over { "Took over" } else { "Holding" };
                tracing::info!("{verb} the profiler lease");
                // Another profiler may have moved the cursor meanwhile.
                self.cursor = None;
            }
            Held::Lost => tracing::warn!("Lost the profiler lease to another profiler"),
            Held::StandingBy => tracing::info!("Another profiler holds the lease; standing by"),
            Held::Kept | Held::StillStandingBy => {}
        }
        self.leading.store(held.is_held(), Ordering::Relaxed);
        Ok(held.is_held())
    }

    async fn release(&mut self) {
        self.leading.store(false, Ordering::Relaxed);
        self.lease.release(&self.ctx.db).await;
    }
}

/// How the store tells addresses apart, which the profiler must follow. sqlite compares them
/// exactly; MySQL (`folds`) compares the profile's `ip` case-insensitively, ignoring trailing
/// spaces, within its first 255 characters. A stored profile found under another spelling of its
/// address is the same attacker there; treating it as a new one would make every commit of the
/// page a conflict, and the profiler would never get past it.
fn address_key(ip: &str, folds: bool) -> String {
    if !folds {
        return ip.to_string();
    }
    let cut: String = ip.chars().take(255).collect();
    cut.trim_end().to_lowercase()
}

/// Waits for the ingester's next `batch_committed`; forever without a bus.
async fn next_batch_notice(notices: &mut Option<async_nats::Subscriber>) {
    while let Some(subscriber) = notices {
        match subscriber.next().await {
            Some(message) if BatchCommitted::from_message(&message.payload).is_some() => return,
            Some(_) => {}
            None => *notices = None,
        }
    }
    std::future::pending().await
}

/// Publishes what a stored batch changed. Best-effort: all of it is stored already, and a bus
/// that fails once is not tried again for the rest of the batch.
async fn publish(ctx: &WorkerContext, events: impl Iterator<Item = Event>) {
    if !ctx.bus.is_connected() {
        return;
    }
    for event in events {
        if let Err(err) = ctx.bus.publish(&event).await {
            tracing::debug!(error = %err, topic = event.topic, "Profiler event not published");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::address_key;

    #[test]
    fn address_keys_follow_the_store() {
        let key = |ip: &str| address_key(ip, true);
        assert_eq!(key("2001:DB8::1"), key("2001:db8::1"));
        assert_eq!(key("192.0.2.1  "), "192.0.2.1");
        let long = "x".repeat(300);
        assert_eq!(key(&long), key(&format!("{long}y")));
        assert_ne!(key("192.0.2.1"), key("192.0.2.10"));
        assert_ne!(address_key("2001:DB8::1", false), address_key("2001:db8::1", false));
    }
}
