//! [`AppState`]: what every handler of the HTTP API can reach. The API's lifespan (`startup`) builds
//! it once over the database, the bus and the rest, and every route shares clones of it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::health::DatabaseHealth;
use super::hot::HotReads;
use super::limit::RateLimits;
use super::stream::{LogTail, SseSlots, Summaries};
use super::taxii::BasicLogins;
use crate::auth::hashing::HashPool;
use crate::auth::session::Sessions;
use crate::bus::{Bus, WorkerRegistry};
use crate::canary::{Planter, TriggerRecorder};
use crate::config::Config;
use crate::db::Db;
use crate::fleet::Fleet;
use crate::metrics::RequestMetrics;
use crate::swarm::master::SwarmMaster;
use crate::swarm::placement::Placement;
use crate::systemd::UnitListing;
use crate::tarpit::Tarpit;
use crate::topology::Topologies;

/// What every handler can reach: one shared [`State`], so the clone each request's extractors make
/// is one reference count, not one per part (measured: a twentieth of a cached `/logs` request).
#[derive(Clone)]
pub struct AppState(Arc<State>);

impl AppState {
    pub fn new(state: State) -> AppState {
        AppState(Arc::new(state))
    }
}

impl std::ops::Deref for AppState {
    type Target = State;

    fn deref(&self) -> &State {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct State {
    pub config: Arc<Config>,
    pub db: Db,
    /// Whether the database finished initialisation, and its last probe (`/health`).
    pub db_health: Arc<DatabaseHealth>,
    pub sessions: Arc<Sessions>,
    pub passwords: Arc<HashPool>,
    pub limits: Arc<RateLimits>,
    /// TAXII's verified HTTP Basic logins, reused a while (`taxii`).
    pub basic_logins: Arc<BasicLogins>,
    pub bus: Bus,
    pub workers: Arc<WorkerRegistry>,
    /// The deckies: deploys, teardowns and the container runtime they run on.
    pub fleet: Fleet,
    /// Where each decky operation runs: this host's fleet or a swarm host's agent.
    pub placement: Placement,
    /// The master's side of the swarm: its settings and its identity, loaded once.
    pub swarm: SwarmMaster,
    /// Topologies: generation, child edits, deploys and the mutation queue.
    pub topologies: Topologies,
    /// The deckies' tarpit rules, over the same fleet.
    pub tarpit: Tarpit,
    /// The canary tokens' bait, planted in the same fleet's deckies.
    pub planter: Arc<Planter>,
    pub units: Arc<UnitListing>,
    /// The newest committed log id, which log streams wait on.
    pub log_tail: LogTail,
    /// The bodies of identical hot log reads, shared for a moment.
    pub hot_reads: Arc<HotReads>,
    /// Open event streams per user (`SVC_SSE_MAX_PER_USER`).
    pub sse: Arc<SseSlots>,
    /// Every request answered, by route template, method and status (`/metrics`).
    pub requests: Arc<RequestMetrics>,
    /// The statistics log streams share.
    pub summaries: Arc<Summaries>,
    /// Records the canary callbacks of known tokens, HTTP and DNS alike.
    pub canary_triggers: Arc<TriggerRecorder>,
    /// The attackers linked into identities, recomputed now and then.
    pub identities: Arc<crate::identity::Identities>,
    /// Cancelled when the server starts shutting down: event streams end, so draining does not
    /// wait on them.
    pub closing: CancellationToken,
}
