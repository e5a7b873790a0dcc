//! File drop: a file written into, or removed from, a running decky (bait for an attacker to
//! find, such as a canary token), through the container engine's API and never a shell.
//!
//! Writing goes through the engine's archive API: a tar stream carrying the file (name, mode,
//! owner, time) and each directory above it, unpacked at the top of the writable directory the
//! file is under ([`DROP_ROOTS`]). A decky's root filesystem is read-only (the engine refuses an
//! archive there), so bait goes under those directories only, each a small in-memory mount of the
//! decky's ([`drop_mounts`]); their content is lost when the container restarts. Before a write,
//! and to remove a file (the archive API cannot delete), the decky's own svc binary is run in the
//! container through the engine's exec API with the path as one argument ([`DECKY_FILE_COMMAND`],
//! [`check_in_place`], [`remove_in_place`]): it refuses a path under a symlink, so nothing reaches
//! outside the writable directories (the archive API follows the container's symlinks).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use bytes::Bytes;

use super::decky_container::DECKY_USER;
use crate::runtime::image::BINARY_IN_IMAGE;
use crate::runtime::{Runtime, RuntimeError};

/// The directories of a decky files may be dropped under: where bait is planted (home
/// directories, `/root`, and where services and deployments keep their files).
pub const DROP_ROOTS: [&str; 5] = ["/home", "/root", "/opt", "/srv", "/var/www"];
/// Each drop directory's mount options: in memory, a few MiB.
const DROP_MOUNT_OPTIONS: &str = "rw,nosuid,nodev,noexec,size=8m";
/// The largest file a drop takes (decoded).
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// The longest path, and path segment, a drop takes.
const MAX_PATH_BYTES: usize = 4096;
const MAX_SEGMENT_BYTES: usize = 255;
/// The most a file's mode may be: permission bits only (no setuid, setgid or sticky bit).
pub const MAX_MODE: i64 = 0o777;
/// The directories the archive makes that keep their owner's secrets, made `0700` (others `0755`).
const PRIVATE_DIRS: [&str; 3] = [".ssh", ".gnupg", ".aws"];

/// The svc subcommand a decky's container runs for a drop: `svc decky-file check|remove PATH`.
pub const DECKY_FILE_COMMAND: &str = "decky-file";
/// Its exit code when it refuses the path (a symlink above it, or a directory at it).
pub const REFUSED_EXIT: i64 = 3;

/// The writable mounts every decky gets for drops: each of [`DROP_ROOTS`], in memory.
pub fn drop_mounts() -> BTreeMap<String, String> {
    DROP_ROOTS.iter().map(|root| (root.to_string(), DROP_MOUNT_OPTIONS.to_string())).collect()
}

/// Why a path cannot take a drop; the text is the client's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path must be absolute")]
    NotAbsolute,
    #[error("path must not contain '..' segments")]
    DotDot,
    #[error("path must not contain control characters")]
    Control,
    #[error("path must name a file, not a directory")]
    NotAFile,
    #[error("path is too long")]
    TooLong,
    #[error("path must be under one of /home, /root, /opt, /srv, /var/www (the rest of a decky is read-only)")]
    OutsideRoots,
}

/// A path a drop may write: under one of [`DROP_ROOTS`] (`root`), then `dirs`, then `file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DropPath {
    pub root: &'static str,
    pub dirs: Vec<String>,
    pub file: String,
}

