//! Row shapes shared by both backends (their column types decode alike) and their conversion into
//! domain types. Times are stored as epoch milliseconds.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DbError, DeckyLifecycle, User};

pub(super) fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// What usernames are unique by and looked up by: case does not make a different user.
pub(super) fn username_key(username: &str) -> String {
    username.to_lowercase()
}

fn time(ms: i64) -> Result<DateTime<Utc>, DbError> {
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
