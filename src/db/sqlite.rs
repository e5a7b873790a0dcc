//! The sqlite backend: one file in WAL mode, the single-host default.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Sqlite};
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

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

pub struct SqliteDb {
    path: PathBuf,
    pool: SqlitePool,
    /// The one connection the batch writers (ingest, the profiler, observation intake) commit
    /// through: sqlite has one writer at a time anyway, and a connection of its own keeps the index
    /// pages those transactions touch in a large cache without every reading connection growing one.
    writer: SqlitePool,
}

impl SqliteDb {
    /// Touches nothing yet: [`Database::migrate`] creates the directory and the file.
    pub fn open(path: &Path) -> DbResult<Self> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            // Ingestion writes many index pages per batch; 16 KiB pages quarter the writes (measured:
            // 62k instead of 36k lines/s). Takes effect when the file is created.
            .page_size(16384)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5))
            // Checkpoints (a copy of the log into the file, and an fsync) every 10,000 pages (160 MiB
            // at 16 KiB pages) rather than every 1,000: under steady ingestion they were most of
            // the waiting.
            .pragma("wal_autocheckpoint", "10000");
        let pool = SqlitePoolOptions::new().acquire_timeout(Duration::from_secs(5)).connect_lazy_with(options.clone());
        // 256 MiB of page cache (a negative size is in KiB), so the log indexes of a few million rows
        // stay cached (1M lines back-filled in 22 s instead of 33 s with 64 MiB); statement
        // journals, which every multi-row insert in a transaction keeps, in memory rather than in a
        // temporary file.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(options.pragma("cache_size", "-262144").pragma("temp_store", "memory"));
        Ok(SqliteDb { path: path.to_path_buf(), pool, writer })
    }
}

