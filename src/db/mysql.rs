//! The MySQL/MariaDB backend, for API replicas that share one database. Its connection settings
//! and its answers to the [`Dialect`] hooks; the verbs are written once for both backends in the
//! areas.

use std::time::Duration;

use sqlx::MySql;
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::DbResult;
use super::dialect::Dialect;
use super::fault::discard_stale;
use super::seal::Seal;
use crate::text::prefix_chars;

static MIGRATOR: Migrator = sqlx::migrate!("migrations/mysql");

/// How long to wait for the server to answer a new connection. A host that accepts TCP but never
/// speaks MySQL would otherwise stall startup forever.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub struct MysqlDb {
    url: String,
    pub(super) pool: MySqlPool,
    /// The batch writers' pool: the same pool, as the server runs concurrent writers itself.
    pub(super) writer: MySqlPool,
    /// Seals the secrets stored here (`seal`).
    pub(super) seal: Seal,
}

impl MysqlDb {
    pub fn open(url: &str, seal: Seal) -> DbResult<Self> {
        let options: MySqlConnectOptions = url.parse()?;
        let pool = discard_stale!(MySqlPoolOptions::new().acquire_timeout(CONNECT_TIMEOUT))
            .connect_lazy_with(options.charset("utf8mb4"));
        Ok(MysqlDb { url: url.to_string(), writer: pool.clone(), pool, seal })
    }
}

impl Dialect for MysqlDb {
    type Sql = MySql;

    const NAME: &'static str = "mysql";
    const MIGRATOR: &'static Migrator = &MIGRATOR;

    const MAX_BYTES_PER_INSERT: usize = 4 << 20;
    const INSERT_OR_SKIP: &'static str = "insert ignore";
    const SKIP_HELD: &'static str = "";
    const FOR_UPDATE: &'static str = " for update";
    const LIKE_ESCAPE: &'static str = " escape '\\\\'";
    const GREATEST: &'static str = "greatest";
    const EXACT: &'static str = " collate utf8mb4_bin";

    fn on_conflict_update(_key: &str) -> String {
        " on duplicate key update ".to_string()
    }

    fn incoming(column: &str) -> String {
        // `values()` rather than MySQL 8's row alias, which MariaDB does not have.
        format!("values({column})")
    }

    fn clip(text: &str, max_chars: usize) -> &str {
        prefix_chars(text, max_chars)
    }

    fn compared(text: &str) -> String {
        // The column's collation ignores letter case.
        Self::indexed(text).to_lowercase()
    }

    fn json_text(column: &str, key: &str) -> String {
        format!("json_unquote(json_extract({column}, '$.\"{key}\"'))")
    }

    async fn prepare(&self) -> DbResult<()> {
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
        Ok(())
    }

    fn opened(&self) {}

    async fn begin_write(&self) -> DbResult<sqlx::Transaction<'static, MySql>> {
        Ok(self.writer.begin().await?)
    }
}
