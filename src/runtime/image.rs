//! The default decky image, built on the host without a registry or a Dockerfile: a root
//! filesystem holding the svc binary and the shared libraries it links (as `ldd` lists them),
//! imported through the engine API with `svc decky` as its entry point. Its tag carries svc's
//! version and a digest of the binary, so an upgraded binary gets a fresh image and an unchanged
//! one is never rebuilt.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{ContainerRuntime, RuntimeError, RuntimeResult};

/// The default image's repository name.
pub const REPOSITORY: &str = "svc-decky";

/// Where the binary lives inside the image.
pub const BINARY_IN_IMAGE: &str = "/usr/local/bin/svc";

/// The svc binary a decky image is built from, and its tag.
#[derive(Clone, Debug)]
pub struct DeckyImage {
    binary: PathBuf,
    reference: String,
}

impl DeckyImage {
    /// The image for `binary`, tagged `svc-decky:<version>-<first 12 hex of its SHA-256>`.
    pub fn for_binary(binary: &Path) -> std::io::Result<DeckyImage> {
        let mut file = std::fs::File::open(binary)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0; 1 << 20];
        loop {
            let read = file.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        let digest: String = hasher.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect();
        let reference = format!("{REPOSITORY}:{}-{digest}", env!("CARGO_PKG_VERSION"));
        Ok(DeckyImage { binary: binary.to_path_buf(), reference })
    }

    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// Builds and imports the image unless the engine has it already.
    pub async fn ensure(&self, runtime: &dyn ContainerRuntime) -> RuntimeResult<()> {
        if runtime.image_exists(&self.reference).await? {
            return Ok(());
        }
        tracing::info!(image = %self.reference, binary = %self.binary.display(), "Building the decky image");
        let binary = self.binary.clone();
        let rootfs = tokio::task::spawn_blocking(move || root_filesystem(&binary))
            .await
            .map_err(|e| RuntimeError::Engine(format!("building the root filesystem: {e}")))?
            .map_err(|e| RuntimeError::Engine(format!("building the root filesystem: {e}")))?;
        let changes = [format!("ENTRYPOINT [\"{BINARY_IN_IMAGE}\"]"), "CMD [\"decky\"]".to_string()];
        runtime.import_image(&self.reference, rootfs, &changes).await
    }
}

/// A tar of the binary at [`BINARY_IN_IMAGE`], every shared library it loads at its own path,
/// and an empty `/tmp`.
fn root_filesystem(binary: &Path) -> std::io::Result<Bytes> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(true);
    tar.append_path_with_name(binary, BINARY_IN_IMAGE.trim_start_matches('/'))?;
    for library in shared_libraries(binary)? {
        tar.append_path_with_name(&library, library.to_string_lossy().trim_start_matches('/'))?;
    }
    let mut tmp = tar::Header::new_gnu();
    tmp.set_entry_type(tar::EntryType::Directory);
    tmp.set_mode(0o1777);
    tmp.set_size(0);
    tar.append_data(&mut tmp, "tmp/", std::io::empty())?;
    Ok(Bytes::from(tar.into_inner()?))
}

/// The absolute paths `ldd` names for `binary` (none for a static binary).
fn shared_libraries(binary: &Path) -> std::io::Result<Vec<PathBuf>> {
    let output = Command::new("ldd").arg(binary).output()?;
    let listing = String::from_utf8_lossy(&output.stdout);
    Ok(parse_ldd(&listing))
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`
/// name a file; `linux-vdso.so.1 (0x…)` does not.
fn parse_ldd(listing: &str) -> Vec<PathBuf> {
    listing
        .lines()
        .filter_map(|line| {
            let path = line.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_listings_name_the_files_to_copy() {
        let listing = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x7f)\n\
                       \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f)\n\t/lib64/ld-linux-x86-64.so.2 (0x7f)\n";
        let paths: Vec<String> = parse_ldd(listing).iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            paths,
            ["/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn the_root_filesystem_holds_the_binary_and_what_it_links() {
        let binary = Path::new("/bin/true");
        let tar = root_filesystem(binary).unwrap();
        let mut archive = tar::Archive::new(&tar[..]);
        let names: Vec<String> =
            archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        assert!(names.contains(&"usr/local/bin/svc".to_string()), "{names:?}");
        assert!(names.iter().any(|n| n.contains("libc.so")), "{names:?}");
        assert!(names.contains(&"tmp/".to_string()) || names.contains(&"tmp".to_string()), "{names:?}");
    }
}
