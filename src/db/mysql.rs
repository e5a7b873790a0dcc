//! The MySQL/MariaDB backend, for API replicas that share one database.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::MigrateDatabase;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::{MySql, QueryBuilder, Transaction};
use uuid::Uuid;

use super::logs::{field_key, is_unfiltered, lease_end};
use super::rows::{
    ATTACKER_COLUMNS, AttackerRow, BountyRow, CommandRow, CredentialRow, CursorRow, LifecycleRow, LogRow,
    OBSERVATION_COLUMNS, ObservationColumns, ObservationRow, PROFILER_CURSOR_KEY, PROFILER_LEASE_SOURCE,
    ProfileColumns, UserRow, bounty_key, bounty_size, command_size, contains_pattern, convert, credential_key,
    credential_size, found, json_element_needles, log_size, millis, new_command_counts, parse_uuid, per_minute,
    principal_key, profiler_cursor_value, row_sets, stored_offset, time, username_key,
};
use super::{
    AttackerCommand, AttackerEvidence, AttackerFilter, AttackerProfile, AttackerSort, BountyFilter, BountyRecord,
    Committed, CredentialRecord, Database, DbError, DbResult, DeckyLifecycle, HistogramBucket, IngestBatch,
    IngestCursor, LifecycleStatus, LogColumn, LogFilter, LogRecord, LogStats, MAX_PROFILE_FINGERPRINTS, NewBounty,
    NewCredential, NewLog, NewUser, ObservationsStored, Page, ProfilerBatch, RevokedToken, Role,
    STRANDED_LIFECYCLE_ERROR, SearchTerm, User,
};
use crate::logline::UNKNOWN_IP;
use crate::observation::Observation;

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
        source: &str,
        holder: &str,
        now: DateTime<Utc>,
        ttl: std::time::Duration,
    ) -> DbResult<bool> {
        let expires_at = millis(lease_end(now, ttl)?);
        // Two statements, each atomic: renew or take over an expired lease; else create it. Of two
        // racing acquirers, the row lock lets one update and the other re-read the row as taken,
        // and the primary key lets one insert and the other fail. The server reports matched rows
        // (sqlx sets CLIENT_FOUND_ROWS), so a renewal to the same instant still counts.
        let taken = sqlx::query(
            "update ingest_leases set holder = ?, expires_at = ? where source = ? and (holder = ? or expires_at <= ?)",
        )
        .bind(holder)
        .bind(expires_at)
        .bind(source)
        .bind(holder)
        .bind(millis(now))
        .execute(&self.pool)
        .await?;
        if taken.rows_affected() == 1 {
            return Ok(true);
        }
        let created = sqlx::query("insert into ingest_leases (source, holder, expires_at) values (?, ?, ?)")
            .bind(source)
            .bind(holder)
            .bind(expires_at)
            .execute(&self.pool)
            .await;
        match created {
            Ok(_) => Ok(true),
            Err(err) => match DbError::from(err) {
                DbError::Conflict => Ok(false),
                other => Err(other),
            },
        }
    }

    async fn release_ingest_lease(&self, source: &str, holder: &str) -> DbResult<()> {
        sqlx::query("delete from ingest_leases where source = ? and holder = ?")
            .bind(source)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ingest_cursor(&self, source: &str) -> DbResult<Option<IngestCursor>> {
        let row: Option<CursorRow> = sqlx::query_as("select file_id, byte_offset from ingest_cursors where source = ?")
            .bind(source)
            .fetch_optional(&self.pool)
            .await?;
        row.map(IngestCursor::try_from).transpose()
    }

    async fn commit_ingest(
        &self,
        source: &str,
        holder: &str,
        expected: Option<&IngestCursor>,
        batch: &IngestBatch,
    ) -> DbResult<Committed> {
        let now = Utc::now();
        let mut tx = self.pool.begin().await?;
        let result: DbResult<Committed> = async {
            check_lease_and_cursor(&mut tx, source, holder, expected, now).await?;
            insert_logs(&mut tx, source, &batch.logs).await?;
            let new_bounties = insert_bounties(&mut tx, &batch.bounties).await?;
            let new_credentials = upsert_credentials(&mut tx, &batch.credentials).await?;
            if let Some(cursor) = &batch.cursor {
                sqlx::query(
                    "insert into ingest_cursors (source, file_id, byte_offset, updated_at) values (?, ?, ?, ?) \
                 on duplicate key update file_id = values(file_id), byte_offset = values(byte_offset), \
                 updated_at = values(updated_at)",
                )
                .bind(source)
                .bind(&cursor.file_id)
                .bind(stored_offset(cursor)?)
                .bind(millis(now))
                .execute(&mut *tx)
                .await?;
            }
            let (last_log_id,): (i64,) =
                sqlx::query_as("select coalesce(max(id), 0) from logs").fetch_one(&mut *tx).await?;
            Ok(Committed { logs: batch.logs.len() as u64, last_log_id, new_bounties, new_credentials })
        }
        .await;
        settle(tx, result).await
    }

    async fn logs(&self, filter: &LogFilter, limit: u32, offset: u64) -> DbResult<Page<LogRecord>> {
        // Without a column match, the page is the newest rows of the time index. Say so: with the
        // limit a placeholder and statistics that lag a growing table, MariaDB was seen to pick a
        // full scan and a sort instead (hundreds of milliseconds at 300,000 rows).
        let by_column = filter.terms.iter().any(|term| matches!(term, SearchTerm::Column(..)));
        let hint = if by_column { "" } else { " force index (ix_logs_timestamp)" };
        let mut select = QueryBuilder::<MySql>::new(format!("select {LOG_COLUMNS} from logs{hint}"));
        push_log_filter(&mut select, filter, None);
        select.push(" order by timestamp desc, id desc limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<LogRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let (total,): (i64,) = if is_unfiltered(filter) {
            sqlx::query_as("select cast(coalesce(sum(total), 0) as signed) from log_totals")
                .fetch_one(&self.pool)
                .await?
        } else {
            let mut count = QueryBuilder::<MySql>::new("select count(*) from logs");
            push_log_filter(&mut count, filter, None);
            count.build_query_as().fetch_one(&self.pool).await?
        };
        Ok(Page { total: total.max(0) as u64, rows: convert(rows)? })
    }

    async fn logs_after(&self, after_id: i64, filter: &LogFilter, limit: u32) -> DbResult<Vec<LogRecord>> {
        // Walk the ids up from `after_id`. A follower's id is recent, so that is a few rows, where a
        // column index would visit every match since the beginning of time.
        let mut select = QueryBuilder::<MySql>::new(format!("select {LOG_COLUMNS} from logs force index (primary)"));
        push_log_filter(&mut select, filter, Some(after_id));
        select.push(" order by id limit ").push_bind(i64::from(limit));
        let rows: Vec<LogRow> = select.build_query_as().fetch_all(&self.pool).await?;
        convert(rows)
    }

    async fn last_log_id(&self) -> DbResult<i64> {
        let (id,): (i64,) = sqlx::query_as("select coalesce(max(id), 0) from logs").fetch_one(&self.pool).await?;
        Ok(id)
    }

    async fn log_histogram(&self, filter: &LogFilter, bucket_minutes: u32) -> DbResult<Vec<HistogramBucket>> {
        let width = i64::from(bucket_minutes.max(1)) * 60_000;
        let mut select = if is_unfiltered(filter) {
            // Whole minutes add up to any bucket aligned to the epoch.
            let mut select = QueryBuilder::<MySql>::new("select minute - minute % ");
            select.push_bind(width).push(" as bucket, cast(sum(total) as signed) from log_minutes");
            select
        } else {
            let mut select = QueryBuilder::<MySql>::new("select timestamp - timestamp % ");
            select.push_bind(width).push(" as bucket, count(*) from logs");
            push_log_filter(&mut select, filter, None);
            select
        };
        select.push(" group by bucket order by bucket");
        let rows: Vec<(i64, i64)> = select.build_query_as().fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|(start, count)| Ok(HistogramBucket { start: time(start)?, count: count.max(0) as u64 }))
            .collect()
    }

    async fn log_stats(&self) -> DbResult<LogStats> {
        let (total_logs, unique_attackers): (i64, i64) = sqlx::query_as(
            "select (select cast(coalesce(sum(total), 0) as signed) from log_totals), \
             (select count(*) from log_attackers where attacker_ip <> ?)",
        )
        .bind(UNKNOWN_IP)
        .fetch_one(&self.pool)
        .await?;
        Ok(LogStats { total_logs: total_logs.max(0) as u64, unique_attackers: unique_attackers.max(0) as u64 })
    }

    async fn bounties(&self, filter: &BountyFilter, limit: u32, offset: u64) -> DbResult<Page<BountyRecord>> {
        // As for the logs: the newest rows of the time index, unless a type narrows them.
        let hint = if filter.bounty_type.is_some() || filter.attacker_ip.is_some() {
            ""
        } else {
            " force index (ix_bounty_timestamp)"
        };
        let mut select = QueryBuilder::<MySql>::new(format!(
            "select id, timestamp, decky, service, attacker_ip, bounty_type, payload from bounty{hint}"
        ));
        push_bounty_filter(&mut select, filter);
        select.push(" order by timestamp desc, id desc limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<BountyRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let mut count = QueryBuilder::<MySql>::new("select count(*) from bounty");
        push_bounty_filter(&mut count, filter);
        let (total,): (i64,) = count.build_query_as().fetch_one(&self.pool).await?;
        Ok(Page { total: total.max(0) as u64, rows: convert(rows)? })
    }

    async fn credentials(&self, limit: u32) -> DbResult<Vec<CredentialRecord>> {
        let rows: Vec<CredentialRow> = sqlx::query_as(
            "select id, attacker_ip, decky, service, secret_kind, secret_sha256, principal, secret_printable, \
             secret_b64, outcome, attempt_count, first_seen, last_seen \
             from credentials force index (ix_credentials_last_seen) order by last_seen desc, id desc limit ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        convert(rows)
    }

    async fn profiler_cursor(&self) -> DbResult<i64> {
        let stored: Option<(String,)> = sqlx::query_as("select value from state where `key` = ?")
            .bind(PROFILER_CURSOR_KEY)
            .fetch_optional(&self.pool)
            .await?;
        profiler_cursor_value(stored.map(|(v,)| v))
    }

    async fn attackers_by_ip(&self, ips: &[String]) -> DbResult<Vec<AttackerProfile>> {
        let mut profiles = Vec::new();
        for ips in ips.chunks(MAX_IN_LIST) {
            let mut select =
                QueryBuilder::<MySql>::new(format!("select {ATTACKER_COLUMNS} from attackers where ip in ("));
            let mut list = select.separated(", ");
            for ip in ips {
                list.push_bind(indexed(ip));
            }
            select.push(")");
            let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;
            profiles.extend(convert::<_, AttackerProfile>(rows)?);
        }
        Ok(profiles)
    }

    async fn attacker_evidence(&self, ips: &[String]) -> DbResult<Vec<AttackerEvidence>> {
        // Keyed by the address as the table compares it: cut to its column, as the ingester cut it,
        // and in any letter case (the column's collation ignores it, so one group may answer an
        // address asked in another case).
        let key = |ip: &str| indexed(ip).to_lowercase();
        let mut found: HashMap<String, AttackerEvidence> = HashMap::new();
        for chunk in ips.chunks(MAX_IN_LIST) {
            let in_list = |query: &mut QueryBuilder<'_, MySql>| {
                query.push(" attacker_ip in (");
                let mut list = query.separated(", ");
                for ip in chunk {
                    list.push_bind(indexed(ip).to_string());
                }
                query.push(")");
            };
            // The first few of each address, without reading the rest out of the database.
            let mut fingerprints = QueryBuilder::<MySql>::new(
                "select attacker_ip, payload from (select attacker_ip, payload, id, \
                 row_number() over (partition by attacker_ip order by id) as n \
                 from bounty where bounty_type = 'fingerprint' and",
            );
            in_list(&mut fingerprints);
            fingerprints.push(") as numbered where n <= ").push_bind(i64::from(MAX_PROFILE_FINGERPRINTS));
            fingerprints.push(" order by id");
            let rows: Vec<(String, String)> = fingerprints.build_query_as().fetch_all(&self.pool).await?;
            for (ip, payload) in rows {
                found.entry(key(&ip)).or_default().fingerprints.push(payload);
            }
            let mut bounties = QueryBuilder::<MySql>::new("select attacker_ip, count(*) from bounty where");
            in_list(&mut bounties);
            bounties.push(" group by attacker_ip");
            let rows: Vec<(String, i64)> = bounties.build_query_as().fetch_all(&self.pool).await?;
            for (ip, count) in rows {
                found.entry(key(&ip)).or_default().bounty_count = count;
            }
            let mut credentials = QueryBuilder::<MySql>::new("select attacker_ip, count(*) from credentials where");
            in_list(&mut credentials);
            credentials.push(" group by attacker_ip");
            let rows: Vec<(String, i64)> = credentials.build_query_as().fetch_all(&self.pool).await?;
            for (ip, count) in rows {
                found.entry(key(&ip)).or_default().credential_count = count;
            }
        }
        Ok(ips
            .iter()
            .map(|ip| AttackerEvidence { ip: ip.clone(), ..found.get(&key(ip)).cloned().unwrap_or_default() })
            .collect())
    }

    async fn commit_profiles(&self, holder: &str, expected_cursor: i64, batch: &ProfilerBatch) -> DbResult<()> {
        let now = Utc::now();
        let profiles: Vec<ProfileColumns<'_>> = batch.profiles.iter().map(ProfileColumns::new).collect();
        let observations: Vec<ObservationColumns<'_>> =
            batch.observations.iter().map(ObservationColumns::new).collect();
        let mut ips = HashSet::new();
        if let Some(twice) = batch.profiles.iter().find(|p| !ips.insert(indexed(&p.ip))) {
            return Err(anyhow::anyhow!("two profiles of {} in one profiler batch", twice.ip).into());
        }

        let mut tx = self.pool.begin().await?;
        let result: DbResult<()> = async {
            check_lease(&mut tx, PROFILER_LEASE_SOURCE, holder, now).await?;
            let stored: Option<(String,)> = sqlx::query_as("select value from state where `key` = ? for update")
                .bind(PROFILER_CURSOR_KEY)
                .fetch_optional(&mut *tx)
                .await?;
            if profiler_cursor_value(stored.map(|(v,)| v))? != expected_cursor {
                return Err(DbError::Conflict);
            }

            // `on duplicate key update` would take any unique key: an address stored under another uuid
            // must be a conflict here, as it is on sqlite, not a silent merge.
            for rows in row_sets(&profiles, MAX_IN_LIST, usize::MAX, |_| 0) {
                let mut select = QueryBuilder::<MySql>::new("select uuid, ip from attackers where ip in (");
                let mut list = select.separated(", ");
                for row in rows {
                    list.push_bind(indexed(&row.profile.ip));
                }
                select.push(") for update");
                let held: Vec<(String, String)> = select.build_query_as().fetch_all(&mut *tx).await?;
                // Every row found holds one of our addresses as the column's collation compares them
                // (letter case and trailing spaces aside), so each must be the profile of that address.
                let ours: HashMap<String, &str> =
                    rows.iter().map(|r| (indexed(&r.profile.ip).to_lowercase(), r.uuid.as_str())).collect();
                if held.iter().any(|(uuid, ip)| ours.get(&ip.to_lowercase()) != Some(&uuid.as_str())) {
                    return Err(DbError::Conflict);
                }
            }

            for rows in row_sets(&profiles, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, ProfileColumns::size) {
                let mut upsert = QueryBuilder::<MySql>::new(
                    "insert into attackers (uuid, ip, first_seen, last_seen, event_count, service_count, decky_count, \
                 services, deckies, traversal_path, is_traversal, bounty_count, credential_count, fingerprints, \
                 command_count, behavior, fold_state, updated_at) ",
                );
                upsert.push_values(rows, |mut row, p| {
                    row.push_bind(p.uuid.as_str())
                        .push_bind(indexed(&p.profile.ip))
                        .push_bind(millis(p.profile.first_seen))
                        .push_bind(millis(p.profile.last_seen))
                        .push_bind(p.profile.event_count)
                        .push_bind(p.profile.service_count())
                        .push_bind(p.profile.decky_count())
                        .push_bind(p.services.as_str())
                        .push_bind(p.deckies.as_str())
                        .push_bind(p.traversal_path.as_str())
                        .push_bind(p.is_traversal)
                        .push_bind(p.profile.bounty_count)
                        .push_bind(p.profile.credential_count)
                        .push_bind(p.profile.fingerprints.as_str())
                        // Counted from the rows below, whatever the caller tallied.
                        .push_bind(0)
                        .push_bind(p.profile.behavior.as_str())
                        .push_bind(p.profile.fold_state.as_str())
                        .push_bind(millis(p.profile.updated_at));
                });
                upsert.push(
                    " on duplicate key update ip = values(ip), first_seen = values(first_seen), \
                 last_seen = values(last_seen), event_count = values(event_count), \
                 service_count = values(service_count), decky_count = values(decky_count), \
                 services = values(services), deckies = values(deckies), traversal_path = values(traversal_path), \
                 is_traversal = values(is_traversal), bounty_count = values(bounty_count), \
                 credential_count = values(credential_count), fingerprints = values(fingerprints), \
                 behavior = values(behavior), \
                 fold_state = values(fold_state), updated_at = values(updated_at)",
                );
                upsert.build().execute(&mut *tx).await?;
            }

            // `insert ignore` skips the log ids stored already; the values are cut to their columns
            // first, so the ignoring has nothing to swallow but duplicates.
            // A command's log id may be held already (rows folded again): it adds nothing to a count.
            let mut held_ids = HashSet::new();
            for commands in batch.commands.chunks(MAX_IN_LIST) {
                let mut select = QueryBuilder::<MySql>::new("select log_id from attacker_commands where log_id in (");
                let mut list = select.separated(", ");
                for (_, command) in commands {
                    list.push_bind(command.log_id);
                }
                select.push(")");
                let ids: Vec<(i64,)> = select.build_query_as().fetch_all(&mut *tx).await?;
                held_ids.extend(ids.into_iter().map(|(id,)| id));
            }
            let added = new_command_counts(&batch.commands, held_ids);

            for rows in row_sets(&batch.commands, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, command_size) {
                let mut insert = QueryBuilder::<MySql>::new(
                    "insert ignore into attacker_commands (attacker_uuid, log_id, timestamp, service, decky, command) ",
                );
                insert.push_values(rows, |mut row, (uuid, command)| {
                    row.push_bind(uuid.to_string())
                        .push_bind(command.log_id)
                        .push_bind(millis(command.timestamp))
                        .push_bind(indexed(&command.service))
                        .push_bind(indexed(&command.decky))
                        .push_bind(command.command.as_str());
                });
                insert.build().execute(&mut *tx).await?;
            }

            // Each count grows by the rows its attacker gained: a step costs the same however long the
            // attacker's history, where a recount would read all of it.
            for counts in added.chunks(MAX_IN_LIST) {
                let mut update =
                    QueryBuilder::<MySql>::new("update attackers set command_count = command_count + case uuid");
                for (uuid, count) in counts {
                    update.push(" when ").push_bind(uuid.as_str()).push(" then ").push_bind(*count);
                }
                update.push(" else 0 end where uuid in (");
                let mut list = update.separated(", ");
                for (uuid, _) in counts {
                    list.push_bind(uuid.as_str());
                }
                update.push(")");
                update.build().execute(&mut *tx).await?;
            }

            for rows in row_sets(&observations, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, ObservationColumns::size) {
                let mut upsert = insert_observations("insert", rows, now);
                // The profiler's own records replace what they measured before, under the stored id.
                upsert.push(
                    " on duplicate key update attacker_uuid = values(attacker_uuid), \
                 identity_ref = values(identity_ref), value = values(value), confidence = values(confidence), \
                 window_start = values(window_start), window_end = values(window_end), source = values(source), \
                 envelope_v = values(envelope_v), ts = values(ts), received_at = values(received_at)",
                );
                upsert.build().execute(&mut *tx).await?;
            }

            sqlx::query("insert into state (`key`, value) values (?, ?) on duplicate key update value = values(value)")
                .bind(PROFILER_CURSOR_KEY)
                .bind(batch.last_log_id.to_string())
                .execute(&mut *tx)
                .await?;
            Ok(())
        }
        .await;
        settle(tx, result).await
    }

    async fn attackers(&self, filter: &AttackerFilter, limit: u32, offset: u64) -> DbResult<Page<AttackerProfile>> {
        let mut select = QueryBuilder::<MySql>::new(format!("select {ATTACKER_COLUMNS} from attackers"));
        push_attacker_filter(&mut select, filter);
        select.push(match filter.sort {
            AttackerSort::Recent => " order by last_seen desc, uuid desc",
            AttackerSort::Active => " order by event_count desc, uuid desc",
            AttackerSort::Traversals => " order by is_traversal desc, last_seen desc, uuid desc",
        });
        select.push(" limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let mut count = QueryBuilder::<MySql>::new("select count(*) from attackers");
        push_attacker_filter(&mut count, filter);
        let (total,): (i64,) = count.build_query_as().fetch_one(&self.pool).await?;
        Ok(Page { total: total.max(0) as u64, rows: convert(rows)? })
    }

    async fn attacker(&self, uuid: Uuid) -> DbResult<AttackerProfile> {
        let row: AttackerRow = sqlx::query_as(&format!("select {ATTACKER_COLUMNS} from attackers where uuid = ?"))
            .bind(uuid.to_string())
            .fetch_one(&self.pool)
            .await?;
        row.try_into()
    }

    async fn attacker_commands(
        &self,
        attacker: Uuid,
        service: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> DbResult<Page<AttackerCommand>> {
        let filter = |query: &mut QueryBuilder<'_, MySql>| {
            query.push(" where attacker_uuid = ").push_bind(attacker.to_string());
            if let Some(service) = service {
                query.push(" and service = ").push_bind(indexed(service).to_string());
            }
        };
        let mut select =
            QueryBuilder::<MySql>::new("select log_id, timestamp, service, decky, command from attacker_commands");
        filter(&mut select);
        select.push(" order by timestamp desc, log_id desc limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<CommandRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let total: Option<(i64,)> = if service.is_some() {
            let mut count = QueryBuilder::<MySql>::new("select count(*) from attacker_commands");
            filter(&mut count);
            count.build_query_as().fetch_optional(&self.pool).await?
        } else {
            sqlx::query_as("select command_count from attackers where uuid = ?")
                .bind(attacker.to_string())
                .fetch_optional(&self.pool)
                .await?
        };
        Ok(Page { total: total.map_or(0, |(total,)| total.max(0) as u64), rows: convert(rows)? })
    }

    async fn services_with_commands(&self, attacker: Uuid, services: &[String]) -> DbResult<Vec<String>> {
        let mut found = Vec::new();
        // One indexed probe a service: an attacker is seen on a handful.
        for service in services {
            let ran: Option<(i64,)> =
                sqlx::query_as("select 1 from attacker_commands where attacker_uuid = ? and service = ? limit 1")
                    .bind(attacker.to_string())
                    .bind(indexed(service))
                    .fetch_optional(&self.pool)
                    .await?;
            if ran.is_some() {
                found.push(service.clone());
            }
        }
        Ok(found)
    }

    async fn add_observations(&self, observations: &[Observation]) -> DbResult<ObservationsStored> {
        let now = Utc::now();
        let columns: Vec<ObservationColumns<'_>> = observations.iter().map(ObservationColumns::new).collect();
        let mut tx = self.pool.begin().await?;
        let result: DbResult<u64> = async {
            let mut stored = 0;
            for rows in row_sets(&columns, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, ObservationColumns::size) {
                // Row by row: a record whose id or evidence key is held, by the table or by an earlier
                // row of the statement, is skipped, and only inserted rows are counted. The values are
                // cut to their columns first, so the ignoring has nothing to swallow but duplicates.
                let mut insert = insert_observations("insert ignore", rows, now);
                stored += insert.build().execute(&mut *tx).await?.rows_affected();
            }
            Ok(stored)
        }
        .await;
        let stored = settle(tx, result).await?;
        Ok(ObservationsStored { stored, duplicates: (observations.len() as u64).saturating_sub(stored) })
    }

    async fn attacker_observations(&self, attacker: Uuid, limit: u32) -> DbResult<Vec<Observation>> {
        let rows: Vec<ObservationRow> = sqlx::query_as(&format!(
            "select {OBSERVATION_COLUMNS} from observations where attacker_uuid = ? \
             order by window_end desc, ts desc, id desc limit ?"
        ))
        .bind(attacker.to_string())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        convert(rows)
    }
}

/// Rows per multi-row insert: at 13 placeholders a row (credentials), 2048 rows stay under the
/// protocol's 65535 placeholders.
const MAX_ROWS_PER_INSERT: usize = 2048;

/// Bytes of values per multi-row insert: well under MariaDB's default `max_allowed_packet` (16 MiB),
/// which bounds one statement with all its values.
const MAX_BYTES_PER_INSERT: usize = 4 << 20;

/// Values in one `in (…)` list.
const MAX_IN_LIST: usize = 1000;

/// The width of the indexed text columns.
const INDEXED_CHARS: usize = 255;

/// `text` cut to `max_chars` characters: an over-long value would fail the whole batch in strict
/// mode, again at every retry.
fn clip(text: &str, max_chars: usize) -> &str {
    if text.len() <= max_chars {
        return text;
    }
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

fn indexed(text: &str) -> &str {
    clip(text, INDEXED_CHARS)
}

const LOG_COLUMNS: &str =
    "id, timestamp, decky, service, event_type, attacker_ip, raw_line, fields, msg, trace_id, span_id";

fn column_name(column: LogColumn) -> &'static str {
    match column {
        LogColumn::Decky => "decky",
        LogColumn::Service => "service",
        LogColumn::EventType => "event_type",
        LogColumn::AttackerIp => "attacker_ip",
    }
}

/// Appends the `where` clause of `filter` (and of `id > after_id`), if it has any condition.
fn push_log_filter(query: &mut QueryBuilder<'_, MySql>, filter: &LogFilter, after_id: Option<i64>) {
    let mut joiner = " where ";
    let mut next = |query: &mut QueryBuilder<'_, MySql>| {
        query.push(joiner);
        joiner = " and ";
    };
    if let Some(after_id) = after_id {
        next(query);
        query.push("id > ").push_bind(after_id);
    }
    for term in &filter.terms {
        next(query);
        match term {
            SearchTerm::Column(column, value) => {
                query.push(column_name(*column)).push(" = ").push_bind(value.clone());
            }
            SearchTerm::Field(key, value) => {
                // The key is reduced to [A-Za-z0-9_] here too, whoever built the term: nothing else
                // may reach the quoted JSON path.
                query
                    .push("json_unquote(json_extract(fields, '$.\"")
                    .push(field_key(key))
                    .push("\"')) = ")
                    .push_bind(value.clone());
            }
            SearchTerm::Text(text) => {
                let pattern = contains_pattern(text);
                query.push("(raw_line like ").push_bind(pattern.clone());
                for column in ["decky", "service", "attacker_ip"] {
                    query.push(" escape '\\\\' or ").push(column).push(" like ").push_bind(pattern.clone());
                }
                query.push(" escape '\\\\')");
            }
        }
    }
    if let Some(since) = filter.since {
        next(query);
        query.push("timestamp >= ").push_bind(millis(since));
    }
    if let Some(until) = filter.until {
        next(query);
        query.push("timestamp <= ").push_bind(millis(until));
    }
}

