//! [`HotReads`]: the JSON bodies of identical hot log reads (the dashboards' polled first page, the
//! same search from many operators) shared for a moment, so that a hundred pollers cost one query.
//!
//! A body is reused only while nothing new is known to be committed: every entry remembers the
//! log generation it was read at ([`crate::db::log_commits`] in this process plus the newest log
//! id the [`LogTail`] heard of from other processes), and one read at an older generation is never
//! served. What neither hears of (a notice lost with the bus down) is bounded by the reuse time
//! (`SVC_READ_CACHE_MS`, default 500 ms), so a row is visible within a second of its commit as
//! without the cache. Concurrent requests for a body being read wait for that one read. The bodies
//! and their keys are bounded in bytes (`SVC_READ_CACHE_BYTES`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::OnceCell;

use super::Result;
use super::stream::LogTail;

/// Which commits a body was read after: two reads at the same generation see the same rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Generation {
    local_commits: u64,
    newest_log_id: i64,
}

struct Entry {
    generation: Generation,
    read_at: Instant,
    body: Arc<OnceCell<Bytes>>,
    /// Bytes counted against the bound: the key and, once read, the body.
    size: usize,
}

/// Shared bodies of hot reads; see the module.
pub struct HotReads {
    reuse: Duration,
    max_bytes: usize,
    tail: LogTail,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_key: HashMap<String, Entry>,
    bytes: usize,
}

impl HotReads {
    /// Bodies reused for `reuse` at most (zero: never), `max_bytes` of them kept at most.
    pub fn new(reuse: Duration, max_bytes: usize, tail: LogTail) -> HotReads {
        HotReads { reuse, max_bytes, tail, entries: Mutex::new(Entries::default()) }
    }

    fn generation(&self) -> Generation {
        Generation { local_commits: crate::db::log_commits(), newest_log_id: self.tail.newest() }
    }

    /// The JSON body for `key`: a fresh one's copy, or `read`'s answer serialised.
    pub async fn json<T, F>(&self, key: String, read: F) -> Result<Response>
    where
        T: serde::Serialize,
        F: Future<Output = Result<T>>,
    {
        let serialised = async { Ok(Bytes::from(serde_json::to_vec(&read.await?).expect("a response serialises"))) };
        let body = if self.reuse.is_zero() { serialised.await? } else { self.shared(key, serialised).await? };
        Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
    }

    async fn shared(&self, key: String, read: impl Future<Output = Result<Bytes>>) -> Result<Bytes> {
        // Taken before the read: a commit during it makes the body stale, never the other way.
        let generation = self.generation();
        let cell = {
            let mut entries = self.entries.lock().expect("hot reads lock");
            match entries.by_key.get(&key) {
                Some(entry) if entry.generation == generation && entry.read_at.elapsed() < self.reuse => {
                    entry.body.clone()
                }
                _ => {
                    let cell = Arc::new(OnceCell::new());
                    let size = key.len();
                    let entry = Entry { generation, read_at: Instant::now(), body: cell.clone(), size };
                    if let Some(old) = entries.by_key.insert(key.clone(), entry) {
                        entries.bytes -= old.size;
                    }
                    entries.bytes += size;
                    self.make_room(&mut entries);
                    cell
                }
            }
        };
        let mut first = false;
        let body = cell
            .get_or_try_init(|| {
                first = true;
                read
            })
            .await?
            .clone();
        if first {
            self.count(&key, &cell, body.len());
        }
        Ok(body)
    }

    /// Counts a body just read against the bound.
    fn count(&self, key: &str, cell: &Arc<OnceCell<Bytes>>, len: usize) {
        let mut entries = self.entries.lock().expect("hot reads lock");
        let Some(entry) = entries.by_key.get_mut(key).filter(|e| Arc::ptr_eq(&e.body, cell)) else { return };
        entry.size += len;
        entries.bytes += len;
        self.make_room(&mut entries);
    }

    /// Over the bound: drops what can no longer be served (stale, or a read that failed), then, if
    /// still over, everything but the reads under way (a body larger than the bound is not kept).
    fn make_room(&self, entries: &mut Entries) {
        if entries.bytes <= self.max_bytes {
            return;
        }
        let now = self.generation();
        // Someone besides the map holds the cell: a read is under way.
        let reading = |e: &Entry| e.body.get().is_none() && Arc::strong_count(&e.body) > 1;
        let by_key = &mut entries.by_key;
        by_key.retain(|_, e| {
            e.generation == now && e.read_at.elapsed() < self.reuse && (e.body.get().is_some() || reading(e))
        });
        if by_key.values().map(|e| e.size).sum::<usize>() > self.max_bytes {
            by_key.retain(|_, e| reading(e));
        }
        entries.bytes = by_key.values().map(|e| e.size).sum();
    }

    /// Bytes held now (keys and bodies).
    pub fn bytes(&self) -> usize {
        self.entries.lock().expect("hot reads lock").bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(reuse_ms: u64, max_bytes: usize) -> (HotReads, LogTail) {
        let tail = LogTail::default();
        (HotReads::new(Duration::from_millis(reuse_ms), max_bytes, tail.clone()), tail)
    }

    async fn body(hot: &HotReads, key: &str, value: u64) -> String {
        let response = hot.json(key.to_string(), async move { Ok(value) }).await.unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_body_is_reused_until_a_newer_log_is_heard_of() {
        let (hot, tail) = reads(60_000, 1 << 20);
        assert_eq!(body(&hot, "k", 1).await, "1");
        assert_eq!(body(&hot, "k", 2).await, "1", "reused");
        assert_eq!(body(&hot, "other", 3).await, "3", "another key is another read");
        tail.advance(tail.newest() + 1);
        assert_eq!(body(&hot, "k", 4).await, "4", "a newer log makes it stale");
    }

    #[tokio::test]
    async fn a_body_is_reused_no_longer_than_the_reuse_time() {
        let (hot, _tail) = reads(1, 1 << 20);
        assert_eq!(body(&hot, "k", 1).await, "1");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(body(&hot, "k", 2).await, "2");
        let (never, _tail) = reads(0, 1 << 20);
        assert_eq!(body(&never, "k", 1).await, "1");
        assert_eq!(body(&never, "k", 2).await, "2", "a zero reuse time turns sharing off");
    }

    #[tokio::test]
    async fn what_is_kept_stays_within_its_byte_bound() {
        let (hot, _tail) = reads(60_000, 64);
        for key in 0..100u64 {
            body(&hot, &format!("key-{key}"), key).await;
            assert!(hot.bytes() <= 64, "{} bytes kept", hot.bytes());
        }
        let (tiny, _tail) = reads(60_000, 4);
        assert_eq!(body(&tiny, "a-long-key", 1).await, "1", "served even when too large to keep");
        assert_eq!(tiny.bytes(), 0);
    }

    #[tokio::test]
    async fn concurrent_requests_for_one_body_wait_for_one_read() {
        let (hot, _tail) = reads(60_000, 1 << 20);
        let reads_done = std::sync::atomic::AtomicU64::new(0);
        let read = || async {
            tokio::task::yield_now().await;
            Ok(reads_done.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
        };
        let (a, b) = tokio::join!(hot.json("k".into(), read()), hot.json("k".into(), read()));
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(reads_done.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
