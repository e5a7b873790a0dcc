//! The tarpit: per-decky rules that slow an attacker who found a decky (DECNET's tarpit, made to
//! work on macvlan deckies and over IPv6). [`Tarpit`] sets, reads and removes a decky's rule and
//! puts it in force inside the decky's own network namespace (`netns`), where the decky's
//! interface is the same for bridge and macvlan networks; the watcher (`svc-workers`) re-applies
//! rules after a decky or host restart through [`Tarpit::enforce`] and reports who is caught.
//!
//! A stored rule is always in force, or how it stands says why not ([`Enforcement`]): `throttle`
//! where the kernel lacks netem (the ports are rate-limited, no delay), `failed` when `tc` failed.
//! `tc`'s own words go to the server log only; callers get [`TarpitError`]s.

pub mod events;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use uuid::Uuid;

use crate::db::{Db, DbError, Enforced, Enforcement, StoredRule, TarpitRule, TarpitSession, User};
use crate::fleet::{Fleet, FleetError};
use crate::netns::{self, tc};
use events::TarpitEvent;

/// What a tarpit operation tells its caller.
#[derive(Debug, thiserror::Error)]
pub enum TarpitError {
    /// No such decky, it is not running, or it has no rule; the text says which (404).
    #[error("{0}")]
    NotFound(String),
    /// Traffic control failed; `tc`'s text was logged (409 with a generic detail).
    #[error("tarpit command failed")]
    TrafficControl,
    #[error(transparent)]
    Store(#[from] DbError),
}

/// The text of a decky without a rule.
pub const NO_RULE: &str = "No active tarpit rule for this decky";

/// Sets, reads, removes and enforces rules; cheap to clone.
#[derive(Clone)]
pub struct Tarpit {
    db: Db,
    fleet: Fleet,
    ingest: Option<PathBuf>,
    /// One change of traffic control at a time in this process, so a route and the watcher never
    /// interleave their `tc` commands on one decky.
    applying: Arc<tokio::sync::Mutex<()>>,
}

impl Tarpit {
    /// Over the fleet's deckies; events go to `ingest` (`SVC_INGEST_LOG_FILE`).
    pub fn new(db: Db, fleet: Fleet, ingest: Option<PathBuf>) -> Tarpit {
        Tarpit { db, fleet, ingest, applying: Arc::default() }
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    pub fn ingest(&self) -> Option<&Path> {
        self.ingest.as_deref()
    }

    /// Sets decky `decky`'s rule (replacing any), puts it in force and writes `tarpit_enabled`.
    /// When traffic control fails, nothing of the new rule stays and the previous one, if any, is
    /// put back.
    pub async fn enable(
        &self,
        decky: &str,
        ports: &[u16],
        delay_ms: u32,
        operator: &User,
    ) -> Result<StoredRule, TarpitError> {
        let pid = self.fleet.locate(decky).await.map_err(fleet_error)?;
        let mut ports = ports.to_vec();
        ports.sort_unstable();
        ports.dedup();
        let rule = TarpitRule {
            id: Uuid::new_v4(),
            decky_name: decky.to_string(),
            ports,
            delay_ms,
            created_at: Utc::now(),
            created_by: operator.uuid.to_string(),
        };
        let _applying = self.applying.lock().await;
        let previous = match self.db.tarpit_rule(decky).await {
            Ok(previous) => Some(previous),
            Err(DbError::NotFound) => None,
            Err(err) => return Err(err.into()),
        };
        let enforced = match apply(pid, &rule).await {
            Ok(enforced) => enforced,
            Err(raw) => {
                tracing::error!(decky, error = %raw, "Tarpit traffic control failed");
                if let Some(previous) = previous {
                    self.record(&previous.rule, reapply(pid, &previous.rule).await).await;
                }
                return Err(TarpitError::TrafficControl);
            }
        };
        if let Err(err) = self.db.put_tarpit_rule(&rule, &enforced).await {
            // A rule that could not be stored must not stay in force unseen.
            if let Err(raw) = remove(pid).await {
                tracing::error!(decky, error = %raw, "Could not remove an unstored tarpit rule");
            }
            return Err(err.into());
        }
        tracing::info!(decky, ports = ?rule.ports, delay_ms, enforcement = enforced.enforcement.as_str(), "Tarpit rule set");
        let event = TarpitEvent::Enabled {
            decky: decky.to_string(),
            ports: rule.ports.clone(),
            delay_ms,
            operator: operator.username.clone(),
            enforcement: enforced.enforcement,
        };
        events::write(self.ingest(), &[(enforced.at, event)]).await;
        Ok(StoredRule {
            rule,
            enforcement: enforced.enforcement,
            enforced_in: enforced.namespace,
            enforced_at: Some(enforced.at),
        })
    }

    /// Removes decky `decky`'s rule and what it put in force, and writes `tarpit_disabled`. A decky
    /// that is gone or stopped has nothing in force: its rule is simply removed.
    pub async fn disable(&self, decky: &str, operator: &User) -> Result<(), TarpitError> {
        let _applying = self.applying.lock().await;
        match self.db.tarpit_rule(decky).await {
            Ok(_) => {}
            Err(DbError::NotFound) => return Err(TarpitError::NotFound(NO_RULE.into())),
            Err(err) => return Err(err.into()),
        }
        match self.fleet.locate(decky).await {
            Ok(pid) => remove(pid).await.map_err(|raw| {
                tracing::error!(decky, error = %raw, "Tarpit traffic control failed");
                TarpitError::TrafficControl
            })?,
            Err(FleetError::NotFound(_)) => {}
            Err(_) => return Err(TarpitError::TrafficControl),
        }
        match self.db.delete_tarpit_rule(decky).await {
            // Removed meanwhile by another replica: the outcome asked for.
            Ok(()) | Err(DbError::NotFound) => {}
            Err(err) => return Err(err.into()),
        }
        tracing::info!(decky, "Tarpit rule removed");
        let event = TarpitEvent::Disabled { decky: decky.to_string(), operator: operator.username.clone() };
        events::write(self.ingest(), &[(Utc::now(), event)]).await;
        Ok(())
    }

    /// Decky `decky`'s rule and the attackers the watcher has caught on it.
    pub async fn rule(&self, decky: &str) -> Result<(StoredRule, Vec<TarpitSession>), TarpitError> {
        let rule = match self.db.tarpit_rule(decky).await {
            Ok(rule) => rule,
            Err(DbError::NotFound) => return Err(TarpitError::NotFound(NO_RULE.into())),
            Err(err) => return Err(err.into()),
        };
        let sessions = self.db.tarpit_sessions().await?.into_iter().filter(|s| s.decky_name == decky).collect();
        Ok((rule, sessions))
    }

    /// Puts a stored rule in force in the namespace of process `pid` (its decky's), unless it
    /// already is there: a decky or host restart gave the decky a new namespace without it.
    /// Returns how the rule stands, as recorded.
    pub async fn enforce(&self, stored: &StoredRule, pid: u32) -> Enforcement {
        let here = netns::identity(&netns::namespace_of(pid)).ok();
        if stored.enforcement.is_applied() && here.is_some() && stored.enforced_in == here {
            return stored.enforcement;
        }
        let _applying = self.applying.lock().await;
        // Set or removed meanwhile (by a route): the next poll sees the rule as it is now.
        match self.db.tarpit_rule(&stored.rule.decky_name).await {
            Ok(current) if current.rule.id == stored.rule.id => {}
            _ => return stored.enforcement,
        }
        let enforced = reapply(pid, &stored.rule).await;
        let enforcement = enforced.enforcement;
        if enforcement.is_applied() {
            tracing::info!(decky = %stored.rule.decky_name, enforcement = enforcement.as_str(), "Tarpit rule put in force");
        }
        self.record(&stored.rule, enforced).await;
        enforcement
    }

    async fn record(&self, rule: &TarpitRule, enforced: Enforced) {
        if let Err(err) = self.db.set_tarpit_enforcement(&rule.decky_name, rule.id, &enforced).await {
            tracing::error!(decky = %rule.decky_name, error = %err, "Could not record how a tarpit rule stands");
        }
    }
}

fn fleet_error(err: FleetError) -> TarpitError {
    match err {
        FleetError::NotFound(detail) | FleetError::Refused(detail) => TarpitError::NotFound(detail),
        FleetError::Runtime => TarpitError::TrafficControl,
        FleetError::Store(err) => TarpitError::Store(err),
    }
}

/// [`apply`], with a failure logged and recorded as `failed`.
async fn reapply(pid: u32, rule: &TarpitRule) -> Enforced {
    apply(pid, rule).await.unwrap_or_else(|raw| {
        tracing::error!(decky = %rule.decky_name, error = %raw, "Tarpit traffic control failed");
        Enforced { enforcement: Enforcement::Failed, namespace: None, at: Utc::now() }
    })
}

/// Why traffic control in a decky's namespace could not be changed, in the words of `tc` or the
/// system: for the log only (a client gets [`TarpitError::TrafficControl`]'s generic text).
#[derive(Debug, thiserror::Error)]
enum TrafficControlError {
    #[error("namespace of pid {pid}: {source}")]
    Namespace { pid: u32, source: std::io::Error },
    #[error("interface of pid {pid}: {source}")]
    Interface { pid: u32, source: std::io::Error },
    #[error("running tc: {0}")]
    Spawn(std::io::Error),
    #[error("tc exited with {status}: {output}")]
    Refused { status: std::process::ExitStatus, output: String },
}

impl TrafficControlError {
    /// A removal found nothing to remove: `tc` said so, or the namespace went with its process
    /// (entering it fails with "No such file").
    fn is_nothing_to_remove(&self) -> bool {
        tc::nothing_to_remove(&self.to_string())
    }
}

/// Replaces whatever of ours is on the interface of `pid`'s namespace with `rule`: root, class and
/// filters, then the delay, or the throttle where the kernel has no netem. On failure nothing of
/// ours is left.
async fn apply(pid: u32, rule: &TarpitRule) -> Result<Enforced, TrafficControlError> {
    let namespace = netns::namespace_of(pid);
    let identity = netns::identity(&namespace).map_err(|source| TrafficControlError::Namespace { pid, source })?;
    let iface = netns::interface_of(pid).map_err(|source| TrafficControlError::Interface { pid, source })?;
    remove(pid).await?;
    let setup = tc_run(&namespace, tc::batch(), tc::setup(&iface, &rule.ports)).await;
    let enforcement = match setup {
        Err(raw) => Err(raw),
        Ok(()) => match tc_run(&namespace, tc::delay(&iface, rule.delay_ms), String::new()).await {
            Ok(()) => Ok(Enforcement::Delay),
            Err(raw) => {
                tracing::warn!(decky = %rule.decky_name, error = %raw, "No delay (netem) in this kernel; throttling the tarpit's ports instead");
                tc_run(&namespace, tc::throttle(&iface), String::new()).await.map(|()| Enforcement::Throttle)
            }
        },
    };
    match enforcement {
        Ok(enforcement) => Ok(Enforced { enforcement, namespace: Some(identity), at: Utc::now() }),
        Err(raw) => {
            let _ = remove(pid).await;
            Err(raw)
        }
    }
}

/// Removes the rule's root from the interface of `pid`'s namespace; none there is fine.
async fn remove(pid: u32) -> Result<(), TrafficControlError> {
    let iface = netns::interface_of(pid).map_err(|source| TrafficControlError::Interface { pid, source })?;
    match tc_run(&netns::namespace_of(pid), tc::remove(&iface), String::new()).await {
        Err(err) if !err.is_nothing_to_remove() => Err(err),
        _ => Ok(()),
    }
}

/// Runs a `tc` command in `namespace`; its output in the error when it fails.
async fn tc_run(namespace: &Path, command: std::process::Command, input: String) -> Result<(), TrafficControlError> {
    let output = netns::run(namespace.to_path_buf(), command, input).await.map_err(TrafficControlError::Spawn)?;
    if output.status.success() {
        return Ok(());
    }
    let text = format!("{}{}", String::from_utf8_lossy(&output.stderr), String::from_utf8_lossy(&output.stdout));
    Err(TrafficControlError::Refused { status: output.status, output: text.trim().to_string() })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_removal_finds_nothing_when_tc_says_so_or_the_namespace_is_gone() {
        let refused = |output: &str| TrafficControlError::Refused {
            status: std::process::ExitStatus::from_raw(2 << 8),
            output: output.into(),
        };
        assert!(refused("Error: Cannot delete qdisc with handle of zero.").is_nothing_to_remove());
        assert!(!refused("Error: Exclusivity flag on, cannot modify.").is_nothing_to_remove());
        let gone = TrafficControlError::Spawn(std::io::Error::from_raw_os_error(2));
        assert!(gone.is_nothing_to_remove(), "{gone}");
        assert_eq!(refused("x").to_string(), "tc exited with exit status: 2: x");
    }
}
