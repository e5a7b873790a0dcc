//! The files attackers leave (an FTP upload, a mail message), kept in one directory the host
//! mounts into the decky, so the master can hand their bytes to an admin
//! (`GET /artifacts/{decky}/{stored_as}`). A file is named by its content's SHA-256, so the same
//! upload twice is stored once and no attacker-chosen name reaches the disk. The directory is held
//! under a quota (what would pass it is not kept, and the line says so) and files older than the
//! retention are removed, at start and every hour, by this process: the writer owns its directory
//! wherever the decky runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How often files past the retention are looked for.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Where captured files go, and how much of them is kept for how long.
#[derive(Clone, Debug)]
pub struct ArtifactsConfig {
    pub dir: PathBuf,
    /// The most bytes the directory holds.
    pub quota: u64,
    /// Files older than this are removed.
    pub retention: Duration,
}

/// What became of a file offered to [`Artifacts::keep`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Stored now, or already (the same bytes came before).
    Stored,
    /// Not stored: the quota would be passed.
    OverQuota,
    /// Not stored: the disk refused (logged).
    Failed,
}

impl Kept {
    /// The line's `stored` field.
    pub fn as_field(self) -> String {
        (self == Kept::Stored).to_string()
    }
}

/// The decky's captured files.
#[derive(Debug)]
pub struct Artifacts {
    config: ArtifactsConfig,
    /// Bytes the directory holds, as of the last prune plus what was kept since.
    used: Mutex<u64>,
}

impl Artifacts {
    /// Opens (and makes) the directory, removing what is past the retention.
    pub fn open(config: ArtifactsConfig) -> std::io::Result<Artifacts> {
        std::fs::create_dir_all(&config.dir)?;
        let artifacts = Artifacts { config, used: Mutex::new(0) };
        artifacts.prune();
        Ok(artifacts)
    }

    /// Stores `bytes` as `stored_as` (the caller's content-derived name) unless it is there already
    /// or would pass the quota. Written to a temporary name and renamed, so a reader never sees half.
    pub async fn keep(self: &std::sync::Arc<Self>, stored_as: String, bytes: Vec<u8>) -> Kept {
        let artifacts = self.clone();
        tokio::task::spawn_blocking(move || artifacts.keep_now(&stored_as, &bytes)).await.unwrap_or(Kept::Failed)
    }

    fn keep_now(&self, stored_as: &str, bytes: &[u8]) -> Kept {
        let path = self.config.dir.join(stored_as);
        if path.exists() {
            return Kept::Stored;
        }
        let mut used = self.used.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if *used + bytes.len() as u64 > self.config.quota {
            return Kept::OverQuota;
        }
        match write_whole(&path, bytes) {
            Ok(()) => {
                *used += bytes.len() as u64;
                Kept::Stored
            }
            Err(err) => {
                tracing::warn!(error = %err, path = %path.display(), "Cannot keep a captured file");
                Kept::Failed
            }
        }
    }

    /// Removes the files past the retention (and any temporary a crash left), and counts the rest.
    pub fn prune(&self) {
        let Ok(entries) = std::fs::read_dir(&self.config.dir) else { return };
        let now = SystemTime::now();
        let mut used = 0;
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let age = meta.modified().ok().and_then(|modified| now.duration_since(modified).ok()).unwrap_or_default();
            let temporary = entry.file_name().to_string_lossy().starts_with('.');
            if age > self.config.retention || temporary {
                if let Err(err) = std::fs::remove_file(entry.path()) {
                    tracing::warn!(error = %err, path = %entry.path().display(), "Cannot remove an old captured file");
                    used += meta.len();
                }
            } else {
                used += meta.len();
            }
        }
        *self.used.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = used;
    }

    /// Prunes every hour, for as long as the decky runs.
    pub async fn prune_hourly(self: std::sync::Arc<Self>) {
        loop {
            tokio::time::sleep(PRUNE_EVERY).await;
            let artifacts = self.clone();
            let _ = tokio::task::spawn_blocking(move || artifacts.prune()).await;
        }
    }
}

/// Writes `bytes` to a hidden temporary beside `path`, owner-only, then renames it into place.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn open(dir: &Path, quota: u64, retention: Duration) -> Arc<Artifacts> {
        Arc::new(Artifacts::open(ArtifactsConfig { dir: dir.to_path_buf(), quota, retention }).unwrap())
    }

    #[tokio::test]
    async fn keeps_files_within_the_quota_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let artifacts = open(dir.path(), 10, Duration::from_secs(60));
        assert_eq!(artifacts.keep("a.bin".into(), b"123456".to_vec()).await, Kept::Stored);
        assert_eq!(artifacts.keep("a.bin".into(), b"123456".to_vec()).await, Kept::Stored, "the same bytes again");
        assert_eq!(artifacts.keep("b.bin".into(), b"12345".to_vec()).await, Kept::OverQuota);
        assert_eq!(artifacts.keep("c.bin".into(), b"1234".to_vec()).await, Kept::Stored);
        assert_eq!(std::fs::read(dir.path().join("a.bin")).unwrap(), b"123456");
        assert!(!dir.path().join("b.bin").exists());
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names.len(), 2, "no temporary left: {names:?}");
        // A reopened store counts what is there.
        let again = open(dir.path(), 10, Duration::from_secs(60));
        assert_eq!(again.keep("d.bin".into(), b"1".to_vec()).await, Kept::OverQuota);
    }

    #[tokio::test]
    async fn files_past_the_retention_are_removed_and_their_room_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let artifacts = open(dir.path(), 10, Duration::from_secs(3600));
        assert_eq!(artifacts.keep("old.bin".into(), b"0123456789".to_vec()).await, Kept::Stored);
        let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("old.bin"))
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        std::fs::write(dir.path().join(".half.bin.1"), b"x").unwrap();
        artifacts.prune();
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(artifacts.keep("new.bin".into(), b"0123456789".to_vec()).await, Kept::Stored);
    }
}
