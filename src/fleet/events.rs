//! The engine's events for this fleet's containers, followed while the API runs. Each `start`,
//! `die`, `remove`/`destroy` or `oom` keeps the containers the fleet last observed true (what
//! `/deckies` serves, `status`, without asking the engine each call), and a container that died,
//! went or ran out of memory asks for the reconcile pass at once instead of at the next periodic
//! round: podman's API service applies no restart policy, so nothing else brings a killed decky
//! back. The periodic pass stays the safety net for whatever happened while the engine was away.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::host_routes::forget_neighbour;
use super::{DECKY_LABEL, FLEET_LABEL, Fleet, TOPOLOGY_LABEL};
use crate::runtime::{ContainerEvent, ContainerInfo};

/// The first wait before following the engine again after it went away; doubled each failure.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between attempts to follow the engine.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Following for this long counts as a success: the next failure waits [`RETRY_FIRST`] again.
const RETRY_RESET: Duration = Duration::from_secs(60);
/// How far back the engine replays events when they are followed again: the listing taken just
/// before is a second old at most by then, and replaying in order ends in the latest state.
const REPLAY_SECS: i64 = 2;

/// The fleet's containers as the engine's events keep them, and the wish for a reconcile pass
/// they raise. Shared by every clone of a [`Fleet`].
#[derive(Debug, Default)]
pub(super) struct Observed {
    state: Mutex<ObservedState>,
    reconcile: Notify,
}

#[derive(Debug, Default)]
struct ObservedState {
    /// Every container carrying the fleet's label, as listed and then changed by each event;
    /// `None` while the events are not followed.
    containers: Option<Vec<ContainerInfo>>,
    /// Bumped by every event and change of following, so a listing that took long is not stored
    /// over what an event said meanwhile.
    generation: u64,
}

impl Observed {
    fn lock(&self) -> std::sync::MutexGuard<'_, ObservedState> {
        self.state.lock().expect("the observed containers' lock is never poisoned")
    }

    /// The fleet's containers now, while events are followed (else the engine must be asked),
    /// with the generation a listing taken now would be stored under.
    pub(super) fn current(&self) -> (Option<Vec<ContainerInfo>>, u64) {
        let state = self.lock();
        (state.containers.clone(), state.generation)
    }

    /// Takes `listing` as the containers, unless events are not followed or one arrived since
    /// `generation` was read.
    pub(super) fn listed(&self, generation: u64, listing: Vec<ContainerInfo>) {
        let mut state = self.lock();
        if state.generation == generation && state.containers.is_some() {
            state.containers = Some(listing);
        }
    }

    fn follow(&self, listing: Vec<ContainerInfo>) {
        let mut state = self.lock();
        state.containers = Some(listing);
        state.generation += 1;
    }

    fn lost(&self) {
        let mut state = self.lock();
        state.containers = None;
        state.generation += 1;
    }

    /// Takes `container`, just made and started here, in place of any of its name (which making
    /// it removed): its own events may arrive after a `/deckies` call that must already see it.
    pub(super) fn made(&self, container: ContainerInfo) {
        let mut state = self.lock();
        state.generation += 1;
        if let Some(containers) = state.containers.as_mut() {
            containers.retain(|c| c.name != container.name && c.id != container.id);
            containers.push(container);
        }
    }

    /// Applies `event`; whether it asks for a reconcile pass (a container stopped or went).
    fn apply(&self, event: ContainerEvent) -> bool {
        let mut state = self.lock();
        state.generation += 1;
        let Some(containers) = state.containers.as_mut() else { return false };
        let find = |containers: &mut Vec<ContainerInfo>, id: &str| containers.iter().position(|c| c.id == id);
        match event {
            ContainerEvent::Started { id, attributes } => {
                match find(containers, &id) {
                    Some(at) => containers[at].state = "running".into(),
                    None => containers.push(ContainerInfo {
                        id,
                        name: attributes.get("name").cloned().unwrap_or_default(),
                        state: "running".into(),
                        labels: attributes,
                    }),
                }
                false
            }
            ContainerEvent::Stopped { id } => {
                if let Some(at) = find(containers, &id) {
                    containers[at].state = "exited".into();
                }
                true
            }
            ContainerEvent::Removed { id } => {
                containers.retain(|c| c.id != id);
                true
            }
            ContainerEvent::OutOfMemory { .. } => true,
        }
    }

    /// Asks for a reconcile pass; several asks before it runs make one.
    pub(super) fn want_reconcile(&self) {
        self.reconcile.notify_one();
    }
}

