//! Appending lines to the ingest file: how every component that writes events (the sniffer, the
//! tarpit's routes and watcher) hands them to the ingester. One write per call, in append mode, so
//! lines of several writers never interleave; the file is reopened each time, so a rotated one is
//! followed.

use std::path::Path;

use tokio::io::AsyncWriteExt;

/// Appends `text` (whole lines, each ending in a newline) to the file at `path`, creating it and
/// its directory when missing.
pub async fn append(path: &Path, text: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await?;
    }
    let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(path).await?;
    file.write_all(text).await?;
    file.flush().await
}
