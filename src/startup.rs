//! The API's lifespan: the spec's startup steps 1–9, one named function each and called in the
//! spec's order by [`Lifespan::start`] (except that steps 2–4, which only judge the configuration,
//! come before step 1's warning), and the shutdown that undoes them ([`Lifespan::serve`]).
//! The top of the library: it builds the HTTP state over the database, the bus and the rest, and
//! embeds the workers it is given ([`crate::worker`]) in step 8.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::hashing::HashPool;
use crate::auth::session::Sessions;
use crate::auth::token::TokenKeys;
use crate::bus::{self, Bus, Counters, Fault, WorkerRegistry};
use crate::canary::{CallbackHome, DnsListener, Planter, TriggerRecorder};
use crate::config::{Config, ConfigError, Reading};
use crate::db::{self, DbError, NewUser, Role};
use crate::fleet::Fleet;
use crate::http::{self, AppState, DatabaseHealth, HotReads, LogTail, RateLimits, SseSlots};
use crate::swarm::listener::SwarmListener;
use crate::swarm::master::SwarmMaster;
use crate::swarm::placement::Placement;
use crate::swarm::record::StoredHeartbeats;
use crate::systemd::UnitListing;
use crate::systemd::installed::UnitSource;
use crate::tarpit::Tarpit;
use crate::topology::Topologies;
use crate::worker::{Attendance, WorkerBody, WorkerContext};

/// The API's name on the bus, which its bus heartbeat reports too.
const API_CONNECTION: &str = "svc-api";
/// Below this soft open-file limit a busy API runs out of sockets.
pub const MIN_OPEN_FILES: u64 = 4096;
pub const DB_INIT_ATTEMPTS: u32 = 5;
pub const DB_INIT_PAUSE: Duration = Duration::from_millis(500);
/// After startup gave up, the database is retried this often until it answers.
const DB_RETRY_INTERVAL: Duration = Duration::from_secs(5);
/// How long a reconcile pass an engine event asked for waits for the rest of a burst (a
/// teardown or a host's restart stops many containers at once).
const RECONCILE_GATHER: Duration = Duration::from_millis(200);
/// Lifecycle rows older than this, still pending or running at startup, were stranded by a restart.
pub const STRANDED_CUTOFF: chrono::Duration = chrono::Duration::hours(1);

