//! Row shapes shared by both backends (their column types decode alike) and their conversion into
//! domain types. Times are stored as epoch milliseconds.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    BountyRecord, CredentialRecord, DbError, DeckyLifecycle, IngestCursor, LogRecord, NewBounty, NewCredential, NewLog,
    User,
};

pub(super) fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// What usernames are unique by and looked up by: case does not make a different user.
pub(super) fn username_key(username: &str) -> String {
    username.to_lowercase()
}

pub(super) fn time(ms: i64) -> Result<DateTime<Utc>, DbError> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| DbError::Other(anyhow::anyhow!("timestamp out of range: {ms}")))
}

/// An update or delete that matched no row was aimed at something that does not exist.
pub(super) fn found(rows_affected: u64) -> Result<(), DbError> {
    if rows_affected == 0 { Err(DbError::NotFound) } else { Ok(()) }
}

pub(super) fn parse_uuid(text: &str) -> Result<Uuid, DbError> {
    text.parse().map_err(|e| DbError::Other(anyhow::anyhow!("stored uuid `{text}` is invalid: {e}")))
}

#[derive(sqlx::FromRow)]
pub(super) struct UserRow {
    uuid: String,
    username: String,
    password_hash: String,
    role: String,
    must_change_password: bool,
    tokens_valid_from: Option<i64>,
    created_at: i64,
}

impl TryFrom<UserRow> for User {
    type Error = DbError;

