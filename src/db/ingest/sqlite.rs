//! sqlite's half of the credential upsert: the rows it returns say which were new.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::db::DbResult;
use crate::db::sqlite::SqliteDb;

impl SqliteDb {
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