/// A started API: its state, and every task it must stop on shutdown.
pub struct Lifespan {
    state: AppState,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

impl Lifespan {
    /// Runs startup steps 1–9. Steps 2–4 refuse to start; the later ones degrade instead.
    ///
    /// Takes a `Config`, or the environment as `svc api` read it, whose problems are then reported
    /// together with the API's rules.
    pub async fn start(config: impl Into<Reading>, workers: Vec<WorkerBody>) -> anyhow::Result<Lifespan> {
        let config = check_configuration(config.into())?;
        warn_on_low_open_file_limit();
        warn_on_public_binding_without_limiter(&config);
        warn_on_webhook_opt_out(&config);
        tighten_data_dir(&config);

        let config = Arc::new(config);
        let db = db::connect(&config.db).context("opening the database")?;
        let secret = config.api.jwt_secret.as_ref().context("SVC_JWT_SECRET is not set")?;
        let keys =
            TokenKeys::new(secret.expose().as_bytes(), chrono::Duration::minutes(config.api.jwt_exp_minutes.into()));
        // Bounded: an unreachable bus costs startup at most a couple of seconds, then is retried
        // in the background (step 9 only needs the handle).
        let bus = Bus::connect(config.bus.nats_url.as_deref(), API_CONNECTION).await;
        let cancel = CancellationToken::new();
        let fleet = Fleet::new(db.clone(), bus.clone(), config.fleet.clone());
        let topologies = Topologies::new(db.clone(), bus.clone(), fleet.clone());
        let swarm = SwarmMaster::new(&config.swarm);
        let placement = Placement::new(db.clone(), fleet.clone(), swarm.clone(), config.ingest.log_file.clone());
        let log_tail = LogTail::default();
        let lifespan = Lifespan {
            state: AppState::new(http::state::State {
                sessions: Arc::new(Sessions::new(keys, db.clone())),
                passwords: Arc::new(HashPool::default()),
                limits: Arc::new(RateLimits::shared(config.api.limiter_enabled, db.clone())),
                basic_logins: Arc::default(),
                db_health: Arc::new(DatabaseHealth::default()),
                workers: Arc::new(WorkerRegistry::new(config.bus.worker_stale_after)),
                tarpit: Tarpit::new(db.clone(), fleet.clone(), config.ingest.log_file.clone()),
                planter: Arc::new(Planter::new(db.clone(), fleet.clone(), canary_home(&config))),
                fleet,
                placement,
                swarm,
                topologies,
                units: Arc::new(UnitListing::new(
                    UnitSource::detect(config.api.unit_dirs.as_deref()),
                    config.api.unit_cache,
                )),
                hot_reads: Arc::new(HotReads::new(
                    config.api.read_cache_reuse,
                    config.api.read_cache_bytes,
                    log_tail.clone(),
                )),
                log_tail,
                sse: Arc::new(SseSlots::new(config.api.sse_max_per_user)),
                summaries: Arc::default(),
                identities: Arc::default(),
                canary_triggers: Arc::new(TriggerRecorder::new(
                    db.clone(),
                    bus.clone(),
                    config.ingest.log_file.clone(),
                    config.api.canary_triggers_per_minute,
                )),
                requests: Arc::default(),
                closing: cancel.child_token(),
                db,
                bus,
                config,
            }),
            tasks: TaskTracker::new(),
            cancel,
        };
        lifespan.init_database().await;
        lifespan.sweep_stranded_lifecycles().await;
        lifespan.enable_tracing();
        lifespan.start_background_workers(workers).await;
        lifespan.start_worker_registry().await;
        lifespan.start_log_tail();
        lifespan.start_fleet_reconciler();
        lifespan.start_canary_planter();
        lifespan.start_swarm_listener().await?;
        lifespan.start_canary_dns().await?;
        lifespan.start_swarm_sweep();
        lifespan.start_limit_pruning();
        lifespan.start_retention();
        Ok(lifespan)
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The HTTP application over this lifespan's state.
    pub fn router(&self) -> axum::Router {
        http::router(self.state.clone())
    }

    /// Serves until `shutdown` is cancelled, then shuts down.
    pub async fn serve(self, listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
        let addr = listener.local_addr()?;
        tracing::info!(%addr, "Listening");
        // Event streams never finish on their own: end them as soon as shutdown starts, so the
        // drain in `http::serve` only waits for ordinary requests.
        let (closing, stopped) = (self.state.closing.clone(), self.cancel.clone());
        let stopping = shutdown.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = stopping.cancelled() => closing.cancel(),
                () = stopped.cancelled() => {}
            }
        });
        let served = http::serve(listener, self.router(), shutdown).await;
        self.shutdown().await;
        served.context("serving HTTP")
    }

    /// Cancels every task this lifespan started (the worker registry among them) and waits for
    /// each, then closes the bus and the database.
    pub async fn shutdown(self) {
        tracing::info!("Shutting down");
        self.tasks.close();
        self.cancel.cancel();
        self.tasks.wait().await;
        self.state.bus.close().await;
        self.state.db.close().await;
        tracing::info!("Shutdown complete");
    }

    /// Step 5: up to five attempts half a second apart; after that the API serves degraded and a
    /// background task keeps trying, so the database coming back heals the service.
    async fn init_database(&self) {
        for attempt in 1..=DB_INIT_ATTEMPTS {
            match prepare_database(&self.state).await {
                Ok(()) => {
                    self.state.db_health.mark_ready();
                    tracing::info!(backend = self.state.db.backend(), "Database ready");
                    return;
                }
                Err(err) => {
                    tracing::warn!(attempt, max_attempts = DB_INIT_ATTEMPTS, error = %format!("{err:#}"), "Database initialisation failed");
                    if attempt < DB_INIT_ATTEMPTS {
                        tokio::time::sleep(DB_INIT_PAUSE).await;
                    }
                }
            }
        }
        tracing::error!(
            attempts = DB_INIT_ATTEMPTS,
            "Database unavailable; serving degraded and retrying every {}s",
            DB_RETRY_INTERVAL.as_secs()
        );
        let (state, cancel) = (self.state.clone(), self.cancel.clone());
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(DB_RETRY_INTERVAL) => {}
                }
                let attempt = tokio::select! {
                    () = cancel.cancelled() => return,
                    attempt = prepare_database(&state) => attempt,
                };
                match attempt {
                    Ok(()) => {
                        state.db_health.mark_ready();
                        tracing::info!("Database recovered");
                        // Startup skipped the sweep; the records it would have failed are still stranded.
                        fail_stranded_lifecycles(&state).await;
                        return;
                    }
                    Err(err) => tracing::debug!(error = %format!("{err:#}"), "Database still unavailable"),
                }
            }
        });
    }

    /// Step 6: lifecycle records a previous master left pending or running can never finish.
    /// Idempotent, and a failure only logs. With the database down it runs on recovery instead.
    async fn sweep_stranded_lifecycles(&self) {
        if self.state.db_health.is_ready() {
            fail_stranded_lifecycles(&self.state).await;
        } else {
            tracing::warn!("Stranded-lifecycle sweep deferred until the database is available");
        }
    }

    /// Step 7: traces exist only when `SVC_DEVELOPER_TRACING` is on; otherwise no request span
    /// layer is installed at all (see `http::with_layers`). The exporter itself is made by the
    /// process before its logging starts (`crate::traces`), as the subscriber carries its layer.
    fn enable_tracing(&self) {
        if self.state.config.api.developer_tracing {
            let exporting = crate::traces::enabled();
            let telemetry = &self.state.config.telemetry;
            tracing::info!(exporting, endpoint = %telemetry.otlp_endpoint, "Developer tracing on: every request is traced");
        }
    }

    /// Step 8: embedded workers, unless in contract-test mode. Each gets a child of the lifespan's
    /// cancellation token, and is attended like a worker process (heartbeat, stop intents: a stop
    /// ends that worker only); an error it returns is logged, a cancellation is not. The registry
    /// listens first, so the first heartbeats are heard.
    async fn start_background_workers(&self, workers: Vec<WorkerBody>) {
        if self.state.config.api.contract_test {
            tracing::info!("Contract-test mode: background workers not started");
            return;
        }
        self.state.workers.listen(&self.state.bus).await;
        for worker in workers {
            let ctx = WorkerContext::new(
                self.state.config.clone(),
                self.state.db.clone(),
                self.state.bus.clone(),
                self.cancel.child_token(),
            );
            let name = worker.name;
            tracing::info!(worker = name, "Starting embedded worker");
            let registry = self.state.workers.clone();
            registry.set_embedded(name, true);
            registry.embed_fault(name, ctx.fault.clone());
            registry.embed_counters(name, ctx.counters.clone());
            let attendance = Attendance::begin(name, &ctx).await;
            self.tasks.spawn(async move {
                let result = (worker.run)(ctx).await;
                attendance.end().await;
                match result {
                    Ok(()) => tracing::info!(worker = name, "Embedded worker stopped"),
                    Err(err) => tracing::warn!(worker = name, error = %format!("{err:#}"), "Embedded worker failed"),
                }
                registry.set_embedded(name, false);
            });
        }
    }

    /// Step 9, even in contract-test mode: the worker registry listens to every heartbeat and the
    /// API sends its own as `api`, so `/workers` always has a live row, and the bus's own
    /// (`system.bus.health`), as every process that owns a bus connection does. Without a bus both are
    /// no-ops; nothing here can stop startup.
    async fn start_worker_registry(&self) {
        let (registry, bus, cancel) = (self.state.workers.clone(), self.state.bus.clone(), self.cancel.clone());
        // Listening before the API's first heartbeat goes out, or its row waits a whole interval.
        registry.listen(&bus).await;
        self.tasks.spawn(async move { registry.run(&bus, cancel).await });
        let heartbeat = bus::heartbeat::run(
            self.state.bus.clone(),
            "api".into(),
            self.state.config.bus.heartbeat_interval,
            Counters::default(),
            Fault::default(),
            self.cancel.clone(),
        );
        self.tasks.spawn(heartbeat);
        self.tasks.spawn(bus::bus_health::run(
            self.state.bus.clone(),
            API_CONNECTION.into(),
            self.state.config.bus.heartbeat_interval,
            self.cancel.clone(),
        ));
        tracing::info!(bus_connected = self.state.bus.is_connected(), "Worker registry and API heartbeat started");
    }

    /// Keeps the engine matching the store, the fleet's containers and the live topologies'
    /// deckies, routes and NAT exemption: at startup (a restart of svc or of the engine leaves one
    /// set of containers, never orphans or duplicates), every `SVC_RECONCILE_S`, and at once when
    /// the engine's events say a container died or went (a short wait gathers a burst into one
    /// pass). Not in contract-test mode, where nothing may touch the host.
    fn start_fleet_reconciler(&self) {
        if self.state.config.api.contract_test {
            return;
        }
        let (fleet, topologies, cancel) =
            (self.state.fleet.clone(), self.state.topologies.clone(), self.cancel.clone());
        let follower = (fleet.clone(), cancel.clone());
        self.tasks.spawn(async move { follower.0.follow_engine(follower.1).await });
        self.tasks.spawn(async move {
            let mut every = tokio::time::interval(fleet.settings().reconcile);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    () = fleet.reconcile_wanted() => {
                        tokio::select! {
                            _ = cancel.cancelled() => return,
                            () = tokio::time::sleep(RECONCILE_GATHER) => {}
                        }
                        if let Err(err) = fleet.reconcile().await {
                            tracing::debug!(error = %err, "Fleet reconcile skipped");
                        }
                        if let Err(err) = topologies.reconcile().await {
                            tracing::debug!(error = %err, "Topology reconcile skipped");
                        }
                    }
                    _ = every.tick() => {
                        if let Err(err) = fleet.reconcile().await {
                            tracing::debug!(error = %err, "Fleet reconcile skipped");
                        }
                        if let Err(err) = topologies.reconcile().await {
                            tracing::debug!(error = %err, "Topology reconcile skipped");
                        }
                    }
                }
            }
        });
    }

    /// Plants the canary tokens' bait in this host's deckies and keeps it there (`canary::planting`). Not
    /// in contract-test mode, where nothing may touch the host.
    fn start_canary_planter(&self) {
        if self.state.config.api.contract_test {
            return;
        }
        let (planter, cancel) = (self.state.planter.clone(), self.cancel.clone());
        self.tasks.spawn(async move { planter.run(cancel).await });
    }

    /// With `SVC_SWARM_ENABLED`: the master's identity loaded (the CA and the master's certificate
    /// are made on first use), and the heartbeat listener agents report to over mutual TLS with
    /// it. A listener that cannot start stops the API: the operator asked for a swarm.
    async fn start_swarm_listener(&self) -> anyhow::Result<()> {
        let config = &self.state.config.swarm;
        if !config.enabled {
            return Ok(());
        }
        let identity = self.state.swarm.identity().await.context("starting the swarm listener")?;
        let listener = SwarmListener::bind(config, &identity).await.context("starting the swarm listener")?;
        let store = Arc::new(StoredHeartbeats(self.state.topologies.clone()));
        self.tasks.spawn(listener.run(store, self.cancel.clone()));
        Ok(())
    }

    /// With `SVC_CANARY_DNS_ZONE`: the canary's DNS listener, in contract-test mode too (it is a
    /// listener, not a worker). One that cannot bind stops the API: baits name the zone.
    async fn start_canary_dns(&self) -> anyhow::Result<()> {
        let Some(config) = &self.state.config.api.canary_dns else { return Ok(()) };
        let listener = DnsListener::bind(config).await?;
        self.tasks.spawn(listener.run(self.state.canary_triggers.clone(), self.cancel.clone()));
        Ok(())
    }

    /// On a master, swarm or not (a host enrolled while the listener is off cannot be heard, and is
    /// shown so): a host silent for three heartbeat intervals becomes `unreachable`. Not in
    /// contract-test mode, where nothing runs in the background.
    fn start_swarm_sweep(&self) {
        if self.state.config.api.contract_test {
            return;
        }
        let (db, heartbeat, cancel) =
            (self.state.db.clone(), self.state.config.swarm.agent.heartbeat, self.cancel.clone());
        self.tasks.spawn(crate::swarm::sweep::run(db, heartbeat, cancel));
    }

    /// Log retention (`SVC_RETENTION_*`): every replica runs the pruner, the lease lets one prune
    /// at a time. Not in contract-test mode, where nothing runs in the background.
    fn start_retention(&self) {
        if self.state.config.api.contract_test {
            return;
        }
        let (db, retention, cancel) = (self.state.db.clone(), self.state.config.retention(), self.cancel.clone());
        self.tasks.spawn(crate::retention::run(db, retention, cancel));
    }

    /// The rate limits' closed windows, forgotten in the background (every replica prunes; the
    /// delete is idempotent).
    fn start_limit_pruning(&self) {
        let (limits, cancel) = (self.state.limits.clone(), self.cancel.clone());
        self.tasks.spawn(async move { limits.prune(cancel).await });
    }

    /// With the worker registry, in contract-test mode too: the newest committed log id, which the
    /// log streams wait on, followed on the bus (or polled without one) until shutdown.
    fn start_log_tail(&self) {
        let (tail, db, bus, cancel) =
            (self.state.log_tail.clone(), self.state.db.clone(), self.state.bus.clone(), self.cancel.clone());
        self.tasks.spawn(async move { tail.run(db, bus, cancel).await });
    }
}

