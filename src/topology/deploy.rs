//! A topology on the container runtime. Every change is one [`converge`](Topologies::converge)
//! from the topology as it was to the topology as stored: new LANs become networks (internal
//! unless DMZ), gone deckies lose their container, new or changed deckies get one on their home
//! LAN and are connected to their other LANs at their addresses, changed attachments are
//! connected or disconnected, every decky gets its routes to the LANs behind forwarding deckies
//! (`routes`), gone LANs lose their network. A deploy converges from nothing; a
//! mutation from the topology before its edits. Teardown removes what carries the topology's
//! label and the networks its LANs name, which is exactly what converging made.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use uuid::Uuid;

use super::{TEARDOWNABLE, Topologies, TopologyError, nat, not_found, ops, routes, shield};
use crate::db::{
    DbError, EditGuard, Lan, Mutation, MutationState, Topology, TopologyDecky, TopologyDetail, TopologyStatus,
};
use crate::fleet::decky_container::service_settings_of;
use crate::fleet::{DeckyContainer, TOPOLOGY_LABEL};
use crate::runtime::{NetworkSpec, RuntimeError};

/// The generic reasons a decky or the topology as a whole is left with; the engine's words are in
/// the log.
pub(super) const CONTAINER_FAILED: &str = "its container could not be started or attached";
pub(super) const NAT_FAILED: &str = "the host's NAT could not be kept off the traffic between its LANs";

/// Why a deploy, a converge or a teardown could not go on. Its text is the generic reason a
/// topology is left with; the engine's and the store's words are in the log.
#[derive(Debug, thiserror::Error)]
pub enum ConvergeFailure {
    #[error("the topology could not be read")]
    Unreadable,
    #[error("the deployment's identity could not be read")]
    Identity,
    #[error("a LAN's network could not be created")]
    Network,
    #[error("a LAN's network could not be created: subnet {0} is in use (on the host or by another network)")]
    SubnetInUse(String),
    #[error("a LAN's network could not be created: it exists with another subnet ({0}); tear it down first")]
    NetworkOnAnotherSubnet(String),
    #[error("the decky image could not be built")]
    Image,
    #[error("{CONTAINER_FAILED}")]
    Container,
    #[error("some of the topology's containers or networks could not be removed")]
    Teardown,
}

/// Why a claimed mutation failed; its text is the mutation's stored reason.
#[derive(Debug, thiserror::Error)]
enum MutationFailure {
    /// The op itself was refused: the engine was not touched.
    #[error("{0}")]
    Refused(String),
    #[error("store: {0}")]
    Store(#[from] DbError),
    /// The engine fell short (what converging reported): the topology is degraded.
    #[error("engine: {0}")]
    Engine(String),
}

/// Where a deploy or teardown left the topology, and why (a generic reason).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub status: TopologyStatus,
    pub reason: Option<String>,
}

impl Topologies {
    fn prefix(&self, topology: Uuid) -> String {
        let id = topology.simple().to_string();
        format!("{}-t{}", self.fleet.settings().name, &id[..8])
    }

    /// The engine's name of a LAN's network (by id, so a renamed LAN keeps its network).
    pub fn network_name(&self, lan: &Lan) -> String {
        let id = lan.id.simple().to_string();
        format!("{}-l{}", self.prefix(lan.topology_id), &id[..8])
    }

    pub fn container_name(&self, decky: &TopologyDecky) -> String {
        format!("{}-{}", self.prefix(decky.topology_id), decky.name)
    }

    /// `pending` → `deploying`, then the deploy in the background.
    pub async fn start_deploy(&self, id: Uuid) -> Result<Topology, TopologyError> {
        let topology = self.begin_deploy(id).await?;
        let this = self.clone();
        tokio::spawn(async move { this.deploy(id).await });
        Ok(topology)
    }

    /// `pending` → `deploying` (409 from any other status); the deploy is the caller's to run,
    /// here ([`deploy`](Topologies::deploy)) or on the swarm host the topology targets.
    pub async fn begin_deploy(&self, id: Uuid) -> Result<Topology, TopologyError> {
        match self.move_status(id, Some(&[TopologyStatus::Pending]), TopologyStatus::Deploying, None).await {
            Ok(_) => {}
            Err(DbError::Conflict) => {
                let status = self.db.topology(id).await.map_err(not_found)?.status;
                return Err(TopologyError::Conflict(format!(
                    "Topology is '{}'; only 'pending' topologies can be deployed.",
                    status.as_str()
                )));
            }
            Err(err) => return Err(not_found(err)),
        }
        Ok(self.db.topology(id).await?)
    }

