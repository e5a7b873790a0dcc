//! Where captured files live on a decky's host: `{SVC_ARTIFACTS_DIR}/{decky}/`, bind-mounted into
//! the decky at [`ARTIFACTS_MOUNT`], where its decoys write each upload or message under a name
//! made from its SHA-256 (`decoy/src/artifacts.rs` holds the quota and the retention this sets).
//! The deployer makes the directory, owned by the decky's user and readable by no one else; the
//! API reads a file back for an admin (`GET /artifacts/{decky}/{stored_as}`).

use std::path::PathBuf;

use super::decky_container::DECKY_USER;
use super::decky_name::is_decky_name;

/// Where a decky's captured files appear inside its container.
pub const ARTIFACTS_MOUNT: &str = "/var/lib/svc/artifacts";
/// What a decky keeps unless told otherwise: MiB, and days.
pub const DEFAULT_QUOTA_MB: u64 = 256;
pub const DEFAULT_RETENTION_DAYS: u64 = 30;

/// How captured files are kept: `SVC_ARTIFACTS_DIR`, `SVC_ARTIFACTS_QUOTA_MB`,
/// `SVC_ARTIFACTS_RETENTION_DAYS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactsPolicy {
    /// One directory per decky under it.
    pub dir: PathBuf,
    /// The most a decky keeps, in MiB.
    pub quota_mb: u64,
    /// How long a file is kept, in days.
    pub retention_days: u64,
}

/// One decky's artifacts directory on this host, made and ready to mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeckyArtifacts {
    pub host_dir: PathBuf,
    pub quota_mb: u64,
    pub retention_days: u64,
}

/// Why a captured file cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ArtifactError {
    /// Not a decky's name.
    BadDecky,
    /// Not a name a decoy stores under.
    BadName,
    NotFound,
}

impl ArtifactsPolicy {
    /// Makes `decky`'s directory (owner the decky's user, mode 0700) and says what to mount. `None`
    /// (logged) when the host will not have it: the decky then runs keeping no files.
    pub fn prepare(&self, decky: &str) -> Option<DeckyArtifacts> {
        let made = (|| -> std::io::Result<PathBuf> {
            let dir = self.dir.join(decky);
            std::fs::create_dir_all(&dir)?;
            let dir = dir.canonicalize()?;
            let (uid, gid) = DECKY_USER.split_once(':').expect("the decky's user is uid:gid");
            std::os::unix::fs::chown(&dir, uid.parse().ok(), gid.parse().ok())?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
            Ok(dir)
        })();
        match made {
            Ok(host_dir) => {
                Some(DeckyArtifacts { host_dir, quota_mb: self.quota_mb, retention_days: self.retention_days })
            }
            Err(err) => {
                tracing::error!(decky, dir = %self.dir.display(), error = %err,
                    "Cannot make the decky's artifacts directory; it will keep no captured files");
                None
            }
        }
    }

    /// The captured file `stored_as` of `decky`, if the names are ones svc writes and it is there.
    pub fn file(&self, decky: &str, stored_as: &str) -> Result<PathBuf, ArtifactError> {
        if !is_decky_name(decky) {
            return Err(ArtifactError::BadDecky);
        }
        if !is_stored_name(stored_as) {
            return Err(ArtifactError::BadName);
        }
        let path = self.dir.join(decky).join(stored_as);
        // A symlink planted in the directory would lead out of it: only a plain file is served.
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() => Ok(path),
            _ => Err(ArtifactError::NotFound),
        }
    }
}

/// A name a decoy stores under (its hash and a suffix) or DECNET's `<time>_<hash>_<name>`: a plain
/// name of letters, digits, `.`, `_`, `-` and `:`, not hidden (a half-written temporary is).
fn is_stored_name(name: &str) -> bool {
    (1..=255).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'))
}

impl DeckyArtifacts {
    /// The bind mount: this host directory, writable, at [`ARTIFACTS_MOUNT`].
    pub fn mount(&self) -> (String, String) {
        (self.host_dir.to_string_lossy().into_owned(), ARTIFACTS_MOUNT.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn policy(dir: &Path) -> ArtifactsPolicy {
        ArtifactsPolicy { dir: dir.to_path_buf(), quota_mb: 1, retention_days: 1 }
    }

    #[test]
    fn only_plain_files_under_plain_names_are_served() {
        let root = tempfile::tempdir().unwrap();
        let policy = policy(root.path());
        std::fs::create_dir_all(root.path().join("web-01")).unwrap();
        std::fs::write(root.path().join("web-01/ab12.bin"), b"x").unwrap();
        std::fs::write(root.path().join("secret"), b"x").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), root.path().join("web-01/link.bin")).unwrap();
        assert_eq!(policy.file("web-01", "ab12.bin"), Ok(root.path().join("web-01/ab12.bin")));
        assert_eq!(policy.file("web-01", "link.bin"), Err(ArtifactError::NotFound));
        assert_eq!(policy.file("web-01", "none.bin"), Err(ArtifactError::NotFound));
        for name in ["..", "../secret", ".hidden", "", "a/b"] {
            assert_eq!(policy.file("web-01", name), Err(ArtifactError::BadName), "{name}");
        }
        for decky in ["..", "Web", ""] {
            assert_eq!(policy.file(decky, "secret"), Err(ArtifactError::BadDecky), "{decky}");
        }
    }
}
