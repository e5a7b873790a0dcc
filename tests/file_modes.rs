//! The files that hold secrets are private whatever the umask: the API started over a data
//! directory left 0755 with a database and an ingest file left 0644 tightens them (and says so in
//! the log), and what it creates (the database, its write-ahead log, the ingest file) is 0600.

use svc_test_support::in_process as common;

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{LogCapture, TestApi, TestDb};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o7777
}

fn loosen(path: &Path, mode: u32) {
    std::fs::set_permissions(path, Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn the_api_makes_its_data_private_and_tightens_what_an_earlier_run_left_loose() {
    let (logs, _guard) = LogCapture::start();
    let db = TestDb::sqlite();
    let config = db.api_config(&[]);
    let data = config.data_dir.clone();
    let ingest = config.ingest.log_file.clone().expect("an ingest file by default");

    // A first run creates everything private.
    let api = TestApi::start(config.clone()).await;
    svc::logline::append(&ingest, b"a line\n").await.unwrap();
    let database = data.join("svc.db");
    let wal = data.join("svc.db-wal");
    assert_eq!(mode(&database), 0o600);
    assert_eq!(mode(&wal), 0o600, "the write-ahead log takes the database's mode");
    assert_eq!(mode(&ingest), 0o600);
    api.stop().await;

    // Left loose (an earlier version, a restore from backup), everything is tightened on start.
    // (A clean close removed the write-ahead log; the database's mode decides the next one's.)
    for (path, loose) in [(&data, 0o755), (&database, 0o644), (&ingest, 0o644)] {
        loosen(path, loose);
    }
    let api = TestApi::start(config).await;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&database), 0o600);
    assert_eq!(mode(&wal), 0o600);
    svc::logline::append(&ingest, b"another line\n").await.unwrap();
    assert_eq!(mode(&ingest), 0o600);
    assert_eq!(std::fs::read_to_string(&ingest).unwrap(), "a line\nanother line\n", "tightening keeps the content");
    let warned = logs.lines_containing("Tightened the mode of a file that holds secrets");
    assert!(warned.len() >= 3, "each tightening is logged: {warned:?}");
    api.stop().await;
}