    /// Makes the stored topology live and records how that went: `active`, `degraded` (some
    /// decky failed) or `failed` (nothing could run); returns that status and its reason.
    pub async fn deploy(&self, id: Uuid) -> Outcome {
        let _engine = self.engine.lock().await;
        let started = std::time::Instant::now();
        let outcome = match self.db.topology_detail(id).await {
            Ok(detail) => self.converge(&empty(&detail), &detail).await,
            Err(err) => {
                tracing::error!(topology = %id, error = %err, "Cannot read the topology to deploy");
                Err(ConvergeFailure::Unreadable)
            }
        };
        if outcome.is_err() {
            // Nothing half-made stays behind a failed deploy: what it made so far goes again.
            if let Err(failure) = self.remove_all(id).await {
                tracing::warn!(topology = %id, reason = %failure, "Could not remove all a failed deploy made");
            }
        }
        let (to, reason) = match &outcome {
            Ok(shortfalls) if shortfalls.is_empty() => (TopologyStatus::Active, None),
            Ok(shortfalls) => (TopologyStatus::Degraded, Some(shortfalls.reason())),
            Err(failure) => (TopologyStatus::Failed, Some(failure.to_string())),
        };
        if let Err(err) = self.move_status(id, Some(&[TopologyStatus::Deploying]), to, reason.as_deref()).await {
            tracing::warn!(topology = %id, error = %err, "Could not record the deploy's outcome");
        }
        tracing::info!(topology = %id, status = to.as_str(), elapsed_ms = started.elapsed().as_millis() as u64, "Topology deploy finished");
        Outcome { status: to, reason }
    }

    /// Moves to `tearing_down`, then tears down in the background.
    pub async fn start_teardown(&self, id: Uuid) -> Result<Topology, TopologyError> {
        let topology = self.begin_teardown(id).await?;
        let this = self.clone();
        tokio::spawn(async move { this.teardown(id).await });
        Ok(topology)
    }

    /// Moves to `tearing_down` (409 from a status that cannot be torn down); the teardown is the
    /// caller's to run, as [`begin_deploy`](Topologies::begin_deploy)'s deploy.
    pub async fn begin_teardown(&self, id: Uuid) -> Result<Topology, TopologyError> {
        match self.move_status(id, Some(&TEARDOWNABLE), TopologyStatus::TearingDown, None).await {
            Ok(_) => {}
            Err(DbError::Conflict) => {
                let status = self.db.topology(id).await.map_err(not_found)?.status;
                return Err(TopologyError::Conflict(format!(
                    "Topology is '{}'; cannot teardown (allowed from: ['active', 'degraded', 'deploying', 'failed']).",
                    status.as_str()
                )));
            }
            Err(err) => return Err(not_found(err)),
        }
        Ok(self.db.topology(id).await?)
    }

    /// Removes every container with the topology's label and every LAN's network: `torn_down`,
    /// or `degraded` with the reason when something stayed; returns that status and its reason.
    pub async fn teardown(&self, id: Uuid) -> Outcome {
        let _engine = self.engine.lock().await;
        let outcome = self.remove_all(id).await;
        let (to, reason) = match outcome {
            Ok(()) => (TopologyStatus::TornDown, None),
            Err(failure) => (TopologyStatus::Degraded, Some(failure.to_string())),
        };
        if let Err(err) = self.move_status(id, Some(&[TopologyStatus::TearingDown]), to, reason.as_deref()).await {
            tracing::warn!(topology = %id, error = %err, "Could not record the teardown's outcome");
        }
        Outcome { status: to, reason }
    }

