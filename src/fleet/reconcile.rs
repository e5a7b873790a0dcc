//! Reconcile: every decky in the store driven to its desired state on the engine, at startup,
//! periodically, when an engine event asks, and again with backoff while something is left to do.
//! A stored decky whose container runs is `running`; one whose deploy a crash interrupted
//! (`pending`, nothing carrying it out), whose container stopped or is gone, or that failed because
//! the engine was away is (re)made; a leftover container in `created` is replaced; a container of
//! this deployment the store no longer names is removed. Deploy lifecycle records are resolved by
//! what is found (a record whose decky runs is `succeeded`). Deckies a deploy in this process is
//! carrying out are left to it, and so are deckies a mutation is recreating (an open `mutate`
//! record, from any process). Only this deployment's containers are touched
//! (`decky_container`); another deployment's of this fleet's name are reported.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::containers::{FleetContainers, by_decky};
use super::deploy::Run;
use super::{DECKY_LABEL, DEFAULT_IMAGE, DeployFailure, Fleet, FleetError};
use crate::db::{DeployState, FleetDecky, FleetNetwork, LifecycleStatus};
use crate::runtime::ContainerInfo;

/// The first wait before a transient failure is retried; it doubles up to [`LONGEST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LONGEST_RETRY: Duration = Duration::from_secs(16);
/// How long an open `mutate` record keeps reconcile off its decky: far longer than recreating
/// a container takes, so that one its mutator died in is remade after that.
const MUTATION_GRACE: chrono::TimeDelta = chrono::TimeDelta::minutes(2);
/// What a deploy record says when its decky left the store before anything finished it.
const REMOVED_BEFORE_DEPLOYED: &str = "the decky was removed before its deploy finished";

/// What reconcile must know beyond the store: which deckies a deploy here is carrying out, when
/// each transient failure is retried, and whether a converging loop runs.
#[derive(Default)]
pub(super) struct Convergence {
    in_flight: Mutex<BTreeSet<String>>,
    retries: Mutex<BTreeMap<String, Retry>>,
    looping: AtomicBool,
}

/// When a decky that failed for a transient reason is tried next, and how long it waited.
#[derive(Clone, Copy)]
struct Retry {
    next: Instant,
    wait: Duration,
}

/// Deckies a deploy in this process carries out, released (for reconcile) when it is dropped.
pub(super) struct InFlight {
    fleet: Fleet,
    names: Vec<String>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut in_flight = self.fleet.convergence.in_flight.lock().expect("the in-flight lock is never poisoned");
        for name in &self.names {
            in_flight.remove(name);
        }
    }
}

impl Convergence {
    fn busy(&self) -> BTreeSet<String> {
        self.in_flight.lock().expect("the in-flight lock is never poisoned").clone()
    }

    fn due(&self, decky: &str, now: Instant) -> bool {
        let retries = self.retries.lock().expect("the retry lock is never poisoned");
        retries.get(decky).is_none_or(|retry| retry.next <= now)
    }

    fn failed(&self, decky: &str) {
        let mut retries = self.retries.lock().expect("the retry lock is never poisoned");
        let wait = retries.get(decky).map_or(FIRST_RETRY, |retry| (retry.wait * 2).min(LONGEST_RETRY));
        retries.insert(decky.to_string(), Retry { next: Instant::now() + wait, wait });
    }

    fn succeeded(&self, decky: &str) {
        self.retries.lock().expect("the retry lock is never poisoned").remove(decky);
    }
}

/// Whether a stored decky is meant to run but reconcile may have to act: its deploy is
/// unfinished, it ran, or it failed for a reason that passes.
fn wanted(decky: &FleetDecky) -> bool {
    match decky.state {
        DeployState::Running | DeployState::Pending => true,
        DeployState::Failed => decky.last_error.as_deref() == Some(DeployFailure::EngineAway.to_string().as_str()),
    }
}

impl Fleet {
    /// Makes the engine match the store (see the module's text); when something is left to do
    /// (the engine is away, a transient failure waits for its retry) it keeps trying in the
    /// background, with backoff, until nothing is. Containers of this fleet's name that another
    /// deployment made are reported (a warning, and [`Fleet::other_deployments`] for health),
    /// never touched.
    pub async fn reconcile(&self) -> Result<(), FleetError> {
        let settled = self.reconcile_pass().await;
        if !matches!(settled, Ok(true)) {
            self.keep_converging();
        }
        settled.map(drop)
    }

    /// The deckies a deploy in this process carries out now.
    pub(super) fn convergence_busy(&self) -> BTreeSet<String> {
        self.convergence.busy()
    }

