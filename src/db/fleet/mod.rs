//! The fleet: the network its deckies share and each decky as deployed, in one store (DECNET kept
//! three that disagreed: a state key, a table and a file). A decky is DECNET's `DeckyConfig`, kept
//! as JSON, with the state of its last deploy beside it. Both dialects accept every statement
//! (`sql.rs`).

mod sql;

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::DbResult;
use super::lifecycle::DeckyLifecycle;

/// A decky as DECNET's dashboard reads it (`DeckyConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeckyConfig {
    pub name: String,
    pub ip: String,
    pub services: Vec<String>,
    pub distro: String,
    /// The image the decky runs: `svc-decky` (the default image, built locally) or the INI's `image`.
    pub base_image: String,
    pub build_base: String,
    pub hostname: String,
    pub archetype: Option<String>,
    /// Per-service settings from the INI's `[<decky>.<service>]` sections.
    pub service_config: BTreeMap<String, BTreeMap<String, String>>,
    pub nmap_os: String,
    /// Minutes between mutations, when set.
    pub mutate_interval: Option<u32>,
    pub last_mutated: f64,
    pub last_login_attempt: f64,
    pub host_uuid: Option<String>,
}

/// The network every decky of the fleet is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetNetwork {
    /// IPv4 CIDR, e.g. `172.29.0.0/24`.
    pub subnet: String,
    pub gateway: String,
    /// The host interface a macvlan network sits on; `None` for a private bridge.
    pub interface: Option<String>,
}

/// Where a decky's last deploy got to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeployState {
    Pending,
    Running,
    Failed,
}

impl DeployState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeployState::Pending => "pending",
            DeployState::Running => "running",
            DeployState::Failed => "failed",
        }
    }
}

impl std::str::FromStr for DeployState {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(DeployState::Pending),
            "running" => Ok(DeployState::Running),
            "failed" => Ok(DeployState::Failed),
            other => Err(anyhow::anyhow!("unknown deploy state `{other}`")),
        }
    }
}

/// One stored decky.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetDecky {
    pub config: DeckyConfig,
    pub state: DeployState,
    /// Why the last deploy failed (generic; the engine's text is in the server log).
    pub last_error: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// The fleet as stored: its network (none before the first deploy) and its deckies by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredFleet {
    pub network: Option<FleetNetwork>,
    pub deckies: Vec<FleetDecky>,
}

/// A deploy as accepted: the network, the deckies it (re)deploys, and their lifecycle records.
#[derive(Clone, Debug)]
pub struct Deployment<'a> {
    pub network: &'a FleetNetwork,
    pub deckies: &'a [DeckyConfig],
    /// Replace the fleet: deckies not in `deckies` are removed from the store.
    pub replace: bool,
    pub lifecycles: &'a [DeckyLifecycle],
    pub at: DateTime<Utc>,
}

#[async_trait]
pub trait FleetStore {
    /// The network and every decky, ordered by name.
    async fn fleet(&self) -> DbResult<StoredFleet>;

    /// Stores a deploy in one transaction: the network, the deckies (state `pending`), and their
    /// lifecycle records. A decky of the same name that an earlier deploy left unfinished
    /// (`pending` or `failed`) is replaced; an additive deploy that would reuse a running decky's
    /// name, or a stored address, fails with `Conflict` and stores nothing.
    async fn commit_deployment(&self, deployment: Deployment<'_>) -> DbResult<()>;

    /// Records how a decky's deploy ended.
    async fn set_deploy_state(
        &self,
        name: &str,
        state: DeployState,
        error: Option<&str>,
        at: DateTime<Utc>,
    ) -> DbResult<()>;

    /// Replaces a decky's configuration if it is still `old` (`Conflict` when it changed meanwhile,
    /// `NotFound` when the decky is gone): a mutation decided on what it read.
    async fn replace_decky_config(&self, old: &DeckyConfig, new: &DeckyConfig, at: DateTime<Utc>) -> DbResult<()>;

    /// Removes a decky; `false` when there was none of that name. The last one takes the network.
    async fn remove_decky(&self, name: &str) -> DbResult<bool>;

    /// This deployment's identity: made on the first call and the same ever after, whichever
    /// process asks (two racing first calls agree on the one stored). The fleet labels what it
    /// makes with it, and only ever removes what carries it.
    async fn deployment_id(&self) -> DbResult<Uuid>;
}