/// Appends the `where` clause of `filter`, if it has any condition.
fn push_attacker_filter(query: &mut QueryBuilder<'_, MySql>, filter: &AttackerFilter) {
    let mut joiner = " where ";
    if let Some(search) = &filter.search {
        query.push(joiner).push("ip like ").push_bind(contains_pattern(search)).push(" escape '\\\\'");
        joiner = " and ";
    }
    if let Some(service) = &filter.service {
        // Compared byte for byte, as on sqlite: exactly this service.
        let [first, later] = json_element_needles(service);
        query.push(joiner).push("(instr(services collate utf8mb4_bin, ").push_bind(first);
        query.push(") > 0 or instr(services collate utf8mb4_bin, ").push_bind(later).push(") > 0)");
    }
}

/// `verb` (`insert` or `insert ignore`) of `rows` into the observations, received at `now`; the
/// caller adds any conflict clause.
fn insert_observations<'a>(
    verb: &str,
    rows: &'a [ObservationColumns<'a>],
    now: DateTime<Utc>,
) -> QueryBuilder<'a, MySql> {
    let mut insert = QueryBuilder::<MySql>::new(format!(
        "{verb} into observations (id, attacker_uuid, identity_ref, primitive, value, confidence, window_start, \
         window_end, source, evidence_ref, evidence_key, envelope_v, ts, received_at) "
    ));
    insert.push_values(rows, |mut row, o| {
        row.push_bind(indexed(&o.id))
            .push_bind(o.attacker_uuid.as_deref())
            .push_bind(o.observation.identity_ref.as_deref())
            .push_bind(indexed(&o.observation.primitive))
            .push_bind(o.value.as_str())
            .push_bind(o.observation.confidence)
            .push_bind(o.observation.window.start_ts)
            .push_bind(o.observation.window.end_ts)
            .push_bind(o.observation.source.as_str())
            .push_bind(o.observation.evidence_ref.as_deref())
            .push_bind(o.evidence_key.as_deref())
            .push_bind(o.observation.v)
            .push_bind(o.observation.ts)
            .push_bind(millis(now));
    });
    insert
}

