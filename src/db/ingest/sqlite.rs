//! sqlite's ingest hooks: how the log rows are inserted, and its half of the credential upsert
//! (the rows it returns say which were new).

use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::db::DbResult;
use crate::db::sqlite::SqliteDb;

impl SqliteDb {
    /// The start of the log rows' insert. `or fail` keeps what the statement inserted before a
    /// failing row, which needs no statement journal: sqlite otherwise copies every page the
    /// statement first touches, 16 KiB each, to undo it (a fifth of the writer's time). The
    /// batch's transaction is rolled back on any failure anyway.
    pub(in crate::db) const INSERT_ROWS: &'static str = "insert or fail";

    /// Runs the credential upsert; returns how many of its rows were new credentials.
    pub(in crate::db) async fn upsert_new_credentials(
        tx: &mut SqliteConnection,
        mut upsert: QueryBuilder<'_, Sqlite>,
        _rows: usize,
    ) -> DbResult<u64> {
        // A row comes back for every insert and every update; only a new row has one attempt.
        upsert.push(" returning attempt_count");
        let attempts: Vec<(i64,)> = upsert.build_query_as().fetch_all(&mut *tx).await?;
        Ok(attempts.iter().filter(|(n,)| *n == 1).count() as u64)
    }
}
