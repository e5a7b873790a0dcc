//! Appending lines to the ingest file: how every component that writes events (the sniffer, the
//! tarpit's routes and watcher) hands them to the ingester. One write per call, in append mode, so
//! lines of several writers never interleave; the file is reopened each time, so a rotated one is
//! followed.

use std::path::Path;

use tokio::io::AsyncWriteExt;

/// Appends `text` (whole lines, each ending in a newline) to the file at `path`, creating it (0600)
/// and its directory (0700) when missing (`file_modes`).
pub async fn append(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let mut file = tokio::fs::File::from_std(crate::file_modes::open_append(path)?);
    file.write_all(text).await?;
    file.flush().await
}