impl Fleet {
    /// Follows the engine's events for this fleet's containers until `cancel`: lists them, then
    /// follows from just before the listing, so nothing between the two is missed (and lists them
    /// again every `SVC_RECONCILE_S`, in case the engine let an event drop); after the
    /// engine went away, again with backoff (1 s doubling to 30 s), asking for a reconcile pass
    /// each time it is back, for what happened meanwhile.
    pub async fn follow_engine(&self, cancel: CancellationToken) {
        let mut retry = RETRY_FIRST;
        while !cancel.is_cancelled() {
            let began = Instant::now();
            if let Err(reason) = self.follow_once(&cancel).await {
                tracing::debug!(reason, "Not following the engine's events; trying again");
            }
            self.observed.lost();
            retry = if began.elapsed() >= RETRY_RESET { RETRY_FIRST } else { (retry * 2).min(RETRY_MAX) };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(retry) => {}
            }
        }
    }

    async fn follow_once(&self, cancel: &CancellationToken) -> Result<(), String> {
        let since = chrono::Utc::now().timestamp() - REPLAY_SECS;
        let name = &self.settings.name;
        let listing = self.runtime.list(FLEET_LABEL, name).await.map_err(|e| e.to_string())?;
        let mut events = self.runtime.events(FLEET_LABEL, name, Some(since));
        self.observed.follow(listing);
        let _ = self.starts.send(super::ContainerStart::Unknown);
        self.hold_host_route().await;
        self.observed.want_reconcile();
        tracing::info!(fleet = %name, "Following the engine's events");
        // A listing now and then, as the reconcile pass's, in case the engine let an event drop.
        let mut relist =
            tokio::time::interval_at(tokio::time::Instant::now() + self.settings.reconcile, self.settings.reconcile);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                _ = relist.tick() => {
                    let (_, generation) = self.observed.current();
                    let listing = self.runtime.list(FLEET_LABEL, name).await.map_err(|e| e.to_string())?;
                    self.observed.listed(generation, listing);
                }
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        tracing::debug!(?event, "Engine event");
                        if let ContainerEvent::Started { id, attributes } = &event {
                            self.started(attributes).await;
                            let _ = self.starts.send(super::ContainerStart::Container(id.clone()));
                        }
                        if self.observed.apply(event) {
                            self.observed.want_reconcile();
                        }
                    }
                    Some(Err(err)) => return Err(err.to_string()),
                    None => return Err("the engine ended the event stream".into()),
                },
            }
        }
    }

    /// A container of the flat fleet started: the host forgets the decky address's old hardware
    /// address (`host_routes`).
    async fn started(&self, attributes: &BTreeMap<String, String>) {
        if attributes.contains_key(TOPOLOGY_LABEL) || !self.bridge_on_this_host() {
            return;
        }
        let Some(decky) = attributes.get(DECKY_LABEL) else { return };
        if let Ok(stored) = self.db.fleet().await
            && let Some(stored) = stored.deckies.iter().find(|d| d.config.name == *decky)
        {
            forget_neighbour(&stored.config.ip).await;
        }
    }

    /// Returns when an engine event asked for a reconcile pass (at once if one asked since the
    /// last call).
    pub async fn reconcile_wanted(&self) {
        self.observed.reconcile.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(id: &str, state: &str) -> ContainerInfo {
        ContainerInfo { id: id.into(), name: format!("svc-{id}"), state: state.into(), labels: BTreeMap::new() }
    }

    fn states(observed: &Observed) -> Vec<(String, String)> {
        let containers = observed.current().0.unwrap_or_default();
        containers.into_iter().map(|c| (c.id, c.state)).collect()
    }

    #[test]
    fn events_keep_the_listing_true_and_a_stop_or_removal_asks_for_a_reconcile_pass() {
        let observed = Observed::default();
        assert!(!observed.apply(ContainerEvent::Removed { id: "a".into() }), "nothing is kept before a listing");
        observed.follow(vec![container("a", "running"), container("b", "running")]);

        assert!(observed.apply(ContainerEvent::Stopped { id: "a".into() }));
        assert!(observed.apply(ContainerEvent::Removed { id: "b".into() }));
        let attributes = BTreeMap::from([("name".to_string(), "svc-c".to_string())]);
        assert!(!observed.apply(ContainerEvent::Started { id: "c".into(), attributes }));
        assert!(observed.apply(ContainerEvent::OutOfMemory { id: "c".into() }));
        assert_eq!(states(&observed), [("a".into(), "exited".into()), ("c".into(), "running".into())]);
        assert_eq!(observed.current().0.unwrap()[1].name, "svc-c", "a new container is named by its event");

        let made =
            ContainerInfo { id: "e".into(), name: "svc-a".into(), state: "running".into(), labels: BTreeMap::new() };
        observed.made(made);
        assert!(!observed.apply(ContainerEvent::Started { id: "e".into(), attributes: BTreeMap::new() }));
        assert_eq!(
            states(&observed),
            [("c".into(), "running".into()), ("e".into(), "running".into())],
            "a container made here replaces its name's old one at once; its late start changes nothing"
        );

        observed.lost();
        assert_eq!(observed.current().0, None, "not followed: the engine must be asked");
    }

    #[test]
    fn a_listing_taken_across_an_event_is_not_kept() {
        let observed = Observed::default();
        observed.follow(vec![container("a", "running")]);
        let (_, generation) = observed.current();
        observed.apply(ContainerEvent::Stopped { id: "a".into() });
        observed.listed(generation, vec![container("a", "running")]);
        assert_eq!(states(&observed), [("a".into(), "exited".into())]);

        let (_, generation) = observed.current();
        observed.listed(generation, vec![container("a", "exited"), container("d", "running")]);
        assert_eq!(states(&observed).len(), 2, "a listing with no event since is kept");
    }
}