impl DropPath {
    /// Checks a client's path: absolute, no `.` or `..` segment, no control character, a file's
    /// name (not ending in `/`), under a drop directory. Repeated slashes are one.
    pub fn parse(path: &str) -> Result<DropPath, PathError> {
        if !path.starts_with('/') {
            return Err(PathError::NotAbsolute);
        }
        if path.chars().any(char::is_control) {
            return Err(PathError::Control);
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segments.iter().any(|s| *s == ".." || *s == ".") {
            return Err(PathError::DotDot);
        }
        if path.len() > MAX_PATH_BYTES || segments.iter().any(|s| s.len() > MAX_SEGMENT_BYTES) {
            return Err(PathError::TooLong);
        }
        if path.ends_with('/') {
            return Err(PathError::NotAFile);
        }
        for root in DROP_ROOTS {
            let depth = root.split('/').filter(|s| !s.is_empty()).count();
            let under = segments.len() > depth
                && segments.iter().zip(root.split('/').filter(|s| !s.is_empty())).all(|(a, b)| a == &b);
            if under {
                let (file, dirs) = segments[depth..].split_last().expect("a segment below the root");
                return Ok(DropPath {
                    root,
                    dirs: dirs.iter().map(|s| s.to_string()).collect(),
                    file: file.to_string(),
                });
            }
        }
        Err(PathError::OutsideRoots)
    }

    /// The path in the container, normalised.
    pub fn full(&self) -> String {
        let mut path = self.root.to_string();
        for segment in self.dirs.iter().chain([&self.file]) {
            path.push('/');
            path.push_str(segment);
        }
        path
    }

    /// The tar stream the engine unpacks at [`DropPath::root`]: each directory above the file
    /// (so none is taken from a symlink the container holds there) and the file, all owned by the
    /// decky's user, with `mode` for the file and `mtime` (epoch seconds) for all.
    pub fn archive(&self, content: &[u8], mode: u32, mtime: u64) -> io::Result<Vec<u8>> {
        let (uid, gid) = decky_ids();
        let mut builder = tar::Builder::new(Vec::new());
        let mut name = String::new();
        for dir in &self.dirs {
            name.push_str(dir);
            name.push('/');
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(if PRIVATE_DIRS.contains(&dir.as_str()) { 0o700 } else { 0o755 });
            header.set_uid(uid);
            header.set_gid(gid);
            header.set_mtime(mtime);
            header.set_size(0);
            builder.append_data(&mut header, &name, io::empty())?;
        }
        name.push_str(&self.file);
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(mode & 0o777);
        header.set_uid(uid);
        header.set_gid(gid);
        header.set_mtime(mtime);
        header.set_size(content.len() as u64);
        builder.append_data(&mut header, &name, content)?;
        builder.into_inner()
    }
}

/// The decky user's uid and gid, from [`DECKY_USER`].
fn decky_ids() -> (u64, u64) {
    let (uid, gid) = DECKY_USER.split_once(':').expect("DECKY_USER is uid:gid");
    (uid.parse().expect("a numeric uid"), gid.parse().expect("a numeric gid"))
}

/// How a drop failed.
#[derive(Debug, thiserror::Error)]
pub enum DropError {
    /// The decky refused the path: a symlink above it, or a directory at it.
    #[error("path is under a symlink or names a directory")]
    Refused,
    /// The engine failed or refused (the container down, the mount full); its text is logged.
    #[error("container runtime operation failed")]
    Runtime,
}

fn runtime_failed(err: RuntimeError) -> DropError {
    tracing::error!(error = %err, "File drop: container runtime operation failed");
    DropError::Runtime
}

/// Runs `svc decky-file <action> <path>` in `container`, as the decky's user.
async fn decky_file(runtime: &Runtime, container: &str, action: &str, path: &DropPath) -> Result<(), DropError> {
    let argv = [BINARY_IN_IMAGE, DECKY_FILE_COMMAND, action, "--", &path.full()].map(str::to_string);
    match runtime.exec(container, DECKY_USER, &argv).await.map_err(runtime_failed)? {
        0 => Ok(()),
        REFUSED_EXIT => Err(DropError::Refused),
        code => {
            tracing::error!(container, action, code, "File drop: decky-file failed");
            Err(DropError::Runtime)
        }
    }
}

/// Writes `content` at `path` in running `container`, with `mode` and time `mtime`.
pub async fn put(
    runtime: &Runtime,
    container: &str,
    path: &DropPath,
    content: &[u8],
    mode: u32,
    mtime: u64,
) -> Result<(), DropError> {
    decky_file(runtime, container, "check", path).await?;
    let archive =
        path.archive(content, mode, mtime).map_err(|e| runtime_failed(RuntimeError::Engine(e.to_string())))?;
    runtime.put_archive(container, path.root, Bytes::from(archive)).await.map_err(runtime_failed)
}

/// Removes `path` from running `container`; a path with nothing there is already removed.
pub async fn remove(runtime: &Runtime, container: &str, path: &DropPath) -> Result<(), DropError> {
    decky_file(runtime, container, "remove", path).await
}

/// Inside the decky: whether `path` may take a drop. Every existing directory between its drop
/// directory and it must be a directory, not a symlink, and it must not be a directory. `Err`
/// holds why not.
pub fn check_in_place(path: &str) -> Result<DropPath, String> {
    let parsed = DropPath::parse(path).map_err(|e| e.to_string())?;
    let mut at = std::path::PathBuf::from(parsed.root);
    for dir in &parsed.dirs {
        at.push(dir);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(format!("{} is a symlink", at.display())),
            Ok(meta) if !meta.is_dir() => return Err(format!("{} is not a directory", at.display())),
            Ok(_) => {}
            // What does not exist yet the archive makes, as a directory.
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(parsed),
            Err(err) => return Err(format!("{}: {err}", at.display())),
        }
    }
    match std::fs::symlink_metadata(Path::new(&parsed.full())) {
        Ok(meta) if meta.is_dir() => Err(format!("{} is a directory", parsed.full())),
        _ => Ok(parsed),
    }
}