    async fn remove_all(&self, id: Uuid) -> Result<(), ConvergeFailure> {
        let runtime = self.fleet.runtime();
        let detail = self.db.topology_detail(id).await.map_err(|err| {
            tracing::error!(topology = %id, error = %err, "Cannot read the topology to tear down");
            ConvergeFailure::Unreadable
        })?;
        let mut ok = true;
        match runtime.list(TOPOLOGY_LABEL, &id.to_string()).await {
            Ok(containers) => {
                for container in containers {
                    if let Err(err) = runtime.remove(&container.id).await {
                        tracing::error!(container = %container.name, error = %err, "Could not remove a topology container");
                        ok = false;
                    }
                }
            }
            Err(err) => {
                tracing::error!(topology = %id, error = %err, "Cannot list the topology's containers");
                return Err(ConvergeFailure::Teardown);
            }
        }
        for decky in &detail.deckies {
            let _ = self.db.set_topology_decky_state(decky.uuid, "torn_down", None, Utc::now()).await;
        }
        if let Err(err) = nat::apply(&nat::chain(id), &[]).await {
            tracing::error!(topology = %id, error = %err, "Could not remove the topology's NAT exemption");
            ok = false;
        }
        shield::apply(id, &[]).await;
        for lan in &detail.lans {
            match runtime.remove_network(&self.network_name(lan)).await {
                Ok(()) => {
                    let _ = self.db.set_lan_network(lan.id, None).await;
                }
                Err(err) => {
                    tracing::error!(network = %self.network_name(lan), error = %err, "Could not remove a LAN's network");
                    ok = false;
                }
            }
        }
        if ok { Ok(()) } else { Err(ConvergeFailure::Teardown) }
    }

    /// Makes the engine go from `before` to `after` (see the module's header). Returns what fell
    /// short (the deckies that failed, and why); `Err` when it could not go on (a network could not
    /// be made, …).
    pub async fn converge(
        &self,
        before: &TopologyDetail,
        after: &TopologyDetail,
    ) -> Result<Shortfalls, ConvergeFailure> {
        let runtime = self.fleet.runtime();
        let owner = self.fleet.owner().await.map_err(|err| {
            tracing::error!(error = %err, "Cannot read the deployment's identity");
            ConvergeFailure::Identity
        })?;
        let old_lans: BTreeSet<Uuid> = before.lans.iter().map(|l| l.id).collect();
        let new_lans: BTreeSet<Uuid> = after.lans.iter().map(|l| l.id).collect();
        for lan in after.lans.iter().filter(|l| !old_lans.contains(&l.id)) {
            let spec = NetworkSpec {
                name: self.network_name(lan),
                driver: "bridge".into(),
                parent: None,
                subnet: lan.subnet.clone(),
                gateway: lan_gateway(&lan.subnet),
                internal: !lan.is_dmz,
                labels: owner.labels(Some(lan.topology_id), None),
            };
            if let Err(err) = runtime.ensure_network(&spec).await {
                tracing::error!(network = %spec.name, error = %err, "Could not create a LAN's network");
                return Err(match err {
                    RuntimeError::SubnetInUse(_) => ConvergeFailure::SubnetInUse(spec.subnet),
                    RuntimeError::NetworkOnAnotherSubnet { existing, .. } => {
                        ConvergeFailure::NetworkOnAnotherSubnet(existing)
                    }
                    _ => ConvergeFailure::Network,
                });
            }
            let _ = self.db.set_lan_network(lan.id, Some(&spec.name)).await;
        }
        let mut shortfalls = Shortfalls::default();
        if let Err(err) = nat::apply(&nat::chain(after.topology.id), &nat::exemptions(after)).await {
            tracing::error!(topology = %after.topology.id, error = %err, "Could not exempt the traffic between LANs from NAT");
            shortfalls.topology.push(NAT_FAILED.into());
        }
        shield::apply(after.topology.id, &shield::rules(after, self.fleet.settings().host_isolation)).await;

        let old: BTreeMap<Uuid, &TopologyDecky> = before.deckies.iter().map(|d| (d.uuid, d)).collect();
        let new: BTreeSet<Uuid> = after.deckies.iter().map(|d| d.uuid).collect();
        for decky in before.deckies.iter().filter(|d| !new.contains(&d.uuid)) {
            if let Err(err) = runtime.remove(&self.container_name(decky)).await {
                tracing::error!(decky = %decky.name, error = %err, "Could not remove a decky's container");
                return Err(ConvergeFailure::Container);
            }
        }
        let mut image = None;
        let mut started = BTreeSet::new();
        for decky in &after.deckies {
            let recreate = old.get(&decky.uuid).is_none_or(|was| needs_recreate(before, was, after, decky));
            let result = if recreate {
                if image.is_none() {
                    image = Some(self.fleet.default_image().await.map_err(|_| ConvergeFailure::Image)?);
                }
                self.start_decky(after, decky, image.as_deref().unwrap_or_default()).await
            } else {
                self.reattach(before, after, decky).await
            };
            let (state, error) = match result {
                Ok(()) => {
                    if recreate {
                        started.insert(decky.uuid);
                    }
                    ("running", None)
                }
                Err(_) => {
                    shortfalls.deckies.push((decky.name.clone(), CONTAINER_FAILED.into()));
                    ("failed", Some(CONTAINER_FAILED))
                }
            };
            if recreate || error.is_some() {
                let _ = self.db.set_topology_decky_state(decky.uuid, state, error, Utc::now()).await;
            }
        }

        self.route(before, after, &started, &mut shortfalls).await;

        for lan in before.lans.iter().filter(|l| !new_lans.contains(&l.id)) {
            if let Err(err) = runtime.remove_network(&self.network_name(lan)).await {
                tracing::error!(network = %self.network_name(lan), error = %err, "Could not remove a LAN's network");
                return Err(ConvergeFailure::Teardown);
            }
        }
        Ok(shortfalls)
    }

