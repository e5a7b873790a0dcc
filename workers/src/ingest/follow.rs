//! Follows one log file by byte offset and hands out complete lines only. A partial last line waits
//! for its newline. Rotation by rename is followed (the old file is read to its end first, also
//! after a restart, found again by its inode beside the new one), and so is truncation. A line
//! longer than the limit is skipped without being held in memory. The cursor carries a fingerprint
//! of the bytes before its offset, so a file truncated and written back past the offset (while the
//! ingester was stopped, paused or between two reads), or a new file on a reused inode, is read
//! from its start instead of from the middle of other lines.
//!
//! Blocking I/O: the ingester calls it from the blocking pool.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use svc::db::IngestCursor;

/// Bytes read from the file per call to `read`.
const CHUNK: usize = 1024 * 1024;

/// What the follower hands out, in file order.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line without its `\n` (and without a `\r` before it).
    Text(&'a [u8]),
    /// A line longer than the limit, skipped; its length in bytes.
    Oversized(u64),
}

/// Where a read stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The line limit was reached; more may be waiting.
    More,
    /// Everything written so far has been handed out (a partial last line waits).
    CaughtUp,
    /// The file does not exist (yet).
    NoFile,
}

/// Bytes hashed from the file's start, and from before the offset, for its fingerprint.
const FINGERPRINT_BLOCK: u64 = 4096;

/// A hash of the file's first block and of the block before `offset` (neither past `offset`):
/// what the bytes read so far looked like. `None` when the file is shorter than `offset`.
fn fingerprint(file: &File, offset: u64) -> io::Result<Option<String>> {
    let head = FINGERPRINT_BLOCK.min(offset);
    let tail = offset.saturating_sub(FINGERPRINT_BLOCK).max(head);
    let mut hasher = Sha256::new();
    hasher.update(offset.to_le_bytes());
    let mut block = vec![0; FINGERPRINT_BLOCK as usize];
    for (start, end) in [(0, head), (tail, offset)] {
        let bytes = &mut block[..(end - start) as usize];
        match file.read_exact_at(bytes, start) {
            Ok(()) => hasher.update(&*bytes),
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(err) => return Err(err),
        }
    }
    Ok(Some(svc::text::hex(&hasher.finalize()[..16])))
}

/// Whether `file` still holds, before `cursor`'s offset, what the cursor saw there (a cursor
/// stored before fingerprints counts as matching).
fn matches(file: &File, cursor: &IngestCursor) -> io::Result<bool> {
    if cursor.fingerprint.is_empty() {
        return Ok(true);
    }
    Ok(fingerprint(file, cursor.offset)?.as_deref() == Some(cursor.fingerprint.as_str()))
}

/// The identity of a file: device and inode, as stored in the cursor.
fn file_id(meta: &std::fs::Metadata) -> String {
    format!("{}:{}", meta.dev(), meta.ino())
}

struct OpenFile {
    file: File,
    id: String,
    /// The offset just past the last line handed out: what the cursor records.
    offset: u64,
    /// Bytes of an oversized line skipped so far (not yet ended by a newline).
    skipped: u64,
    skipping: bool,
    /// Read but not yet ended by a newline.
    pending: Vec<u8>,
    /// The fingerprint at `offset` when the last read ended, checked when the next one starts.
    mark: Option<(u64, String)>,
}

impl OpenFile {
    fn open(path: &Path, offset: u64) -> io::Result<OpenFile> {
        let mut file = File::open(path)?;
        let id = file_id(&file.metadata()?);
        file.seek(SeekFrom::Start(offset))?;
        let mut open = OpenFile { file, id, offset, skipped: 0, skipping: false, pending: Vec::new(), mark: None };
        open.remark()?;
        Ok(open)
    }

    /// Notes the fingerprint at the current offset.
    fn remark(&mut self) -> io::Result<()> {
        if self.mark.as_ref().is_none_or(|(at, _)| *at != self.offset) {
            self.mark = fingerprint(&self.file, self.offset)?.map(|print| (self.offset, print));
        }
        Ok(())
    }

    /// Whether the bytes before the offset were rewritten since the last read ended.
    fn rewritten(&self) -> io::Result<bool> {
        let Some((at, print)) = &self.mark else { return Ok(false) };
        Ok(fingerprint(&self.file, *at)?.as_ref() != Some(print))
    }

    /// Where the next read starts.
    fn read_position(&self) -> u64 {
        self.offset + self.skipped + self.pending.len() as u64
    }

    fn rewind(&mut self) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(0))?;
        self.offset = 0;
        self.skipped = 0;
        self.skipping = false;
        self.pending.clear();
        self.mark = None;
        self.remark()
    }
}