/// Step 1: a warning only; startup goes on.
/// Where the canary tokens' baits call home, from the API's settings.
fn canary_home(config: &Config) -> CallbackHome {
    let dns_zone = config.api.canary_dns.as_ref().map(|dns| dns.zone.as_str().to_string());
    CallbackHome { http_base: config.api.canary_callback_base(), dns_zone }
}

fn warn_on_low_open_file_limit() {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(current) = limit.current
        && current < MIN_OPEN_FILES
    {
        tracing::warn!(
            soft_limit = current,
            recommended = MIN_OPEN_FILES,
            "Open-file limit is low; raise it (ulimit -n, or LimitNOFILE= under systemd)"
        );
    }
}

/// Steps 2–4 in one pass: public binding, master mode, and the signing secret (checked eagerly, so
/// a bad one fails at boot and not at first login), with the admin password the first admin gets.
/// The only place the API's rules run. They are reported after whatever reading the environment
/// found, all at once, so an operator fixes everything in one round; ahead of step 1's warning, so a
/// refused configuration is reported alone; and before any database, worker or bus comes up.
fn check_configuration(reading: Reading) -> Result<Config, ConfigError> {
    reading.check_for_api()?;
    Ok(reading.config)
}

/// Step 2's warning: on a public binding, rate limiting is what stands between login and brute force.
fn warn_on_public_binding_without_limiter(config: &Config) {
    if !config.api.binds_loopback() && !config.api.limiter_enabled {
        tracing::error!(
            severity = "critical",
            host = %config.api.host,
            "Rate limiting is disabled on a public binding: login is open to brute force"
        );
    }
}