    /// Marks `names` as carried out by a deploy here until the guard is dropped.
    pub(super) fn in_flight(&self, names: Vec<String>) -> InFlight {
        let mut in_flight = self.convergence.in_flight.lock().expect("the in-flight lock is never poisoned");
        in_flight.extend(names.iter().cloned());
        InFlight { fleet: self.clone(), names }
    }

    /// Reconcile passes with backoff (1 s doubling to 16 s) until one leaves nothing to do; one
    /// such loop at a time.
    pub(super) fn keep_converging(&self) {
        if self.convergence.looping.swap(true, Ordering::SeqCst) {
            return;
        }
        let fleet = self.clone();
        tokio::spawn(async move {
            let mut wait = FIRST_RETRY;
            loop {
                tokio::time::sleep(wait).await;
                match fleet.reconcile_pass().await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(err) => tracing::debug!(error = %err, "Fleet reconcile skipped"),
                }
                wait = (wait * 2).min(LONGEST_RETRY);
            }
            fleet.convergence.looping.store(false, Ordering::SeqCst);
            tracing::info!("The fleet converged");
        });
    }

    /// One pass; whether it left nothing to do.
    async fn reconcile_pass(&self) -> Result<bool, FleetError> {
        let _deciding = self.deciding.lock().await;
        let stored = self.db.fleet().await?;
        let owner = self.owner().await?;
        let busy = self.convergence.busy();
        let FleetContainers { ours: containers, others } = match self.own_containers(&owner, &stored).await {
            Ok(containers) => containers,
            Err(err) => {
                tracing::debug!(error = %err, "Reconcile: the engine cannot be reached");
                let waiting = stored.deckies.iter().any(|d| !busy.contains(&d.config.name) && wanted(d));
                return Ok(!waiting);
            }
        };
        self.found_others(others);
        // Someone may have flushed the host's rules or routes.
        self.hold_host_route().await;
        // Read after the listing: a container a mutation removed was removed after its record
        // was stored, so the record is seen here.
        let busy = busy.into_iter().chain(self.mutating().await?).collect::<BTreeSet<String>>();
        let names: BTreeSet<&str> = stored.deckies.iter().map(|d| d.config.name.as_str()).collect();
        for container in &containers {
            let decky = container.labels.get(DECKY_LABEL).map(String::as_str).unwrap_or_default();
            if !names.contains(decky) {
                tracing::info!(container = %container.name, "Removing a container the fleet no longer has");
                let _ = self.runtime.remove(&container.id).await;
            }
        }
        let containers = by_decky(containers);
        let mut prepared: Option<Result<Option<String>, DeployFailure>> = None;
        let mut settled = true;
        let now = Instant::now();
        for decky in stored.deckies.iter().filter(|d| !busy.contains(&d.config.name)) {
            let name = decky.config.name.as_str();
            let container = containers.get(name);
            if container.is_some_and(ContainerInfo::is_running) {
                if decky.state != DeployState::Running {
                    tracing::info!(decky = name, "A decky whose deploy did not finish runs: recorded");
                    self.settle(decky, Ok(())).await;
                }
                continue;
            }
            if !wanted(decky) {
                continue;
            }
            if !self.convergence.due(name, now) {
                settled = false;
                continue;
            }
            // A stopped container of a decky that ran is started as it is; a leftover in
            // `created` (its deploy interrupted) or one that will not start is replaced.
            if decky.state == DeployState::Running
                && let Some(container) = container.filter(|c| c.state != "created")
                && (self.runtime.start(&container.id).await.is_ok()
                    || self.runtime.pid(&container.id).await.is_ok_and(|pid| pid.is_some()))
            {
                // Started by someone else meanwhile (`docker restart`) is as good.
                continue;
            }
            tracing::info!(decky = name, state = decky.state.as_str(), "Making the decky's container");
            let image = match &prepared {
                Some(prepared) => prepared.clone(),
                None => {
                    let network = stored.network.clone();
                    let made = self.prepare_stored(network, &stored.deckies).await;
                    prepared.insert(made).clone()
                }
            };
            let result = match image {
                Ok(image) => self.start_decky(&decky.config, &image).await,
                Err(failure) => Err(failure),
            };
            if result.as_ref().is_err_and(DeployFailure::is_transient) {
                settled = false;
            }
            self.settle(decky, result).await;
        }
        self.resolve_lifecycles(&busy).await?;
        Ok(settled)
    }

    /// Deckies a mutation (here or in the mutator's process) is recreating now: those with an
    /// open `mutate` record younger than [`MUTATION_GRACE`]. Reconcile acting on one would race
    /// the mutation's own remove, create and start of its container.
    async fn mutating(&self) -> Result<Vec<String>, FleetError> {
        let since = Utc::now() - MUTATION_GRACE;
        let open = self.db.open_lifecycles("mutate").await?;
        Ok(open.into_iter().filter(|r| r.updated_at > since).map(|r| r.decky_name).collect())
    }

    /// The network and the default image (when a stored decky runs it), for deckies reconcile
    /// (re)makes.
    async fn prepare_stored(
        &self,
        network: Option<FleetNetwork>,
        deckies: &[FleetDecky],
    ) -> Result<Option<String>, DeployFailure> {
        let Some(network) = network else { return Err(DeployFailure::Network) };
        let run = Run { deckies: Vec::new(), lifecycles: Vec::new(), network, moved: false };
        self.prepare(&run).await?;
        if deckies.iter().any(|d| d.config.base_image == DEFAULT_IMAGE) {
            Ok(Some(self.default_image().await?))
        } else {
            Ok(None)
        }
    }

    /// Records what reconcile found or did for `decky`, and announces a change of state.
    async fn settle(&self, decky: &FleetDecky, result: Result<(), DeployFailure>) {
        let name = decky.config.name.as_str();
        let (state, error) = match &result {
            Ok(()) => {
                self.convergence.succeeded(name);
                (DeployState::Running, None)
            }
            Err(failure) => {
                if failure.is_transient() {
                    self.convergence.failed(name);
                }
                (DeployState::Failed, Some(failure.to_string()))
            }
        };
        if let Err(err) = self.db.set_deploy_state(name, state, error.as_deref(), Utc::now()).await {
            tracing::error!(decky = name, error = %err, "Could not record the decky's deploy state");
        }
        if decky.state != state || decky.last_error != error {
            self.announce_state(name, state.as_str(), error.as_deref()).await;
            self.fleet_changed();
        }
    }

    /// Ends the open deploy records of deckies nothing carries out (a deploy a crash interrupted),
    /// by what the store now says: `succeeded` for a running decky, `failed` with its reason for
    /// one that failed (a transient failure is still retried: the decky's state follows) or left
    /// the store; one not tried yet stays open (the startup sweep ends it after an hour).
    async fn resolve_lifecycles(&self, busy: &BTreeSet<String>) -> Result<(), FleetError> {
        let open = self.db.open_lifecycles("deploy").await?;
        if open.is_empty() {
            return Ok(());
        }
        let stored = self.db.fleet().await?;
        let deckies: BTreeMap<&str, &FleetDecky> = stored.deckies.iter().map(|d| (d.config.name.as_str(), d)).collect();
        // A record carrying a swarm host is that host's agent's to end (by its heartbeat).
        for record in open.iter().filter(|r| r.host_uuid.is_none() && !busy.contains(&r.decky_name)) {
            let (status, error) = match deckies.get(record.decky_name.as_str()) {
                None => (LifecycleStatus::Failed, Some(REMOVED_BEFORE_DEPLOYED)),
                Some(d) if d.state == DeployState::Running => (LifecycleStatus::Succeeded, None),
                Some(d) if d.state == DeployState::Failed => (LifecycleStatus::Failed, d.last_error.as_deref()),
                Some(_) => continue,
            };
            self.record(record.id, &record.decky_name, status, error).await;
        }
        Ok(())
    }

    /// Remembers (for health) and reports the containers another deployment made; a warning only
    /// when they change, not every round.
    fn found_others(&self, others: Vec<ContainerInfo>) {
        let mut names: Vec<String> = others.into_iter().map(|c| c.name).collect();
        names.sort();
        let mut known = self.others.lock().expect("the other deployments' list lock is never poisoned");
        if *known != names && !names.is_empty() {
            tracing::warn!(
                fleet = %self.settings.name,
                containers = %names.join(","),
                "Containers of this fleet's name were made by another deployment (another database on this engine); they are left alone"
            );
        }
        *known = names;
    }

    /// What health says of other deployments' containers of this fleet's name, when the last
    /// reconcile found some.
    pub fn other_deployments(&self) -> Option<String> {
        let known = self.others.lock().expect("the other deployments' list lock is never poisoned");
        (!known.is_empty()).then(|| {
            format!(
                "{} container(s) of fleet '{}' belong to another deployment on this engine and are left alone: {}",
                known.len(),
                self.settings.name,
                known.join(", ")
            )
        })
    }
}
