//! Bringing deployed topologies back after their containers went away or restarted (an engine
//! or host restart, a container removed or stopped by hand), as the fleet's reconcile does for
//! the flat fleet and on the same schedule. For each live topology: a decky that ran and whose
//! container stopped is started again, one whose container is gone, or runs without its
//! addresses, is made again (the same networks and addresses), every decky whose routes between LANs are not as planned gets them
//! again (a container's new namespace has none), and the host's NAT exemption is set again (a
//! host restart empties the NAT table). The topology's status events say what was found
//! (`active` → `degraded`) and, once all is back, what was restored (→ `active`). The host's
//! shield from the LANs (`shield`) is set again too, without a word on the topology's status.
//!
//! A topology whose mutation is queued or being applied is left to the mutator, one targeted at a
//! swarm host to that host's agent (which heals its copy), and deploys and teardowns in this
//! process wait for a heal to end (and it for them).

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use uuid::Uuid;

use super::deploy::{CONTAINER_FAILED, NAT_FAILED, Shortfalls, empty};
use super::{Topologies, nat, routes, shield};
use crate::db::{DbError, MutationState, TopologyDecky, TopologyDetail, TopologyStatus};
use crate::fleet::{TOPOLOGY_LABEL, by_decky};
use crate::runtime::ContainerInfo;

/// What a heal found wrong with one decky.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrong {
    Stopped,
    Gone,
    /// Running without its addresses: podman's network set-up lost a race with a concurrent
    /// start (`podman restart` while we start it), and nothing but a new container mends it.
    Unwired,
    Unrouted,
}

impl Wrong {
    fn found(self) -> &'static str {
        match self {
            Wrong::Stopped => "its container had stopped",
            Wrong::Gone => "its container was gone",
            Wrong::Unwired => "its container had lost its addresses",
            Wrong::Unrouted => "its routes between LANs were not set",
        }
    }
}

const NAT_FOUND: &str = "the host's NAT exemption for its LANs was not set";
const STARTED: &str = "container started again";
const MADE: &str = "container made again";
const ROUTED: &str = "routes set again";
const NAT_RESTORED: &str = "NAT exemption set again";

impl Topologies {
    /// Heals every live topology (see the module's header); one that cannot be read is skipped.
    pub async fn reconcile(&self) -> Result<(), DbError> {
        for status in [TopologyStatus::Active, TopologyStatus::Degraded] {
            for topology in self.db.topologies(Some(status), 500, 0).await?.rows {
                if topology.target_host_uuid.is_some() {
                    continue;
                }
                self.heal(topology.id).await;
            }
        }
        Ok(())
    }

    async fn heal(&self, id: Uuid) {
        // A deploy or teardown at work here: the next round looks again.
        let Ok(_engine) = self.engine.try_lock() else { return };
        if self.mutation_at_work(id).await {
            return;
        }
        let Ok(detail) = self.db.topology_detail(id).await else { return };
        if !detail.topology.status.is_live() {
            return;
        }
        let containers = match self.fleet.runtime().list(TOPOLOGY_LABEL, &id.to_string()).await {
            Ok(containers) => by_decky(containers),
            Err(err) => {
                tracing::debug!(topology = %id, error = %err, "Heal skipped: the engine cannot be reached");
                return;
            }
        };
        // The host's shield is the host's, not the topology's: set again without a word on its status.
        let shield_rules = shield::rules(&detail, self.fleet.settings().host_isolation);
        if !shield::is_current(id, &shield_rules).await.unwrap_or(true) {
            tracing::warn!(topology = %id, "The host shield of a topology's LANs was not set; setting it again");
            shield::apply(id, &shield_rules).await;
        }
        let wrong = self.inspect(&detail, &containers).await;
        let nat_pairs = nat::exemptions(&detail);
        // Where iptables cannot be asked, the deploy already said so; a heal could not do better.
        let nat_wrong = !nat::is_current(&nat::chain(id), &nat_pairs).await.unwrap_or(true);
        // The mutator runs in a process of its own: one that took a mutation while this round
        // looked (a container being replaced reads as gone or unrouted) is left to converge it.
        if (wrong.is_empty() && !nat_wrong) || self.mutation_at_work(id).await {
            return;
        }
        let mut found: Vec<String> = wrong.iter().map(|(name, w)| format!("'{name}': {}", w.found())).collect();
        found.extend(nat_wrong.then(|| NAT_FOUND.to_string()));
        tracing::warn!(topology = %id, found = %found.join("; "), "Healing a topology");
        let _ = self
            .move_status(id, Some(&[TopologyStatus::Active]), TopologyStatus::Degraded, Some(&found.join("; ")))
            .await;

        let (done, shortfalls) = self.repair(&detail, &containers, &wrong, &nat_pairs).await;
        let all_running = match self.db.topology_detail(id).await {
            Ok(now) => now.deckies.iter().all(|d| d.state == "running"),
            Err(_) => false,
        };
        if !shortfalls.is_empty() || !all_running {
            let reason = if shortfalls.is_empty() { "a decky failed before".to_string() } else { shortfalls.reason() };
            tracing::warn!(topology = %id, %reason, "A topology stays degraded after healing");
            return;
        }
        let mut restored: Vec<String> =
            done.iter().map(|(name, what)| format!("'{name}': {}", what.join(", "))).collect();
        restored.extend(nat_wrong.then(|| NAT_RESTORED.to_string()));
        let reason = if restored.is_empty() {
            "restored: all as deployed again".to_string()
        } else {
            format!("restored {}", restored.join("; "))
        };
        let _ = self.move_status(id, Some(&[TopologyStatus::Degraded]), TopologyStatus::Active, Some(&reason)).await;
    }

