//! `svc systemd install` writes units systemd accepts, and `svc api` reports readiness to systemd.

use svc_test_support::processes as common;

use std::os::unix::net::UnixDatagram;
use std::process::Command;

use common::*;
use rustix::process::Signal;
use svc::roster::KNOWN_WORKERS;

#[test]
fn installed_units_pass_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let units = dir.path().join("units");
    std::fs::create_dir_all(&units).unwrap();
    let out = svc(dir.path(), &["systemd", "install", "--dir", units.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut files: Vec<String> =
        std::fs::read_dir(&units).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    // The API's unit, each worker's of the roster, and the target.
    let mut expected: Vec<String> =
        KNOWN_WORKERS.iter().map(|name| format!("svc-{name}.service")).chain(["svc.target".to_string()]).collect();
    expected.sort();
    assert_eq!(files, expected);
    let api = std::fs::read_to_string(units.join("svc-api.service")).unwrap();
    let bin = std::fs::canonicalize(env!("CARGO_BIN_EXE_svc")).unwrap();
    assert!(api.contains(&format!("ExecStart={} api\n", bin.display())), "{api}");
    assert!(api.contains("Type=notify"));

    let verify = Command::new("systemd-analyze")
        .env("PATH", path())
        .args(["verify", "--man=no"])
        .args(files.iter().map(|f| units.join(f)))
        .output()
        .expect("systemd-analyze is installed (scripts/lib.sh installs the systemd package)");
    let complaints = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "{complaints}");
    // verify reports unknown or bad settings on stderr but still exits 0.
    let ours: Vec<&str> = complaints.lines().filter(|l| l.contains("svc")).collect();
    assert!(ours.is_empty(), "{complaints}");
}

#[test]
fn a_dry_run_prints_the_units_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let units = dir.path().join("units");
    let out = svc(dir.path(), &["systemd", "install", "--dir", units.to_str().unwrap(), "--dry-run"]).output().unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("svc-sniffer.service") && printed.contains("CAP_NET_RAW"), "{printed}");
    assert!(!units.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_tells_systemd_when_it_is_ready_and_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(DEADLINE)).unwrap();
    let (mut command, port) = api_command(dir.path(), None);
    command.env("NOTIFY_SOCKET", &socket_path);
    let mut api = start_api(command, port).await;
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    api.signal(Signal::TERM);
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert_eq!(api.wait().code(), Some(0));
}
