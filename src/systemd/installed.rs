//! Which workers have a unit installed, for the `installed` flag of `/workers`: asked of
//! `systemctl list-unit-files` where systemd is the service manager, else read from the unit
//! directories. Either way the answer is cached, so a dashboard polling `/workers` costs one
//! listing per cache window.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::recent::Recent;

/// Where unit files live when systemd is not there to ask (systemd's own search path).
pub const DEFAULT_UNIT_DIRS: [&str; 5] = [
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];
/// A service manager that does not answer within this counts as listing nothing.
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitSource {
    Systemctl,
    Dirs(Vec<PathBuf>),
}

impl UnitSource {
    /// The configured directories if any (`SVC_UNIT_DIRS`); else systemctl when systemd runs the
    /// host (its runtime directory exists, as `sd_booted` checks); else the standard directories.
    pub fn detect(configured: Option<&[PathBuf]>) -> UnitSource {
        match configured {
            Some(dirs) => UnitSource::Dirs(dirs.to_vec()),
            None if Path::new("/run/systemd/system").is_dir() => UnitSource::Systemctl,
            None => UnitSource::Dirs(DEFAULT_UNIT_DIRS.iter().map(PathBuf::from).collect()),
        }
    }
}

pub struct UnitListing {
    source: UnitSource,
    cache_for: Duration,
    listed: Recent<BTreeSet<String>>,
}

impl UnitListing {
    pub fn new(source: UnitSource, cache_for: Duration) -> UnitListing {
        UnitListing { source, cache_for, listed: Recent::default() }
    }

    /// Whether systemd runs this host (and so can start a unit).
    pub fn systemd_runs_the_host(&self) -> bool {
        self.source == UnitSource::Systemctl
    }

    /// Starts `svc-<worker>.service` through systemd.
    pub async fn start(&self, worker: &str) -> Result<(), StartError> {
        let unit = super::unit_of_worker(worker);
        if !self.installed().await.contains(worker) {
            return Err(StartError::NotInstalled(unit));
        }
        if !self.systemd_runs_the_host() {
            return Err(StartError::NoServiceManager(unit));
        }
        let output = tokio::process::Command::new("systemctl").args(["start", &unit]).kill_on_drop(true).output();
        let failed = |reason: String| StartError::Failed { unit: unit.clone(), reason };
        match tokio::time::timeout(SYSTEMCTL_START_TIMEOUT, output).await {
            Ok(Ok(output)) if output.status.success() => Ok(()),
            Ok(Ok(output)) => Err(failed(String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or("").into())),
            Ok(Err(err)) => Err(failed(err.to_string())),
            Err(_) => Err(failed("timed out".into())),
        }
    }
}

/// How long `systemctl start` may take (a unit of `Type=notify` answers once it is ready).
const SYSTEMCTL_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a worker's unit could not be started. `Failed` carries systemctl's own words, for the log.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("unit file not installed: {0}")]
    NotInstalled(String),
    #[error("no service manager can start {0}: systemd does not run this host, nor svc supervise this worker")]
    NoServiceManager(String),
    #[error("systemctl could not start {unit}")]
    Failed { unit: String, reason: String },
}

impl UnitListing {
    /// The workers (`api` included) with an `svc-<worker>.service` unit.
    pub async fn installed(&self) -> BTreeSet<String> {
        let list = async {
            match &self.source {
                UnitSource::Systemctl => from_systemctl().await,
                UnitSource::Dirs(dirs) => from_dirs(dirs.clone()).await,
            }
        };
        self.listed.get_or_find(self.cache_for, list).await
    }
}

async fn from_systemctl() -> BTreeSet<String> {
    let output = tokio::process::Command::new("systemctl")
        .args(["list-unit-files", "svc-*.service", "--no-legend", "--no-pager"])
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(SYSTEMCTL_TIMEOUT, output).await {
        Ok(Ok(output)) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter_map(super::worker_of_unit)
            .map(str::to_string)
            .collect(),
        Ok(Ok(output)) => {
            tracing::warn!(status = %output.status, "systemctl list-unit-files failed; no unit counts as installed");
            BTreeSet::new()
        }
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "Cannot run systemctl; no unit counts as installed");
            BTreeSet::new()
        }
        Err(_) => {
            tracing::warn!("systemctl list-unit-files timed out; no unit counts as installed");
            BTreeSet::new()
        }
    }
}

async fn from_dirs(dirs: Vec<PathBuf>) -> BTreeSet<String> {
    let listed = tokio::task::spawn_blocking(move || {
        let mut workers = BTreeSet::new();
        for dir in &dirs {
            // A missing directory is normal (not every distribution has all of them).
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            for entry in entries.flatten() {
                if let Some(worker) = entry.file_name().to_str().and_then(super::worker_of_unit) {
                    workers.insert(worker.to_string());
                }
            }
        }
        workers
    })
    .await;
    listed.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_unit_file_counts_once_the_cache_expires() {
        let dir = tempfile::tempdir().unwrap();
        let listing = UnitListing::new(UnitSource::Dirs(vec![dir.path().into()]), Duration::from_millis(200));
        assert!(listing.installed().await.is_empty());
        std::fs::write(dir.path().join("svc-sniffer.service"), "").unwrap();
        std::fs::write(dir.path().join("other.service"), "").unwrap();
        assert!(listing.installed().await.is_empty(), "answered from the cache");
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(listing.installed().await, BTreeSet::from(["sniffer".to_string()]));
    }
}
