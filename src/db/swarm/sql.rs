//! The swarm statements, the same on both backends. Optional filters are written once as
//! `(? is null or column = ?)`, each value bound twice.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    DeckyShard, Enrollment, HostStatus, MAX_SHARD_ERROR_CHARS, ShardFilter, ShardState, SwarmHost, SwarmStore,
};
use crate::db::codec::{convert, found, json_text, millis, parse_uuid, settle, time};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};

#[derive(sqlx::FromRow)]
struct HostRow {
    uuid: String,
    name: String,
    address: String,
    agent_port: i32,
    status: String,
    last_heartbeat: Option<i64>,
    client_cert_fingerprint: Option<String>,
    updater_cert_fingerprint: Option<String>,
    enrolled_at: i64,
    notes: Option<String>,
    use_ipvlan: bool,
}

impl TryFrom<HostRow> for SwarmHost {
    type Error = DbError;

    fn try_from(row: HostRow) -> Result<Self, DbError> {
        Ok(SwarmHost {
            uuid: parse_uuid(&row.uuid)?,
            name: row.name,
            address: row.address,
            agent_port: u16::try_from(row.agent_port)
                .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored agent port: {e}")))?,
            status: row.status.parse().map_err(DbError::Corrupt)?,
            last_heartbeat: row.last_heartbeat.map(time).transpose()?,
            client_cert_fingerprint: row.client_cert_fingerprint,
            updater_cert_fingerprint: row.updater_cert_fingerprint,
            enrolled_at: time(row.enrolled_at)?,
            notes: row.notes,
            use_ipvlan: row.use_ipvlan,
        })
    }
}

#[derive(sqlx::FromRow)]
struct ShardRow {
    decky_name: String,
    host_uuid: String,
    services: String,
    decky_config: Option<String>,
    decky_ip: Option<String>,
    state: String,
    last_error: Option<String>,
    compose_hash: Option<String>,
    last_seen: Option<i64>,
    updated_at: i64,
}

impl TryFrom<ShardRow> for DeckyShard {
    type Error = DbError;

    fn try_from(row: ShardRow) -> Result<Self, DbError> {
        let services = serde_json::from_str(&row.services)
            .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored shard services are not a JSON list: {e}")))?;
        let decky_config = row
            .decky_config
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored shard config of `{}`: {e}", row.decky_name)))?;
        Ok(DeckyShard {
            host_uuid: parse_uuid(&row.host_uuid)?,
            services,
            decky_config,
            decky_ip: row.decky_ip,
            state: row.state.parse().map_err(DbError::Corrupt)?,
            last_error: row.last_error,
            compose_hash: row.compose_hash,
            last_seen: row.last_seen.map(time).transpose()?,
            updated_at: time(row.updated_at)?,
            decky_name: row.decky_name,
        })
    }
}

#[derive(sqlx::FromRow)]
struct EnrollmentRow {
    token_hash: String,
    host_uuid: String,
    master_host: String,
    with_updater: bool,
    services_ini: Option<String>,
    created_at: i64,
    expires_at: i64,
}

impl TryFrom<EnrollmentRow> for Enrollment {
    type Error = DbError;

    fn try_from(row: EnrollmentRow) -> Result<Self, DbError> {
        Ok(Enrollment {
            token_hash: row.token_hash,
            host_uuid: parse_uuid(&row.host_uuid)?,
            master_host: row.master_host,
            with_updater: row.with_updater,
            services_ini: row.services_ini,
            created_at: time(row.created_at)?,
            expires_at: time(row.expires_at)?,
        })
    }
}

/// A shard's stored error is short: the dashboard shows it on every card.
fn error_text(error: &str) -> &str {
    crate::text::prefix_chars(error, MAX_SHARD_ERROR_CHARS)
}

const HOST_COLUMNS: &str = "uuid, name, address, agent_port, status, last_heartbeat, client_cert_fingerprint, \
     updater_cert_fingerprint, enrolled_at, notes, use_ipvlan";

const SHARD_COLUMNS: &str =
    "decky_name, host_uuid, services, decky_config, decky_ip, state, last_error, compose_hash, last_seen, updated_at";

const ENROLLMENT_COLUMNS: &str =
    "token_hash, host_uuid, master_host, with_updater, services_ini, created_at, expires_at";

/// The `where` clause of a [`ShardFilter`]: three optional matches, each bound twice by [`bind_filter!`].
const SHARD_WHERE: &str = "(? is null or host_uuid = ?) and (? is null or decky_name = ?) and (? is null or state = ?)";

fn filter_values(filter: &ShardFilter) -> [Option<String>; 3] {
    [filter.host_uuid.map(|u| u.to_string()), filter.decky_name.clone(), filter.state.map(|s| s.as_str().to_string())]
}

macro_rules! bind_filter {
    ($query:expr, $values:expr) => {{
        let mut query = $query;
        for value in $values.iter() {
            query = query.bind(value.clone()).bind(value.clone());
        }
        query
    }};
}

