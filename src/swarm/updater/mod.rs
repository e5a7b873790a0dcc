//! `svc updater`: a worker host's self-updater (reference §1.11). A mutual-TLS API (`routes`) on
//! which the master pushes a release of svc (a gzipped tar of the binary and its units): its
//! SHA-256 is checked before anything is unpacked (`extract`, which refuses anything but plain
//! files and directories), it is staged beside the running release and switched in atomically
//! (`releases`), the agent is restarted on it and probed (`agent`), and on failure the previous
//! release is put back and probed again. `/update-self` replaces the updater itself and re-executes
//! it. The master's side is `swarm::updates`.

pub mod agent;
pub mod extract;
pub mod releases;
mod routes;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::agent::{AgentProcess, RestartMode};
use self::releases::Slots;
use super::client::Endpoint;
use super::config::UpdaterConfig;
use super::pki::fingerprint as sha256_hex;
use super::tls::{Identity, PeerPin, client_config};

/// How often the supervised agent is checked for having exited.
const REVIVE_CHECK: Duration = Duration::from_millis(500);

/// The updater's state, shared by its routes; cheap to clone.
#[derive(Clone, Debug)]
pub struct Updater {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The agent's releases.
    slots: Slots,
    /// The updater's own releases (`<dir>/updater`).
    own: Slots,
    agent: AgentProcess,
    max_bytes: u64,
    /// One update, self-update or rollback at a time.
    busy: tokio::sync::Mutex<()>,
    /// How this process was started, to re-execute the new updater alike.
    args: Vec<OsString>,
    shutdown: CancellationToken,
}

/// The provenance the master gives a release of `binary`: this build's version and the binary's
/// own digest, so two builds of one version differ.
pub fn provenance(binary: &[u8]) -> String {
    let digest = sha256_hex(binary);
    format!("{}+{}", env!("CARGO_PKG_VERSION"), &digest[..12])
}

impl Updater {
    /// The updater of `settings`, presenting `identity`; the agent listens on `agent_host:agent_port`
    /// of this host.
    pub fn new(
        settings: &UpdaterConfig,
        identity: &Identity,
        ca_pem: &str,
        agent_host: &str,
        agent_port: u16,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Updater> {
        let slots = Slots::new(&settings.dir);
        let probe_host = match agent_host {
            "0.0.0.0" | "::" | "" => "127.0.0.1",
            other => other,
        };
        let probe = Endpoint {
            host: probe_host.to_string(),
            port: agent_port,
            // The agent is this host's own: any leaf the CA signed, no name check.
            tls: client_config(identity, ca_pem, PeerPin::CaSigned, false)?,
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(2),
        };
        let units = super::bundle::unit_names();
        let agent = AgentProcess::new(
            settings.restart,
            slots.clone(),
            settings.installed_binary.clone(),
            units,
            probe,
            settings.probe_for,
        );
        Ok(Updater {
            inner: Arc::new(Inner {
                own: Slots::new(settings.dir.join("updater")),
                slots,
                agent,
                max_bytes: settings.max_bytes,
                busy: tokio::sync::Mutex::new(()),
                args: std::env::args_os().skip(1).collect(),
                shutdown,
            }),
        })
    }

    /// Re-executes the updater's own current release when one was installed by a self-update and
    /// this process is another binary (a restart of the unit, which starts the installed one).
    /// Returns when there is nothing to switch to.
    pub fn reexec_own_release(&self) -> anyhow::Result<()> {
        let Some(own) = self.inner.own.current() else { return Ok(()) };
        let own_binary = std::fs::canonicalize(own.join(releases::BINARY))?;
        if std::fs::canonicalize(std::env::current_exe()?)? == own_binary {
            return Ok(());
        }
        tracing::info!(binary = %own_binary.display(), "Starting the updater's own current release");
        let err =
            std::os::unix::process::CommandExt::exec(std::process::Command::new(&own_binary).args(&self.inner.args));
        Err(anyhow::anyhow!("re-executing {}: {err}", own_binary.display()))
    }

    /// Makes the running binary the agent's first release when there is none yet, and (supervising) starts the agent on the current release.
    pub async fn prepare(&self) -> anyhow::Result<()> {
        let exe = std::env::current_exe()?;
        let sha = provenance(&std::fs::read(&exe)?);
        // The agent's slots only: the updater's own are made by its first self-update.
        self.inner.slots.bootstrap(&exe, &sha)?;
        if self.inner.agent.mode() == RestartMode::Supervise {
            self.inner.agent.restart().await?;
            self.supervise();
        }
        Ok(())
    }

    /// Until shutdown, restarts the supervised agent when it exited on its own, outside an update
    /// (an update's probe decides about an agent that exits on a new release).
    fn supervise(&self) {
        let updater = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = updater.inner.shutdown.cancelled() => return,
                    () = tokio::time::sleep(REVIVE_CHECK) => {}
                }
                if let Ok(_idle) = updater.inner.busy.try_lock() {
                    updater.inner.agent.revive_if_exited().await;
                }
            }
        });
    }

    /// Serves the API on `listener` until shutdown; a supervised agent is stopped with it.
    pub async fn run(self, listener: TcpListener, identity: &Identity, ca_pem: &str) -> anyhow::Result<()> {
        let server = super::tls::server_config(identity, ca_pem)?;
        tracing::info!(address = %listener.local_addr()?, dir = %self.inner.slots.root().display(), "Updater API listening (mutual TLS)");
        let shutdown = self.inner.shutdown.clone();
        super::serve::serve(listener, server, routes::router(self.clone()), shutdown).await;
        self.inner.agent.stop().await;
        Ok(())
    }

    /// The binary a self-update switched to, with the arguments this process was started with.
    fn reexec_target(&self) -> (PathBuf, Vec<OsString>) {
        (self.inner.own.current_binary(), self.inner.args.clone())
    }
}
