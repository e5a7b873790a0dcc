//! How far each container's output has been written to the ingest file, kept so that a collector
//! killed at any moment neither repeats nor loses a line when it starts again.
//!
//! Each batch is written ahead: the journal first records the batch's bytes, where the ingest file
//! ended before it, and every container's position after it (`pending`); then the bytes are
//! appended with one `write`. At startup a pending batch is looked for in the ingest file from
//! where it began: found, it was written; not found, it is appended now. Either way the positions
//! after it hold. Other writers (sniffer, tarpit) may append to the same file meanwhile, which is
//! why the batch is searched for rather than measured.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// A container's position in its own output: the timestamp of the last line taken (nanoseconds
/// since the epoch), and how many lines carried exactly that timestamp (an engine may stamp
/// several lines alike: podman's API gives whole seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub ts_nanos: i128,
    pub at_ts: u64,
}

impl Position {
    /// Whether a line stamped `ts_nanos`, the `index`-th of that stamp, was taken already.
    pub fn covers(&self, ts_nanos: i128, index: u64) -> bool {
        ts_nanos < self.ts_nanos || (ts_nanos == self.ts_nanos && index < self.at_ts)
    }

    /// The position after taking a line stamped `ts_nanos`.
    pub fn advance(&mut self, ts_nanos: i128) {
        if ts_nanos == self.ts_nanos {
            self.at_ts += 1;
        } else {
            *self = Position { ts_nanos, at_ts: 1 };
        }
    }

    /// The whole second to ask the engine for output from (inclusive).
    pub fn since_secs(&self) -> i64 {
        (self.ts_nanos.div_euclid(1_000_000_000)) as i64
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct State {
    positions: BTreeMap<String, Position>,
    pending: Option<Pending>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pending {
    /// Where the ingest file ended before the batch.
    offset: u64,
    /// The batch, base64.
    bytes: String,
}

/// What an ingest file shorter than where a pending batch began says of the batch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shorter {
    /// At a start after a kill: the batch went in and the file was rotated since.
    WrittenThenRotated,
    /// On a retry in the same process: the batch is known not written, the file was rotated
    /// while it waited.
    NotWritten,
}

pub struct Journal {
    path: PathBuf,
    ingest: PathBuf,
    state: State,
}

impl Journal {
    /// Opens the journal at `path` for the ingest file `ingest`, finishing a batch a kill left
    /// pending.
    pub fn open(path: &Path, ingest: &Path) -> io::Result<Journal> {
        let state = match fs::read(path) {
            Ok(raw) => serde_json::from_slice(&raw).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
            Err(err) if err.kind() == io::ErrorKind::NotFound => State::default(),
            Err(err) => return Err(err),
        };
        let mut journal = Journal { path: path.to_path_buf(), ingest: ingest.to_path_buf(), state };
        if let Some(pending) = journal.state.pending.take() {
            let bytes = STANDARD.decode(&pending.bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if journal.written_since(pending.offset, &bytes, Shorter::WrittenThenRotated)? {
                tracing::info!(bytes = bytes.len(), "Collector: the last batch before the restart was written");
            } else {
                tracing::info!(bytes = bytes.len(), "Collector: writing the batch a restart interrupted");
                journal.append(&bytes)?;
            }
            journal.save()?;
        }
        Ok(journal)
    }

    pub fn positions(&self) -> std::collections::HashMap<String, Position> {
        self.state.positions.iter().map(|(id, p)| (id.clone(), *p)).collect()
    }

    pub fn position(&self, container: &str) -> Position {
        self.state.positions.get(container).copied().unwrap_or_default()
    }

    /// Writes `bytes` to the ingest file and records `positions` as reached, exactly once whenever
    /// the process dies. After a failure (the disk full) the same batch is committed again: a
    /// batch still pending is the one being retried, and is appended only if it is not in the
    /// file yet.
    pub fn commit(&mut self, bytes: &[u8], positions: &BTreeMap<String, Position>) -> io::Result<()> {
        if self.state.pending.is_none() {
            for (container, position) in positions {
                self.state.positions.insert(container.clone(), *position);
            }
            if !bytes.is_empty() {
                let offset = fs::metadata(&self.ingest).map(|m| m.len()).unwrap_or(0);
                self.state.pending = Some(Pending { offset, bytes: STANDARD.encode(bytes) });
                self.save()?;
            }
        }
        if let Some(pending) = &self.state.pending {
            // Retried in this process: a file now shorter than where the batch began (rotated
            // meanwhile) does not hold it.
            if !self.written_since(pending.offset, bytes, Shorter::NotWritten)? {
                self.append(bytes)?;
            }
            self.state.pending = None;
        }
        self.save()
    }

    /// Appends `bytes` whole or not at all: a write the disk cut short is taken back, so that
    /// the retry does not leave half a line (and half a batch twice) in the file.
    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        let mut file = svc::file_modes::open_append(&self.ingest)?;
        let before = file.metadata()?.len();
        if let Err(err) = file.write_all(bytes) {
            self.take_back(&mut file, before, bytes);
            return Err(err);
        }
        // Not synced: the bytes are in the file all the same, and the retry finds them there.
        file.sync_data()
    }

    /// Cuts the file back to `before` when all it holds past there is a beginning of `bytes`
    /// (ours alone: another writer's line after it is left as it is).
    fn take_back(&self, file: &mut File, before: u64, bytes: &[u8]) {
        let Ok(len) = file.metadata().map(|m| m.len()) else { return };
        if len <= before || len - before > bytes.len() as u64 {
            return;
        }
        let mut tail = Vec::new();
        let read = File::open(&self.ingest).and_then(|mut f| {
            f.seek(SeekFrom::Start(before))?;
            f.read_to_end(&mut tail)
        });
        if read.is_ok() && bytes.starts_with(&tail) && file.set_len(before).is_ok() {
            tracing::warn!(bytes = tail.len(), "Collector: took back a batch the disk cut short");
        }
    }

    /// Whether `bytes` appear in the ingest file at or after `offset`; a file now shorter than
    /// `offset` was rotated or truncated, and `shorter` says what that means.
    fn written_since(&self, offset: u64, bytes: &[u8], shorter: Shorter) -> io::Result<bool> {
        let mut file = match File::open(&self.ingest) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(err) => return Err(err),
        };
        if file.metadata()?.len() < offset {
            return Ok(shorter == Shorter::WrittenThenRotated);
        }
        file.seek(SeekFrom::Start(offset))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail)?;
        Ok(memchr::memmem::find(&tail, bytes).is_some())
    }

