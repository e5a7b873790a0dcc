//! What the master, its agents and their updaters exchange, in DECNET's shapes (reference §1.8,
//! §1.9, §1.11): the paths of every route the three serve, which both the routers and the callers
//! name from here; the agent's deploy, mutate and teardown requests and its status, a topology's
//! apply and teardown, and the heartbeat an agent posts to the master with the results of its
//! deploys and mutations.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::db::DeckyConfig;

/// Where agents post heartbeats on the master's swarm listener.
pub const HEARTBEAT_PATH: &str = "/swarm/heartbeat";
/// The master's swarm listener's own health.
pub const LISTENER_HEALTH_PATH: &str = "/swarm/health";

// The agent's routes (reference §1.8), which the master calls.
/// `GET`: whether the agent (or the updater, on its port) answers.
pub const HEALTH_PATH: &str = "/health";
/// `GET`: the host's deckies and their containers ([`AgentStatus`]).
pub const STATUS_PATH: &str = "/status";
/// `POST` a [`DeployRequest`].
pub const DEPLOY_PATH: &str = "/deploy";
/// `POST` a [`MutateRequest`].
pub const MUTATE_PATH: &str = "/mutate";
/// `POST` a [`TeardownRequest`].
pub const TEARDOWN_PATH: &str = "/teardown";
/// `POST`: tear every decky down, remove the agent's installed files, stop.
pub const SELF_DESTRUCT_PATH: &str = "/self-destruct";
/// `POST` a whole topology; answered with [`TopologyApplied`].
pub const TOPOLOGY_APPLY_PATH: &str = "/topology/apply";
/// `POST` a [`TopologyTeardownRequest`]; answered with [`TopologyApplied`].
pub const TOPOLOGY_TEARDOWN_PATH: &str = "/topology/teardown";

// The updater's routes (reference §1.11), beside [`HEALTH_PATH`]; uploads are multipart.
/// `POST` a release of the agent.
pub const UPDATE_PATH: &str = "/update";
/// `POST` a release of the updater itself.
pub const UPDATE_SELF_PATH: &str = "/update-self";
/// `POST`: the agent's previous release back.
pub const ROLLBACK_PATH: &str = "/rollback";
/// `GET`: the agent's releases.
pub const RELEASES_PATH: &str = "/releases";
/// The largest heartbeat or agent request body read.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `POST /deploy`: the deckies this host is to run, as a deployment INI.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployRequest {
    /// The deployment INI of this host's share of the fleet.
    pub config: String,
    /// Check the INI and answer which deckies it names; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// DECNET's flag to rebuild images; accepted and ignored (the decky image is built locally).
    #[serde(default)]
    pub no_cache: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeployAccepted {
    /// `accepted`, or `dry_run`.
    pub status: String,
    pub deckies: Vec<String>,
}

/// `POST /mutate`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MutateRequest {
    pub decky_id: String,
    /// The services the master drew; the agent's fleet draws its own from the decky's archetype.
    #[serde(default)]
    pub services: Vec<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// `POST /teardown`: one decky, or every decky of the host when `decky_id` is null or absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeardownRequest {
    #[serde(default)]
    pub decky_id: Option<String>,
}

/// `GET /status`, and the `status` of each heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    pub deployed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default)]
    pub deckies: Vec<DeckyConfig>,
    /// Per decky: whether it runs, and each service's container state.
    #[serde(default)]
    pub runtime: BTreeMap<String, DeckyRuntime>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeckyRuntime {
    pub running: bool,
    #[serde(default)]
    pub services: BTreeMap<String, String>,
}

/// What an agent posts to the master every interval and when a deploy or mutation ends.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Heartbeat {
    pub host_uuid: Uuid,
    pub agent_version: String,
    pub status: AgentStatus,
    /// The topologies the agent runs for the master ([`TopologyReport`]s; DECNET's agents send a
    /// shape of their own, which is left unread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Vec<LifecycleDelta>>,
}

/// How one deploy or mutation on the agent ended (or stands).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleDelta {
    pub decky_name: String,
    /// `deploy` or `mutate`.
    pub operation: String,
    /// `running`, `succeeded` or `failed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
}

/// `POST /topology/teardown`: the topology the agent is to remove from its engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyTeardownRequest {
    pub topology_id: Uuid,
}

/// The agent's answer to `POST /topology/apply` (whose body is the whole topology) and
/// `/topology/teardown`: where the topology was left, why (a generic reason), and each decky's
/// state there.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TopologyApplied {
    pub status: crate::db::TopologyStatus,
    pub reason: Option<String>,
    pub deckies: Vec<TopologyDeckyState>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TopologyDeckyState {
    pub uuid: Uuid,
    pub state: String,
    pub last_error: Option<String>,
}

/// Where a topology the agent runs for the master stands on its host (its heal included), sent in
/// each heartbeat's `topology`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TopologyReport {
    pub id: Uuid,
    pub status: crate::db::TopologyStatus,
    pub reason: Option<String>,
    pub deckies: Vec<TopologyDeckyState>,
}