    /// Gives each running decky its routes to the LANs behind forwarding deckies (`routes`)
    /// where its plan changed from `before`'s, or it was `started` (a new namespace) and has some;
    /// a decky that could not be given them is `degraded`, with the reason, in the store and in
    /// `shortfalls`. Returns the deckies whose routes changed.
    pub(super) async fn route(
        &self,
        before: &TopologyDetail,
        after: &TopologyDetail,
        started: &BTreeSet<Uuid>,
        shortfalls: &mut Shortfalls,
    ) -> Vec<String> {
        let runtime = self.fleet.runtime();
        let had = routes::plan(before);
        let mut changed = Vec::new();
        for (uuid, routes) in routes::plan(after) {
            let had = had.get(&uuid).map(Vec::as_slice).unwrap_or_default();
            if had == routes.as_slice() && (routes.is_empty() || !started.contains(&uuid)) {
                continue;
            }
            let Some(decky) = after.deckies.iter().find(|d| d.uuid == uuid) else { continue };
            let result = match runtime.pid(&self.container_name(decky)).await {
                Ok(Some(pid)) => routes::ensure(pid, &routes).await.map_err(|err| err.to_string()),
                // Not running: its start already failed and was counted.
                Ok(None) => continue,
                Err(err) => {
                    tracing::error!(decky = %decky.name, error = %err, "Cannot find a decky's container to route");
                    Err("the engine did not say where its container runs".to_string())
                }
            };
            if result.is_ok() && decky.state == "degraded" {
                let _ = self.db.set_topology_decky_state(decky.uuid, "running", None, Utc::now()).await;
            }
            if result == Ok(true) {
                changed.push(decky.name.clone());
            }
            if let Err(err) = result {
                tracing::error!(decky = %decky.name, error = %err, "Could not set a decky's routes between LANs");
                let cause = format!("its routes between LANs could not be set ({err})");
                let _ = self.db.set_topology_decky_state(decky.uuid, "degraded", Some(&cause), Utc::now()).await;
                shortfalls.deckies.push((decky.name.clone(), cause));
            }
        }
        changed
    }

    /// Runs the decky on its home LAN and connects it to the others.
    pub(super) async fn start_decky(
        &self,
        detail: &TopologyDetail,
        decky: &TopologyDecky,
        image: &str,
    ) -> Result<(), ConvergeFailure> {
        let runtime = self.fleet.runtime();
        let edges = detail.edges_of(decky);
        let Some((home, rest)) = edges.split_first() else {
            tracing::warn!(decky = %decky.name, "A decky on no LAN is not started");
            return Err(ConvergeFailure::Container);
        };
        let lan_of = |id: Uuid| detail.lans.iter().find(|l| l.id == id);
        let Some(home_lan) = lan_of(home.lan_id) else { return Err(ConvergeFailure::Container) };
        let forwards = edges.iter().any(|e| e.forwards_l3);
        let service_config = service_settings_of(decky.decky_config.as_ref());
        let owner = self.fleet.owner().await.map_err(|err| {
            tracing::error!(error = %err, "Cannot read the deployment's identity");
            ConvergeFailure::Identity
        })?;
        let spec = owner.spec(&DeckyContainer {
            container: self.container_name(decky),
            name: &decky.name,
            hostname: &decky.name,
            image: image.to_string(),
            services: &decky.services,
            service_config: &service_config,
            network: self.network_name(home_lan),
            ip: home.ip.clone().unwrap_or_default(),
            topology: Some(decky.topology_id),
            forwards: forwards && !rest.is_empty(),
            artifacts: self.fleet.artifacts().prepare(&decky.name),
        });
        if let Err(err) = runtime.run(&spec).await {
            tracing::error!(decky = %decky.name, error = %err, "Could not start a topology decky");
            return Err(ConvergeFailure::Container);
        }
        for edge in rest {
            let Some(lan) = lan_of(edge.lan_id) else { continue };
            let ip = edge.ip.clone().unwrap_or_default();
            if let Err(err) = runtime.connect(&self.network_name(lan), &spec.name, &ip).await {
                tracing::error!(decky = %decky.name, lan = %lan.name, error = %err, "Could not attach a decky to a LAN");
                return Err(ConvergeFailure::Container);
            }
        }
        tracing::info!(decky = %decky.name, container = %spec.name, "Topology decky started");
        Ok(())
    }

