//! Release slots on a worker host: every release is a directory `releases/<id>/` holding the svc
//! binary (`svc`), its units (`units/`) and `.svc-release.json` (the provenance sha and when it was
//! installed). `current` and `previous` are symbolic links to two of them; each is switched by
//! renaming a fresh link over it, so a reader sees the old release or the new one, never neither.
//! Installing rotates (the old previous is deleted, current becomes previous); rolling back swaps
//! the two links. A release is unpacked into a staging directory beside them first, removed again
//! if it is not installed.

use std::path::{Path, PathBuf};

use chrono::Utc;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The binary inside a release.
pub const BINARY: &str = "svc";
/// The units inside a release.
pub const UNITS: &str = "units";
/// A release's provenance, beside its binary.
pub const METADATA: &str = ".svc-release.json";
const RELEASES: &str = "releases";
const CURRENT: &str = "current";
const PREVIOUS: &str = "previous";

/// What a release says of itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseInfo {
    /// The master's provenance for it (`<version>+<sha-256 prefix of the binary>`).
    pub sha: String,
    pub installed_at: String,
}

/// One slot as `/health` reports it (DECNET's `active` and `prev`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SlotView {
    pub slot: String,
    pub sha: Option<String>,
    pub installed_at: Option<String>,
}

/// The release this process runs, from the metadata beside its own executable (the link it was
/// started through is resolved); `None` when it was not installed as a release.
pub fn running_release() -> Option<ReleaseInfo> {
    let exe = std::env::current_exe().ok()?;
    read_info(exe.parent()?)
}

/// How long a staged binary gets to answer `--version`.
const VERSION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `binary` runs: `binary --version` exits 0 within [`VERSION_WAIT`] (killed past it); why
/// not, otherwise. Blocking.
pub fn answers_version(binary: &Path) -> Result<(), String> {
    let mut child = std::process::Command::new(binary)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|err| format!("cannot run it: {err}"))?;
    let deadline = std::time::Instant::now() + VERSION_WAIT;
    loop {
        match child.try_wait().map_err(|err| err.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => return Err(format!("--version {status}")),
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("--version did not exit within {} s", VERSION_WAIT.as_secs()));
            }
            None => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

fn read_info(release: &Path) -> Option<ReleaseInfo> {
    serde_json::from_slice(&std::fs::read(release.join(METADATA)).ok()?).ok()
}

/// The slots under one root: the agent's (`SVC_UPDATER_DIR`) or the updater's own (`…/updater`).
#[derive(Clone, Debug)]
pub struct Slots {
    root: PathBuf,
}