    fn save(&self) -> io::Result<()> {
        let raw = serde_json::to_vec(&self.state).map_err(io::Error::other)?;
        let tmp = self.path.with_extension("tmp");
        {
            // It can hold a batch of lines not yet in the ingest file: as private as that file.
            let mut file = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .mode(svc::file_modes::PRIVATE_FILE)
                .open(&tmp)?;
            file.write_all(&raw)?;
            file.sync_data()?;
        }
        fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(id: &str, ts: i128, n: u64) -> BTreeMap<String, Position> {
        BTreeMap::from([(id.to_string(), Position { ts_nanos: ts, at_ts: n })])
    }

    #[test]
    fn positions_cover_lines_already_taken_even_with_equal_stamps() {
        let mut p = Position::default();
        p.advance(5);
        p.advance(5);
        assert_eq!(p, Position { ts_nanos: 5, at_ts: 2 });
        assert!(p.covers(4, 0) && p.covers(5, 1));
        assert!(!p.covers(5, 2) && !p.covers(6, 0));
        p.advance(7);
        assert_eq!(p, Position { ts_nanos: 7, at_ts: 1 });
        assert_eq!(Position { ts_nanos: 2_500_000_000, at_ts: 1 }.since_secs(), 2);
    }

    #[test]
    fn a_batch_left_pending_is_written_once_whether_or_not_it_went_in() {
        let dir = tempfile::tempdir().unwrap();
        let (state, ingest) = (dir.path().join("state"), dir.path().join("ingest.log"));

        // Killed after the journal, before the append: the batch goes in at the next start.
        let mut journal = Journal::open(&state, &ingest).unwrap();
        journal.commit(b"one\n", &positions("c", 1, 1)).unwrap();
        journal.state.pending = Some(Pending { offset: 4, bytes: STANDARD.encode(b"two\n") });
        journal.state.positions.insert("c".into(), Position { ts_nanos: 2, at_ts: 1 });
        journal.save().unwrap();
        let journal = Journal::open(&state, &ingest).unwrap();
        assert_eq!(fs::read_to_string(&ingest).unwrap(), "one\ntwo\n");
        assert_eq!(journal.position("c"), Position { ts_nanos: 2, at_ts: 1 });

        // Killed after the append (another writer added a line too): nothing is repeated.
        let mut journal = journal;
        journal.state.pending = Some(Pending { offset: 8, bytes: STANDARD.encode(b"three\n") });
        journal.save().unwrap();
        fs::OpenOptions::new().append(true).open(&ingest).unwrap().write_all(b"sniffer\nthree\n").unwrap();
        Journal::open(&state, &ingest).unwrap();
        assert_eq!(fs::read_to_string(&ingest).unwrap(), "one\ntwo\nsniffer\nthree\n");
    }

    #[test]
    fn a_batch_that_failed_is_written_once_when_retried() {
        let dir = tempfile::tempdir().unwrap();
        let (state, ingest) = (dir.path().join("state"), dir.path().join("ingest.log"));
        let mut journal = Journal::open(&state, &ingest).unwrap();
        journal.commit(b"one\n", &positions("c", 1, 1)).unwrap();

        // The ingest file cannot be written (here: a directory stands in its place for a moment).
        fs::rename(&ingest, dir.path().join("aside")).unwrap();
        fs::create_dir(&ingest).unwrap();
        assert!(journal.commit(b"two\n", &positions("c", 2, 1)).is_err());
        assert!(journal.commit(b"two\n", &positions("c", 2, 1)).is_err(), "still failing");
        fs::remove_dir(&ingest).unwrap();
        fs::rename(dir.path().join("aside"), &ingest).unwrap();

        journal.commit(b"two\n", &positions("c", 2, 1)).unwrap();
        journal.commit(b"three\n", &positions("c", 3, 1)).unwrap();
        assert_eq!(fs::read_to_string(&ingest).unwrap(), "one\ntwo\nthree\n");
        assert_eq!(Journal::open(&state, &ingest).unwrap().position("c"), Position { ts_nanos: 3, at_ts: 1 });
    }

    #[test]
    fn a_write_the_disk_cut_short_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let (state, ingest) = (dir.path().join("state"), dir.path().join("ingest.log"));
        let journal = Journal::open(&state, &ingest).unwrap();
        fs::write(&ingest, "one\ntw").unwrap();
        let mut file = OpenOptions::new().append(true).open(&ingest).unwrap();
        journal.take_back(&mut file, 4, b"two\nthree\n");
        assert_eq!(fs::read_to_string(&ingest).unwrap(), "one\n");
        // Another writer's line after ours: nothing is taken back.
        fs::write(&ingest, "one\ntw").unwrap();
        journal.take_back(&mut file, 4, b"xy\n");
        assert_eq!(fs::read_to_string(&ingest).unwrap(), "one\ntw");
    }
}
