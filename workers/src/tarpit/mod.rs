//! The tarpit watcher: every `SVC_TARPIT_POLL_SECS` (15 s) it puts each stored rule in force
//! where a decky or host restart took it away, reads each ruled decky's TCP and TCP6 connection
//! tables, and writes edge-triggered `tarpit_enter` and `tarpit_exit` (with `duration_s`) per
//! attacker address and port. Open sessions live in the store, so a restart neither enters a caught
//! attacker twice nor loses its exit, and two watchers never both report one edge. Runs in the API
//! always (spec, startup step 8) and as `svc worker tarpit`.
//!
//! `sessions` decides the edges; here is the loop and what it reads.

pub mod sessions;

use std::collections::{HashMap, HashSet};

use anyhow::Context;
use chrono::Utc;
use svc::db::{Db, StoredRule, TarpitSession};
use svc::fleet::Fleet;
use svc::netns::{self, conntable};
use svc::roster::counters::tarpit as counter;
use svc::runtime::ContainerInfo;
use svc::tarpit::Tarpit;
use svc::tarpit::events::{self, TarpitEvent};
use svc::worker::{WorkerBody, WorkerContext};

/// The worker's name.
pub const NAME: &str = "tarpit";

/// The worker `svc worker tarpit` runs and `svc api` always embeds.
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, run)
}

/// Polls until the worker is stopped; a poll under way is finished first.
pub async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let config = &ctx.config;
    let fleet = Fleet::new(ctx.db.clone(), ctx.bus.clone(), config.fleet.clone());
    let mut watcher = Watcher::new(ctx.db.clone(), Tarpit::new(ctx.db.clone(), fleet, config.ingest.log_file.clone()));
    let mut every = tokio::time::interval(config.tarpit.poll_interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = ctx.cancel.cancelled() => return Ok(()),
            _ = every.tick() => {}
        }
        match watcher.poll().await {
            Ok(poll) => {
                // Health from facts: two missed polls (a store or kernel call hung) read as stuck.
                ctx.fault.worked(config.tarpit.poll_interval * 2 + PROGRESS_GRACE);
                ctx.counters.add(counter::POLLS, 1);
                ctx.counters.add(counter::ENTERED, poll.entered as u64);
                ctx.counters.add(counter::EXITED, poll.exited as u64);
                ctx.counters.set(counter::CAUGHT, poll.caught as u64);
            }
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "Tarpit poll failed");
                ctx.fault.set("the tarpit watcher cannot read the rules or the deckies");
            }
        }
    }
}

/// Beyond two poll intervals, how long a poll may take before the watcher reads as stuck.
const PROGRESS_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What one poll did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Poll {
    pub entered: usize,
    pub exited: usize,
    /// Sessions open after it.
    pub caught: usize,
}

/// The watcher's state between polls: where each container's namespace is.
pub struct Watcher {
    db: Db,
    tarpit: Tarpit,
    /// Container id → its pid and namespace, so a poll asks the engine only about containers that
    /// are new or restarted (their namespace changed).
    pids: HashMap<String, (u32, String)>,
}

impl Watcher {
    pub fn new(db: Db, tarpit: Tarpit) -> Watcher {
        Watcher { db, tarpit, pids: HashMap::new() }
    }

    /// One poll: rules in force, tables read, edges stored, then written as events.
    pub async fn poll(&mut self) -> anyhow::Result<Poll> {
        let rules = self.db.tarpit_rules().await.context("reading the tarpit rules")?;
        let open = self.db.tarpit_sessions().await.context("reading the open tarpit sessions")?;
        if rules.is_empty() && open.is_empty() {
            return Ok(Poll::default());
        }
        let containers = if rules.is_empty() {
            Default::default()
        } else {
            self.tarpit.fleet().containers().await.context("listing the fleet's containers")?
        };
        let mut seen = HashMap::new();
        for stored in &rules {
            if let Some(connections) = self.watch(stored, containers.get(&stored.rule.decky_name)).await {
                seen.insert(stored.rule.decky_name.clone(), connections);
            }
        }
        self.pids.retain(|id, _| containers.values().any(|c| c.id == *id));
        let ruled: HashSet<&str> = rules.iter().map(|r| r.rule.decky_name.as_str()).collect();
        let now = Utc::now();
        let changes = sessions::diff(&open, &seen, &ruled, now);
        // The store first: only the edges this watcher made are reported, once.
        let opened = self.db.open_tarpit_sessions(&changes.open).await.context("opening tarpit sessions")?;
        let closed = self.db.close_tarpit_sessions(&changes.close).await.context("closing tarpit sessions")?;
        let report: Vec<_> = opened
            .iter()
            .map(|s| (now, enter(s)))
            .chain(closed.iter().map(|s| (now, exit(s, sessions::duration_s(s.entered_at, now)))))
            .collect();
        events::write(self.tarpit.ingest(), &report).await;
        Ok(Poll { entered: opened.len(), exited: closed.len(), caught: open.len() + opened.len() - closed.len() })
    }

    /// Puts `stored` in force in its decky and reads the decky's connections on the rule's ports:
    /// none when the decky is not running; `None` (sessions left as they are) when its tables
    /// cannot be read.
    async fn watch(
        &mut self,
        stored: &StoredRule,
        container: Option<&ContainerInfo>,
    ) -> Option<Vec<conntable::Connection>> {
        let Some(container) = container.filter(|c| c.is_running()) else {
            // Stopped or gone: nobody is connected, and nothing is in force to check.
            return Some(Vec::new());
        };
        let pid = self.pid(container).await?;
        self.tarpit.enforce(stored, pid).await;
        let ports: HashSet<u16> = stored.rule.ports.iter().copied().collect();
        match conntable::read(pid, |port| ports.contains(&port)) {
            Ok(connections) => Some(connections),
            Err(err) => {
                tracing::debug!(decky = %stored.rule.decky_name, error = %err, "Cannot read the decky's connection tables");
                None
            }
        }
    }

    /// The container's pid: remembered while its namespace is the same, else asked of the engine.
    async fn pid(&mut self, container: &ContainerInfo) -> Option<u32> {
        if let Some((pid, namespace)) = self.pids.get(&container.id)
            && netns::identity(&netns::namespace_of(*pid)).is_ok_and(|now| now == *namespace)
        {
            return Some(*pid);
        }
        let pid = match self.tarpit.fleet().runtime().pid(&container.id).await {
            Ok(Some(pid)) => pid,
            Ok(None) => return None,
            Err(err) => {
                tracing::debug!(container = %container.name, error = %err, "Cannot inspect a decky's container");
                return None;
            }
        };
        let namespace = netns::identity(&netns::namespace_of(pid)).ok()?;
        self.pids.insert(container.id.clone(), (pid, namespace));
        Some(pid)
    }
}

fn enter(session: &TarpitSession) -> TarpitEvent {
    TarpitEvent::Enter {
        decky: session.decky_name.clone(),
        attacker_ip: session.attacker_ip.clone(),
        port: session.port,
    }
}

fn exit(session: &TarpitSession, duration_s: i64) -> TarpitEvent {
    TarpitEvent::Exit {
        decky: session.decky_name.clone(),
        attacker_ip: session.attacker_ip.clone(),
        port: session.port,
        duration_s,
    }
}
