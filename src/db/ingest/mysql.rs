//! MySQL's ingest hooks: how the log rows are inserted, and its half of the credential upsert
//! (it has no `returning`, but counts what it did).

use sqlx::{MySql, MySqlConnection, QueryBuilder};

use crate::db::DbResult;
use crate::db::mysql::MysqlDb;

impl MysqlDb {
    /// The start of the log rows' insert.
    pub(in crate::db) const INSERT_ROWS: &'static str = "insert";

    /// Runs the credential upsert of `rows` rows; returns how many were new credentials.
    pub(in crate::db) async fn upsert_new_credentials(
        tx: &mut MySqlConnection,
        mut upsert: QueryBuilder<'_, MySql>,
        rows: usize,
    ) -> DbResult<u64> {
        // The server counts 1 per inserted row and 2 per updated one (an update always changes
        // attempt_count): of n rows, 2n - affected were new.
        let affected = upsert.build().execute(&mut *tx).await?.rows_affected();
        Ok((2 * rows as u64).saturating_sub(affected))
    }
}