both_backends! {
    #[async_trait]
    impl SwarmStore for Backend {
        async fn add_swarm_host(&self, host: &SwarmHost) -> DbResult<()> {
            let mut tx = self.begin_write().await?;
            let result = self.insert_host(&mut tx, host).await;
            settle(tx, result).await
        }

        async fn enroll_swarm_host(&self, host: &SwarmHost, enrollment: &Enrollment) -> DbResult<()> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<()> = async {
                self.insert_host(&mut tx, host).await?;
                sqlx::query(&format!(
                    "insert into swarm_enrollments ({ENROLLMENT_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?)"
                ))
                .bind(&enrollment.token_hash)
                .bind(enrollment.host_uuid.to_string())
                .bind(&enrollment.master_host)
                .bind(enrollment.with_updater)
                .bind(&enrollment.services_ini)
                .bind(millis(enrollment.created_at))
                .bind(millis(enrollment.expires_at))
                .execute(&mut *tx)
                .await?;
                Ok(())
            }
            .await;
            settle(tx, result).await
        }

        async fn swarm_host(&self, uuid: Uuid) -> DbResult<SwarmHost> {
            let row: HostRow = sqlx::query_as(&format!("select {HOST_COLUMNS} from swarm_hosts where uuid = ?"))
                .bind(uuid.to_string())
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn swarm_host_by_name(&self, name: &str) -> DbResult<SwarmHost> {
            let row: HostRow = sqlx::query_as(&format!(
                "select {HOST_COLUMNS} from swarm_hosts where name{} = ?",
                Backend::EXACT
            ))
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
            row.try_into()
        }

        async fn swarm_host_by_fingerprint(&self, fingerprint: &str) -> DbResult<SwarmHost> {
            let row: HostRow =
                sqlx::query_as(&format!("select {HOST_COLUMNS} from swarm_hosts where client_cert_fingerprint = ?"))
                    .bind(fingerprint)
                    .fetch_one(&self.pool)
                    .await?;
            row.try_into()
        }

        async fn swarm_hosts(&self, status: Option<HostStatus>) -> DbResult<Vec<SwarmHost>> {
            let status = status.map(HostStatus::as_str);
            let rows: Vec<HostRow> = sqlx::query_as(&format!(
                "select {HOST_COLUMNS} from swarm_hosts where (? is null or status = ?) order by name"
            ))
            .bind(status)
            .bind(status)
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn set_swarm_host_address(&self, uuid: Uuid, address: &str) -> DbResult<()> {
            let done = sqlx::query("update swarm_hosts set address = ? where uuid = ?")
                .bind(address)
                .bind(uuid.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }

        async fn set_swarm_host_fingerprints(&self, uuid: Uuid, client: &str, updater: Option<&str>) -> DbResult<()> {
            let done = sqlx::query(
                "update swarm_hosts set client_cert_fingerprint = ?, updater_cert_fingerprint = ? where uuid = ?",
            )
            .bind(client)
            .bind(updater)
            .bind(uuid.to_string())
            .execute(&self.pool)
            .await?;
            found(done.rows_affected())
        }

        async fn record_swarm_heartbeat(&self, uuid: Uuid, at: DateTime<Utc>) -> DbResult<()> {
            let done = sqlx::query("update swarm_hosts set status = ?, last_heartbeat = ? where uuid = ?")
                .bind(HostStatus::Active.as_str())
                .bind(millis(at))
                .bind(uuid.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }

        async fn mark_silent_swarm_hosts(&self, cutoff: DateTime<Utc>) -> DbResult<Vec<SwarmHost>> {
            const SILENT: &str = "status = 'active' and last_heartbeat < ?";
            let mut tx = self.begin_write().await?;
            let result: DbResult<Vec<SwarmHost>> = async {
                let rows: Vec<HostRow> = sqlx::query_as(&format!(
                    "select {HOST_COLUMNS} from swarm_hosts where {SILENT} order by name{}",
                    Backend::FOR_UPDATE
                ))
                .bind(millis(cutoff))
                .fetch_all(&mut *tx)
                .await?;
                sqlx::query(&format!("update swarm_hosts set status = 'unreachable' where {SILENT}"))
                    .bind(millis(cutoff))
                    .execute(&mut *tx)
                    .await?;
                let mut hosts: Vec<SwarmHost> = convert(rows)?;
                for host in &mut hosts {
                    host.status = HostStatus::Unreachable;
                }
                Ok(hosts)
            }
            .await;
            settle(tx, result).await
        }

        async fn delete_swarm_host(&self, uuid: Uuid) -> DbResult<()> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<()> = async {
                let uuid = uuid.to_string();
                sqlx::query("delete from decky_shards where host_uuid = ?").bind(&uuid).execute(&mut *tx).await?;
                sqlx::query("delete from swarm_enrollments where host_uuid = ?").bind(&uuid).execute(&mut *tx).await?;
                let done = sqlx::query("delete from swarm_hosts where uuid = ?").bind(&uuid).execute(&mut *tx).await?;
                found(done.rows_affected())
            }
            .await;
            settle(tx, result).await
        }

        async fn upsert_decky_shards(&self, shards: &[DeckyShard]) -> DbResult<()> {
            if shards.is_empty() {
                return Ok(());
            }
            let upsert = format!(
                "insert into decky_shards ({SHARD_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?){}",
                Backend::replace(
                    "decky_name",
                    &["host_uuid", "services", "decky_config", "decky_ip", "state", "last_error", "compose_hash",
                      "last_seen", "updated_at"],
                )
            );
            let mut tx = self.begin_write().await?;
            let result: DbResult<()> = async {
                for shard in shards {
                    sqlx::query(&upsert)
                        .bind(Backend::indexed(&shard.decky_name))
                        .bind(shard.host_uuid.to_string())
                        .bind(json_text(&shard.services))
                        .bind(shard.decky_config.as_ref().map(json_text))
                        .bind(shard.decky_ip.as_deref().map(|ip| Backend::clip(ip, 64)))
                        .bind(shard.state.as_str())
                        .bind(shard.last_error.as_deref().map(error_text))
                        .bind(shard.compose_hash.as_deref().map(|h| Backend::clip(h, 128)))
                        .bind(shard.last_seen.map(millis))
                        .bind(millis(shard.updated_at))
                        .execute(&mut *tx)
                        .await?;
                }
                Ok(())
            }
            .await;
            settle(tx, result).await
        }

        async fn decky_shards(&self, filter: &ShardFilter) -> DbResult<Vec<DeckyShard>> {
            let statement = format!("select {SHARD_COLUMNS} from decky_shards where {SHARD_WHERE} order by decky_name");
            let rows: Vec<ShardRow> =
                bind_filter!(sqlx::query_as(&statement), filter_values(filter)).fetch_all(&self.pool).await?;
            convert(rows)
        }

        async fn set_decky_shard_state(
            &self,
            filter: &ShardFilter,
            state: ShardState,
            last_error: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<u64> {
            let statement =
                format!("update decky_shards set state = ?, last_error = ?, updated_at = ? where {SHARD_WHERE}");
            let query = sqlx::query(&statement)
                .bind(state.as_str())
                .bind(last_error.map(error_text))
                .bind(millis(at));
            Ok(bind_filter!(query, filter_values(filter)).execute(&self.pool).await?.rows_affected())
        }

        async fn delete_decky_shards(&self, filter: &ShardFilter) -> DbResult<u64> {
            let statement = format!("delete from decky_shards where {SHARD_WHERE}");
            Ok(bind_filter!(sqlx::query(&statement), filter_values(filter)).execute(&self.pool).await?.rows_affected())
        }

        async fn enrollment(&self, token_hash: &str, now: DateTime<Utc>) -> DbResult<Enrollment> {
            let row: EnrollmentRow = sqlx::query_as(&format!(
                "select {ENROLLMENT_COLUMNS} from swarm_enrollments where token_hash = ? and expires_at > ?"
            ))
            .bind(token_hash)
            .bind(millis(now))
            .fetch_one(&self.pool)
            .await?;
            row.try_into()
        }

        async fn claim_enrollment(&self, token_hash: &str, now: DateTime<Utc>) -> DbResult<Enrollment> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<Enrollment> = async {
                let row: EnrollmentRow = sqlx::query_as(&format!(
                    "select {ENROLLMENT_COLUMNS} from swarm_enrollments where token_hash = ? and expires_at > ?{}",
                    Backend::FOR_UPDATE
                ))
                .bind(token_hash)
                .bind(millis(now))
                .fetch_one(&mut *tx)
                .await?;
                let done = sqlx::query("delete from swarm_enrollments where token_hash = ?")
                    .bind(token_hash)
                    .execute(&mut *tx)
                    .await?;
                found(done.rows_affected())?;
                row.try_into()
            }
            .await;
            settle(tx, result).await
        }

        async fn forget_expired_enrollments(&self, now: DateTime<Utc>) -> DbResult<u64> {
            let done = sqlx::query("delete from swarm_enrollments where expires_at <= ?")
                .bind(millis(now))
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected())
        }
    }

    impl Backend {
        async fn insert_host(&self, tx: &mut sqlx::Transaction<'static, Sql>, host: &SwarmHost) -> DbResult<()> {
            sqlx::query(&format!("insert into swarm_hosts ({HOST_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"))
                .bind(host.uuid.to_string())
                .bind(&host.name)
                .bind(&host.address)
                .bind(i32::from(host.agent_port))
                .bind(host.status.as_str())
                .bind(host.last_heartbeat.map(millis))
                .bind(&host.client_cert_fingerprint)
                .bind(&host.updater_cert_fingerprint)
                .bind(millis(host.enrolled_at))
                .bind(&host.notes)
                .bind(host.use_ipvlan)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }
    }
}
