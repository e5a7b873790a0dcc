//! The sqlite backend: one file in WAL mode, the single-host default. Its connection settings and
//! its answers to the [`Dialect`] hooks; the verbs are written once for both backends in the areas.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

use super::DbResult;
use super::dialect::Dialect;
use super::fault::discard_stale;
use super::seal::Seal;

mod reads;

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

pub struct SqliteDb {
    path: PathBuf,
    /// The file's device and inode once migrated: the file is ours while the path still names them.
    identity: std::sync::Mutex<Option<(u64, u64)>>,
    pub(super) pool: SqlitePool,
    /// The one connection the batch writers (ingest, the profiler, observation intake) commit
    /// through: sqlite has one writer at a time anyway, and a connection of its own keeps the index
    /// pages those transactions touch in a large cache without every reading connection growing one.
    pub(super) writer: SqlitePool,
    /// The log views' reads (`reads.rs`).
    pub(super) reads: reads::Reads,
    /// Seals the secrets stored here (`seal`).
    pub(super) seal: Seal,
}

impl SqliteDb {
    /// Touches nothing yet: [`Database::migrate`](super::Database::migrate) creates the directory and the file.
    pub fn open(path: &Path, writer_cache_mib: usize, seal: Seal) -> DbResult<Self> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            // Ingestion writes many index pages per batch; 16 KiB pages quarter the writes (measured:
            // 62k instead of 36k lines/s). Takes effect when the file is created.
            .page_size(16384)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5))
            // Checkpoints (a copy of the log into the file, and an fsync) every 10,000 pages (160 MiB
            // at 16 KiB pages) rather than every 1,000: under steady ingestion they were most of
            // the waiting.
            .pragma("wal_autocheckpoint", "10000");
        let pool = discard_stale!(SqlitePoolOptions::new().acquire_timeout(Duration::from_secs(5)))
            .connect_lazy_with(options.clone());
        // A large page cache (a negative size is in KiB), so the log indexes stay cached; statement
        // journals, which multi-row inserts in a transaction keep, in memory rather than in a
        // temporary file.
        let cache_size = format!("-{}", writer_cache_mib * 1024);
        let writer =
            discard_stale!(SqlitePoolOptions::new().max_connections(1).acquire_timeout(Duration::from_secs(5)))
                .connect_lazy_with(options.pragma("cache_size", cache_size).pragma("temp_store", "memory"));
        Ok(SqliteDb {
            path: path.to_path_buf(),
            identity: std::sync::Mutex::new(None),
            pool,
            writer,
            reads: reads::Reads::new(path.to_path_buf()),
            seal,
        })
    }
}

impl SqliteDb {
    /// Whether the path still names the file we migrated (a cheap `stat`).
    fn check_identity(&self) -> DbResult<()> {
        let Some(opened) = *self.identity.lock().expect("identity lock") else { return Ok(()) };
        if file_identity(&self.path) == Some(opened) {
            return Ok(());
        }
        Err(store_fault(format!(
            "the database file {} was removed or replaced while in use; nothing is stored until it is back \
             (restore it from a backup and restart svc, or restart svc to begin a new, empty database, whose \
             admin is then seeded from SVC_ADMIN_PASSWORD again)",
            self.path.display()
        )))
    }
}

impl Dialect for SqliteDb {
    type Sql = sqlx::Sqlite;

    const NAME: &'static str = "sqlite";
    const MIGRATOR: &'static Migrator = &MIGRATOR;

    const MAX_BYTES_PER_INSERT: usize = usize::MAX;
    const INSERT_OR_SKIP: &'static str = "insert";
    const SKIP_HELD: &'static str = " on conflict do nothing";
    const FOR_UPDATE: &'static str = "";
    const LIKE_ESCAPE: &'static str = " escape '\\'";
    const GREATEST: &'static str = "max";
    const EXACT: &'static str = "";

    fn on_conflict_update(key: &str) -> String {
        format!(" on conflict ({key}) do update set ")
    }

    fn incoming(column: &str) -> String {
        format!("excluded.{column}")
    }

    fn clip(text: &str, _max_chars: usize) -> &str {
        text
    }

    fn compared(text: &str) -> String {
        text.to_string()
    }

    fn json_text(column: &str, key: &str) -> String {
        format!("json_extract({column}, '$.\"{key}\"')")
    }

    async fn prepare(&self) -> DbResult<()> {
        // Made 0600 before sqlite opens it, so its journal files (which take the database file's
        // mode) are private too; ones left looser by an earlier version are tightened.
        crate::file_modes::private_file(&self.path)
            .map_err(|e| anyhow::anyhow!("cannot create the database file {}: {e}", self.path.display()))?;
        for suffix in ["-wal", "-shm"] {
            let mut journal = self.path.clone().into_os_string();
            journal.push(suffix);
            crate::file_modes::tighten(Path::new(&journal), crate::file_modes::PRIVATE_FILE)
                .map_err(|e| anyhow::anyhow!("cannot tighten {}: {e}", Path::new(&journal).display()))?;
        }
        Ok(())
    }

    fn opened(&self) {
        *self.identity.lock().expect("identity lock") = file_identity(&self.path);
    }

    async fn close_reads(&self) {
        self.reads.close().await;
    }

    fn check_store(&self) -> DbResult<()> {
        self.check_identity()?;
        if self.identity.lock().expect("identity lock").is_none() {
            return Ok(());
        }
        // What a new connection would meet: it opens the file read-only when it cannot write it.
        // Asked without opening the file: closing any descriptor of it would drop every POSIX lock
        // this process's connections hold on it.
        if let Err(err) = rustix::fs::access(&self.path, rustix::fs::Access::WRITE_OK) {
            return Err(store_fault(format!(
                "the database file {} cannot be opened for writing ({err}); make it writable again (its owner, \
                 mode, attributes and the file system's mount) and svc resumes by itself",
                self.path.display()
            )));
        }
        Ok(())
    }

    async fn begin_write(&self) -> DbResult<sqlx::Transaction<'static, sqlx::Sqlite>> {
        // A batch committed into a removed file would be lost at the next start.
        self.check_identity()?;
        // `begin immediate` takes the write lock first: a deferred transaction that reads and then
        // writes fails at once (no busy wait) when another writer got in between.
        Ok(self.writer.begin_with("begin immediate").await?)
    }
}

/// The device and inode `path` names now.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn store_fault(reason: String) -> super::DbError {
    super::fault::record();
    super::DbError::Unavailable(anyhow::anyhow!(reason))
}