    /// Whether a mutation of topology `id` is queued or being applied (or the queue cannot be read).
    async fn mutation_at_work(&self, id: Uuid) -> bool {
        for state in [MutationState::Pending, MutationState::Applying] {
            if !self.db.mutations(id, Some(state)).await.is_ok_and(|m| m.is_empty()) {
                return true;
            }
        }
        false
    }

    /// The deckies that ran and are not as deployed: their container stopped or gone, or their
    /// routes not as planned.
    async fn inspect(
        &self,
        detail: &TopologyDetail,
        containers: &BTreeMap<String, ContainerInfo>,
    ) -> BTreeMap<String, Wrong> {
        let plans = routes::plan(detail);
        let mut wrong = BTreeMap::new();
        for decky in detail.deckies.iter().filter(|d| ran(d)) {
            let found = match containers.get(&decky.name) {
                None => Some(Wrong::Gone),
                Some(container) if !container.is_running() => Some(Wrong::Stopped),
                Some(container) => {
                    let planned = plans.get(&decky.uuid).map(Vec::as_slice).unwrap_or_default();
                    let wired: BTreeSet<&str> = detail.edges_of(decky).iter().filter_map(|e| e.ip.as_deref()).collect();
                    match self.fleet.runtime().pid(&container.id).await {
                        Ok(Some(pid)) => {
                            // Addresses that cannot be read are not taken for lost ones.
                            let has = routes::addresses(pid).await.ok();
                            if has.is_some_and(|has| !wired.iter().all(|ip| has.contains(*ip))) {
                                Some(Wrong::Unwired)
                            } else if planned.is_empty() {
                                None
                            } else {
                                routes::current(pid).await.ok().is_none_or(|c| c != planned).then_some(Wrong::Unrouted)
                            }
                        }
                        _ => (!planned.is_empty()).then_some(Wrong::Unrouted),
                    }
                }
            };
            if let Some(found) = found {
                wrong.insert(decky.name.clone(), found);
            }
        }
        wrong
    }

    /// Starts or makes again the deckies `wrong` names, then sets every decky's routes and the
    /// NAT exemption as planned; what was done for each decky, and what could not be done.
    async fn repair(
        &self,
        detail: &TopologyDetail,
        containers: &BTreeMap<String, ContainerInfo>,
        wrong: &BTreeMap<String, Wrong>,
        nat_pairs: &[(String, String)],
    ) -> (BTreeMap<String, Vec<&'static str>>, Shortfalls) {
        let runtime = self.fleet.runtime();
        let mut done: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
        let mut shortfalls = Shortfalls::default();
        let mut image = None;
        for decky in detail.deckies.iter().filter(|d| wrong.get(&d.name).is_some_and(|w| *w != Wrong::Unrouted)) {
            let found = wrong[&decky.name];
            // Started by someone else meanwhile (an engine restart, `docker restart`) is as good.
            if found == Wrong::Stopped
                && let Some(container) = containers.get(&decky.name)
                && (runtime.start(&container.id).await.is_ok()
                    || runtime.pid(&container.id).await.is_ok_and(|pid| pid.is_some()))
            {
                done.entry(decky.name.clone()).or_default().push(STARTED);
                continue;
            }
            if found == Wrong::Unwired
                && let Some(container) = containers.get(&decky.name)
                && let Err(err) = runtime.remove(&container.id).await
            {
                tracing::warn!(decky = %decky.name, error = %err, "Could not remove a container that lost its addresses");
            }
            if image.is_none() {
                image = self.fleet.default_image().await.ok();
            }
            let made = match &image {
                Some(image) => self.start_decky(detail, decky, image).await.is_ok(),
                None => false,
            };
            if made {
                done.entry(decky.name.clone()).or_default().push(MADE);
            } else {
                shortfalls.deckies.push((decky.name.clone(), CONTAINER_FAILED.into()));
                let _ =
                    self.db.set_topology_decky_state(decky.uuid, "failed", Some(CONTAINER_FAILED), Utc::now()).await;
            }
        }
        // From nothing: every decky's routes are looked at, each namespace may have lost them.
        for name in self.route(&empty(detail), detail, &BTreeSet::new(), &mut shortfalls).await {
            done.entry(name).or_default().push(ROUTED);
        }
        if let Err(err) = nat::apply(&nat::chain(detail.topology.id), nat_pairs).await {
            tracing::error!(topology = %detail.topology.id, error = %err, "Could not set the NAT exemption again");
            shortfalls.topology.push(NAT_FAILED.into());
        }
        (done, shortfalls)
    }
}

/// A decky that was up once deployed (one that failed to start stays failed until changed).
fn ran(decky: &TopologyDecky) -> bool {
    decky.state == "running" || decky.state == "degraded"
}
