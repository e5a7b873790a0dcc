//! The log views on sqlite: their index hints (its planner picks the time index by itself), and
//! their reads on the rusqlite read path (`db::sqlite::reads`), a page and its total in one hop,
//! the headline counters likewise.

use rusqlite::{Connection, params_from_iter};

use super::LogRecord;
use crate::db::DbResult;
use crate::db::codec::time;
use crate::db::sqlite::SqliteDb;
use crate::db::statement::Statement;

impl SqliteDb {
    /// A log page without a column match: the newest rows of the time index.
    pub(in crate::db) const LOGS_BY_TIME: &'static str = "";
    /// A follower's rows: walk the ids up from where it stands (a follower's id is recent, so that
    /// is a few rows, where a column index would visit every match since the beginning of time).
    pub(in crate::db) const LOGS_BY_ID: &'static str = " not indexed";
    /// A bounty page without a type or address: the newest rows of the time index.
    pub(in crate::db) const BOUNTIES_BY_TIME: &'static str = "";
    /// The credential list, most recently seen first.
    pub(in crate::db) const CREDENTIALS_BY_LAST_SEEN: &'static str = "";

    /// The log rows `select` reads, and the count `total` reads.
    pub(super) async fn read_log_page(&self, select: Statement, total: Statement) -> DbResult<(Vec<LogRecord>, i64)> {
        self.reads
            .run(move |conn| {
                let rows = log_records(conn, &select)?;
                let total =
                    conn.prepare_cached(&total.sql)?.query_row(params_from_iter(&total.args), |row| row.get(0))?;
                Ok((rows, total))
            })
            .await
    }

    /// The two counts `counts` reads.
    pub(super) async fn read_counts(&self, counts: Statement) -> DbResult<(i64, i64)> {
        self.reads
            .run(move |conn| {
                let mut statement = conn.prepare_cached(&counts.sql)?;
                Ok(statement.query_row(params_from_iter(&counts.args), |row| Ok((row.get(0)?, row.get(1)?)))?)
            })
            .await
    }

    /// The log rows `select` reads.
    pub(super) async fn read_logs(&self, select: Statement) -> DbResult<Vec<LogRecord>> {
        self.reads.run(move |conn| log_records(conn, &select)).await
    }
}

/// The rows of `select`, whose columns are `LOG_COLUMNS` in their order.
fn log_records(conn: &Connection, select: &Statement) -> DbResult<Vec<LogRecord>> {
    let mut statement = conn.prepare_cached(&select.sql)?;
    let mut rows = statement.query(params_from_iter(&select.args))?;
    let mut records = Vec::new();
    while let Some(row) = rows.next()? {
        records.push(LogRecord {
            id: row.get(0)?,
            timestamp: time(row.get(1)?)?,
            decky: row.get(2)?,
            service: row.get(3)?,
            event_type: row.get(4)?,
            attacker_ip: row.get(5)?,
            raw_line: row.get(6)?,
            fields: row.get(7)?,
            msg: row.get(8)?,
            trace_id: row.get(9)?,
            span_id: row.get(10)?,
            host_uuid: row.get(11)?,
        });
    }
    Ok(records)
}
