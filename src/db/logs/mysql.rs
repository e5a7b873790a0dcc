//! The log views on MySQL/MariaDB: their index hints, and their reads through sqlx.
//!
//! With the limit a placeholder and statistics that lag a growing table, MariaDB was seen to pick a
//! full scan and a sort (hundreds of milliseconds at 300,000 rows) where the time index answers a
//! page at once.

use super::LogRecord;
use super::sql::LogRow;
use crate::db::DbResult;
use crate::db::codec::convert;
use crate::db::mysql::MysqlDb;
use crate::db::statement::Statement;

impl MysqlDb {
    /// A log page without a column match: the newest rows of the time index.
    pub(in crate::db) const LOGS_BY_TIME: &'static str = " force index (ix_logs_timestamp)";
    /// A follower's rows: walk the ids up from where it stands.
    pub(in crate::db) const LOGS_BY_ID: &'static str = " force index (primary)";
    /// A bounty page without a type or address: the newest rows of the time index.
    pub(in crate::db) const BOUNTIES_BY_TIME: &'static str = " force index (ix_bounty_timestamp)";
    /// The credential list, most recently seen first.
    pub(in crate::db) const CREDENTIALS_BY_LAST_SEEN: &'static str = " force index (ix_credentials_last_seen)";

    /// The log rows `select` reads, and the count `total` reads.
    pub(super) async fn read_log_page(&self, select: Statement, total: Statement) -> DbResult<(Vec<LogRecord>, i64)> {
        let rows = self.read_logs(select).await?;
        let (total,): (i64,) = total.query_as::<sqlx::MySql, _>().fetch_one(&self.pool).await?;
        Ok((rows, total))
    }

    /// The two counts `counts` reads.
    pub(super) async fn read_counts(&self, counts: Statement) -> DbResult<(i64, i64)> {
        Ok(counts.query_as::<sqlx::MySql, _>().fetch_one(&self.pool).await?)
    }

    /// The log rows `select` reads.
    pub(super) async fn read_logs(&self, select: Statement) -> DbResult<Vec<LogRecord>> {
        let rows: Vec<LogRow> = select.query_as::<sqlx::MySql, _>().fetch_all(&self.pool).await?;
        convert(rows)
    }
}