/// Inside the decky: removes the file at `path` (which passed [`check_in_place`]); a symlink
/// there is removed itself, not what it points at; nothing there is already removed.
pub fn remove_in_place(path: &DropPath) -> io::Result<()> {
    match std::fs::remove_file(path.full()) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_path_is_an_absolute_file_under_a_drop_directory() {
        let ok = DropPath::parse("/home/admin//.ssh/id_rsa").unwrap();
        assert_eq!(ok, DropPath { root: "/home", dirs: vec!["admin".into(), ".ssh".into()], file: "id_rsa".into() });
        assert_eq!(ok.full(), "/home/admin/.ssh/id_rsa");
        assert_eq!(DropPath::parse("/var/www/index.html").unwrap().root, "/var/www");
        assert_eq!(DropPath::parse("/root/.bash_history").unwrap().dirs, Vec::<String>::new());
        assert_eq!(DropPath::parse("home/x"), Err(PathError::NotAbsolute));
        assert_eq!(DropPath::parse("/home/a/../../etc/passwd"), Err(PathError::DotDot));
        assert_eq!(DropPath::parse("/home/./x"), Err(PathError::DotDot));
        assert_eq!(DropPath::parse("/home/a\0b"), Err(PathError::Control));
        assert_eq!(DropPath::parse("/home/a\nb"), Err(PathError::Control));
        assert_eq!(DropPath::parse("/home/admin/"), Err(PathError::NotAFile));
        assert_eq!(DropPath::parse("/home"), Err(PathError::OutsideRoots), "the drop directory itself");
        assert_eq!(DropPath::parse("/etc/passwd"), Err(PathError::OutsideRoots));
        assert_eq!(DropPath::parse("/homework/x"), Err(PathError::OutsideRoots), "a prefix is not a parent");
        assert_eq!(DropPath::parse("/var/wwwx/y"), Err(PathError::OutsideRoots));
        assert_eq!(DropPath::parse(&format!("/home/{}", "a".repeat(256))), Err(PathError::TooLong));
    }

    #[test]
    fn the_archive_carries_the_directories_and_the_file_owned_by_the_decky_user() {
        let path = DropPath::parse("/home/admin/.ssh/id_rsa").unwrap();
        let bytes = path.archive(b"KEY", 0o4600, 1_700_000_000).unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let entries: Vec<(String, u32, u64, u64, u64, Vec<u8>)> = archive
            .entries()
            .unwrap()
            .map(|entry| {
                let mut entry = entry.unwrap();
                let header = entry.header().clone();
                let mut content = Vec::new();
                io::Read::read_to_end(&mut entry, &mut content).unwrap();
                let name = entry.path().unwrap().display().to_string();
                (
                    name,
                    header.mode().unwrap(),
                    header.uid().unwrap(),
                    header.gid().unwrap(),
                    header.mtime().unwrap(),
                    content,
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("admin/".into(), 0o755, 65534, 65534, 1_700_000_000, vec![]),
                ("admin/.ssh/".into(), 0o700, 65534, 65534, 1_700_000_000, vec![]),
                ("admin/.ssh/id_rsa".into(), 0o600, 65534, 65534, 1_700_000_000, b"KEY".to_vec()),
            ],
            "no setuid bit"
        );
    }

    #[test]
    fn in_place_a_refused_path_says_why_and_an_absent_file_is_removed() {
        // The checks on the real filesystem run under a drop directory this test cannot own, so
        // they are exercised through their parts: parse errors pass through.
        assert!(check_in_place("/etc/passwd").unwrap_err().contains("must be under"));
        assert!(check_in_place("/home/../etc/passwd").unwrap_err().contains(".."));
        let nothing = DropPath::parse("/srv/svc-file-drop-test/absent").unwrap();
        assert!(remove_in_place(&nothing).is_ok(), "nothing there is already removed");
    }
}
