//! The tarpit: one rule per decky (DECNET's `tarpit_rules`, upserted by decky name, a new id each
//! time), with how and where it was last put in force; and the watcher's open sessions, so that a
//! restart neither enters a caught attacker twice nor loses its exit. Opening and closing a
//! session say whether this call did it, so two watchers never both report one edge. Both
//! dialects accept every statement (`sql.rs`).

mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::DbResult;

/// A rule as an admin set it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TarpitRule {
    /// New each time the rule is set.
    pub id: Uuid,
    pub decky_name: String,
    /// The decky's TCP ports whose traffic is slowed.
    pub ports: Vec<u16>,
    pub delay_ms: u32,
    pub created_at: DateTime<Utc>,
    /// The admin's uuid.
    pub created_by: String,
}

/// How a rule is in force in its decky's network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Stored, not applied yet (the decky was not running).
    Pending,
    /// The delay is in force (netem).
    Delay,
    /// The kernel lacks netem: the rule's ports are rate-limited instead, and no delay is in force.
    Throttle,
    /// Traffic control failed; the watcher tries again at each poll.
    Failed,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Pending => "pending",
            Enforcement::Delay => "delay",
            Enforcement::Throttle => "throttle",
            Enforcement::Failed => "failed",
        }
    }

    /// Whether traffic control holds what it applied (the delay, or the fallback throttle).
    pub fn is_applied(self) -> bool {
        matches!(self, Enforcement::Delay | Enforcement::Throttle)
    }
}

impl std::str::FromStr for Enforcement {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(Enforcement::Pending),
            "delay" => Ok(Enforcement::Delay),
            "throttle" => Ok(Enforcement::Throttle),
            "failed" => Ok(Enforcement::Failed),
            other => Err(anyhow::anyhow!("unknown tarpit enforcement `{other}`")),
        }
    }
}

/// A stored rule and where it was last applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRule {
    pub rule: TarpitRule,
    pub enforcement: Enforcement,
    /// The network namespace it was applied in (`<boot id>/<inode>`), if any.
    pub enforced_in: Option<String>,
    pub enforced_at: Option<DateTime<Utc>>,
}

/// How a rule stands after an attempt to apply it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enforced {
    pub enforcement: Enforcement,
    pub namespace: Option<String>,
    pub at: DateTime<Utc>,
}

/// One attacker caught on one port of one decky, since `entered_at`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TarpitSession {
    pub decky_name: String,
    pub attacker_ip: String,
    pub port: u16,
    pub entered_at: DateTime<Utc>,
}

#[async_trait]
pub trait TarpitStore {
    /// Stores `rule` in place of the decky's current one, with how it stands.
    async fn put_tarpit_rule(&self, rule: &TarpitRule, enforced: &Enforced) -> DbResult<()>;

    /// The decky's rule; `NotFound` when it has none.
    async fn tarpit_rule(&self, decky: &str) -> DbResult<StoredRule>;

    /// Every rule, ordered by decky name.
    async fn tarpit_rules(&self) -> DbResult<Vec<StoredRule>>;

    /// Removes the decky's rule; `NotFound` when it had none.
    async fn delete_tarpit_rule(&self, decky: &str) -> DbResult<()>;

    /// Records how rule `id` stands; a rule replaced meanwhile (another id) is left alone.
    async fn set_tarpit_enforcement(&self, decky: &str, id: Uuid, enforced: &Enforced) -> DbResult<()>;

    /// Every open session, ordered by decky, address and port.
    async fn tarpit_sessions(&self) -> DbResult<Vec<TarpitSession>>;

    /// Opens each session in one transaction; returns those this call opened (one already open is
    /// left as it is and not returned).
    async fn open_tarpit_sessions(&self, sessions: &[TarpitSession]) -> DbResult<Vec<TarpitSession>>;

    /// Closes each session (matched by decky, address and port) in one transaction; returns those
    /// this call closed, with the time each was entered.
    async fn close_tarpit_sessions(&self, sessions: &[TarpitSession]) -> DbResult<Vec<TarpitSession>>;
}
