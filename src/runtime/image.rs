//! The default decky image, built on the host without a registry or a Dockerfile: a root
//! filesystem holding the svc binary and the shared libraries it links (as `ldd` lists them),
//! packed as a one-layer image archive (the `docker save` format, which Docker and podman both
//! load) with `svc decky` as its entry point. Its tag carries svc's version and a digest of the
//! binary, so an upgraded binary gets a fresh image and an unchanged one is never rebuilt. The
//! name is fully qualified (`localhost/…`): podman's Docker API would otherwise read a short name
//! as Docker Hub's.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{ContainerRuntime, RuntimeError, RuntimeResult};

/// The default image's repository name.
pub const REPOSITORY: &str = "localhost/svc-decky";

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
        let digest: String = crate::text::hex(&hasher.finalize()[..6]);
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
        let (binary, reference) = (self.binary.clone(), self.reference.clone());
        let archive = tokio::task::spawn_blocking(move || archive(&reference, &root_filesystem(&binary)?))
            .await
            .map_err(|e| RuntimeError::Engine(format!("building the image: {e}")))?
            .map_err(|e| RuntimeError::Engine(format!("building the image: {e}")))?;
        runtime.load_image(archive).await?;
        if !runtime.image_exists(&self.reference).await? {
            return Err(RuntimeError::Engine(format!(
                "the engine loaded the archive but has no image {}",
                self.reference
            )));
        }
        // Each build of svc makes a new image: the older ones no container runs are removed, so an
        // upgraded host does not keep every image it ever built.
        for tag in runtime.image_tags(REPOSITORY).await? {
            if tag != self.reference {
                tracing::info!(image = %tag, "Removing an older decky image");
                runtime.remove_image(&tag).await?;
            }
        }
        Ok(())
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::text::hex(&Sha256::digest(bytes))
}

/// The image archive: `manifest.json`, the image's configuration, and `rootfs` as its one layer.
fn archive(reference: &str, rootfs: &[u8]) -> std::io::Result<Bytes> {
    let layer_digest = sha256_hex(rootfs);
    let architecture = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": architecture,
        "os": "linux",
        "config": {
            "Entrypoint": [BINARY_IN_IMAGE],
            "Cmd": ["decky"],
            "Labels": {"svc.image": "decky"},
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        "history": [{"created_by": "svc: the svc binary and the libraries it links"}],
    }))?;
    let config_name = format!("{}.json", sha256_hex(&config));
    let layer_name = format!("{layer_digest}/layer.tar");
    let manifest = serde_json::to_vec(&serde_json::json!([
        {"Config": config_name, "RepoTags": [reference], "Layers": [layer_name]}
    ]))?;
    let mut tar = tar::Builder::new(Vec::new());
    for (name, data) in
        [(config_name.as_str(), &config[..]), (layer_name.as_str(), rootfs), ("manifest.json", &manifest[..])]
    {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, data)?;
    }
    Ok(Bytes::from(tar.into_inner()?))
}

/// A tar of the binary at [`BINARY_IN_IMAGE`], every shared library it loads at its own path,
/// and an empty `/tmp`.
fn root_filesystem(binary: &Path) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    append_file(&mut tar, binary, BINARY_IN_IMAGE)?;
    for library in shared_libraries(binary)? {
        append_file(&mut tar, &library, &library.to_string_lossy())?;
    }
    let mut tmp = tar::Header::new_gnu();
    tmp.set_entry_type(tar::EntryType::Directory);
    tmp.set_mode(0o1777);
    tmp.set_size(0);
    tar.append_data(&mut tmp, "tmp/", std::io::empty())?;
    tar.into_inner()
}

/// The file at `source` (symbolic links followed) as a plain file at `target`: plain headers only,
/// since engines refuse the sparse entries a tar of a file with holes may get.
fn append_file(tar: &mut tar::Builder<Vec<u8>>, source: &Path, target: &str) -> std::io::Result<()> {
    let data = std::fs::read(source)?;
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(data.len() as u64);
    header.set_mode(0o755);
    tar.append_data(&mut header, target.trim_start_matches('/'), &data[..])
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

    #[test]
    fn the_archive_names_its_layer_and_configuration_by_digest() {
        let archive = archive("localhost/svc-decky:1-x", b"layer bytes").unwrap();
        let mut entries = tar::Archive::new(&archive[..]);
        let mut files = std::collections::BTreeMap::new();
        for entry in entries.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            files.insert(name, data);
        }
        let manifest: serde_json::Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
        assert_eq!(manifest[0]["RepoTags"][0], "localhost/svc-decky:1-x");
        let layer = manifest[0]["Layers"][0].as_str().unwrap();
        assert_eq!(files[layer], b"layer bytes");
        let config: serde_json::Value =
            serde_json::from_slice(&files[manifest[0]["Config"].as_str().unwrap()]).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], format!("sha256:{}", sha256_hex(b"layer bytes")));
        assert_eq!(config["config"]["Entrypoint"][0], BINARY_IN_IMAGE);
    }
}