pub struct Follower {
    path: PathBuf,
    max_line: usize,
    current: Option<OpenFile>,
    /// Where to start when the file first appears: the cursor of an earlier run.
    resume: Option<IngestCursor>,
    /// What each read fills, allocated once: `read` runs once per batch.
    chunk: Vec<u8>,
}

impl Follower {
    /// Follows `path` from `cursor` (from the start without one). Lines over `max_line` bytes are
    /// skipped.
    pub fn new(path: PathBuf, cursor: Option<IngestCursor>, max_line: usize) -> Follower {
        Follower { path, max_line, current: None, resume: cursor, chunk: vec![0; CHUNK] }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The position just past the last line handed out; `None` before the file has been opened.
    pub fn cursor(&self) -> Option<IngestCursor> {
        let open = self.current.as_ref()?;
        let fingerprint = match &open.mark {
            Some((at, print)) if *at == open.offset => print.clone(),
            _ => fingerprint(&open.file, open.offset).ok().flatten().unwrap_or_default(),
        };
        Some(IngestCursor { file_id: open.id.clone(), offset: open.offset, fingerprint })
    }

    /// Hands complete lines to `on_line`, at most `max_lines`, following rotation and truncation.
    /// With `to_end`, a last line without a newline is handed out too (a finished file).
    pub fn read(&mut self, max_lines: usize, to_end: bool, on_line: &mut dyn FnMut(Line<'_>)) -> io::Result<Progress> {
        let progress = self.read_lines(max_lines, to_end, on_line)?;
        if let Some(open) = self.current.as_mut() {
            open.remark()?;
        }
        Ok(progress)
    }

    fn read_lines(
        &mut self,
        max_lines: usize,
        to_end: bool,
        on_line: &mut dyn FnMut(Line<'_>),
    ) -> io::Result<Progress> {
        // Truncated and written back past where we were since the last read (the ingester paused,
        // or a fast writer): what follows the old offset is the middle of other lines.
        if let Some(open) = self.current.as_mut()
            && open.rewritten()?
        {
            tracing::warn!(path = %self.path.display(), "Log file rewritten since the last read; reading it from the start");
            open.rewind()?;
        }
        let mut handed = 0;
        loop {
            if self.current.is_none() && !self.open()? {
                return Ok(Progress::NoFile);
            }
            let open = self.current.as_mut().expect("opened above");
            handed += split_lines(open, self.max_line, max_lines - handed, on_line);
            if handed == max_lines {
                return Ok(Progress::More);
            }
            let n = open.file.read(&mut self.chunk)?;
            if n > 0 {
                open.pending.extend_from_slice(&self.chunk[..n]);
                continue;
            }
            // At the end of what is written: has the file been truncated, or replaced?
            if open.file.metadata()?.len() < open.read_position() {
                tracing::warn!(path = %self.path.display(), "Log file truncated; reading it from the start");
                open.rewind()?;
                continue;
            }
            let replaced = match std::fs::metadata(&self.path) {
                Ok(meta) => file_id(&meta) != open.id,
                Err(err) if err.kind() == io::ErrorKind::NotFound => false,
                Err(err) => return Err(err),
            };
            if !replaced && !to_end {
                return Ok(Progress::CaughtUp);
            }
            // The old file is read to its end: what is left unterminated was its last line.
            if !open.pending.is_empty() || open.skipping {
                finish_partial(open, self.max_line, on_line);
                handed += 1;
            }
            if !replaced {
                return Ok(Progress::CaughtUp);
            }
            tracing::info!(path = %self.path.display(), "Log file rotated; following the new file");
            self.current = None;
            self.resume = None;
            if handed == max_lines {
                return Ok(Progress::More);
            }
        }
    }

    /// Opens the file to follow; false when it does not exist yet.
    fn open(&mut self) -> io::Result<bool> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(err) => return Err(err),
        };
        let Some(cursor) = self.resume.take() else {
            self.current = Some(OpenFile::open(&self.path, 0)?);
            return Ok(true);
        };
        if file_id(&meta) == cursor.file_id {
            let offset = if meta.len() < cursor.offset {
                tracing::warn!(path = %self.path.display(), "Log file shorter than the cursor; reading it from the start");
                0
            } else if !matches(&File::open(&self.path)?, &cursor)? {
                tracing::warn!(
                    path = %self.path.display(),
                    "Log file rewritten since the cursor (truncated and grown back, or a new file on the same inode); \
                     reading it from the start"
                );
                0
            } else {
                cursor.offset
            };
            self.current = Some(OpenFile::open(&self.path, offset)?);
            return Ok(true);
        }
        // Rotated while we were not running: finish the old file first, if it is still there.
        match find_by_id(&self.path, &cursor)? {
            Some(old) => {
                tracing::info!(old = %old.display(), "Finishing the rotated log file before the new one");
                self.current = Some(OpenFile::open(&old, cursor.offset)?);
            }
            None => {
                tracing::warn!(
                    path = %self.path.display(),
                    "The file the cursor points into is gone; lines written to it after the cursor are lost"
                );
                self.current = Some(OpenFile::open(&self.path, 0)?);
            }
        }
        Ok(true)
    }
}

/// Hands out the complete lines in `open.pending`, at most `limit`; returns how many.
fn split_lines(open: &mut OpenFile, max_line: usize, limit: usize, on_line: &mut dyn FnMut(Line<'_>)) -> usize {
    let mut start = 0;
    let mut handed = 0;
    while handed < limit {
        let Some(len) = memchr::memchr(b'\n', &open.pending[start..]) else { break };
        let line = &open.pending[start..start + len];
        if open.skipping {
            on_line(Line::Oversized(open.skipped + len as u64));
            open.offset += open.skipped;
            open.skipped = 0;
            open.skipping = false;
        } else if line.len() > max_line {
            on_line(Line::Oversized(len as u64));
        } else {
            on_line(Line::Text(line.strip_suffix(b"\r").unwrap_or(line)));
        }
        open.offset += len as u64 + 1;
        start += len + 1;
        handed += 1;
    }
    open.pending.drain(..start);
    // No newline in sight and already too long: drop what is held and skip to the next newline.
    if handed < limit && open.pending.len() > max_line {
        open.skipped += open.pending.len() as u64;
        open.pending.clear();
        open.skipping = true;
    }
    handed
}

/// Hands out the unterminated rest of a finished file as its last line.
fn finish_partial(open: &mut OpenFile, max_line: usize, on_line: &mut dyn FnMut(Line<'_>)) {
    let line = std::mem::take(&mut open.pending);
    if open.skipping || line.len() > max_line {
        on_line(Line::Oversized(open.skipped + line.len() as u64));
    } else {
        on_line(Line::Text(line.strip_suffix(b"\r").unwrap_or(&line)));
    }
    open.offset += open.skipped + line.len() as u64;
    open.skipped = 0;
    open.skipping = false;
}

/// A file beside `path` (rotated copies live in the same directory) with the cursor's identity and
/// its bytes before the offset.
fn find_by_id(path: &Path, cursor: &IngestCursor) -> io::Result<Option<PathBuf>> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.metadata().is_ok_and(|meta| meta.is_file() && file_id(&meta) == cursor.file_id)
            && File::open(entry.path()).and_then(|file| matches(&file, cursor)).unwrap_or(false)
        {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Reads everything available now, as text lines (oversized ones as `<N bytes>`).
    fn drain(follower: &mut Follower, to_end: bool) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let progress = follower
                .read(3, to_end, &mut |line| {
                    lines.push(match line {
                        Line::Text(text) => String::from_utf8_lossy(text).into_owned(),
                        Line::Oversized(len) => format!("<{len} bytes>"),
                    })
                })
                .unwrap();
            if progress != Progress::More {
                return lines;
            }
        }
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_partial_line_waits_for_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        let mut follower = Follower::new(path.clone(), None, 100);
        assert_eq!(follower.read(10, false, &mut |_| {}).unwrap(), Progress::NoFile);
        append(&path, "one\r\ntwo\nthr");
        assert_eq!(drain(&mut follower, false), ["one", "two"]);
        assert_eq!(follower.cursor().unwrap().offset, 9);
        append(&path, "ee\n");
        assert_eq!(drain(&mut follower, false), ["three"]);
        assert_eq!(follower.cursor().unwrap().offset, 15);
    }

    #[test]
    fn resumes_from_a_cursor_and_restarts_a_truncated_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        append(&path, "a\nb\nc\n");
        let mut first = Follower::new(path.clone(), None, 100);
        let mut seen = Vec::new();
        first.read(2, false, &mut |line| seen.push(format!("{line:?}"))).unwrap();
        let cursor = first.cursor().unwrap();
        assert_eq!(cursor.offset, 4);
        let mut again = Follower::new(path.clone(), Some(cursor), 100);
        assert_eq!(drain(&mut again, false), ["c"]);

        // copytruncate: the file shrinks under us, then grows again.
        std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
        append(&path, "d\n");
        assert_eq!(drain(&mut again, false), ["d"]);
        assert_eq!(again.cursor().unwrap().offset, 2);
    }

