//! The canary statements, the same on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::{CanaryBlob, CanaryStore, CanaryToken, CanaryTokenFilter, CanaryTokenState, CanaryTrigger, NewCanaryBlob};
use crate::db::codec::{bigint, convert, count, found, millis, parse_uuid, time};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};

#[derive(sqlx::FromRow)]
struct TokenRow {
    uuid: String,
    kind: String,
    decky_name: String,
    topology_id: Option<String>,
    blob_uuid: Option<String>,
    instrumenter: Option<String>,
    generator: Option<String>,
    placement_path: String,
    callback_token: String,
    placed_at: Option<i64>,
    last_triggered_at: Option<i64>,
    trigger_count: i64,
    created_by: String,
    created_at: i64,
    state: String,
    last_error: Option<String>,
}

impl TryFrom<TokenRow> for CanaryToken {
    type Error = DbError;

    fn try_from(row: TokenRow) -> Result<Self, DbError> {
        Ok(CanaryToken {
            uuid: parse_uuid(&row.uuid)?,
            kind: row.kind,
            decky_name: row.decky_name,
            topology_id: row.topology_id,
            blob_uuid: row.blob_uuid.as_deref().map(parse_uuid).transpose()?,
            instrumenter: row.instrumenter,
            generator: row.generator,
            placement_path: row.placement_path,
            callback_token: row.callback_token,
            placed_at: row.placed_at.map(time).transpose()?,
            last_triggered_at: row.last_triggered_at.map(time).transpose()?,
            trigger_count: count(row.trigger_count),
            created_by: row.created_by,
            created_at: time(row.created_at)?,
            state: row.state.parse().map_err(DbError::Corrupt)?,
            last_error: row.last_error,
        })
    }
}

#[derive(sqlx::FromRow)]
struct BlobRow {
    uuid: String,
    sha256: String,
    filename: String,
    content_type: String,
    size_bytes: i64,
    uploaded_by: String,
    uploaded_at: i64,
    token_count: i64,
}

impl TryFrom<BlobRow> for CanaryBlob {
    type Error = DbError;

    fn try_from(row: BlobRow) -> Result<Self, DbError> {
        Ok(CanaryBlob {
            uuid: parse_uuid(&row.uuid)?,
            sha256: row.sha256,
            filename: row.filename,
            content_type: row.content_type,
            size_bytes: count(row.size_bytes),
            uploaded_by: row.uploaded_by,
            uploaded_at: time(row.uploaded_at)?,
            token_count: count(row.token_count),
        })
    }
}

#[derive(sqlx::FromRow)]
struct TriggerRow {
    uuid: String,
    token_uuid: String,
    occurred_at: i64,
    src_ip: String,
    user_agent: Option<String>,
    method: String,
    request_path: Option<String>,
    dns_qname: Option<String>,
    headers: String,
}

impl TryFrom<TriggerRow> for CanaryTrigger {
    type Error = DbError;

    fn try_from(row: TriggerRow) -> Result<Self, DbError> {
        Ok(CanaryTrigger {
            uuid: parse_uuid(&row.uuid)?,
            token_uuid: parse_uuid(&row.token_uuid)?,
            occurred_at: time(row.occurred_at)?,
            src_ip: row.src_ip,
            user_agent: row.user_agent,
            method: row.method,
            request_path: row.request_path,
            dns_qname: row.dns_qname,
            headers: row.headers,
        })
    }
}

const TOKEN_COLUMNS: &str = "uuid, kind, decky_name, topology_id, blob_uuid, instrumenter, generator, \
     placement_path, callback_token, placed_at, last_triggered_at, trigger_count, created_by, created_at, state, \
     last_error";

const BLOB_SELECT: &str = "select b.uuid, b.sha256, b.filename, b.content_type, b.size_bytes, b.uploaded_by, \
     b.uploaded_at, (select count(*) from canary_tokens t where t.blob_uuid = b.uuid) as token_count \
     from canary_blobs b";

const TRIGGER_COLUMNS: &str =
    "uuid, token_uuid, occurred_at, src_ip, user_agent, method, request_path, dns_qname, headers";