fn push_bounty_filter(query: &mut QueryBuilder<'_, MySql>, filter: &BountyFilter) {
    let mut joiner = " where ";
    if let Some(bounty_type) = &filter.bounty_type {
        query.push(joiner).push("bounty_type = ").push_bind(bounty_type.clone());
        joiner = " and ";
    }
    if let Some(attacker_ip) = &filter.attacker_ip {
        query.push(joiner).push("attacker_ip = ").push_bind(attacker_ip.clone());
        joiner = " and ";
    }
    if let Some(search) = &filter.search {
        let pattern = contains_pattern(search);
        query.push(joiner).push("(decky like ").push_bind(pattern.clone());
        for column in ["service", "attacker_ip", "payload"] {
            query.push(" escape '\\\\' or ").push(column).push(" like ").push_bind(pattern.clone());
        }
        query.push(" escape '\\\\')");
    }
}

/// `Conflict` unless `holder` holds a live lease on `source`. The lease row stays locked to the end
/// of the transaction, so it does not move under it.
/// Commits `tx` if `result` is a success and rolls it back at once if not. A dropped transaction
/// only queues its rollback until the pool next touches the connection; until then its row and
/// metadata locks stall whoever comes next (a `drop database` waits for them indefinitely).
async fn settle<T>(tx: Transaction<'_, MySql>, result: DbResult<T>) -> DbResult<T> {
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

async fn check_lease(tx: &mut MySqlConnection, source: &str, holder: &str, now: DateTime<Utc>) -> DbResult<()> {
    let lease: Option<(i64,)> =
        sqlx::query_as("select expires_at from ingest_leases where source = ? and holder = ? for update")
            .bind(source)
            .bind(holder)
            .fetch_optional(&mut *tx)
            .await?;
    if !matches!(lease, Some((expires_at,)) if expires_at > millis(now)) {
        return Err(DbError::Conflict);
    }
    Ok(())
}

/// `Conflict` unless `holder` holds a live lease on `source` and the cursor is still `expected`.
/// Both rows stay locked to the end of the transaction, so neither moves under it.
async fn check_lease_and_cursor(
    tx: &mut MySqlConnection,
    source: &str,
    holder: &str,
    expected: Option<&IngestCursor>,
    now: DateTime<Utc>,
) -> DbResult<()> {
    check_lease(tx, source, holder, now).await?;
    let stored: Option<CursorRow> =
        sqlx::query_as("select file_id, byte_offset from ingest_cursors where source = ? for update")
            .bind(source)
            .fetch_optional(&mut *tx)
            .await?;
    if stored.map(IngestCursor::try_from).transpose()?.as_ref() != expected {
        return Err(DbError::Conflict);
    }
    Ok(())
}

/// The rows, and what the counters learn from them: the total, the minutes, the attackers.
async fn insert_logs(tx: &mut MySqlConnection, source: &str, logs: &[NewLog]) -> DbResult<()> {
    if logs.is_empty() {
        return Ok(());
    }
    for rows in row_sets(logs, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, log_size) {
        let mut insert = QueryBuilder::<MySql>::new(
            "insert into logs (timestamp, decky, service, event_type, attacker_ip, raw_line, fields, msg) ",
        );
        insert.push_values(rows, |mut row, log| {
            row.push_bind(millis(log.timestamp))
                .push_bind(indexed(&log.decky))
                .push_bind(indexed(&log.service))
                .push_bind(indexed(&log.event_type))
                .push_bind(indexed(&log.attacker_ip))
                .push_bind(log.raw_line.as_str())
                .push_bind(log.fields.as_str())
                .push_bind(log.msg.as_deref());
        });
        insert.build().execute(&mut *tx).await?;
    }

    sqlx::query(
        "insert into log_totals (source, total) values (?, ?) on duplicate key update total = total + values(total)",
    )
    .bind(source)
    .bind(logs.len() as i64)
    .execute(&mut *tx)
    .await?;

    let minutes = per_minute(logs);
    for rows in row_sets(&minutes, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, |_| 64) {
        let mut upsert = QueryBuilder::<MySql>::new("insert into log_minutes (source, minute, total) ");
        upsert.push_values(rows, |mut row, (minute, total)| {
            row.push_bind(source).push_bind(*minute).push_bind(*total);
        });
        upsert.push(" on duplicate key update total = total + values(total)");
        upsert.build().execute(&mut *tx).await?;
    }

    // In key order, so two transactions lock shared rows in the same order.
    let attackers: Vec<&str> =
        logs.iter().map(|log| indexed(&log.attacker_ip)).collect::<BTreeSet<_>>().into_iter().collect();
    for rows in row_sets(&attackers, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, |ip| ip.len() + 16) {
        let mut insert = QueryBuilder::<MySql>::new("insert ignore into log_attackers (attacker_ip) ");
        insert.push_values(rows, |mut row, ip| {
            row.push_bind(*ip);
        });
        insert.build().execute(&mut *tx).await?;
    }
    Ok(())
}

/// Stores the bounties not stored before; returns how many that was. `insert ignore` reports only
/// the rows it inserted; the values are cut to their columns first, so the ignoring has nothing
/// to swallow but duplicates.
async fn insert_bounties(tx: &mut MySqlConnection, bounties: &[NewBounty]) -> DbResult<u64> {
    let mut new = 0;
    for rows in row_sets(bounties, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, bounty_size) {
        let mut insert = QueryBuilder::<MySql>::new(
            "insert ignore into bounty (timestamp, decky, service, attacker_ip, bounty_type, payload, dedup_key) ",
        );
        insert.push_values(rows, |mut row, bounty| {
            row.push_bind(millis(bounty.timestamp))
                .push_bind(indexed(&bounty.decky))
                .push_bind(indexed(&bounty.service))
                .push_bind(indexed(&bounty.attacker_ip))
                .push_bind(indexed(&bounty.bounty_type))
                .push_bind(bounty.payload.as_str())
                .push_bind(bounty_key(bounty));
        });
        new += insert.build().execute(&mut *tx).await?.rows_affected();
    }
    Ok(new)
}

/// Inserts each credential not seen before and counts an attempt on the others; returns how many
/// were new.
async fn upsert_credentials(tx: &mut MySqlConnection, credentials: &[NewCredential]) -> DbResult<u64> {
    let mut new = 0;
    for rows in row_sets(credentials, MAX_ROWS_PER_INSERT, MAX_BYTES_PER_INSERT, credential_size) {
        let mut upsert = QueryBuilder::<MySql>::new(
            "insert into credentials (attacker_ip, decky, service, secret_kind, secret_sha256, principal, \
             principal_key, secret_printable, secret_b64, outcome, attempt_count, first_seen, last_seen, dedup_key) ",
        );
        upsert.push_values(rows, |mut row, credential| {
            row.push_bind(indexed(&credential.attacker_ip))
                .push_bind(indexed(&credential.decky))
                .push_bind(indexed(&credential.service))
                .push_bind(indexed(&credential.secret_kind))
                .push_bind(clip(&credential.secret_sha256, 64))
                .push_bind(credential.principal.as_deref())
                .push_bind(principal_key(credential))
                .push_bind(credential.secret_printable.as_str())
                .push_bind(credential.secret_b64.as_str())
                .push_bind(credential.outcome.as_deref().map(indexed))
                .push("1")
                .push_bind(millis(credential.seen_at))
                .push_bind(millis(credential.seen_at))
                .push_bind(credential_key(credential));
        });
        upsert.push(
            " on duplicate key update attempt_count = attempt_count + 1, \
             last_seen = greatest(last_seen, values(last_seen)), outcome = coalesce(values(outcome), outcome)",
        );
        // The server counts 1 per inserted row and 2 per updated one (an update always changes
        // attempt_count): of n rows, 2n - affected were new.
        let affected = upsert.build().execute(&mut *tx).await?.rows_affected();
        new += (2 * rows.len() as u64).saturating_sub(affected);
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_counts_characters_and_keeps_them_whole() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip("abcdef", 3), "abc");
        assert_eq!(clip("ééé", 2), "éé");
        assert_eq!(clip("éé", 2), "éé");
        assert_eq!(clip("", 0), "");
    }
}
