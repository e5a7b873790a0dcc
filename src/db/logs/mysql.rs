//! The index hints of the log views on MySQL/MariaDB: with the limit a placeholder and statistics
//! that lag a growing table, MariaDB was seen to pick a full scan and a sort (hundreds of
//! milliseconds at 300,000 rows) where the time index answers a page at once.

use crate::db::mysql::MysqlDb;

impl MysqlDb {
    /// A log page without a column match: the newest rows of the time index.
    pub(in crate::db) const LOGS_BY_TIME: &'static str = " force index (ix_logs_timestamp)";
    /// A follower's rows: walk the ids up from where it stands.
    pub(in crate::db) const LOGS_BY_ID: &'static str = " force index (primary)";
    /// A bounty page without a type or address: the newest rows of the time index.
    pub(in crate::db) const BOUNTIES_BY_TIME: &'static str = " force index (ix_bounty_timestamp)";
    /// The credential list, most recently seen first.
    pub(in crate::db) const CREDENTIALS_BY_LAST_SEEN: &'static str = " force index (ix_credentials_last_seen)";
}