#[async_trait]
impl Database for SqliteDb {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn migrate(&self) -> DbResult<()> {
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| anyhow::anyhow!("cannot create the database directory {}: {e}", parent.display()))?;
        }
        Ok(MIGRATOR.run(&self.pool).await?)
    }

    async fn ping(&self) -> DbResult<()> {
        sqlx::query("select 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        self.writer.close().await;
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
        sqlx::query("insert into revoked_tokens (jti, user_uuid, expires_at, revoked_at) values (?, ?, ?, ?) on conflict do nothing")
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
        let mut query = QueryBuilder::<Sqlite>::new("select * from decky_lifecycle where id in (");
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
        // One statement: sqlite runs writers one at a time, so of two racing acquirers exactly one
        // finds the row free (or its own).
        let done = sqlx::query(
            "insert into ingest_leases (source, holder, expires_at) values (?, ?, ?) \
             on conflict (source) do update set holder = excluded.holder, expires_at = excluded.expires_at \
             where ingest_leases.holder = excluded.holder or ingest_leases.expires_at <= ?",
        )
        .bind(source)
        .bind(holder)
        .bind(millis(lease_end(now, ttl)?))
        .bind(millis(now))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
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
        // `begin immediate` takes the write lock first: a deferred transaction that reads and then
        // writes fails at once (no busy wait) when another writer got in between.
        let mut tx = self.writer.begin_with("begin immediate").await?;
        check_lease_and_cursor(&mut tx, source, holder, expected, now).await?;
        insert_logs(&mut tx, source, &batch.logs).await?;
        let new_bounties = insert_bounties(&mut tx, &batch.bounties).await?;
        let new_credentials = upsert_credentials(&mut tx, &batch.credentials).await?;
        if let Some(cursor) = &batch.cursor {
            sqlx::query(
                "insert into ingest_cursors (source, file_id, byte_offset, updated_at) values (?, ?, ?, ?) \
                 on conflict (source) do update set file_id = excluded.file_id, byte_offset = excluded.byte_offset, \
                 updated_at = excluded.updated_at",
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
        tx.commit().await?;
        Ok(Committed { logs: batch.logs.len() as u64, last_log_id, new_bounties, new_credentials })
    }

    async fn logs(&self, filter: &LogFilter, limit: u32, offset: u64) -> DbResult<Page<LogRecord>> {
        let mut select = QueryBuilder::<Sqlite>::new(format!("select {LOG_COLUMNS} from logs"));
        push_log_filter(&mut select, filter, None);
        select.push(" order by timestamp desc, id desc limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<LogRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let (total,): (i64,) = if is_unfiltered(filter) {
            sqlx::query_as("select coalesce(sum(total), 0) from log_totals").fetch_one(&self.pool).await?
        } else {
            let mut count = QueryBuilder::<Sqlite>::new("select count(*) from logs");
            push_log_filter(&mut count, filter, None);
            count.build_query_as().fetch_one(&self.pool).await?
        };
        Ok(Page { total: total.max(0) as u64, rows: convert(rows)? })
    }

    async fn logs_after(&self, after_id: i64, filter: &LogFilter, limit: u32) -> DbResult<Vec<LogRecord>> {
        // `not indexed`: walk the ids up from `after_id`. A follower's id is recent, so that is a few
        // rows, where a column index would visit every match since the beginning of time.
        let mut select = QueryBuilder::<Sqlite>::new(format!("select {LOG_COLUMNS} from logs not indexed"));
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
            let mut select = QueryBuilder::<Sqlite>::new("select minute - minute % ");
            select.push_bind(width).push(" as bucket, sum(total) from log_minutes");
            select
        } else {
            let mut select = QueryBuilder::<Sqlite>::new("select timestamp - timestamp % ");
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
            "select (select coalesce(sum(total), 0) from log_totals), \
             (select count(*) from log_attackers where attacker_ip <> ?)",
        )
        .bind(UNKNOWN_IP)
        .fetch_one(&self.pool)
        .await?;
        Ok(LogStats { total_logs: total_logs.max(0) as u64, unique_attackers: unique_attackers.max(0) as u64 })
    }

    async fn bounties(&self, filter: &BountyFilter, limit: u32, offset: u64) -> DbResult<Page<BountyRecord>> {
        let mut select = QueryBuilder::<Sqlite>::new(
            "select id, timestamp, decky, service, attacker_ip, bounty_type, payload from bounty",
        );
        push_bounty_filter(&mut select, filter);
        select.push(" order by timestamp desc, id desc limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<BountyRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let mut count = QueryBuilder::<Sqlite>::new("select count(*) from bounty");
        push_bounty_filter(&mut count, filter);
        let (total,): (i64,) = count.build_query_as().fetch_one(&self.pool).await?;
        Ok(Page { total: total.max(0) as u64, rows: convert(rows)? })
    }

    async fn credentials(&self, limit: u32) -> DbResult<Vec<CredentialRecord>> {
        let rows: Vec<CredentialRow> = sqlx::query_as(
            "select id, attacker_ip, decky, service, secret_kind, secret_sha256, principal, secret_printable, \
             secret_b64, outcome, attempt_count, first_seen, last_seen \
             from credentials order by last_seen desc, id desc limit ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        convert(rows)
    }

    async fn profiler_cursor(&self) -> DbResult<i64> {
        let stored: Option<(String,)> = sqlx::query_as("select value from state where key = ?")
            .bind(PROFILER_CURSOR_KEY)
            .fetch_optional(&self.pool)
            .await?;
        profiler_cursor_value(stored.map(|(v,)| v))
    }

    async fn attackers_by_ip(&self, ips: &[String]) -> DbResult<Vec<AttackerProfile>> {
        let mut profiles = Vec::new();
        for ips in ips.chunks(MAX_IN_LIST) {
            let mut select =
                QueryBuilder::<Sqlite>::new(format!("select {ATTACKER_COLUMNS} from attackers where ip in ("));
            let mut list = select.separated(", ");
            for ip in ips {
                list.push_bind(ip.as_str());
            }
            select.push(")");
            let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;
            profiles.extend(convert::<_, AttackerProfile>(rows)?);
        }
        Ok(profiles)
    }

    async fn attacker_evidence(&self, ips: &[String]) -> DbResult<Vec<AttackerEvidence>> {
        let mut found: HashMap<String, AttackerEvidence> = HashMap::new();
        for chunk in ips.chunks(MAX_IN_LIST) {
            let in_list = |query: &mut QueryBuilder<'_, Sqlite>| {
                query.push(" attacker_ip in (");
                let mut list = query.separated(", ");
                for ip in chunk {
                    list.push_bind(ip.clone());
                }
                query.push(")");
            };
            // The first few of each address, without reading the rest out of the database.
            let mut fingerprints = QueryBuilder::<Sqlite>::new(
                "select attacker_ip, payload from (select attacker_ip, payload, id, \
                 row_number() over (partition by attacker_ip order by id) as n \
                 from bounty where bounty_type = 'fingerprint' and",
            );
            in_list(&mut fingerprints);
            fingerprints.push(") as numbered where n <= ").push_bind(i64::from(MAX_PROFILE_FINGERPRINTS));
            fingerprints.push(" order by id");
            let rows: Vec<(String, String)> = fingerprints.build_query_as().fetch_all(&self.pool).await?;
            for (ip, payload) in rows {
                found.entry(ip).or_default().fingerprints.push(payload);
            }
            let mut bounties = QueryBuilder::<Sqlite>::new("select attacker_ip, count(*) from bounty where");
            in_list(&mut bounties);
            bounties.push(" group by attacker_ip");
            let rows: Vec<(String, i64)> = bounties.build_query_as().fetch_all(&self.pool).await?;
            for (ip, count) in rows {
                found.entry(ip).or_default().bounty_count = count;
            }
            let mut credentials = QueryBuilder::<Sqlite>::new("select attacker_ip, count(*) from credentials where");
            in_list(&mut credentials);
            credentials.push(" group by attacker_ip");
            let rows: Vec<(String, i64)> = credentials.build_query_as().fetch_all(&self.pool).await?;
            for (ip, count) in rows {
                found.entry(ip).or_default().credential_count = count;
            }
        }
        Ok(ips
            .iter()
            .map(|ip| AttackerEvidence { ip: ip.clone(), ..found.get(ip).cloned().unwrap_or_default() })
            .collect())
    }

    async fn commit_profiles(&self, holder: &str, expected_cursor: i64, batch: &ProfilerBatch) -> DbResult<()> {
        let now = Utc::now();
        let profiles: Vec<ProfileColumns<'_>> = batch.profiles.iter().map(ProfileColumns::new).collect();
        let observations: Vec<ObservationColumns<'_>> =
            batch.observations.iter().map(ObservationColumns::new).collect();
        let mut ips = HashSet::new();
        if let Some(twice) = batch.profiles.iter().find(|p| !ips.insert(p.ip.as_str())) {
            return Err(anyhow::anyhow!("two profiles of {} in one profiler batch", twice.ip).into());
        }

        // `begin immediate`: the write lock first, so nothing moves between the checks and the writes.
        let mut tx = self.writer.begin_with("begin immediate").await?;
        check_lease(&mut tx, PROFILER_LEASE_SOURCE, holder, now).await?;
        let stored: Option<(String,)> = sqlx::query_as("select value from state where key = ?")
            .bind(PROFILER_CURSOR_KEY)
            .fetch_optional(&mut *tx)
            .await?;
        if profiler_cursor_value(stored.map(|(v,)| v))? != expected_cursor {
            return Err(DbError::Conflict);
        }

        for rows in row_sets(&profiles, MAX_IN_LIST, usize::MAX, |_| 0) {
            let mut select = QueryBuilder::<Sqlite>::new("select uuid, ip from attackers where ip in (");
            let mut list = select.separated(", ");
            for row in rows {
                list.push_bind(row.profile.ip.as_str());
            }
            select.push(")");
            let held: Vec<(String, String)> = select.build_query_as().fetch_all(&mut *tx).await?;
            let by_ip: HashMap<&str, &str> = rows.iter().map(|r| (r.profile.ip.as_str(), r.uuid.as_str())).collect();
            if held.iter().any(|(uuid, ip)| by_ip.get(ip.as_str()).is_some_and(|ours| ours != uuid)) {
                return Err(DbError::Conflict);
            }
        }

        for rows in row_sets(&profiles, MAX_PROFILE_ROWS_PER_INSERT, usize::MAX, ProfileColumns::size) {
            let mut upsert = QueryBuilder::<Sqlite>::new(
                "insert into attackers (uuid, ip, first_seen, last_seen, event_count, service_count, decky_count, \
                 services, deckies, traversal_path, is_traversal, bounty_count, credential_count, fingerprints, \
                 command_count, behavior, fold_state, updated_at) ",
            );
            upsert.push_values(rows, |mut row, p| {
                row.push_bind(p.uuid.as_str())
                    .push_bind(p.profile.ip.as_str())
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
                " on conflict (uuid) do update set ip = excluded.ip, first_seen = excluded.first_seen, \
                 last_seen = excluded.last_seen, event_count = excluded.event_count, \
                 service_count = excluded.service_count, decky_count = excluded.decky_count, \
                 services = excluded.services, deckies = excluded.deckies, traversal_path = excluded.traversal_path, \
                 is_traversal = excluded.is_traversal, bounty_count = excluded.bounty_count, \
                 credential_count = excluded.credential_count, fingerprints = excluded.fingerprints, \
                 behavior = excluded.behavior, \
                 fold_state = excluded.fold_state, updated_at = excluded.updated_at",
            );
            upsert.build().execute(&mut *tx).await?;
        }

        // A command's log id may be held already (rows folded again): it adds nothing to a count.
        let mut held_ids = HashSet::new();
        for commands in batch.commands.chunks(MAX_IN_LIST) {
            let mut select = QueryBuilder::<Sqlite>::new("select log_id from attacker_commands where log_id in (");
            let mut list = select.separated(", ");
            for (_, command) in commands {
                list.push_bind(command.log_id);
            }
            select.push(")");
            let ids: Vec<(i64,)> = select.build_query_as().fetch_all(&mut *tx).await?;
            held_ids.extend(ids.into_iter().map(|(id,)| id));
        }
        let added = new_command_counts(&batch.commands, held_ids);

        for rows in row_sets(&batch.commands, MAX_ROWS_PER_INSERT, usize::MAX, command_size) {
            let mut insert = QueryBuilder::<Sqlite>::new(
                "insert into attacker_commands (attacker_uuid, log_id, timestamp, service, decky, command) ",
            );
            insert.push_values(rows, |mut row, (uuid, command)| {
                row.push_bind(uuid.to_string())
                    .push_bind(command.log_id)
                    .push_bind(millis(command.timestamp))
                    .push_bind(command.service.as_str())
                    .push_bind(command.decky.as_str())
                    .push_bind(command.command.as_str());
            });
            insert.push(" on conflict (log_id) do nothing");
            insert.build().execute(&mut *tx).await?;
        }

        // Each count grows by the rows its attacker gained: a step costs the same however long the
        // attacker's history, where a recount would read all of it.
        for counts in added.chunks(MAX_IN_LIST) {
            let mut update =
                QueryBuilder::<Sqlite>::new("update attackers set command_count = command_count + case uuid");
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

        for rows in row_sets(&observations, MAX_ROWS_PER_INSERT, usize::MAX, ObservationColumns::size) {
            let mut upsert = insert_observations(rows, now);
            // The profiler's own records replace what they measured before, under the stored id. An
            // id stored already for other evidence leaves that record alone.
            upsert.push(
                " on conflict (evidence_key) do update set attacker_uuid = excluded.attacker_uuid, \
                 identity_ref = excluded.identity_ref, value = excluded.value, confidence = excluded.confidence, \
                 window_start = excluded.window_start, window_end = excluded.window_end, source = excluded.source, \
                 envelope_v = excluded.envelope_v, ts = excluded.ts, received_at = excluded.received_at \
                 on conflict do nothing",
            );
            upsert.build().execute(&mut *tx).await?;
        }

        sqlx::query(
            "insert into state (key, value) values (?, ?) on conflict (key) do update set value = excluded.value",
        )
        .bind(PROFILER_CURSOR_KEY)
        .bind(batch.last_log_id.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn attackers(&self, filter: &AttackerFilter, limit: u32, offset: u64) -> DbResult<Page<AttackerProfile>> {
        let mut select = QueryBuilder::<Sqlite>::new(format!("select {ATTACKER_COLUMNS} from attackers"));
        push_attacker_filter(&mut select, filter);
        select.push(match filter.sort {
            AttackerSort::Recent => " order by last_seen desc, uuid desc",
            AttackerSort::Active => " order by event_count desc, uuid desc",
            AttackerSort::Traversals => " order by is_traversal desc, last_seen desc, uuid desc",
        });
        select.push(" limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let mut count = QueryBuilder::<Sqlite>::new("select count(*) from attackers");
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
        let filter = |query: &mut QueryBuilder<'_, Sqlite>| {
            query.push(" where attacker_uuid = ").push_bind(attacker.to_string());
            if let Some(service) = service {
                query.push(" and service = ").push_bind(service.to_string());
            }
        };
        let mut select =
            QueryBuilder::<Sqlite>::new("select log_id, timestamp, service, decky, command from attacker_commands");
        filter(&mut select);
        select.push(" order by timestamp desc, log_id desc limit ").push_bind(i64::from(limit));
        select.push(" offset ").push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        let rows: Vec<CommandRow> = select.build_query_as().fetch_all(&self.pool).await?;

        let total: Option<(i64,)> = if service.is_some() {
            let mut count = QueryBuilder::<Sqlite>::new("select count(*) from attacker_commands");
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
                    .bind(service.as_str())
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
        let mut tx = self.writer.begin_with("begin immediate").await?;
        let mut stored = 0;
        for rows in row_sets(&columns, MAX_ROWS_PER_INSERT, usize::MAX, ObservationColumns::size) {
            // Row by row: a record whose id or evidence key is held, by the table or by an earlier
            // row of the statement, is skipped.
            let mut insert = insert_observations(rows, now);
            insert.push(" on conflict do nothing");
            stored += insert.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(ObservationsStored { stored, duplicates: observations.len() as u64 - stored })
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

/// Rows per multi-row insert: at 14 values a row (credentials), 2048 rows stay under sqlite's
/// 32766 bound variables.
const MAX_ROWS_PER_INSERT: usize = 2048;

/// Rows per multi-row insert of profiles: 18 values a row.
const MAX_PROFILE_ROWS_PER_INSERT: usize = 1024;

/// Values in one `in (…)` list.
const MAX_IN_LIST: usize = 1000;

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
fn push_log_filter(query: &mut QueryBuilder<'_, Sqlite>, filter: &LogFilter, after_id: Option<i64>) {
    let mut joiner = " where ";
    let mut next = |query: &mut QueryBuilder<'_, Sqlite>| {
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
                query.push("json_extract(fields, '$.\"").push(field_key(key)).push("\"') = ").push_bind(value.clone());
            }
            SearchTerm::Text(text) => {
                let pattern = contains_pattern(text);
                query.push("(raw_line like ").push_bind(pattern.clone());
                for column in ["decky", "service", "attacker_ip"] {
                    query.push(" escape '\\' or ").push(column).push(" like ").push_bind(pattern.clone());
                }
                query.push(" escape '\\')");
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
fn push_attacker_filter(query: &mut QueryBuilder<'_, Sqlite>, filter: &AttackerFilter) {
    let mut joiner = " where ";
    if let Some(search) = &filter.search {
        query.push(joiner).push("ip like ").push_bind(contains_pattern(search)).push(" escape '\\'");
        joiner = " and ";
    }
    if let Some(service) = &filter.service {
        // `instr` compares case and all: exactly this service.
        let [first, later] = json_element_needles(service);
        query.push(joiner).push("(instr(services, ").push_bind(first).push(") > 0 or instr(services, ");
        query.push_bind(later).push(") > 0)");
    }
}

/// The start of an insert of `rows` into the observations, received at `now`; the caller adds
/// the conflict clause.
fn insert_observations<'a>(rows: &'a [ObservationColumns<'a>], now: DateTime<Utc>) -> QueryBuilder<'a, Sqlite> {
    let mut insert = QueryBuilder::<Sqlite>::new(
        "insert into observations (id, attacker_uuid, identity_ref, primitive, value, confidence, window_start, \
         window_end, source, evidence_ref, evidence_key, envelope_v, ts, received_at) ",
    );
    insert.push_values(rows, |mut row, o| {
        row.push_bind(o.id.as_str())
            .push_bind(o.attacker_uuid.as_deref())
            .push_bind(o.observation.identity_ref.as_deref())
            .push_bind(o.observation.primitive.as_str())
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

fn push_bounty_filter(query: &mut QueryBuilder<'_, Sqlite>, filter: &BountyFilter) {
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
            query.push(" escape '\\' or ").push(column).push(" like ").push_bind(pattern.clone());
        }
        query.push(" escape '\\')");
    }
}

/// `Conflict` unless `holder` holds a live lease on `source`.
async fn check_lease(tx: &mut SqliteConnection, source: &str, holder: &str, now: DateTime<Utc>) -> DbResult<()> {
    let held: Option<(i64,)> =
        sqlx::query_as("select 1 from ingest_leases where source = ? and holder = ? and expires_at > ?")
            .bind(source)
            .bind(holder)
            .bind(millis(now))
            .fetch_optional(&mut *tx)
            .await?;
    if held.is_none() {
        return Err(DbError::Conflict);
    }
    Ok(())
}

/// `Conflict` unless `holder` holds a live lease on `source` and the cursor is still `expected`.
async fn check_lease_and_cursor(
    tx: &mut SqliteConnection,
    source: &str,
    holder: &str,
    expected: Option<&IngestCursor>,
    now: DateTime<Utc>,
) -> DbResult<()> {
    check_lease(tx, source, holder, now).await?;
    let stored: Option<CursorRow> = sqlx::query_as("select file_id, byte_offset from ingest_cursors where source = ?")
        .bind(source)
        .fetch_optional(&mut *tx)
        .await?;
    if stored.map(IngestCursor::try_from).transpose()?.as_ref() != expected {
        return Err(DbError::Conflict);
    }
    Ok(())
}

/// The rows, and what the counters learn from them: the total, the minutes, the attackers.
async fn insert_logs(tx: &mut SqliteConnection, source: &str, logs: &[NewLog]) -> DbResult<()> {
    if logs.is_empty() {
        return Ok(());
    }
    for rows in row_sets(logs, MAX_ROWS_PER_INSERT, usize::MAX, log_size) {
        let mut insert = QueryBuilder::<Sqlite>::new(
            "insert into logs (timestamp, decky, service, event_type, attacker_ip, raw_line, fields, msg) ",
        );
        insert.push_values(rows, |mut row, log| {
            row.push_bind(millis(log.timestamp))
                .push_bind(log.decky.as_str())
                .push_bind(log.service.as_str())
                .push_bind(log.event_type.as_str())
                .push_bind(log.attacker_ip.as_str())
                .push_bind(log.raw_line.as_str())
                .push_bind(log.fields.as_str())
                .push_bind(log.msg.as_deref());
        });
        insert.build().execute(&mut *tx).await?;
    }

    sqlx::query(
        "insert into log_totals (source, total) values (?, ?) \
         on conflict (source) do update set total = total + excluded.total",
    )
    .bind(source)
    .bind(logs.len() as i64)
    .execute(&mut *tx)
    .await?;

    let minutes = per_minute(logs);
    for rows in row_sets(&minutes, MAX_ROWS_PER_INSERT, usize::MAX, |_| 0) {
        let mut upsert = QueryBuilder::<Sqlite>::new("insert into log_minutes (source, minute, total) ");
        upsert.push_values(rows, |mut row, (minute, total)| {
            row.push_bind(source).push_bind(*minute).push_bind(*total);
        });
        upsert.push(" on conflict (source, minute) do update set total = total + excluded.total");
        upsert.build().execute(&mut *tx).await?;
    }

    let attackers: Vec<&str> =
        logs.iter().map(|log| log.attacker_ip.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
    for rows in row_sets(&attackers, MAX_ROWS_PER_INSERT, usize::MAX, |_| 0) {
        let mut insert = QueryBuilder::<Sqlite>::new("insert into log_attackers (attacker_ip) ");
        insert.push_values(rows, |mut row, ip| {
            row.push_bind(*ip);
        });
        insert.push(" on conflict do nothing");
        insert.build().execute(&mut *tx).await?;
    }
    Ok(())
}

/// Stores the bounties not stored before; returns how many that was.
async fn insert_bounties(tx: &mut SqliteConnection, bounties: &[NewBounty]) -> DbResult<u64> {
    let mut new = 0;
    for rows in row_sets(bounties, MAX_ROWS_PER_INSERT, usize::MAX, bounty_size) {
        let mut insert = QueryBuilder::<Sqlite>::new(
            "insert into bounty (timestamp, decky, service, attacker_ip, bounty_type, payload, dedup_key) ",
        );
        insert.push_values(rows, |mut row, bounty| {
            row.push_bind(millis(bounty.timestamp))
                .push_bind(bounty.decky.as_str())
                .push_bind(bounty.service.as_str())
                .push_bind(bounty.attacker_ip.as_str())
                .push_bind(bounty.bounty_type.as_str())
                .push_bind(bounty.payload.as_str())
                .push_bind(bounty_key(bounty));
        });
        insert.push(" on conflict (dedup_key) do nothing");
        new += insert.build().execute(&mut *tx).await?.rows_affected();
    }
    Ok(new)
}

/// Inserts each credential not seen before and counts an attempt on the others; returns how many
/// were new.
async fn upsert_credentials(tx: &mut SqliteConnection, credentials: &[NewCredential]) -> DbResult<u64> {
    let mut new = 0;
    for rows in row_sets(credentials, MAX_ROWS_PER_INSERT, usize::MAX, credential_size) {
        let mut upsert = QueryBuilder::<Sqlite>::new(
            "insert into credentials (attacker_ip, decky, service, secret_kind, secret_sha256, principal, \
             principal_key, secret_printable, secret_b64, outcome, attempt_count, first_seen, last_seen, dedup_key) ",
        );
        upsert.push_values(rows, |mut row, credential| {
            row.push_bind(credential.attacker_ip.as_str())
                .push_bind(credential.decky.as_str())
                .push_bind(credential.service.as_str())
                .push_bind(credential.secret_kind.as_str())
                .push_bind(credential.secret_sha256.as_str())
                .push_bind(credential.principal.as_deref())
                .push_bind(principal_key(credential))
                .push_bind(credential.secret_printable.as_str())
                .push_bind(credential.secret_b64.as_str())
                .push_bind(credential.outcome.as_deref())
                .push("1")
                .push_bind(millis(credential.seen_at))
                .push_bind(millis(credential.seen_at))
                .push_bind(credential_key(credential));
        });
        // A row comes back for every insert and every update; only a new row has one attempt.
        upsert.push(
            " on conflict (dedup_key) do update set attempt_count = attempt_count + 1, \
             last_seen = max(last_seen, excluded.last_seen), outcome = coalesce(excluded.outcome, outcome) \
             returning attempt_count",
        );
        let attempts: Vec<(i64,)> = upsert.build_query_as().fetch_all(&mut *tx).await?;
        new += attempts.iter().filter(|(n,)| *n == 1).count() as u64;
    }
    Ok(new)
}
