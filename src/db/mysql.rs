//! The MySQL/MariaDB backend, for API replicas that share one database.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::MigrateDatabase;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{MySql, QueryBuilder};
use uuid::Uuid;

use super::rows::{LifecycleRow, UserRow, convert, found, millis, parse_uuid, username_key};
use super::{
    BountyFilter, BountyRecord, Committed, CredentialRecord, Database, DbResult, DeckyLifecycle, HistogramBucket,
    IngestBatch, IngestCursor, LifecycleStatus, LogFilter, LogRecord, LogStats, NewUser, Page, RevokedToken, Role,
    STRANDED_LIFECYCLE_ERROR, User,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/mysql");

/// How long to wait for the server to answer a new connection. A host that accepts TCP but never
/// speaks MySQL would otherwise stall startup forever.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub struct MysqlDb {
    url: String,
    pool: MySqlPool,
}

impl MysqlDb {
    pub fn open(url: &str) -> DbResult<Self> {
        let options: MySqlConnectOptions = url.parse()?;
        let pool =
            MySqlPoolOptions::new().acquire_timeout(CONNECT_TIMEOUT).connect_lazy_with(options.charset("utf8mb4"));
        Ok(MysqlDb { url: url.to_string(), pool })
    }
}

#[async_trait]
impl Database for MysqlDb {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn migrate(&self) -> DbResult<()> {
        // A fresh server has no database yet; creating it saves the operator a manual step. These
        // calls open connections of their own, outside the pool and its timeout.
        let ensure_database = async {
            if !MySql::database_exists(&self.url).await? {
                MySql::create_database(&self.url).await?;
            }
            Ok::<_, sqlx::Error>(())
        };
        tokio::time::timeout(CONNECT_TIMEOUT, ensure_database)
            .await
            .map_err(|_| anyhow::anyhow!("the server did not answer within {}s", CONNECT_TIMEOUT.as_secs()))??;
        Ok(MIGRATOR.run(&self.pool).await?)
    }

