//! [`Reads`]: the sqlite read path of the hot log views. A read runs whole (its statements, and
//! its rows into records) on a blocking thread with a rusqlite connection of this small pool, in
//! one hop. sqlx's sqlite driver runs every connection on a thread of its own and hands each row
//! across a channel: at a page of 50 rows that hand-off was most of a `GET /logs`.
//!
//! The connections follow the same fault rule as sqlx's pools (`db::fault`): one opened before
//! the last store fault is closed instead of reused, and a read failing with a store fault records one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use crate::db::fault;
use crate::db::{DbError, DbResult};

/// Reads under way at once, each on a connection (with sqlite's default 2 MiB page cache) and a
/// blocking thread of its own: more than the cores, so a few long searches do not hold up the
/// short page reads behind them.
const READERS: usize = 8;

pub(in crate::db) struct Reads {
    path: Arc<Path>,
    idle: Mutex<Vec<Reader>>,
    permits: Semaphore,
}

struct Reader {
    conn: Connection,
    opened: Instant,
}

impl Reader {
    fn open(path: &Path) -> DbResult<Reader> {
        let opened = Instant::now();
        // Never creates the file: the migrations did, and a missing one is a fault to report.
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        // This path only reads: a statement that would write fails instead.
        conn.pragma_update(None, "query_only", true)?;
        Ok(Reader { conn, opened })
    }
}

impl Reads {
    pub fn new(path: PathBuf) -> Reads {
        Reads { path: path.into(), idle: Mutex::new(Vec::new()), permits: Semaphore::new(READERS) }
    }

    /// Runs `read` on a connection of the pool, on a blocking thread.
    pub async fn run<T, F>(&self, read: F) -> DbResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> DbResult<T> + Send + 'static,
    {
        let Ok(_permit) = self.permits.acquire().await else {
            return Err(DbError::Unavailable(anyhow::anyhow!("the database is closed")));
        };
        let idle = self.idle.lock().expect("reads lock").pop().filter(|r| fault::opened_since_last_fault(r.opened));
        let path = self.path.clone();
        let (reader, result) = tokio::task::spawn_blocking(move || {
            let reader = match idle {
                Some(reader) => reader,
                None => match Reader::open(&path) {
                    Ok(reader) => reader,
                    Err(err) => return (None, Err(err)),
                },
            };
            let result = read(&reader.conn);
            (Some(reader), result)
        })
        .await
        .map_err(|err| DbError::Other(anyhow::anyhow!("a sqlite read failed: {err}")))?;
        if let Some(reader) = reader.filter(|r| fault::opened_since_last_fault(r.opened)) {
            self.idle.lock().expect("reads lock").push(reader);
        }
        result
    }

    /// Waits for the reads under way, then refuses every later one as sqlx's closed pools do.
    pub async fn close(&self) {
        if let Ok(all) = self.permits.acquire_many(READERS as u32).await {
            all.forget();
        }
        self.permits.close();
        self.idle.lock().expect("reads lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(dir: &tempfile::TempDir) -> PathBuf {
        let path = dir.path().join("svc.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("create table t (n integer); insert into t values (1), (2);").unwrap();
        path
    }

    fn count(conn: &Connection) -> DbResult<i64> {
        Ok(conn.query_row("select count(*) from t", [], |row| row.get(0))?)
    }

    #[tokio::test]
    async fn a_missing_file_is_unavailable_and_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.db");
        let err = Reads::new(path.clone()).run(count).await.unwrap_err();
        assert!(err.is_unavailable(), "{err:?}");
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_connection_opened_before_a_store_fault_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let reads = Reads::new(database(&dir));
        // Another test's fault while a read runs drops its connection: read until one is kept.
        let mut first = None;
        for _ in 0..100 {
            assert_eq!(reads.run(count).await.unwrap(), 2);
            first = reads.idle.lock().unwrap().first().map(|c| c.opened);
            if first.is_some() {
                break;
            }
        }
        let first = first.expect("a connection kept after a read");
        // Faults are process-wide: other tests may record some meanwhile, never un-record this one.
        fault::record();
        assert_eq!(reads.run(count).await.unwrap(), 2);
        // Another test's fault while the read ran drops that connection too: none idle is fine.
        let idle = reads.idle.lock().unwrap();
        assert!(idle.len() <= 1 && idle.iter().all(|c| c.opened > first), "a fresh connection after the fault");
    }

    #[tokio::test]
    async fn a_closed_pool_waits_for_its_reads_then_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let reads = Arc::new(Reads::new(database(&dir)));
        let (started, start) = std::sync::mpsc::channel();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let under_way = tokio::spawn({
            let reads = reads.clone();
            async move {
                reads
                    .run(move |conn| {
                        started.send(()).unwrap();
                        finished.recv().unwrap();
                        count(conn)
                    })
                    .await
            }
        });
        tokio::task::spawn_blocking(move || start.recv().unwrap()).await.unwrap();
        let closing = tokio::spawn({
            let reads = reads.clone();
            async move { reads.close().await }
        });
        tokio::task::yield_now().await;
        assert!(!closing.is_finished(), "close waits for the read under way");
        finish.send(()).unwrap();
        assert_eq!(under_way.await.unwrap().unwrap(), 2, "the read under way completes");
        closing.await.unwrap();
        assert!(reads.idle.lock().unwrap().is_empty(), "no connection is kept");
        assert!(reads.run(count).await.unwrap_err().is_unavailable());
    }

    #[tokio::test]
    async fn the_read_path_cannot_write() {
        let dir = tempfile::tempdir().unwrap();
        let reads = Reads::new(database(&dir));
        reads.run(|conn| Ok(conn.execute("delete from t", [])?)).await.unwrap_err();
        assert_eq!(reads.run(count).await.unwrap(), 2, "nothing deleted");
    }
}