    /// Connects and disconnects a kept decky as its attachments changed.
    async fn reattach(
        &self,
        before: &TopologyDetail,
        after: &TopologyDetail,
        decky: &TopologyDecky,
    ) -> Result<(), ConvergeFailure> {
        let runtime = self.fleet.runtime();
        let container = self.container_name(decky);
        let old: BTreeSet<(Uuid, Option<String>)> =
            before.edges.iter().filter(|e| e.decky_uuid == decky.uuid).map(|e| (e.lan_id, e.ip.clone())).collect();
        let new: BTreeSet<(Uuid, Option<String>)> =
            after.edges.iter().filter(|e| e.decky_uuid == decky.uuid).map(|e| (e.lan_id, e.ip.clone())).collect();
        for (lan, _) in old.difference(&new) {
            if let Some(lan) = before.lans.iter().find(|l| l.id == *lan)
                && let Err(err) = runtime.disconnect(&self.network_name(lan), &container).await
            {
                tracing::error!(decky = %decky.name, error = %err, "Could not detach a decky from a LAN");
                return Err(ConvergeFailure::Container);
            }
        }
        for (lan, ip) in new.difference(&old) {
            if let Some(lan) = after.lans.iter().find(|l| l.id == *lan)
                && let Err(err) =
                    runtime.connect(&self.network_name(lan), &container, ip.as_deref().unwrap_or_default()).await
            {
                tracing::error!(decky = %decky.name, error = %err, "Could not attach a decky to a LAN");
                return Err(ConvergeFailure::Container);
            }
        }
        Ok(())
    }

    /// Applies a claimed mutation: its edits to the store, then to the engine when the topology
    /// is live. Ends the mutation `applied` or `failed` (with the reason), moves a topology whose
    /// engine failed to `degraded`, and announces each step.
    pub async fn apply(&self, mutation: &Mutation) -> MutationState {
        self.announce_mutation(mutation, "applying").await;
        let outcome = self.apply_inner(mutation).await;
        let reason = outcome.as_ref().err().map(MutationFailure::to_string);
        let state = if outcome.is_ok() { MutationState::Applied } else { MutationState::Failed };
        match self.db.finish_mutation(mutation.id, state, reason.as_deref(), Utc::now()).await {
            Ok(()) => {}
            Err(DbError::NotFound) => {
                tracing::warn!(mutation = %mutation.id, "The mutation's claim went stale meanwhile")
            }
            Err(err) => tracing::error!(mutation = %mutation.id, error = %err, "Could not record the mutation's end"),
        }
        let mut ended = mutation.clone();
        ended.state = state;
        ended.reason = reason.clone();
        self.announce_mutation(&ended, state.as_str()).await;
        // A refused op leaves the engine as it was; only an engine failure degrades.
        if let Err(MutationFailure::Engine(_)) = &outcome {
            let _ = self.move_status(mutation.topology_id, None, TopologyStatus::Degraded, reason.as_deref()).await;
        }
        state
    }