    async fn ping(&self) -> DbResult<()> {
        sqlx::query("select 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    async fn add_user(&self, user: NewUser, now: DateTime<Utc>) -> DbResult<User> {
        let uuid = Uuid::new_v4();
        sqlx::query(
            "insert into users (uuid, username, username_key, password_hash, role, must_change_password, created_at) \
             values (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(uuid.to_string())
        .bind(&user.username)
        .bind(username_key(&user.username))
        .bind(&user.password_hash)
        .bind(user.role.as_str())
        .bind(user.must_change_password)
        .bind(millis(now))
        .execute(&self.pool)
        .await?;
        self.user_by_name(&user.username).await
    }

    async fn user_by_name(&self, username: &str) -> DbResult<User> {
        let row: UserRow = sqlx::query_as("select * from users where username_key = ?")
            .bind(username_key(username))
            .fetch_one(&self.pool)
            .await?;
        row.try_into()
    }

    async fn list_users(&self) -> DbResult<Vec<User>> {
        let rows: Vec<UserRow> =
            sqlx::query_as("select * from users order by username_key").fetch_all(&self.pool).await?;
        convert(rows)
    }

    async fn user_by_uuid(&self, uuid: Uuid) -> DbResult<User> {
        let row: UserRow =
            sqlx::query_as("select * from users where uuid = ?").bind(uuid.to_string()).fetch_one(&self.pool).await?;
        row.try_into()
    }

    async fn delete_user(&self, uuid: Uuid) -> DbResult<()> {
        let done = sqlx::query("delete from users where uuid = ?").bind(uuid.to_string()).execute(&self.pool).await?;
        found(done.rows_affected())
    }

    async fn set_password(
        &self,
        user: Uuid,
        password_hash: &str,
        must_change_password: bool,
        tokens_valid_from: DateTime<Utc>,
    ) -> DbResult<()> {
        let done = sqlx::query(
            "update users set password_hash = ?, must_change_password = ?, tokens_valid_from = ? where uuid = ?",
        )
        .bind(password_hash)
        .bind(must_change_password)
        .bind(millis(tokens_valid_from))
        .bind(user.to_string())
        .execute(&self.pool)
        .await?;
        found(done.rows_affected())
    }

    async fn set_role(&self, user: Uuid, role: Role, tokens_valid_from: DateTime<Utc>) -> DbResult<()> {
        let done = sqlx::query("update users set role = ?, tokens_valid_from = ? where uuid = ?")
            .bind(role.as_str())
            .bind(millis(tokens_valid_from))
            .bind(user.to_string())
            .execute(&self.pool)
            .await?;
        found(done.rows_affected())
    }

    async fn revoke_token(&self, token: &RevokedToken, now: DateTime<Utc>) -> DbResult<()> {
        sqlx::query("insert ignore into revoked_tokens (jti, user_uuid, expires_at, revoked_at) values (?, ?, ?, ?)")
            .bind(&token.jti)
            .bind(token.user.to_string())
            .bind(millis(token.expires_at))
            .bind(millis(now))
            .execute(&self.pool)
            .await?;
        sqlx::query("delete from revoked_tokens where expires_at < ?").bind(millis(now)).execute(&self.pool).await?;
        Ok(())
    }

    async fn is_token_revoked(&self, jti: &str) -> DbResult<bool> {
        let (count,): (i64,) =
            sqlx::query_as("select count(*) from revoked_tokens where jti = ?").bind(jti).fetch_one(&self.pool).await?;
        Ok(count > 0)
    }

    async fn add_sse_ticket(&self, ticket_hash: &str, user: Uuid, expires_at: DateTime<Utc>) -> DbResult<()> {
        sqlx::query("insert into sse_tickets (ticket_hash, user_uuid, expires_at, created_at) values (?, ?, ?, ?)")
            .bind(ticket_hash)
            .bind(user.to_string())
            .bind(millis(expires_at))
            .bind(millis(Utc::now()))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn take_sse_ticket(&self, ticket_hash: &str, now: DateTime<Utc>) -> DbResult<Option<Uuid>> {
        // One statement, so of two concurrent redemptions exactly one gets the row.
        let taken: Option<(String, i64)> =
            sqlx::query_as("delete from sse_tickets where ticket_hash = ? returning user_uuid, expires_at")
                .bind(ticket_hash)
                .fetch_optional(&self.pool)
                .await?;
        sqlx::query("delete from sse_tickets where expires_at < ?").bind(millis(now)).execute(&self.pool).await?;
        match taken {
            Some((user, expires_at)) if expires_at >= millis(now) => Ok(Some(parse_uuid(&user)?)),
            _ => Ok(None),
        }
    }

    async fn add_lifecycle(&self, record: &DeckyLifecycle) -> DbResult<()> {
        sqlx::query(
            "insert into decky_lifecycle \
             (id, decky_name, host_uuid, operation, status, error, started_at, updated_at, completed_at) \
             values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(record.id.to_string())
        .bind(&record.decky_name)
        .bind(&record.host_uuid)
        .bind(&record.operation)
        .bind(record.status.as_str())
        .bind(&record.error)
        .bind(millis(record.started_at))
        .bind(millis(record.updated_at))
        .bind(record.completed_at.map(millis))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn lifecycles(&self, ids: &[Uuid]) -> DbResult<Vec<DeckyLifecycle>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let mut query = QueryBuilder::<MySql>::new("select * from decky_lifecycle where id in (");
        let mut list = query.separated(", ");
        for id in ids {
            list.push_bind(id.to_string());
        }
        query.push(") order by started_at, id");
        let rows: Vec<LifecycleRow> = query.build_query_as().fetch_all(&self.pool).await?;
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
    async fn acquire_ingest_lease(
        &self,
        _source: &str,
        _holder: &str,
        _now: DateTime<Utc>,
        _ttl: std::time::Duration,
    ) -> DbResult<bool> {
        Err(not_yet())
    }

    async fn release_ingest_lease(&self, _source: &str, _holder: &str) -> DbResult<()> {
        Err(not_yet())
    }

    async fn ingest_cursor(&self, _source: &str) -> DbResult<Option<IngestCursor>> {
        Err(not_yet())
    }

    async fn commit_ingest(
        &self,
        _source: &str,
        _holder: &str,
        _expected: Option<&IngestCursor>,
        _batch: &IngestBatch,
    ) -> DbResult<Committed> {
        Err(not_yet())
    }

    async fn logs(&self, _filter: &LogFilter, _limit: u32, _offset: u64) -> DbResult<Page<LogRecord>> {
        Err(not_yet())
    }

    async fn logs_after(&self, _after_id: i64, _filter: &LogFilter, _limit: u32) -> DbResult<Vec<LogRecord>> {
        Err(not_yet())
    }

    async fn last_log_id(&self) -> DbResult<i64> {
        Err(not_yet())
    }

    async fn log_histogram(&self, _filter: &LogFilter, _bucket_minutes: u32) -> DbResult<Vec<HistogramBucket>> {
        Err(not_yet())
    }

    async fn log_stats(&self) -> DbResult<LogStats> {
        Err(not_yet())
    }

    async fn bounties(&self, _filter: &BountyFilter, _limit: u32, _offset: u64) -> DbResult<Page<BountyRecord>> {
        Err(not_yet())
    }

    async fn credentials(&self, _limit: u32) -> DbResult<Vec<CredentialRecord>> {
        Err(not_yet())
    }
}

fn not_yet() -> super::DbError {
    super::DbError::Other(anyhow::anyhow!("not implemented yet"))
}
