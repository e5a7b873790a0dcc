//! How the two SQL dialects differ, in one place, and the macro that writes a verb once for both.
//!
//! Every verb of every area is written once, inside [`both_backends!`], which expands it for
//! [`SqliteDb`](super::sqlite::SqliteDb) with `Sql = sqlx::Sqlite` and for
//! [`MysqlDb`](super::mysql::MysqlDb) with `Sql = sqlx::MySql`. Statements are the same text on
//! both wherever the dialects agree (placeholders are `?` on both, identifiers quoted with
//! backticks where they must be). Where they differ, the statement takes the difference from a
//! [`Dialect`] hook (here: syntax every area meets) or from an area's own hooks, items each
//! backend defines under the same name in the area's `sqlite.rs` and `mysql.rs`. Supported servers: sqlite 3.35 and later (bundled), MySQL 8.0 and
//! MariaDB 10.11; no statement uses what only one of MySQL and MariaDB has.

use std::future::Future;

use super::DbResult;

/// The width of the indexed text columns on MySQL (`varchar(255)`).
pub(super) const INDEXED_CHARS: usize = 255;

pub(super) trait Dialect {
    type Sql: sqlx::Database;

    /// `sqlite` or `mysql`.
    const NAME: &'static str;

    /// The backend's schema, `migrations/<NAME>`.
    const MIGRATOR: &'static sqlx::migrate::Migrator;

    /// Bytes of values per multi-row insert: MySQL bounds one statement with its values by
    /// `max_allowed_packet` (16 MiB by default on MariaDB); sqlite has no such bound.
    const MAX_BYTES_PER_INSERT: usize;

    /// The start of an insert that skips rows whose unique key is held (`insert ignore` on MySQL,
    /// whose values are cut to their columns first so that nothing else is ignored), and its end
    /// (sqlite's `on conflict do nothing`).
    const INSERT_OR_SKIP: &'static str;
    const SKIP_HELD: &'static str;

    /// Locks the rows a read in a transaction returns until it ends (MySQL); sqlite's writer holds
    /// the whole database from `begin immediate` on.
    const FOR_UPDATE: &'static str;

    /// The `escape` clause of a [`contains_pattern`](super::codec::contains_pattern) match (a
    /// backslash is itself escaped in MySQL's string literals).
    const LIKE_ESCAPE: &'static str;

    /// The larger of two values.
    const GREATEST: &'static str;

    /// Compares a text column byte for byte (MySQL's collation ignores letter case).
    const EXACT: &'static str;

    /// The update clause of an upsert on the unique key `key`: sqlite names the key, MySQL takes
    /// whichever unique key conflicts.
    fn on_conflict_update(key: &str) -> String;

    /// The value the insert offered for `column`, inside an upsert's update clause.
    fn incoming(column: &str) -> String;

    /// An upsert's update clause on `key` that replaces `columns` with the values offered.
    fn replace(key: &str, columns: &[&str]) -> String {
        let set: Vec<String> = columns.iter().map(|c| format!("{c} = {}", Self::incoming(c))).collect();
        format!("{}{}", Self::on_conflict_update(key), set.join(", "))
    }

    /// `text` as a column of `max_chars` characters stores it: MySQL in strict mode fails a whole
    /// batch, at every retry, for one over-long value; sqlite has no widths.
    fn clip(text: &str, max_chars: usize) -> &str;

    /// `text` as an indexed text column stores it.
    fn indexed(text: &str) -> &str {
        Self::clip(text, INDEXED_CHARS)
    }

    /// `text` as an indexed column compares it: two texts with one key are the same value.
    fn compared(text: &str) -> String;

    /// The text at `$."key"` of the JSON column `column`.
    fn json_text(column: &str, key: &str) -> String;

    /// What must exist before the migrations run: the file's directory, the server's database.
    fn prepare(&self) -> impl Future<Output = DbResult<()>> + Send;

    /// Whether the store is still the one we opened and can be written, without a statement: the
    /// sqlite file removed or made read-only under us. Errors are [`DbError::Unavailable`](super::DbError).
    fn check_store(&self) -> DbResult<()> {
        Ok(())
    }

    /// The migrations ran: what [`check_store`](Self::check_store) compares with is now there.
    fn opened(&self);

    /// Closes what reads the store beside the sqlx pools (sqlite's log views), waiting for the
    /// reads under way.
    fn close_reads(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// A transaction of the batch writers: it holds the write lock (sqlite) or takes row locks as
    /// it goes (MySQL).
    fn begin_write(&self) -> impl Future<Output = DbResult<sqlx::Transaction<'static, Self::Sql>>> + Send;
}

/// Writes the items once for each backend: inside, `Backend` is the backend's type and `Sql` its
/// sqlx database. Items are private to their expansion. The async verbs of an area's trait impl
/// (`#[async_trait] impl SomeStore for Backend { … }`) each run in a store span ([`traced_verbs!`]).
macro_rules! both_backends {
    ($($items:tt)*) => {
        const _: () = {
            #[allow(unused_imports)]
            use $crate::db::dialect::Dialect as _;
            type Backend = $crate::db::sqlite::SqliteDb;
            #[allow(dead_code)]
            type Sql = ::sqlx::Sqlite;
            $crate::db::dialect::traced_items! { $($items)* }
        };
        const _: () = {
            #[allow(unused_imports)]
            use $crate::db::dialect::Dialect as _;
            type Backend = $crate::db::mysql::MysqlDb;
            #[allow(dead_code)]
            type Sql = ::sqlx::MySql;
            $crate::db::dialect::traced_items! { $($items)* }
        };
    };
}
pub(super) use both_backends;

/// The items of [`both_backends!`] one by one: an area's trait impl goes through
/// [`traced_verbs!`], any other item as it is.
macro_rules! traced_items {
    () => {};
    (#[$attr:meta] impl $store:ident for Backend { $($verbs:tt)* } $($rest:tt)*) => {
        $crate::db::dialect::traced_verbs! { [$attr] [$store] [] $($verbs)* }
        $crate::db::dialect::traced_items! { $($rest)* }
    };
    ($item:item $($rest:tt)*) => {
        $item
        $crate::db::dialect::traced_items! { $($rest)* }
    };
}
pub(super) use traced_items;

/// A trait impl whose `async fn` verbs each run inside [`verb_span`](super::verb_span) (a span
/// only while traces are exported), the rest copied token by token: the verbs done so far are
/// gathered in the second bracket, then the impl is written whole, so `#[async_trait]` sees them.
macro_rules! traced_verbs {
    ([$attr:meta] [$store:ident] [$($done:tt)*]) => {
        #[$attr]
        impl $store for Backend { $($done)* }
    };
    (
        [$attr:meta] [$store:ident] [$($done:tt)*]
        $(#[$verb_attr:meta])* async fn $verb:ident ($($args:tt)*) -> $ret:ty $body:block
        $($rest:tt)*
    ) => {
        $crate::db::dialect::traced_verbs! {
            [$attr] [$store] [
                $($done)*
                $(#[$verb_attr])* async fn $verb($($args)*) -> $ret {
                    $crate::db::in_verb_span::<$ret, _>(stringify!($verb), Backend::NAME, async move $body).await
                }
            ]
            $($rest)*
        }
    };
    ([$attr:meta] [$store:ident] [$($done:tt)*] $other:tt $($rest:tt)*) => {
        $crate::db::dialect::traced_verbs! { [$attr] [$store] [$($done)* $other] $($rest)* }
    };
}
pub(super) use traced_verbs;
