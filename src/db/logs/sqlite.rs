//! The index hints of the log views on sqlite: its planner picks the time index by itself.

use crate::db::sqlite::SqliteDb;

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
}
