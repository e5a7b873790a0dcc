//! Decommission: every decky of the host torn down, then the agent's installed files removed from
//! under its install root (the binary, its settings and certificates, its state, its units; logs are
//! kept), then the agent stops. The files are the ones the enrollment bundle installs.

use std::path::Path;
use std::time::Duration;

use super::Agent;
use crate::fleet::FleetError;

/// Paths under the install root the enrollment bundle writes, removed on self-destruct.
pub const INSTALLED_PATHS: &[&str] = &["usr/local/bin/svc", "etc/svc", "var/lib/svc", "opt/svc"];
/// Where the bundle's systemd units go; each `svc-*.service` there is removed.
pub const UNIT_DIR: &str = "etc/systemd/system";
/// The answer to the master goes out before the agent stops.
const ANSWER_GRACE: Duration = Duration::from_millis(500);

impl Agent {
    /// Tears down every decky this host runs.
    pub(super) async fn teardown_all(&self) -> Result<(), FleetError> {
        let stored = self.db.fleet().await?;
        for decky in stored.deckies {
            match self.fleet.teardown(&decky.config.name).await {
                Ok(()) | Err(FleetError::NotFound(_)) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Schedules the teardown, the removal of the installed files and the agent's stop.
    pub(super) fn self_destruct(&self) {
        let agent = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ANSWER_GRACE).await;
            if let Err(err) = agent.teardown_all().await {
                tracing::error!(error = %err, "Self-destruct: the deckies could not all be torn down");
            }
            remove_installed(&agent.settings.install_root);
            tracing::warn!("Self-destruct done; the agent stops");
            agent.shutdown.cancel();
        });
    }
}

fn remove_installed(root: &Path) {
    for relative in INSTALLED_PATHS {
        let path = root.join(relative);
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        match removed {
            Ok(()) => tracing::info!(path = %path.display(), "Removed"),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => tracing::error!(path = %path.display(), error = %err, "Could not remove"),
        }
    }
    let Ok(units) = std::fs::read_dir(root.join(UNIT_DIR)) else { return };
    for unit in units.flatten() {
        let name = unit.file_name().to_string_lossy().to_string();
        if name.starts_with("svc-")
            && name.ends_with(".service")
            && let Err(err) = std::fs::remove_file(unit.path())
        {
            tracing::error!(unit = %name, error = %err, "Could not remove a unit file");
        }
    }
}