    async fn apply_inner(&self, mutation: &Mutation) -> Result<(), MutationFailure> {
        let mut pool = self.subnet_pool().await.map_err(|err| match err {
            TopologyError::Store(err) => MutationFailure::Store(err),
            other => MutationFailure::Refused(other.to_string()),
        })?;
        let before = self.db.topology_detail(mutation.topology_id).await?;
        let live = before.topology.status.is_live();
        let edits = ops::edits(&before, &mutation.op, &mutation.payload, &mut pool, live)
            .map_err(|refused| MutationFailure::Refused(refused.0))?;
        let guard = EditGuard::queued(&[TopologyStatus::Active, TopologyStatus::Degraded]);
        match self.db.edit_topology(mutation.topology_id, guard, &edits).await {
            Ok(_) => {}
            Err(DbError::Conflict) => {
                return Err(MutationFailure::Refused("a name, address or attachment is already taken".into()));
            }
            Err(DbError::NotFound) => return Err(MutationFailure::Refused("a part the op names is gone".into())),
            Err(err) => return Err(err.into()),
        }
        let after = self.db.topology_detail(mutation.topology_id).await?;
        match self.converge(&before, &after).await {
            Ok(shortfalls) if shortfalls.is_empty() => Ok(()),
            Ok(shortfalls) => Err(MutationFailure::Engine(shortfalls.reason())),
            Err(failure) => Err(MutationFailure::Engine(failure.to_string())),
        }
    }

    /// A pool for `add_lan` without a subnet: the /24s no topology holds.
    pub async fn pool(&self) -> Result<super::generate::SubnetPool, TopologyError> {
        self.subnet_pool().await
    }
}

/// What a converge that left the topology running fell short of: the deckies that failed (name,
/// cause) and what failed for the topology as a whole.
#[derive(Debug, Default)]
pub struct Shortfalls {
    pub deckies: Vec<(String, String)>,
    pub topology: Vec<String>,
}

impl Shortfalls {
    pub fn is_empty(&self) -> bool {
        self.deckies.is_empty() && self.topology.is_empty()
    }

    /// The status reason: `N decky/ies failed to start: 'name': cause; …`, then the rest.
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if !self.deckies.is_empty() {
            let each: Vec<String> = self.deckies.iter().map(|(name, cause)| format!("'{name}': {cause}")).collect();
            parts.push(format!("{} decky/ies failed to start: {}", self.deckies.len(), each.join("; ")));
        }
        parts.extend(self.topology.iter().cloned());
        parts.join("; ")
    }
}

/// A topology with no parts: what a deploy converges from.
pub(super) fn empty(detail: &TopologyDetail) -> TopologyDetail {
    TopologyDetail { topology: detail.topology.clone(), lans: Vec::new(), deckies: Vec::new(), edges: Vec::new() }
}

/// The gateway of a /24: its first host.
fn lan_gateway(subnet: &str) -> String {
    subnet.parse::<crate::fleet::subnet::Subnet>().map(|s| s.first_host().to_string()).unwrap_or_default()
}

/// A decky's container is made again when what it runs, its name, its home LAN or its
/// forwarding changed; other attachment changes are connects and disconnects.
fn needs_recreate(before: &TopologyDetail, was: &TopologyDecky, after: &TopologyDetail, now: &TopologyDecky) -> bool {
    let home = |d: &TopologyDetail, decky: &TopologyDecky| d.edges_of(decky).first().map(|e| (e.lan_id, e.ip.clone()));
    let forwards = |d: &TopologyDetail, decky: &TopologyDecky| d.edges_of(decky).iter().any(|e| e.forwards_l3);
    was.services != now.services
        || was.name != now.name
        || home(before, was) != home(after, now)
        || forwards(before, was) != forwards(after, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_each_failed_decky_and_its_cause() {
        let mut shortfalls = Shortfalls::default();
        assert!(shortfalls.is_empty());
        shortfalls.deckies.push((
            "db".into(),
            "its routes between LANs could not be set (Error: Nexthop has invalid gateway.)".into(),
        ));
        shortfalls.deckies.push(("web".into(), CONTAINER_FAILED.into()));
        assert_eq!(
            shortfalls.reason(),
            "2 decky/ies failed to start: 'db': its routes between LANs could not be set (Error: Nexthop has \
             invalid gateway.); 'web': its container could not be started or attached"
        );
        shortfalls.topology.push(NAT_FAILED.into());
        assert!(
            shortfalls
                .reason()
                .ends_with("attached; the host's NAT could not be kept off the traffic between its LANs")
        );
        shortfalls.deckies.clear();
        assert_eq!(shortfalls.reason(), NAT_FAILED);
    }
}
