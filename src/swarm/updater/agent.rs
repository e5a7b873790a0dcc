//! The host's agent as the updater restarts and probes it. Under systemd (`SVC_UPDATER_RESTART=
//! systemd`) the installed binary path (`<install root>/usr/local/bin/svc`, which the bundle's
//! units start) is made a link to `<updater dir>/current/svc` and `svc-agent.service` and the
//! host's worker units are restarted; otherwise (`supervise`, the default, and how the tests run
//! it) the updater runs `<updater dir>/current/svc agent` as its own child with its own
//! environment, and restarts it when it exits on its own (as systemd's `Restart=on-failure` does for
//! the unit). Either way the agent's `/health` is then probed, with the updater's certificate, for a
//! bounded time.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use super::releases::Slots;
use crate::swarm::client::{CallError, Endpoint};
use crate::swarm::wire::HEALTH_PATH;

/// How long a stopping agent gets before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
const PROBE_PAUSE: Duration = Duration::from_millis(200);

/// Why the agent is not running healthy on the current release. The texts are what the master is
/// told (the probes' lines of a refused update); the causes behind the first three are in the log.
#[derive(Debug, thiserror::Error)]
pub enum AgentUnhealthy {
    #[error("the agent could not be started")]
    NotStarted,
    #[error("the installed binary could not be switched")]
    BinaryNotSwitched,
    #[error("the agent's unit could not be restarted")]
    UnitNotRestarted,
    #[error("agent exited ({0})")]
    Exited(ExitStatus),
    /// The last probe's failure, once the probe bound is over.
    #[error("{last} within {:.1} s", within.as_secs_f64())]
    NoHealthyAnswer { last: ProbeFailure, within: Duration },
}

/// Why one `/health` probe of the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeFailure {
    /// It answered, but not `200` with `status: ok`.
    #[error("agent answered {0}")]
    Answered(u16),
    #[error(transparent)]
    Call(#[from] CallError),
}

/// How the agent is restarted on a new release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartMode {
    /// The updater runs the agent itself.
    Supervise,
    /// `systemctl restart` of the bundle's units.
    Systemd,
}

/// The agent of this host, restartable and probed.
#[derive(Debug)]
pub struct AgentProcess {
    mode: RestartMode,
    slots: Slots,
    /// `<install root>/usr/local/bin/svc`: what the units start (systemd mode).
    installed_binary: PathBuf,
    /// The units restarted under systemd: the agent's first.
    units: Vec<String>,
    probe: Endpoint,
    probe_for: Duration,
    child: Mutex<Option<Child>>,
}

impl AgentProcess {
    pub fn new(
        mode: RestartMode,
        slots: Slots,
        installed_binary: PathBuf,
        units: Vec<String>,
        probe: Endpoint,
        probe_for: Duration,
    ) -> AgentProcess {
        AgentProcess { mode, slots, installed_binary, units, probe, probe_for, child: Mutex::new(None) }
    }

    pub fn mode(&self) -> RestartMode {
        self.mode
    }

    /// Stops the agent running now (if any) and starts it on the current release.
    pub async fn restart(&self) -> Result<(), AgentUnhealthy> {
        match self.mode {
            RestartMode::Supervise => {
                let mut child = self.child.lock().await;
                if let Some(running) = child.take() {
                    stop(running).await;
                }
                let mut command = Command::new(self.slots.current_binary());
                command.arg("agent").kill_on_drop(true);
                crate::signals::die_with_parent(&mut command);
                let spawned = command.spawn();
                *child = Some(spawned.map_err(|err| {
                    tracing::error!(error = %err, "Cannot start the agent on the current release");
                    AgentUnhealthy::NotStarted
                })?);
                Ok(())
            }
            RestartMode::Systemd => {
                self.link_installed_binary().map_err(|err| {
                    tracing::error!(error = %err, "Cannot point the installed binary at the current release");
                    AgentUnhealthy::BinaryNotSwitched
                })?;
                for (index, unit) in self.units.iter().enumerate() {
                    let status = Command::new("systemctl").args(["restart", unit]).status().await;
                    let ok = status.as_ref().is_ok_and(ExitStatus::success);
                    if !ok {
                        tracing::warn!(%unit, status = ?status, "systemctl restart failed");
                        // The agent's unit decides; the workers' are best effort.
                        if index == 0 {
                            return Err(AgentUnhealthy::UnitNotRestarted);
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Stops the supervised agent (before the updater replaces itself); nothing under systemd.
    pub async fn stop(&self) {
        if let Some(running) = self.child.lock().await.take() {
            stop(running).await;
        }
    }

    /// Restarts a supervised agent that exited on its own (a crash, a kill) on the current release;
    /// whether it had exited.
    pub async fn revive_if_exited(&self) -> bool {
        let Some(status) = self.exited().await else { return false };
        tracing::warn!(%status, "The agent exited on its own; restarting it on the current release");
        if let Err(err) = self.restart().await {
            tracing::error!(error = %err, "The agent could not be restarted after it exited");
        }
        true
    }

    /// [`restart`](Self::restart), then [`probe`](Self::probe).
    pub async fn restart_and_probe(&self) -> Result<String, AgentUnhealthy> {
        self.restart().await?;
        self.probe().await
    }

    /// One `/health` call: whether the agent answers now.
    pub async fn probe_once(&self) -> Result<(), ProbeFailure> {
        let answer = self.probe.get(HEALTH_PATH).await?;
        if answer.status.is_success() { Ok(()) } else { Err(ProbeFailure::Answered(answer.status.as_u16())) }
    }

    /// Waits until the agent answers `/health` with `status: ok`, at most the probe bound; the
    /// body, or why not. A supervised agent that exits ends the wait at once.
    pub async fn probe(&self) -> Result<String, AgentUnhealthy> {
        let deadline = tokio::time::Instant::now() + self.probe_for;
        loop {
            if let Some(status) = self.exited().await {
                return Err(AgentUnhealthy::Exited(status));
            }
            let last = match self.probe.get(HEALTH_PATH).await {
                Ok(answer) if answer.status.is_success() && answer.json()["status"] == "ok" => {
                    return Ok(String::from_utf8_lossy(&answer.body).into_owned());
                }
                Ok(answer) => ProbeFailure::Answered(answer.status.as_u16()),
                Err(err) => ProbeFailure::Call(err),
            };
            if tokio::time::Instant::now() + PROBE_PAUSE > deadline {
                return Err(AgentUnhealthy::NoHealthyAnswer { last, within: self.probe_for });
            }
            tokio::time::sleep(PROBE_PAUSE).await;
        }
    }

    async fn exited(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().await;
        child.as_mut()?.try_wait().ok().flatten()
    }

    /// `<install root>/usr/local/bin/svc` → `<updater dir>/current/svc`, by renaming a new link over
    /// it.
    fn link_installed_binary(&self) -> std::io::Result<()> {
        let temp = self.installed_binary.with_extension(format!("svc-update-{}", uuid::Uuid::new_v4().simple()));
        if let Some(parent) = temp.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(self.slots.current_binary(), &temp)?;
        std::fs::rename(&temp, &self.installed_binary).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
    }
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`].
async fn stop(mut child: Child) {
    if let Some(pid) = child.id().and_then(|id| Pid::from_raw(id as i32)) {
        let _ = kill_process(pid, Signal::TERM);
    }
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_err() {
        tracing::warn!("The agent ignored SIGTERM; killing it");
        let _ = child.kill().await;
    }
}
