//! When the store itself is in trouble (unreachable, disk full, read-only, its file gone) rather
//! than a statement being wrong: which errors say so, and what follows from them. Such a failure is
//! [`DbError::Unavailable`](super::DbError::Unavailable), answered 503 like health, and every pooled
//! connection that existed when it happened is closed instead of reused: a connection opened while
//! the file was read-only stays read-only, and one whose rollback failed stays inside its
//! transaction (sqlx then refuses every later `begin`), so only fresh connections heal by themselves.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnectionMetadata;

/// sqlite primary result codes that mean the file cannot be written or read, whatever the statement.
const SQLITE_STORE_FAULTS: [i64; 5] = [
    8,  // SQLITE_READONLY
    10, // SQLITE_IOERR
    13, // SQLITE_FULL
    14, // SQLITE_CANTOPEN
    26, // SQLITE_NOTADB
];

/// MySQL/MariaDB server errors that mean the server cannot store anything now.
const MYSQL_STORE_FAULTS: [u16; 5] = [
    1021, // ER_DISK_FULL
    1030, // ER_GET_ERRNO (the engine's OS error, e.g. no space)
    1114, // ER_RECORD_FILE_FULL
    1290, // ER_OPTION_PREVENTS_STATEMENT (read-only server)
    1836, // ER_READ_ONLY_MODE
];

/// Whether `err` says the store is unavailable rather than the statement wrong.
pub(super) fn is_store_fault(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                return MYSQL_STORE_FAULTS.contains(&mysql.number());
            }
            let code = db.code().and_then(|c| c.parse::<i64>().ok());
            code.is_some_and(is_sqlite_store_fault)
        }
        _ => false,
    }
}

/// When this process last saw a store fault, as time since [`EPOCH`] (0: never).
static LAST_FAULT: AtomicU64 = AtomicU64::new(0);
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Store faults this process has seen, for `/metrics`.
static FAULTS_SEEN: AtomicU64 = AtomicU64::new(0);

/// How many store faults this process has seen since it started.
pub fn faults_seen() -> u64 {
    FAULTS_SEEN.load(Ordering::Relaxed)
}

/// Records a store fault now: connections older than this are discarded on their next use.
pub(super) fn record() {
    FAULTS_SEEN.fetch_add(1, Ordering::Relaxed);
    let since = EPOCH.elapsed().as_nanos().max(1) as u64;
    LAST_FAULT.fetch_max(since, Ordering::AcqRel);
}

/// Whether a pooled connection with `meta` may be used: it must be younger than the last fault.
/// Process-wide on purpose: one fault in a test process costs other pools only a reconnect.
pub(super) fn may_reuse(meta: &PoolConnectionMetadata) -> bool {
    opened_since_last_fault(Instant::now().checked_sub(meta.age).unwrap_or(*EPOCH))
}

/// Whether a connection opened at `opened` is younger than the last store fault.
pub(super) fn opened_since_last_fault(opened: Instant) -> bool {
    let last = LAST_FAULT.load(Ordering::Acquire);
    last == 0 || opened.saturating_duration_since(*EPOCH) > Duration::from_nanos(last)
}

/// Whether a sqlite result code (primary or extended) says the store is unavailable.
pub(super) fn is_sqlite_store_fault(code: i64) -> bool {
    SQLITE_STORE_FAULTS.contains(&(code & 0xff))
}

/// The pool hooks: a connection older than the last fault is not handed out, and one given back
/// still inside a transaction (its rollback failed) is closed.
macro_rules! discard_stale {
    ($options:expr) => {
        $options
            .before_acquire(|_conn, meta| Box::pin(async move { Ok($crate::db::fault::may_reuse(&meta)) }))
            .after_release(|conn, meta| {
                Box::pin(async move {
                    use sqlx::Connection as _;
                    Ok($crate::db::fault::may_reuse(&meta) && !conn.is_in_transaction())
                })
            })
    };
}
pub(super) use discard_stale;
