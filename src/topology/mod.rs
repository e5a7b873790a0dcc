//! Topologies (DECNET's MazeNET) as the API and the mutator use them: [`Topologies`] generates
//! (`generate`) or starts blank, queues mutations (stored first, then announced on the bus),
//! deploys and tears down over the container runtime (`deploy`: a network per LAN, a container
//! per decky with an address on each of its LANs, routes between LANs through the deckies that
//! forward: `routes`, the host's NAT kept off the traffic between them: `nat`), applies a claimed
//! mutation (`ops` turns it into store edits, `deploy` makes them live), and brings deployed
//! topologies back when their containers go (`heal`). The store is the truth; the engine's words
//! go to the server log, callers get [`TopologyError`]s with DECNET's texts.

pub mod deploy;
pub mod generate;
pub mod heal;
pub mod nat;
pub mod ops;
pub mod personas;
pub mod routes;
pub mod shield;

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::bus::topics::ServiceChange;
use crate::bus::{Bus, Event, topics};
use crate::db::{
    Db, DbError, Edge, EditGuard, Lan, Mutation, Topology, TopologyDecky, TopologyDetail, TopologyEdit, TopologyStatus,
};
use crate::fleet::{Fleet, catalog};
use generate::{Params, Plan, SubnetPool};

/// What a topology operation tells its caller.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// 404 with this text.
    #[error("{0}")]
    NotFound(String),
    /// 409 with this text.
    #[error("{0}")]
    Conflict(String),
    /// 400 with this text.
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Store(#[from] DbError),
}

pub const NOT_FOUND: &str = "Topology not found";

/// Why a deploy or teardown is refused while the container engine does not answer.
pub const ENGINE_UNAVAILABLE: &str = "Container runtime unavailable";

/// Why a topology running on a swarm host takes no mutation (its agent applies it whole).
pub const ON_SWARM_HOST: &str = "Topology runs on a swarm host, which applies it whole; its mutation queue is closed.";

/// Statuses from which a topology may be deleted, torn down.
pub const DELETABLE: [TopologyStatus; 3] = [TopologyStatus::Pending, TopologyStatus::TornDown, TopologyStatus::Failed];
pub const TEARDOWNABLE: [TopologyStatus; 4] =
    [TopologyStatus::Active, TopologyStatus::Degraded, TopologyStatus::Failed, TopologyStatus::Deploying];

fn not_found(err: DbError) -> TopologyError {
    match err {
        DbError::NotFound => TopologyError::NotFound(NOT_FOUND.into()),
        other => TopologyError::Store(other),
    }
}

/// Who asks for a topology to be made.
#[derive(Clone, Debug)]
pub struct NewTopology {
    pub name: String,
    pub mode: String,
    pub target_host_uuid: Option<String>,
}

/// Topologies over the store, the bus and the fleet's runtime; cheap to clone.
#[derive(Clone)]
pub struct Topologies {
    db: Db,
    bus: Bus,
    fleet: Fleet,
    /// Held by a deploy, a teardown or a heal in this process, so a heal never makes again what a
    /// teardown is removing.
    engine: Arc<tokio::sync::Mutex<()>>,
}