    #[test]
    fn a_file_truncated_and_grown_back_past_the_cursor_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        append(&path, "a1\na2\n");
        let mut first = Follower::new(path.clone(), None, 100);
        assert_eq!(drain(&mut first, false), ["a1", "a2"]);
        let cursor = first.cursor().unwrap();
        assert_eq!(cursor.fingerprint.len(), 32);

        // Between two runs: emptied in place, then written past the old offset.
        std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
        append(&path, "b1\nb2\nb3\n");
        let mut again = Follower::new(path.clone(), Some(cursor.clone()), 100);
        assert_eq!(drain(&mut again, false), ["b1", "b2", "b3"]);

        // Between two reads of one follower (the ingester was paused).
        std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
        append(&path, "c1\nc2\nc3\nc4\n");
        assert_eq!(drain(&mut again, false), ["c1", "c2", "c3", "c4"]);

        // A cursor without a fingerprint (stored before them) is trusted as before.
        let legacy = IngestCursor { fingerprint: String::new(), ..again.cursor().unwrap() };
        append(&path, "c5\n");
        assert_eq!(drain(&mut Follower::new(path.clone(), Some(legacy), 100), false), ["c5"]);
    }

    #[test]
    fn an_unchanged_file_keeps_its_fingerprint_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        append(&path, &"x".repeat(9000));
        append(&path, "\nend\n");
        let mut follower = Follower::new(path.clone(), None, 100_000);
        assert_eq!(drain(&mut follower, false).len(), 2);
        let cursor = follower.cursor().unwrap();
        append(&path, "more\n");
        assert_eq!(drain(&mut Follower::new(path.clone(), Some(cursor), 100_000), false), ["more"]);
    }

    #[test]
    fn rename_rotation_finishes_the_old_file_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        let mut writer = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        writer.write_all(b"old-1\n").unwrap();
        let mut follower = Follower::new(path.clone(), None, 100);
        assert_eq!(drain(&mut follower, false), ["old-1"]);
        std::fs::rename(&path, dir.path().join("ingest.log.1")).unwrap();
        // The writer has not reopened yet: it still appends to the renamed file.
        writer.write_all(b"old-2\nold-3-unterminated").unwrap();
        append(&path, "new-1\n");
        assert_eq!(drain(&mut follower, false), ["old-2", "old-3-unterminated", "new-1"]);
        let cursor = follower.cursor().unwrap();
        assert_eq!(cursor.offset, 6);
        assert_eq!(cursor.file_id, file_id(&std::fs::metadata(&path).unwrap()));
    }

    #[test]
    fn a_restart_after_rotation_finds_the_old_file_by_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        append(&path, "old-1\n");
        let mut before = Follower::new(path.clone(), None, 100);
        assert_eq!(drain(&mut before, false), ["old-1"]);
        let cursor = before.cursor();
        drop(before);
        // While no ingester runs: more lines, a rotation, lines in the new file.
        append(&path, "old-2\n");
        std::fs::rename(&path, dir.path().join("ingest.log.1")).unwrap();
        append(&path, "new-1\n");
        let mut after = Follower::new(path.clone(), cursor, 100);
        assert_eq!(drain(&mut after, false), ["old-2", "new-1"]);

        // When the old file is gone too, the new one is read from its start.
        let cursor = after.cursor();
        append(&path, "new-2\n");
        std::fs::rename(&path, dir.path().join("ingest.log.1")).unwrap();
        // Created while the old file still exists, so it cannot reuse the old inode.
        append(&path, "newer-1\n");
        std::fs::remove_file(dir.path().join("ingest.log.1")).unwrap();
        assert_eq!(drain(&mut Follower::new(path.clone(), cursor, 100), false), ["newer-1"]);
    }

    #[test]
    fn an_oversized_line_is_skipped_without_being_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingest.log");
        let long = "x".repeat(3 * CHUNK + 17);
        append(&path, &format!("before\n{long}\nafter\n"));
        let mut follower = Follower::new(path.clone(), None, 1000);
        assert_eq!(
            drain(&mut follower, false),
            ["before".to_string(), format!("<{} bytes>", long.len()), "after".into()]
        );
        assert_eq!(follower.cursor().unwrap().offset, std::fs::metadata(&path).unwrap().len());
        assert!(follower.current.as_ref().unwrap().pending.capacity() < 2 * CHUNK + 1000);

        // One still being written is neither handed out nor passed by the cursor.
        let at = follower.cursor().unwrap().offset;
        append(&path, &"y".repeat(5000));
        assert!(drain(&mut follower, false).is_empty());
        assert_eq!(follower.cursor().unwrap().offset, at);
        append(&path, "\nok\n");
        assert_eq!(drain(&mut follower, false), ["<5000 bytes>", "ok"]);
    }

    #[test]
    fn to_end_hands_out_a_last_unterminated_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.log");
        append(&path, "a\nb");
        let mut follower = Follower::new(path.clone(), None, 100);
        assert_eq!(drain(&mut follower, true), ["a", "b"]);
        assert_eq!(follower.cursor().unwrap().offset, 3);
        assert!(drain(&mut follower, true).is_empty());
    }
}
