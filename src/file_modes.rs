//! The service's files are private to the user it runs as: the data directory holds the database
//! (password hashes, webhook secrets, every captured credential) and the ingest file (every line
//! before it is stored), so whatever starts the service (systemd, `scripts/start`, a shell with a
//! loose umask) the data directory is 0700 and each such file 0600. Every place that creates one goes
//! through here; one that already exists with a looser mode is tightened, and the log says so.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The data directory's mode.
pub const PRIVATE_DIR: u32 = 0o700;
/// A private file's mode.
pub const PRIVATE_FILE: u32 = 0o600;

/// Creates `dir` (and missing parents) 0700; an existing `dir` looser than that is tightened.
/// Parents that already exist are left as they are: they may be shared, like `/var/lib`.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    create_private_dirs(dir)?;
    tighten(dir, PRIVATE_DIR)
}

/// Creates whatever of `dir` is missing, 0700, without changing what exists.
pub fn create_private_dirs(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    DirBuilder::new().recursive(true).mode(PRIVATE_DIR).create(dir)
}

/// Opens `path` for appending, creating it 0600 (and its missing directories 0700); an existing
/// file looser than 0600 is tightened.
pub fn open_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        create_private_dirs(dir)?;
    }
    let file = OpenOptions::new().create(true).append(true).mode(PRIVATE_FILE).open(path)?;
    tighten_open(&file, path)?;
    Ok(file)
}

/// Creates `path` empty and 0600 when it does not exist; tightens it when it does. An existing
/// file is never opened: closing any descriptor of a file drops every POSIX lock this process holds
/// on it, and a database this process already has open (its connections' locks) would be corrupted.
pub fn private_file(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        create_private_dirs(dir)?;
    }
    match OpenOptions::new().write(true).create_new(true).mode(PRIVATE_FILE).open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => tighten(path, PRIVATE_FILE),
        Err(err) => Err(err),
    }
}

/// Takes from an existing `path` every permission `mode` does not grant; a missing path is fine.
pub fn tighten(path: &Path, mode: u32) -> io::Result<()> {
    let current = match std::fs::metadata(path) {
        Ok(metadata) => metadata.permissions().mode() & 0o7777,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    if current & !mode == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, Permissions::from_mode(current & mode))?;
    warn_tightened(path, current, current & mode);
    Ok(())
}

fn tighten_open(file: &File, path: &Path) -> io::Result<()> {
    let current = file.metadata()?.permissions().mode() & 0o7777;
    if current & !PRIVATE_FILE != 0 {
        file.set_permissions(Permissions::from_mode(current & PRIVATE_FILE))?;
        warn_tightened(path, current, current & PRIVATE_FILE);
    }
    Ok(())
}

fn warn_tightened(path: &Path, was: u32, now: u32) {
    tracing::warn!(path = %path.display(), was = %format!("{was:o}"), now = %format!("{now:o}"), "Tightened the mode of a file that holds secrets");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn new_files_and_directories_are_private_and_loose_existing_ones_are_tightened() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data/nested");
        private_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700);
        let file = data.join("ingest.log");
        drop(open_append(&file).unwrap());
        assert_eq!(mode(&file), 0o600);

        std::fs::set_permissions(&data, Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        private_dir(&data).unwrap();
        drop(open_append(&file).unwrap());
        assert_eq!((mode(&data), mode(&file)), (0o700, 0o600));

        // Tightening only takes away: a file its owner made read-only stays so.
        std::fs::set_permissions(&file, Permissions::from_mode(0o444)).unwrap();
        tighten(&file, PRIVATE_FILE).unwrap();
        assert_eq!(mode(&file), 0o400);
        tighten(&root.path().join("missing"), PRIVATE_FILE).unwrap();
    }
}