impl Topologies {
    pub fn new(db: Db, bus: Bus, fleet: Fleet) -> Topologies {
        Topologies { db, bus, fleet, engine: Arc::default() }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The /24s no topology holds yet, in order.
    async fn subnet_pool(&self) -> Result<SubnetPool, TopologyError> {
        let mut taken = BTreeSet::new();
        let mut offset = 0;
        loop {
            let page = self.db.topologies(None, 500, offset).await?;
            for topology in &page.rows {
                if let Ok(detail) = self.db.topology_detail(topology.id).await {
                    taken.extend(detail.lans.into_iter().map(|l| l.subnet));
                }
            }
            offset += page.rows.len() as u64;
            if page.rows.is_empty() || offset >= page.total {
                break;
            }
        }
        Ok(SubnetPool::new(self.fleet.settings().topology_subnet_pool, taken))
    }

    /// The next /24 no topology holds.
    pub async fn next_subnet(&self) -> Result<String, TopologyError> {
        self.subnet_pool().await?.next_free().map_err(|e| TopologyError::Conflict(e.to_string()))
    }

    /// Plans and stores a topology under `params.seed`; status `pending`.
    pub async fn generate(&self, new: NewTopology, params: Params) -> Result<Topology, TopologyError> {
        let mut pool = self.subnet_pool().await?;
        let plan = generate::generate(&params, &catalog::service_names(), &mut pool)
            .map_err(|e| TopologyError::Conflict(e.to_string()))?;
        let snapshot = serde_json::to_value(&params).unwrap_or(Value::Null);
        let detail = from_plan(new, snapshot, plan);
        self.store_new(detail).await
    }

    /// Stores a topology with no LANs; status `pending`.
    pub async fn blank(&self, new: NewTopology) -> Result<Topology, TopologyError> {
        let detail = from_plan(new, json!({"blank": true}), Plan { lans: Vec::new(), deckies: Vec::new() });
        self.store_new(detail).await
    }

    /// Stores a topology made elsewhere (generated, blank, or sent by the master to the agent that
    /// is to run it); 409 when its name is taken.
    pub async fn store_new(&self, detail: TopologyDetail) -> Result<Topology, TopologyError> {
        match self.db.create_topology(&detail).await {
            Ok(()) => Ok(detail.topology),
            Err(DbError::Conflict) => {
                Err(TopologyError::Conflict(format!("Topology name {:?} already exists", detail.topology.name)))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Whether deploy or teardown (which start `from` these statuses) may go on: the topology
    /// exists (404), and when its status lets the operation start, the container engine answers
    /// (409, as the fleet answers an engine failure), so a request the engine cannot serve changes
    /// nothing. A status the operation cannot start from is left to its own refusal.
    pub async fn engine_ready(&self, id: Uuid, from: &[TopologyStatus]) -> Result<(), TopologyError> {
        let topology = self.db.topology(id).await.map_err(not_found)?;
        if !from.contains(&topology.status) || self.fleet.ping().await {
            return Ok(());
        }
        Err(TopologyError::Conflict(ENGINE_UNAVAILABLE.into()))
    }

    pub async fn detail(&self, id: Uuid) -> Result<TopologyDetail, TopologyError> {
        self.db.topology_detail(id).await.map_err(not_found)
    }

    pub async fn delete(&self, id: Uuid) -> Result<(), TopologyError> {
        match self.db.delete_topology(id, &DELETABLE).await {
            Err(DbError::Conflict) => {
                let status = self.db.topology(id).await.map_err(not_found)?.status;
                Err(TopologyError::Conflict(format!(
                    "Topology is '{}'; teardown to 'torn_down' before delete.",
                    status.as_str()
                )))
            }
            other => other.map_err(not_found),
        }
    }

    /// Applies a pending-only child edit: 409 unless `pending` or when `expected_version` is stale.
    pub async fn edit_pending(
        &self,
        id: Uuid,
        expected_version: Option<i64>,
        edits: &[TopologyEdit],
    ) -> Result<Topology, TopologyError> {
        let guard = EditGuard::change(&[TopologyStatus::Pending], expected_version);
        match self.db.edit_topology(id, guard, edits).await {
            Ok(topology) => Ok(topology),
            Err(DbError::Conflict) => {
                Err(self.explain_conflict(id, expected_version, &[TopologyStatus::Pending]).await)
            }
            Err(DbError::NotFound) => {
                self.db.topology(id).await.map_err(not_found)?;
                Err(TopologyError::NotFound("Not found".into()))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Why a guarded write was refused, in DECNET's words.
    async fn explain_conflict(&self, id: Uuid, expected: Option<i64>, statuses: &[TopologyStatus]) -> TopologyError {
        let topology = match self.db.topology(id).await {
            Ok(topology) => topology,
            Err(err) => return not_found(err),
        };
        if !statuses.contains(&topology.status) {
            return TopologyError::Conflict(if statuses.contains(&TopologyStatus::Pending) {
                pending_only(topology.status)
            } else {
                queue_closed(topology.status)
            });
        }
        match expected {
            Some(expected) if expected != topology.version => {
                TopologyError::Conflict(format!("Version conflict: expected {expected}, current {}", topology.version))
            }
            // The guard held, so a unique key did not: a name or an attachment is taken.
            _ => TopologyError::Conflict("A LAN, decky or edge of that name or address already exists".into()),
        }
    }

    /// Stores a mutation of a live topology, then announces it; a failed announcement loses
    /// nothing (the mutator polls).
    pub async fn enqueue(
        &self,
        id: Uuid,
        op: &str,
        payload: &Value,
        expected_version: Option<i64>,
    ) -> Result<Mutation, TopologyError> {
        let live = [TopologyStatus::Active, TopologyStatus::Degraded];
        let topology = self.db.topology(id).await.map_err(not_found)?;
        if !topology.status.is_live() {
            return Err(TopologyError::Conflict(queue_closed(topology.status)));
        }
        if topology.target_host_uuid.is_some() {
            return Err(TopologyError::Conflict(ON_SWARM_HOST.into()));
        }
        let guard = EditGuard::change(&live, expected_version);
        let mutation = match self.db.enqueue_mutation(id, guard, op, payload, Utc::now()).await {
            Ok(mutation) => mutation,
            Err(DbError::Conflict) => return Err(self.explain_conflict(id, expected_version, &live).await),
            Err(err) => return Err(not_found(err)),
        };
        self.announce_mutation(&mutation, "enqueued").await;
        Ok(mutation)
    }

    /// `topology.<id>.mutation.<state>` with the mutation as payload.
    pub async fn announce_mutation(&self, mutation: &Mutation, state: &str) {
        let Ok(topic) = topics::topology_mutation(mutation.topology_id, state) else { return };
        let payload = json!({
            "mutation_id": mutation.id, "topology_id": mutation.topology_id, "op": mutation.op,
            "state": state, "reason": mutation.reason,
        });
        if let Err(err) = self.bus.publish(&Event::new(topic, state, payload)).await {
            tracing::debug!(error = %err, mutation = %mutation.id, "Mutation event not published");
        }
    }

    /// Announces what a mutation did to the services of the topology's deckies (see
    /// [`service_changes`]); a failed publish only costs a dashboard its live update.
    pub async fn announce_service_changes(&self, before: &TopologyDetail, after: &TopologyDetail) {
        for event in service_changes(before, after) {
            if let Err(err) = self.bus.publish(&event).await {
                tracing::debug!(error = %err, topic = %event.topic, "Decky service event not published");
            }
        }
    }

    /// Ends what a restart stranded: a topology `deploying` (failed) or `tearing_down` (degraded)
    /// since before `cutoff`, whose background work died with the process that ran it. Returns
    /// how many it moved. (The cutoff spares another replica's work in progress.)
    pub async fn end_stranded(&self, cutoff: chrono::DateTime<Utc>) -> Result<usize, DbError> {
        let mut moved = 0;
        for (from, to) in [
            (TopologyStatus::Deploying, TopologyStatus::Failed),
            (TopologyStatus::TearingDown, TopologyStatus::Degraded),
        ] {
            let stranded = self.db.topologies(Some(from), 500, 0).await?;
            for topology in stranded.rows.iter().filter(|t| t.status_changed_at < cutoff) {
                let reason = Some(crate::db::STRANDED_LIFECYCLE_ERROR);
                if self.move_status(topology.id, Some(&[from]), to, reason).await.is_ok() {
                    moved += 1;
                }
            }
        }
        Ok(moved)
    }

    /// Moves the topology along the status machine, recording why, and announces it.
    pub async fn move_status(
        &self,
        id: Uuid,
        from: Option<&[TopologyStatus]>,
        to: TopologyStatus,
        reason: Option<&str>,
    ) -> Result<TopologyStatus, DbError> {
        let left = self.db.set_topology_status(id, from, to, reason, Utc::now()).await?;
        let payload = json!({"state": to.as_str(), "from": left.as_str(), "reason": reason});
        if let Err(err) = self.bus.publish(&Event::new(topics::topology_status(id), "status", payload)).await {
            tracing::debug!(error = %err, topology = %id, "Status event not published");
        }
        Ok(left)
    }
}

/// The events DECNET publishes when a decky that stays gains or loses services:
/// `decky.<name>.service_added` or `service_removed`, one per service, with `{decky_name,
/// service_name, topology_id, services}` (its services after the change). A decky added or removed
/// as a whole is told by its mutation's own events.
pub fn service_changes(before: &TopologyDetail, after: &TopologyDetail) -> Vec<Event> {
    let mut events = Vec::new();
    for now in &after.deckies {
        let Some(was) = before.deckies.iter().find(|d| d.uuid == now.uuid) else { continue };
        let added = now.services.iter().filter(|s| !was.services.contains(s)).map(|s| (s, ServiceChange::Added));
        let removed = was.services.iter().filter(|s| !now.services.contains(s)).map(|s| (s, ServiceChange::Removed));
        for (service, change) in added.chain(removed) {
            let Ok(topic) = topics::decky_service(&now.name, change) else { continue };
            let payload = json!({
                "decky_name": now.name, "service_name": service, "topology_id": now.topology_id,
                "services": now.services,
            });
            events.push(Event::new(topic, change.as_str(), payload));
        }
    }
    events
}

/// DECNET's refusal of a child edit outside `pending`.
pub fn pending_only(status: TopologyStatus) -> String {
    format!(
        "Topology is '{}'; free-form child edits are pending-only.  Use the mutation queue for active topologies.",
        status.as_str()
    )
}

/// DECNET's refusal of a mutation outside `active`/`degraded`.
pub fn queue_closed(status: TopologyStatus) -> String {
    format!(
        "Topology is '{}'; the mutation queue is only open for 'active' or 'degraded' topologies.  Use child-CRUD endpoints while pending.",
        status.as_str()
    )
}

/// The stored form of a plan: uuids for every part, every decky `pending`.
fn from_plan(new: NewTopology, snapshot: Value, plan: Plan) -> TopologyDetail {
    let now = Utc::now();
    let id = Uuid::new_v4();
    let topology = Topology {
        id,
        name: new.name,
        mode: new.mode,
        target_host_uuid: new.target_host_uuid,
        status: TopologyStatus::Pending,
        version: 1,
        needs_resync: false,
        created_at: now,
        status_changed_at: now,
        email_personas: "[]".into(),
        language_default: "en".into(),
        config_snapshot: snapshot,
    };
    let lans: Vec<Lan> = plan
        .lans
        .iter()
        .map(|l| Lan {
            id: Uuid::new_v4(),
            topology_id: id,
            name: l.name.clone(),
            subnet: l.subnet.clone(),
            is_dmz: l.is_dmz,
            docker_network_id: None,
            x: None,
            y: None,
        })
        .collect();
    let mut deckies = Vec::new();
    let mut edges = Vec::new();
    for planned in plan.deckies {
        let uuid = Uuid::new_v4();
        let bridge = planned.addresses.len() > 1;
        for (lan, ip) in &planned.addresses {
            edges.push(Edge {
                id: Uuid::new_v4(),
                topology_id: id,
                decky_uuid: uuid,
                lan_id: lans[*lan].id,
                ip: Some(ip.clone()),
                is_bridge: bridge,
                forwards_l3: planned.forwards_l3,
            });
        }
        let ips_by_lan: serde_json::Map<String, Value> =
            planned.addresses.iter().map(|(lan, ip)| (lans[*lan].name.clone(), Value::String(ip.clone()))).collect();
        deckies.push(TopologyDecky {
            uuid,
            topology_id: id,
            name: planned.name,
            services: planned.services,
            decky_config: Some(json!({"ips_by_lan": ips_by_lan, "forwards_l3": planned.forwards_l3})),
            ip: planned.addresses.first().map(|(_, ip)| ip.clone()),
            state: "pending".into(),
            last_error: None,
            x: None,
            y: None,
        });
    }
    TopologyDetail { topology, lans, deckies, edges }
}

#[cfg(test)]
mod tests {
    use super::*;
    use generate::{PlannedDecky, PlannedLan};

    fn planned(name: &str, services: &[&str], ip: &str) -> PlannedDecky {
        let services = services.iter().map(|s| s.to_string()).collect();
        PlannedDecky { name: name.into(), services, addresses: vec![(0, ip.into())], forwards_l3: false }
    }

    #[test]
    fn a_kept_decky_announces_each_service_it_gained_or_lost() {
        let new = NewTopology { name: "t".into(), mode: "unihost".into(), target_host_uuid: None };
        let lan = PlannedLan { name: "LAN-00".into(), subnet: "10.0.0.0/24".into(), is_dmz: true, parent: None };
        let deckies = vec![planned("web", &["ssh", "http"], "10.0.0.2"), planned("gone", &["ftp"], "10.0.0.3")];
        let before = from_plan(new.clone(), Value::Null, Plan { lans: vec![lan.clone()], deckies });
        let id = before.topology.id;
        let mut after = before.clone();
        after.deckies[0].services = vec!["http".into(), "smtp".into(), "telnet".into()];
        let added =
            from_plan(new, Value::Null, Plan { lans: vec![lan], deckies: vec![planned("new", &["ssh"], "10.0.0.4")] });
        after.deckies[1] = added.deckies[0].clone();

        let events: Vec<(String, String, Value)> =
            service_changes(&before, &after).into_iter().map(|e| (e.topic, e.kind, e.payload)).collect();
        let topics: Vec<(&str, &str)> = events.iter().map(|(t, k, _)| (t.as_str(), k.as_str())).collect();
        assert_eq!(
            topics,
            [
                ("decky.web.service_added", "service_added"),
                ("decky.web.service_added", "service_added"),
                ("decky.web.service_removed", "service_removed"),
            ]
        );
        assert_eq!(
            events[0].2,
            json!({"decky_name": "web", "service_name": "smtp", "topology_id": id, "services": ["http", "smtp", "telnet"]})
        );
        assert_eq!(events[2].2["service_name"], "ssh");
        assert!(service_changes(&before, &before).is_empty());
    }
}
