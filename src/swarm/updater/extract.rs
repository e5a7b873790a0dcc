//! Unpacking a release tarball into a fresh staging directory, refusing anything that is not a
//! plain file or directory under it: absolute paths, `..`, symbolic and hard links, devices and
//! fifos, more entries or more bytes than the caps. Modes keep their permission bits only (setuid,
//! setgid and sticky are stripped). Files are created exclusively, so nothing already there is
//! followed or overwritten. The first refusal stops the extraction; the caller discards the
//! staging directory.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;

/// Entries a release may hold.
pub const MAX_ENTRIES: usize = 10_000;

/// Why a tarball was refused. The texts are what the master sees; the offending name goes to the
/// log only.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("tarball entry has an absolute path")]
    Absolute,
    #[error("tarball entry escapes the release directory")]
    Escapes,
    #[error("tarball entry is a link")]
    Link,
    #[error("tarball entry is not a regular file or directory")]
    Special,
    #[error("tarball exceeds the size cap")]
    TooLarge,
    #[error("tarball is not a gzipped tar")]
    Malformed,
    #[error("cannot write the release")]
    Io(#[source] std::io::Error),
}

/// Unpacks the gzipped tar `tgz` into `dest` (which must exist and be empty), at most `max_bytes`
/// of file content in all.
pub fn extract(tgz: &[u8], dest: &Path, max_bytes: u64) -> Result<(), Refused> {
    let mut archive = tar::Archive::new(GzDecoder::new(tgz));
    let entries = archive.entries().map_err(malformed)?;
    let mut total: u64 = 0;
    for (index, entry) in entries.enumerate() {
        if index >= MAX_ENTRIES {
            return Err(Refused::TooLarge);
        }
        let mut entry = entry.map_err(malformed)?;
        let raw = entry.path_bytes().into_owned();
        let relative = checked_path(&raw).inspect_err(|why| {
            tracing::warn!(entry = %String::from_utf8_lossy(&raw), %why, "Release tarball refused");
        })?;
        let header = entry.header();
        let mode = header.mode().map_err(malformed)? & 0o777;
        let kind = header.entry_type();
        let target = dest.join(&relative);
        if kind.is_dir() {
            std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&target).map_err(Refused::Io)?;
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            tracing::warn!(entry = %relative.display(), "Release tarball refused: a link");
            return Err(Refused::Link);
        }
        if !kind.is_file() {
            tracing::warn!(entry = %relative.display(), kind = ?kind, "Release tarball refused: a special file");
            return Err(Refused::Special);
        }
        let declared = header.size().map_err(malformed)?;
        total = total.checked_add(declared).ok_or(Refused::TooLarge)?;
        if total > max_bytes {
            return Err(Refused::TooLarge);
        }
        if let Some(parent) = target.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o755).create(parent).map_err(Refused::Io)?;
        }
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&target).map_err(Refused::Io)?;
        // The declared size bounds what is read, whatever the stream holds.
        let copied = std::io::copy(&mut (&mut entry).take(declared), &mut file).map_err(malformed)?;
        if copied != declared {
            return Err(Refused::Malformed);
        }
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).map_err(Refused::Io)?;
    }
    Ok(())
}

fn malformed(err: std::io::Error) -> Refused {
    tracing::warn!(error = %err, "Release tarball unreadable");
    Refused::Malformed
}

/// The entry's path as a relative path of plain components; `.` components are dropped.
fn checked_path(raw: &[u8]) -> Result<PathBuf, Refused> {
    let text = std::str::from_utf8(raw).map_err(|_| Refused::Malformed)?;
    if text.starts_with('/') {
        return Err(Refused::Absolute);
    }
    let mut relative = PathBuf::new();
    for component in Path::new(text).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(Refused::Escapes),
            Component::RootDir | Component::Prefix(_) => return Err(Refused::Absolute),
        }
    }
    if relative.as_os_str().is_empty() {
        return Err(Refused::Malformed);
    }
    Ok(relative)
}

#[cfg(test)]
mod tests;
