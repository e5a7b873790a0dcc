//! The extraction rules, tried on hostile tarballs: absolute paths, `..`, links, devices, the size cap and setuid bits.

use super::*;
use std::os::unix::fs::PermissionsExt;

fn tgz(entries: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (path, mode, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(*mode);
        header.set_cksum();
        tar.append_data(&mut header, path, *data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn files_land_under_the_destination_with_setuid_setgid_and_sticky_stripped() {
    let dir = tempfile::tempdir().unwrap();
    let archive = tgz(&[("svc", 0o4755, b"binary"), ("units/svc-agent.service", 0o3644, b"[Unit]\n")]);
    extract(&archive, dir.path(), 1024).unwrap();
    assert_eq!(std::fs::read(dir.path().join("svc")).unwrap(), b"binary");
    assert_eq!(mode(&dir.path().join("svc")), 0o755);
    assert_eq!(mode(&dir.path().join("units/svc-agent.service")), 0o644);
}

#[test]
fn the_size_cap_counts_every_file_and_garbage_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let archive = tgz(&[("a", 0o644, &[0u8; 600]), ("b", 0o644, &[0u8; 600])]);
    assert!(matches!(extract(&archive, dir.path(), 1000), Err(Refused::TooLarge)));
    let fresh = tempfile::tempdir().unwrap();
    assert!(matches!(extract(b"not a tarball", fresh.path(), 1000), Err(Refused::Malformed)));
}

#[test]
fn paths_must_stay_relative_and_inside() {
    assert!(matches!(checked_path(b"/etc/passwd"), Err(Refused::Absolute)));
    assert!(matches!(checked_path(b"../x"), Err(Refused::Escapes)));
    assert!(matches!(checked_path(b"a/../../x"), Err(Refused::Escapes)));
    assert!(matches!(checked_path(b"./"), Err(Refused::Malformed)));
    assert_eq!(checked_path(b"./units/a.service").unwrap(), PathBuf::from("units/a.service"));
}
