//! The MySQL/MariaDB backend, for API replicas that share one database.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::MigrateDatabase;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{MySql, QueryBuilder};
use uuid::Uuid;

use super::rows::{LifecycleRow, UserRow, convert, millis, username_key};
use super::{Database, DbResult, DeckyLifecycle, LifecycleStatus, NewUser, STRANDED_LIFECYCLE_ERROR, User};

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

    async fn set_password(
        &self,
        user: Uuid,
        password_hash: &str,
        must_change_password: bool,
        now: DateTime<Utc>,
    ) -> DbResult<()> {
        let done = sqlx::query(
            "update users set password_hash = ?, must_change_password = ?, tokens_valid_from = ? where uuid = ?",
        )
        .bind(password_hash)
        .bind(must_change_password)
        .bind(millis(now))
        .bind(user.to_string())
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 { Err(super::DbError::NotFound) } else { Ok(()) }
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
}
