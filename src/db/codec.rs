//! How domain values are stored and read back, the same on both backends: times as epoch
//! milliseconds, uuids as text, lists as JSON text, long keys as hashes; and the plumbing every
//! batch writer shares (row sets of multi-row statements, a transaction that always ends).

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{DbError, DbResult};

/// Rows per multi-row insert: at 14 values a row (credentials), 2048 rows stay under sqlite's
/// 32766 bound variables (MySQL allows 65535).
pub(super) const MAX_ROWS_PER_INSERT: usize = 2048;

/// Values in one `in (…)` list.
pub(super) const MAX_IN_LIST: usize = 1000;

/// One page of a listing and the total it is part of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub total: u64,
    pub rows: Vec<T>,
}

pub(super) fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

pub(super) fn time(ms: i64) -> DbResult<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| DbError::Corrupt(anyhow::anyhow!("timestamp out of range: {ms}")))
}

/// A count as the API reports it: a stored count is never negative.
pub(super) fn count(n: i64) -> u64 {
    n.max(0) as u64
}

/// An offset, count or size as a BIGINT bind (none reaches `i64::MAX`; one past it would be held there).
pub(super) fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An update or delete that matched no row was aimed at something that does not exist.
pub(super) fn found(rows_affected: u64) -> DbResult<()> {
    if rows_affected == 0 { Err(DbError::NotFound) } else { Ok(()) }
}

pub(super) fn parse_uuid(text: &str) -> DbResult<Uuid> {
    text.parse().map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored uuid `{text}` is invalid: {e}")))
}

/// Converts every row, failing on the first that does not hold a valid domain value.
pub(super) fn convert<R, T: TryFrom<R, Error = DbError>>(rows: Vec<R>) -> DbResult<Vec<T>> {
    rows.into_iter().map(T::try_from).collect()
}

pub(super) fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    // Strings, lists of strings and `serde_json::Value`s always serialise.
    serde_json::to_string(value).expect("JSON values serialise")
}

/// The NUL-joined parts, hashed: a fixed-width unique key for values too long to index together.
pub(super) fn dedup_key(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hash.update([0]);
        }
        hash.update(part.as_bytes());
    }
    format!("{:x}", hash.finalize())
}

/// A `LIKE` pattern matching `text` anywhere, its wildcards (`%`, `_`) and the escape character
/// (`\`) taken literally: use it with the dialect's `LIKE_ESCAPE`.
pub(super) fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Splits `items` into the row sets of multi-row statements: none over `max_rows` rows or over
/// `max_bytes` (by `size`; a single larger row goes alone). Every set holds a power of two rows, so
/// a backend prepares at most one statement per power of two and its statement cache stays small
/// whatever the batch sizes.
pub(super) fn row_sets<T>(items: &[T], max_rows: usize, max_bytes: usize, size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let max_rows = prev_power_of_two(max_rows.max(1));
    let mut sets = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let mut rows = 0;
        let mut bytes = 0;
        while rows < rest.len() && rows < max_rows {
            let next = size(&rest[rows]);
            if rows > 0 && bytes + next > max_bytes {
                break;
            }
            bytes += next;
            rows += 1;
        }
        let rows = prev_power_of_two(rows);
        let (set, tail) = rest.split_at(rows);
        sets.push(set);
        rest = tail;
    }
    sets
}

fn prev_power_of_two(n: usize) -> usize {
    if n.is_power_of_two() { n } else { n.next_power_of_two() / 2 }
}

/// Ends `tx` as `result` says: committed on success, rolled back before returning on error. A
/// dropped transaction is only rolled back when the pool next touches its connection; until then
/// it holds its locks (on MySQL, a test database's drop waited on them forever) and the connection
/// stays mid-transaction.
pub(super) async fn settle<DB: sqlx::Database, T>(tx: sqlx::Transaction<'_, DB>, result: DbResult<T>) -> DbResult<T> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(err) => {
            // A failed rollback means a broken connection, which the server rolls back itself.
            let _ = tx.rollback().await;
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_sets_are_powers_of_two_within_both_limits() {
        let items: Vec<usize> = vec![10; 1000];
        let sets = row_sets(&items, 300, usize::MAX, |n| *n);
        let lens: Vec<usize> = sets.iter().map(|s| s.len()).collect();
        assert_eq!(lens, [256, 256, 256, 128, 64, 32, 8]);
        assert_eq!(lens.iter().sum::<usize>(), 1000);

        let sets = row_sets(&items, 4096, 95, |n| *n);
        assert!(sets.iter().all(|s| s.len() == 8));
        assert_eq!(sets.len(), 125);

        // A row over the byte budget goes alone; the others still share statements.
        let items = [1, 1, 500, 1, 1, 1];
        let lens: Vec<usize> = row_sets(&items, 64, 100, |n| *n).iter().map(|s| s.len()).collect();
        assert_eq!(lens, [2, 1, 2, 1]);
        assert!(row_sets::<usize>(&[], 64, 100, |n| *n).is_empty());
    }

    #[test]
    fn like_patterns_take_wildcards_literally() {
        assert_eq!(contains_pattern("a%b_c\\d"), "%a\\%b\\_c\\\\d%");
        assert_eq!(contains_pattern(""), "%%");
    }
}
