//! The free-disk watermark: below `SVC_DISK_MIN_FREE_MB` free on the filesystem of the ingest file
//! or of the sqlite database, the collector and the ingester shed the low-value events
//! (`SVC_DISK_LOW_VALUE_EVENTS`: connections, requests) and keep credentials, commands and files;
//! `/health` says so. One check, read from the filesystem each time, so every component that asks
//! agrees on the facts.

use std::path::{Path, PathBuf};

/// What runs low, and which events go first.
#[derive(Clone, Debug)]
pub struct DiskWatermark {
    min_free_bytes: u64,
    low_value_events: Vec<String>,
    watched: Vec<PathBuf>,
}

/// A filesystem below the watermark: which path's, and how much is free there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowDisk {
    pub path: PathBuf,
    pub free_bytes: u64,
}

impl DiskWatermark {
    /// Below `min_free_bytes` (0: never) free on the filesystem of any of `watched`, the
    /// `low_value_events` are shed.
    pub fn new(watched: Vec<PathBuf>, min_free_bytes: u64, low_value_events: Vec<String>) -> DiskWatermark {
        DiskWatermark { min_free_bytes, low_value_events, watched }
    }

    /// The first watched filesystem with less free space than the watermark; `None` when every one
    /// has enough, or the watermark is off.
    pub fn low(&self) -> Option<LowDisk> {
        if self.min_free_bytes == 0 {
            return None;
        }
        self.watched.iter().find_map(|path| {
            let free_bytes = free_bytes(path)?;
            (free_bytes < self.min_free_bytes).then(|| LowDisk { path: path.clone(), free_bytes })
        })
    }

    /// Whether an event of `event_type` is shed while the disk is low.
    pub fn is_low_value(&self, event_type: &str) -> bool {
        self.low_value_events.iter().any(|e| e == event_type)
    }

    /// What `/health` and the workers say while shedding.
    pub fn detail(&self, low: &LowDisk) -> String {
        format!(
            "disk low ({} MiB free, under {} MiB): shedding {}",
            low.free_bytes >> 20,
            self.min_free_bytes >> 20,
            self.low_value_events.join(", ")
        )
    }
}

/// Free bytes (for an unprivileged writer) of the filesystem holding `path`, or its nearest
/// existing ancestor (the file may not exist yet).
fn free_bytes(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| !p.as_os_str().is_empty() && p.exists()).unwrap_or(Path::new("."));
    let stat = rustix::fs::statvfs(existing).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watermark_above_any_disk_is_low_and_zero_is_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut watermark = DiskWatermark {
            min_free_bytes: u64::MAX,
            low_value_events: vec!["connect".into()],
            watched: vec![dir.path().join("not/yet/ingest.log")],
        };
        let low = watermark.low().expect("no disk has that much free");
        assert!(low.free_bytes > 0);
        assert!(watermark.detail(&low).contains("shedding connect"));
        assert!(watermark.is_low_value("connect") && !watermark.is_low_value("auth_attempt"));
        watermark.min_free_bytes = 1;
        assert_eq!(watermark.low(), None);
        watermark.min_free_bytes = 0;
        assert_eq!(watermark.low(), None);
    }
}