    fn try_from(row: UserRow) -> Result<Self, DbError> {
        Ok(User {
            uuid: parse_uuid(&row.uuid)?,
            username: row.username,
            password_hash: row.password_hash,
            role: row.role.parse()?,
            must_change_password: row.must_change_password,
            tokens_valid_from: row.tokens_valid_from.map(time).transpose()?,
            created_at: time(row.created_at)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct LifecycleRow {
    id: String,
    decky_name: String,
    host_uuid: Option<String>,
    operation: String,
    status: String,
    error: Option<String>,
    started_at: i64,
    updated_at: i64,
    completed_at: Option<i64>,
}

impl TryFrom<LifecycleRow> for DeckyLifecycle {
    type Error = DbError;

    fn try_from(row: LifecycleRow) -> Result<Self, DbError> {
        Ok(DeckyLifecycle {
            id: parse_uuid(&row.id)?,
            decky_name: row.decky_name,
            host_uuid: row.host_uuid,
            operation: row.operation,
            status: row.status.parse()?,
            error: row.error,
            started_at: time(row.started_at)?,
            updated_at: time(row.updated_at)?,
            completed_at: row.completed_at.map(time).transpose()?,
        })
    }
}

/// Converts every row, failing on the first that does not hold a valid domain value.
pub(super) fn convert<R, T: TryFrom<R, Error = DbError>>(rows: Vec<R>) -> Result<Vec<T>, DbError> {
    rows.into_iter().map(T::try_from).collect()
}

#[derive(sqlx::FromRow)]
pub(super) struct LogRow {
    id: i64,
    timestamp: i64,
    decky: String,
    service: String,
    event_type: String,
    attacker_ip: String,
    raw_line: String,
    fields: String,
    msg: Option<String>,
    trace_id: Option<String>,
    span_id: Option<String>,
}

impl TryFrom<LogRow> for LogRecord {
    type Error = DbError;

    fn try_from(row: LogRow) -> Result<Self, DbError> {
        Ok(LogRecord {
            id: row.id,
            timestamp: time(row.timestamp)?,
            decky: row.decky,
            service: row.service,
            event_type: row.event_type,
            attacker_ip: row.attacker_ip,
            raw_line: row.raw_line,
            fields: row.fields,
            msg: row.msg,
            trace_id: row.trace_id,
            span_id: row.span_id,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct BountyRow {
    id: i64,
    timestamp: i64,
    decky: String,
    service: String,
    attacker_ip: String,
    bounty_type: String,
    payload: String,
}

impl TryFrom<BountyRow> for BountyRecord {
    type Error = DbError;

    fn try_from(row: BountyRow) -> Result<Self, DbError> {
        Ok(BountyRecord {
            id: row.id,
            timestamp: time(row.timestamp)?,
            decky: row.decky,
            service: row.service,
            attacker_ip: row.attacker_ip,
            bounty_type: row.bounty_type,
            payload: row.payload,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CredentialRow {
    id: i64,
    attacker_ip: String,
    decky: String,
    service: String,
    secret_kind: String,
    secret_sha256: String,
    principal: Option<String>,
    secret_printable: String,
    secret_b64: String,
    outcome: Option<String>,
    attempt_count: i64,
    first_seen: i64,
    last_seen: i64,
}

impl TryFrom<CredentialRow> for CredentialRecord {
    type Error = DbError;

    fn try_from(row: CredentialRow) -> Result<Self, DbError> {
        Ok(CredentialRecord {
            id: row.id,
            attacker_ip: row.attacker_ip,
            decky: row.decky,
            service: row.service,
            secret_kind: row.secret_kind,
            secret_sha256: row.secret_sha256,
            principal: row.principal,
            secret_printable: row.secret_printable,
            secret_b64: row.secret_b64,
            outcome: row.outcome,
            attempt_count: u64::try_from(row.attempt_count)
                .map_err(|_| DbError::Other(anyhow::anyhow!("negative attempt count {}", row.attempt_count)))?,
            first_seen: time(row.first_seen)?,
            last_seen: time(row.last_seen)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CursorRow {
    file_id: String,
    byte_offset: i64,
}

impl TryFrom<CursorRow> for IngestCursor {
    type Error = DbError;

    fn try_from(row: CursorRow) -> Result<Self, DbError> {
        let offset = u64::try_from(row.byte_offset)
            .map_err(|_| DbError::Other(anyhow::anyhow!("negative ingest offset {}", row.byte_offset)))?;
        Ok(IngestCursor { file_id: row.file_id, offset })
    }
}

/// A cursor offset as the BIGINT column holds it.
pub(super) fn stored_offset(cursor: &IngestCursor) -> Result<i64, DbError> {
    i64::try_from(cursor.offset)
        .map_err(|_| DbError::Other(anyhow::anyhow!("ingest offset {} too large", cursor.offset)))
}

/// The NUL-joined parts, hashed: a fixed-width unique key for values too long to index together.
fn dedup_key(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hash.update([0]);
        }
        hash.update(part.as_bytes());
    }
    format!("{:x}", hash.finalize())
}

/// What makes a bounty the same bounty: its type, its attacker and its payload.
pub(super) fn bounty_key(bounty: &NewBounty) -> String {
    dedup_key(&[&bounty.bounty_type, &bounty.attacker_ip, &bounty.payload])
}

/// The principal as the unique key sees it: none is the empty principal.
pub(super) fn principal_key(credential: &NewCredential) -> &str {
    credential.principal.as_deref().unwrap_or("")
}

/// What makes a credential the same credential: who tried which secret, for whom, where.
pub(super) fn credential_key(credential: &NewCredential) -> String {
    dedup_key(&[
        &credential.attacker_ip,
        &credential.decky,
        &credential.service,
        &credential.secret_kind,
        &credential.secret_sha256,
        principal_key(credential),
    ])
}

/// A `LIKE` pattern matching `text` anywhere, its wildcards (`%`, `_`) and the escape character
/// (`\`) taken literally: use it with `escape '\'`.
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

/// Bytes a log row sends to the server, roughly: its text plus a little per column.
pub(super) fn log_size(log: &NewLog) -> usize {
    const PER_COLUMN: usize = 16;
    log.decky.len()
        + log.service.len()
        + log.event_type.len()
        + log.attacker_ip.len()
        + log.raw_line.len()
        + log.fields.len()
        + log.msg.as_ref().map_or(0, String::len)
        + 8 * PER_COLUMN
}

pub(super) fn bounty_size(bounty: &NewBounty) -> usize {
    bounty.decky.len()
        + bounty.service.len()
        + bounty.attacker_ip.len()
        + bounty.bounty_type.len()
        + bounty.payload.len()
        + 64
        + 7 * 16
}

pub(super) fn credential_size(credential: &NewCredential) -> usize {
    credential.attacker_ip.len()
        + credential.decky.len()
        + credential.service.len()
        + credential.secret_kind.len()
        + credential.secret_sha256.len()
        + 2 * credential.principal.as_ref().map_or(0, String::len)
        + credential.secret_printable.len()
        + credential.secret_b64.len()
        + credential.outcome.as_ref().map_or(0, String::len)
        + 64
        + 13 * 16
}

/// The logs counted per minute (epoch milliseconds of the minute's start), oldest first.
pub(super) fn per_minute(logs: &[NewLog]) -> Vec<(i64, i64)> {
    let mut minutes = std::collections::BTreeMap::new();
    for log in logs {
        let at = millis(log.timestamp);
        *minutes.entry(at - at.rem_euclid(60_000)).or_insert(0) += 1;
    }
    minutes.into_iter().collect()
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

    #[test]
    fn dedup_keys_separate_their_parts() {
        let bounty = |t: &str, ip: &str, p: &str| NewBounty {
            timestamp: Utc::now(),
            decky: "d".into(),
            service: "s".into(),
            attacker_ip: ip.into(),
            bounty_type: t.into(),
            payload: p.into(),
        };
        assert_eq!(bounty_key(&bounty("a", "b", "c")).len(), 64);
        assert_ne!(bounty_key(&bounty("a", "bc", "")), bounty_key(&bounty("ab", "c", "")));
        // Only type, attacker and payload count.
        let mut other = bounty("a", "b", "c");
        other.decky = "elsewhere".into();
        assert_eq!(bounty_key(&bounty("a", "b", "c")), bounty_key(&other));
    }
}