/// A release being unpacked; removed on drop unless installed.
#[derive(Debug)]
pub struct Staging {
    pub dir: PathBuf,
    installed: bool,
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.installed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Rollback found no previous release.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    #[error("no previous release to roll back to")]
    NoPrevious,
    #[error("cannot switch the release links")]
    Io(#[from] std::io::Error),
}

impl Slots {
    pub fn new(root: impl Into<PathBuf>) -> Slots {
        Slots { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The binary as the supervisor and the units start it: through `current`.
    pub fn current_binary(&self) -> PathBuf {
        self.root.join(CURRENT).join(BINARY)
    }

    /// The release directory `current` points at.
    pub fn current(&self) -> Option<PathBuf> {
        self.resolve(CURRENT)
    }

    pub fn previous(&self) -> Option<PathBuf> {
        self.resolve(PREVIOUS)
    }

    fn resolve(&self, link: &str) -> Option<PathBuf> {
        let target = std::fs::read_link(self.root.join(link)).ok()?;
        let dir = self.root.join(target);
        dir.is_dir().then_some(dir)
    }

    /// A fresh, empty directory to unpack a release into; stale staging directories (a crash
    /// mid-update) are removed first.
    pub fn stage(&self) -> std::io::Result<Staging> {
        let releases = self.root.join(RELEASES);
        std::fs::create_dir_all(&releases)?;
        for entry in std::fs::read_dir(&releases)?.flatten() {
            if entry.file_name().to_string_lossy().starts_with(".staging-") {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = releases.join(format!(".staging-{}", Uuid::new_v4().simple()));
        std::fs::create_dir(&dir)?;
        Ok(Staging { dir, installed: false })
    }

    /// Makes `staging` a release with `sha` and switches `current` to it; the old current becomes
    /// `previous` and the old previous is deleted.
    pub fn install(&self, mut staging: Staging, sha: &str) -> std::io::Result<ReleaseInfo> {
        let info = ReleaseInfo { sha: sha.to_string(), installed_at: crate::time::format_utc(Utc::now()) };
        std::fs::write(staging.dir.join(METADATA), serde_json::to_vec(&info).map_err(std::io::Error::other)?)?;
        let id = format!("{}-{}", Utc::now().format("%Y%m%dT%H%M%S%.3f"), &Uuid::new_v4().simple().to_string()[..8]);
        let release = self.root.join(RELEASES).join(&id);
        std::fs::rename(&staging.dir, &release)?;
        staging.installed = true;
        let (old_current, old_previous) = (self.current(), self.previous());
        if let Some(current) = &old_current {
            self.point(PREVIOUS, current)?;
        }
        self.point(CURRENT, &release)?;
        if let Some(stale) = old_previous.filter(|dir| Some(dir) != old_current.as_ref()) {
            let _ = std::fs::remove_dir_all(stale);
        }
        Ok(info)
    }

    /// Swaps `current` and `previous`.
    pub fn rollback(&self) -> Result<(), RollbackError> {
        let previous = self.previous().ok_or(RollbackError::NoPrevious)?;
        let current = self.current();
        self.point(CURRENT, &previous)?;
        match current {
            Some(current) => self.point(PREVIOUS, &current)?,
            None => std::fs::remove_file(self.root.join(PREVIOUS))?,
        }
        Ok(())
    }

    /// Installs `binary` as the first release (`sha`) when there is no current one: what the
    /// enrollment bundle installed becomes the release to roll back to.
    pub fn bootstrap(&self, binary: &Path, sha: &str) -> std::io::Result<()> {
        if self.current().is_some() {
            return Ok(());
        }
        let staging = self.stage()?;
        std::fs::copy(binary, staging.dir.join(BINARY))?;
        self.install(staging, sha).map(|_| ())
    }

    /// `active` and `prev`, as `/health` lists them (absent slots left out).
    pub fn views(&self) -> Vec<SlotView> {
        [("active", self.current()), ("prev", self.previous())]
            .into_iter()
            .filter_map(|(slot, dir)| {
                let info = read_info(&dir?);
                Some(SlotView {
                    slot: slot.to_string(),
                    sha: info.as_ref().map(|i| i.sha.clone()),
                    installed_at: info.map(|i| i.installed_at),
                })
            })
            .collect()
    }

    /// Points `link` at `release` (relative, so the tree can move) by renaming a new link over it.
    fn point(&self, link: &str, release: &Path) -> std::io::Result<()> {
        let name = release.file_name().ok_or_else(|| std::io::Error::other("release without a name"))?;
        let target = Path::new(RELEASES).join(name);
        let temp = self.root.join(format!(".{link}.{}", Uuid::new_v4().simple()));
        std::os::unix::fs::symlink(&target, &temp)?;
        std::fs::rename(&temp, self.root.join(link)).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_rotates_and_rollback_swaps_and_a_failed_stage_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let slots = Slots::new(dir.path());
        assert!(matches!(slots.rollback(), Err(RollbackError::NoPrevious)));
        let binary = dir.path().join("svc-initial");
        std::fs::write(&binary, "v1").unwrap();
        slots.bootstrap(&binary, "one").unwrap();
        slots.bootstrap(&binary, "ignored").unwrap();
        assert_eq!(slots.views().iter().map(|v| v.sha.clone().unwrap()).collect::<Vec<_>>(), ["one"]);
        assert!(matches!(slots.rollback(), Err(RollbackError::NoPrevious)));

        for sha in ["two", "three"] {
            let staging = slots.stage().unwrap();
            std::fs::write(staging.dir.join(BINARY), sha).unwrap();
            slots.install(staging, sha).unwrap();
        }
        let shas = |slots: &Slots| slots.views().iter().map(|v| v.sha.clone().unwrap()).collect::<Vec<_>>();
        assert_eq!(shas(&slots), ["three", "two"]);
        assert_eq!(std::fs::read_to_string(slots.current_binary()).unwrap(), "three");
        let releases = std::fs::read_dir(dir.path().join(RELEASES)).unwrap().count();
        assert_eq!(releases, 2, "the release before previous is deleted");
        slots.rollback().unwrap();
        assert_eq!(shas(&slots), ["two", "three"]);
        assert_eq!(std::fs::read_to_string(slots.current_binary()).unwrap(), "two");

        let staging = slots.stage().unwrap();
        let staged = staging.dir.clone();
        drop(staging);
        assert!(!staged.exists(), "an abandoned stage is removed");
        assert_eq!(shas(&slots), ["two", "three"]);
    }
}