both_backends! {
    #[async_trait]
    impl CanaryStore for Backend {
        async fn add_canary_token(&self, token: &CanaryToken) -> DbResult<()> {
            sqlx::query(&format!(
                "insert into canary_tokens ({TOKEN_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(token.uuid.to_string())
            .bind(&token.kind)
            .bind(&token.decky_name)
            .bind(&token.topology_id)
            .bind(token.blob_uuid.map(|uuid| uuid.to_string()))
            .bind(&token.instrumenter)
            .bind(&token.generator)
            .bind(&token.placement_path)
            .bind(&token.callback_token)
            .bind(token.placed_at.map(millis))
            .bind(token.last_triggered_at.map(millis))
            .bind(bigint(token.trigger_count))
            .bind(&token.created_by)
            .bind(millis(token.created_at))
            .bind(token.state.as_str())
            .bind(&token.last_error)
            .execute(&self.pool)
            .await?;
            Ok(())
        }

        async fn canary_tokens(&self, filter: &CanaryTokenFilter) -> DbResult<Vec<CanaryToken>> {
            let mut query = QueryBuilder::<Sql>::new(format!("select {TOKEN_COLUMNS} from canary_tokens where 1 = 1"));
            for (column, value) in [
                ("decky_name", &filter.decky_name),
                ("state", &filter.state),
                ("kind", &filter.kind),
                ("topology_id", &filter.topology_id),
            ] {
                if let Some(value) = value {
                    query.push(format!(" and {column} = ")).push_bind(value.clone());
                }
            }
            query.push(" order by created_at desc, uuid");
            let rows: Vec<TokenRow> = query.build_query_as().fetch_all(&self.pool).await?;
            convert(rows)
        }

        async fn canary_token(&self, uuid: Uuid) -> DbResult<CanaryToken> {
            let row: TokenRow = sqlx::query_as(&format!("select {TOKEN_COLUMNS} from canary_tokens where uuid = ?"))
                .bind(uuid.to_string())
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn canary_token_by_callback(&self, callback_token: &str) -> DbResult<Option<CanaryToken>> {
            let row: Option<TokenRow> =
                sqlx::query_as(&format!("select {TOKEN_COLUMNS} from canary_tokens where callback_token = ?"))
                    .bind(callback_token)
                    .fetch_optional(&self.pool)
                    .await?;
            row.map(TryInto::try_into).transpose()
        }

        async fn set_canary_token_state(
            &self,
            uuid: Uuid,
            state: CanaryTokenState,
            last_error: Option<&str>,
            placed_at: Option<DateTime<Utc>>,
        ) -> DbResult<()> {
            let done = sqlx::query(
                "update canary_tokens set state = ?, last_error = ?, placed_at = coalesce(?, placed_at) where uuid = ?",
            )
            .bind(state.as_str())
            .bind(last_error)
            .bind(placed_at.map(millis))
            .bind(uuid.to_string())
            .execute(&self.pool)
            .await?;
            found(done.rows_affected())
        }

        async fn record_canary_trigger(&self, trigger: &CanaryTrigger) -> DbResult<()> {
            let mut tx = self.pool.begin().await?;
            let done = sqlx::query(
                "update canary_tokens set trigger_count = trigger_count + 1, last_triggered_at = ? where uuid = ?",
            )
            .bind(millis(trigger.occurred_at))
            .bind(trigger.token_uuid.to_string())
            .execute(&mut *tx)
            .await?;
            found(done.rows_affected())?;
            sqlx::query(&format!("insert into canary_triggers ({TRIGGER_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?)"))
                .bind(trigger.uuid.to_string())
                .bind(trigger.token_uuid.to_string())
                .bind(millis(trigger.occurred_at))
                .bind(&trigger.src_ip)
                .bind(&trigger.user_agent)
                .bind(&trigger.method)
                .bind(&trigger.request_path)
                .bind(&trigger.dns_qname)
                .bind(&trigger.headers)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }

        async fn canary_triggers(&self, token_uuid: Uuid, limit: u32, skip: u64) -> DbResult<Vec<CanaryTrigger>> {
            let rows: Vec<TriggerRow> = sqlx::query_as(&format!(
                "select {TRIGGER_COLUMNS} from canary_triggers where token_uuid = ? \
                 order by occurred_at desc, uuid limit ? offset ?"
            ))
            .bind(token_uuid.to_string())
            .bind(i64::from(limit))
            .bind(bigint(skip))
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn add_canary_blob(&self, blob: &NewCanaryBlob) -> DbResult<CanaryBlob> {
            let inserted = sqlx::query(
                "insert into canary_blobs (uuid, sha256, filename, content_type, size_bytes, uploaded_by, uploaded_at, \
                 bytes) values (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(blob.uuid.to_string())
            .bind(&blob.sha256)
            .bind(&blob.filename)
            .bind(&blob.content_type)
            .bind(bigint(blob.bytes.len() as u64))
            .bind(&blob.uploaded_by)
            .bind(millis(blob.uploaded_at))
            .bind(&blob.bytes)
            .execute(&self.pool)
            .await;
            match inserted.map_err(DbError::from) {
                Ok(_) | Err(DbError::Conflict) => {}
                Err(other) => return Err(other),
            }
            let row: BlobRow = sqlx::query_as(&format!("{BLOB_SELECT} where b.sha256 = ?"))
                .bind(&blob.sha256)
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn canary_blobs(&self) -> DbResult<Vec<CanaryBlob>> {
            let rows: Vec<BlobRow> = sqlx::query_as(&format!("{BLOB_SELECT} order by b.uploaded_at desc, b.uuid"))
                .fetch_all(&self.pool)
                .await?;
            convert(rows)
        }

        async fn canary_blob(&self, uuid: Uuid) -> DbResult<CanaryBlob> {
            let row: BlobRow = sqlx::query_as(&format!("{BLOB_SELECT} where b.uuid = ?"))
                .bind(uuid.to_string())
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn canary_blob_bytes(&self, uuid: Uuid) -> DbResult<Vec<u8>> {
            let (bytes,): (Vec<u8>,) = sqlx::query_as("select bytes from canary_blobs where uuid = ?")
                .bind(uuid.to_string())
                .fetch_one(&self.pool)
                .await?;
            Ok(bytes)
        }

        async fn delete_canary_blob(&self, uuid: Uuid) -> DbResult<()> {
            let uuid = uuid.to_string();
            let done = sqlx::query(
                "delete from canary_blobs where uuid = ? and not exists \
                 (select 1 from canary_tokens where blob_uuid = ?)",
            )
            .bind(&uuid)
            .bind(&uuid)
            .execute(&self.pool)
            .await?;
            if done.rows_affected() > 0 {
                return Ok(());
            }
            let exists: Option<(String,)> = sqlx::query_as("select uuid from canary_blobs where uuid = ?")
                .bind(&uuid)
                .fetch_optional(&self.pool)
                .await?;
            Err(if exists.is_some() { DbError::Conflict } else { DbError::NotFound })
        }
    }
}