/// The API checks webhook destinations at create and patch: say when the address rules are off.
fn warn_on_webhook_opt_out(config: &Config) {
    if config.webhook.allow_private {
        tracing::warn!("SVC_WEBHOOK_ALLOW_PRIVATE is on: webhooks may target private and loopback addresses");
    }
}

/// Lifecycle records and topology deploys or teardowns a restart left unfinished.
async fn fail_stranded_lifecycles(state: &AppState) {
    let now = Utc::now();
    match state.db.fail_stranded_lifecycles(now - STRANDED_CUTOFF, now).await {
        Ok(0) => {}
        Ok(count) => tracing::warn!(count, "Marked stranded lifecycle records as failed"),
        Err(err) => tracing::error!(error = %err, "Stranded-lifecycle sweep failed"),
    }
    match state.topologies.end_stranded(now - STRANDED_CUTOFF).await {
        Ok(0) => {}
        Ok(count) => tracing::warn!(count, "Ended stranded topology deploys and teardowns"),
        Err(err) => tracing::error!(error = %err, "Stranded-topology sweep failed"),
    }
}

/// The data directory holds the database and the ingest file: 0700 whoever made it (what is in it
/// is made private as it is created, see `file_modes`).
fn tighten_data_dir(config: &Config) {
    if let Err(err) = crate::file_modes::tighten(&config.data_dir, crate::file_modes::PRIVATE_DIR) {
        tracing::error!(dir = %config.data_dir.display(), error = %err, "Cannot make the data directory private");
    }
}

