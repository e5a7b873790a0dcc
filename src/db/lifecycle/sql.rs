//! The lifecycle records' statements, the same on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use sqlx::query::Query;
use uuid::Uuid;

use super::{DeckyLifecycle, LifecycleStatus, LifecycleStore, STRANDED_LIFECYCLE_ERROR};
use crate::db::codec::{convert, millis, parse_uuid, time};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};

#[derive(sqlx::FromRow)]
struct LifecycleRow {
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
            status: row.status.parse().map_err(DbError::Corrupt)?,
            error: row.error,
            started_at: time(row.started_at)?,
            updated_at: time(row.updated_at)?,
            completed_at: row.completed_at.map(time).transpose()?,
        })
    }
}

/// The longest error text a record keeps (DECNET's bound).
const MAX_ERROR_CHARS: usize = 2000;

/// The insert of one record, for this area and for a deploy's transaction (`fleet`).
pub(in crate::db) fn insert_lifecycle<'q, DB>(
    record: &'q DeckyLifecycle,
) -> Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>
where
    DB: sqlx::Database,
    String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    sqlx::query(
        "insert into decky_lifecycle \
         (id, decky_name, host_uuid, operation, status, error, started_at, updated_at, completed_at) \
         values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(record.id.to_string())
    .bind(record.decky_name.as_str())
    .bind(record.host_uuid.as_deref())
    .bind(record.operation.as_str())
    .bind(record.status.as_str())
    .bind(record.error.as_deref())
    .bind(millis(record.started_at))
    .bind(millis(record.updated_at))
    .bind(record.completed_at.map(millis))
}

both_backends! {
    #[async_trait]
    impl LifecycleStore for Backend {
        async fn add_lifecycle(&self, record: &DeckyLifecycle) -> DbResult<()> {
            insert_lifecycle::<Sql>(record).execute(&self.pool).await?;
            Ok(())
        }

        async fn set_lifecycle_status(
            &self,
            id: Uuid,
            status: LifecycleStatus,
            error: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<()> {
            let completed = matches!(status, LifecycleStatus::Succeeded | LifecycleStatus::Failed).then(|| millis(at));
            // A terminal record never changes again: a retry is a new record.
            sqlx::query(
                "update decky_lifecycle set status = ?, error = ?, updated_at = ?, completed_at = ? \
                 where id = ? and status in (?, ?)",
            )
            .bind(status.as_str())
            .bind(error.map(|e| crate::text::prefix_chars(e, MAX_ERROR_CHARS)))
            .bind(millis(at))
            .bind(completed)
            .bind(id.to_string())
            .bind(LifecycleStatus::Pending.as_str())
            .bind(LifecycleStatus::Running.as_str())
            .execute(&self.pool)
            .await?;
            Ok(())
        }

        async fn open_lifecycle(&self, decky: &str, operation: &str, host_uuid: &str) -> DbResult<Option<Uuid>> {
            let id: Option<String> = sqlx::query_scalar(
                "select id from decky_lifecycle where decky_name = ? and operation = ? and host_uuid = ? \
                 and status in (?, ?) order by started_at desc, id desc limit 1",
            )
            .bind(decky)
            .bind(operation)
            .bind(host_uuid)
            .bind(LifecycleStatus::Pending.as_str())
            .bind(LifecycleStatus::Running.as_str())
            .fetch_optional(&self.pool)
            .await?;
            id.as_deref().map(parse_uuid).transpose()
        }

        async fn lifecycles(&self, ids: &[Uuid]) -> DbResult<Vec<DeckyLifecycle>> {
            if ids.is_empty() {
                return Ok(vec![]);
            }
            let mut query = QueryBuilder::<Sql>::new("select * from decky_lifecycle where id in (");
            let mut list = query.separated(", ");
            for id in ids {
                list.push_bind(id.to_string());
            }
            query.push(") order by started_at, id");
            let rows: Vec<LifecycleRow> = query.build_query_as().fetch_all(&self.pool).await?;
            convert(rows)
        }

        async fn open_lifecycles(&self, operation: &str) -> DbResult<Vec<DeckyLifecycle>> {
            let rows: Vec<LifecycleRow> = sqlx::query_as(
                "select * from decky_lifecycle where operation = ? and status in (?, ?) order by started_at, id",
            )
            .bind(operation)
            .bind(LifecycleStatus::Pending.as_str())
            .bind(LifecycleStatus::Running.as_str())
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn fail_stranded_lifecycles(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> DbResult<u64> {
            let done = sqlx::query(
                "update decky_lifecycle set status = ?, error = ?, updated_at = ?, completed_at = ? \
                 where status in (?, ?) and started_at < ?",
            )
            .bind(LifecycleStatus::Failed.as_str())
            .bind(STRANDED_LIFECYCLE_ERROR)
            .bind(millis(now))
            .bind(millis(now))
            .bind(LifecycleStatus::Pending.as_str())
            .bind(LifecycleStatus::Running.as_str())
            .bind(millis(cutoff))
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected())
        }
    }
}