/// Migrations, then the first admin.
async fn prepare_database(state: &AppState) -> anyhow::Result<()> {
    state.db.migrate().await.context("applying migrations")?;
    let sealed = state.db.seal_webhook_secrets().await.context("sealing webhook secrets")?;
    if sealed > 0 {
        tracing::info!(webhooks = sealed, "Sealed webhook signing secrets stored in plaintext");
    }
    seed_admin(state).await.context("creating the admin user")
}

/// Creates `SVC_ADMIN_USER` flagged must-change-password. While it is still flagged, its password
/// follows `SVC_ADMIN_PASSWORD`, so an operator who regenerates the env file can still log in.
async fn seed_admin(state: &AppState) -> anyhow::Result<()> {
    let (db, config) = (&state.db, &state.config);
    let Some(secret) = config.api.admin_password.as_ref() else { return Ok(()) };
    let existing = match db.user_by_name(&config.api.admin_user).await {
        Ok(user) => Some(user),
        Err(DbError::NotFound) => None,
        Err(err) => return Err(err.into()),
    };
    if let Some(user) = &existing {
        // An admin who chose a password keeps it: only a still-flagged one is compared (one hash).
        if !user.must_change_password
            || state.passwords.verify(secret.expose().to_string(), Some(user.password_hash.clone())).await?
        {
            return Ok(());
        }
    }
    let hash = state.passwords.hash(secret.expose().to_string()).await?;
    match existing {
        Some(user) => {
            db.set_password(user.uuid, &hash, true, Utc::now()).await?;
            tracing::info!(user = %config.api.admin_user, "Admin password re-synced from SVC_ADMIN_PASSWORD");
        }
        None => {
            let new = NewUser {
                username: config.api.admin_user.clone(),
                password_hash: hash,
                role: Role::Admin,
                must_change_password: true,
            };
            match db.add_user(new, Utc::now()).await {
                Ok(_) => tracing::info!(
                    user = %config.api.admin_user,
                    "Admin user created; the password must be changed at first login"
                ),
                // Another replica created it first.
                Err(DbError::Conflict) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
    Ok(())
}
