//! The log views' statements, written once for both backends.

use async_trait::async_trait;
use sqlx::QueryBuilder;

use super::search::field_key;
use super::{
    ADMIN_ONLY_FIELDS, BountyFilter, BountyRecord, CredentialFilter, CredentialRecord, CredentialReuse,
    HistogramBucket, LogFilter, LogRecord, LogStats, LogStore, MAX_REUSE_ADDRESSES, MIN_REUSE_TARGETS,
    RECIPIENT_EVENTS, SearchTerm,
};
use crate::db::codec::{bigint, contains_pattern, convert, count, dedup_key, millis, time};
use crate::db::dialect::both_backends;
use crate::db::statement::Statement;
use crate::db::{DbError, DbResult, Page};
use crate::logline::UNKNOWN_IP;

const LOG_COLUMNS: &str =
    "id, timestamp, decky, service, event_type, attacker_ip, raw_line, fields, msg, trace_id, span_id, host_uuid";

/// The sum of a counter column as a BIGINT (MySQL's `sum` is a DECIMAL).
const TOTAL: &str = "cast(coalesce(sum(total), 0) as signed integer)";

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
    host_uuid: Option<String>,
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
            host_uuid: row.host_uuid,
        })
    }
}

#[derive(sqlx::FromRow)]
struct BountyRow {
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
struct CredentialRow {
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
                .map_err(|_| DbError::Corrupt(anyhow::anyhow!("negative attempt count {}", row.attempt_count)))?,
            first_seen: time(row.first_seen)?,
            last_seen: time(row.last_seen)?,
        })
    }
}

/// The attempts of a reuse finding as a BIGINT (MySQL's `sum` is a DECIMAL).
const ATTEMPTS: &str = "cast(sum(attempts) as signed integer)";

/// Which secrets a reuse grouping reads.
enum Secret<'a> {
    /// Every secret of this kind.
    Kind(&'a str),
    /// The one secret of this hash, kind and principal key.
    Exact(&'a str, &'a str, &'a str),
}

/// A finding's id: 32 hex digits of the hash of its secret, kind and principal key.
fn reuse_id(sha256: &str, kind: &str, principal_key: &str) -> String {
    let mut id = dedup_key(&[sha256, kind, principal_key]);
    id.truncate(32);
    id
}

/// One reuse finding as the grouping reads it; its addresses and targets are read after.
#[derive(sqlx::FromRow)]
struct ReuseRow {
    secret_sha256: String,
    secret_kind: String,
    principal_key: String,
    principal: Option<String>,
    secret_printable: String,
    secret_b64: String,
    target_count: i64,
    attempt_count: i64,
    first_seen: i64,
    last_seen: i64,
}

impl ReuseRow {
    /// The finding, with the (address, decky, service) of each of its credential rows.
    fn into_finding(self, targets: Vec<(String, String, String)>) -> DbResult<CredentialReuse> {
        let mut ips = std::collections::BTreeSet::new();
        let mut deckies = std::collections::BTreeSet::new();
        let mut services = std::collections::BTreeSet::new();
        for (ip, decky, service) in targets {
            ips.insert(ip);
            deckies.insert(decky);
            services.insert(service);
        }
        Ok(CredentialReuse {
            id: reuse_id(&self.secret_sha256, &self.secret_kind, &self.principal_key),
            secret_sha256: self.secret_sha256,
            secret_kind: self.secret_kind,
            principal: self.principal,
            principal_key: self.principal_key,
            secret_printable: self.secret_printable,
            secret_b64: self.secret_b64,
            target_count: count(self.target_count),
            attempt_count: count(self.attempt_count),
            first_seen: time(self.first_seen)?,
            last_seen: time(self.last_seen)?,
            attacker_ips: ips.into_iter().take(MAX_REUSE_ADDRESSES).collect(),
            deckies: deckies.into_iter().collect(),
            services: services.into_iter().collect(),
        })
    }
}

/// Whether `filter` keeps every row: then a total is the stored counter, not a count.
fn is_unfiltered(filter: &LogFilter) -> bool {
    filter.terms.is_empty() && filter.since.is_none() && filter.until.is_none()
}

/// The statement that reads `filter`'s total from the counters the ingest transaction keeps: for
/// every row, or for one column equal to a value (as `where column = ?` on the logs matches: the
/// counter's value column compares as the logs' column does). `None` when only a count over the
/// logs answers.
fn stored_total(filter: &LogFilter) -> Option<Statement> {
    if filter.since.is_some() || filter.until.is_some() {
        return None;
    }
    match filter.terms.as_slice() {
        [] => Some(Statement::new(format!("select {TOTAL} from log_totals"))),
        [SearchTerm::Column(column, value)] => {
            let mut total = Statement::new(format!("select {TOTAL} from log_column_totals where column_name = "));
            total.bind(column.name().to_string()).push(" and column_value = ").bind(value.clone());
            Some(total)
        }
        _ => None,
    }
}

both_backends! {
    #[async_trait]
    impl LogStore for Backend {
        async fn logs(&self, filter: &LogFilter, limit: u32, offset_rows: u64) -> DbResult<Page<LogRecord>> {
            let by_column = filter.terms.iter().any(|term| matches!(term, SearchTerm::Column(..)));
            let hint = if by_column { "" } else { Backend::LOGS_BY_TIME };
            let mut select = Statement::new(format!("select {LOG_COLUMNS} from logs{hint}"));
            push_log_filter(&mut select, filter, None);
            select.push(" order by timestamp desc, id desc limit ").bind(i64::from(limit));
            select.push(" offset ").bind(bigint(offset_rows));
            let total = stored_total(filter).unwrap_or_else(|| {
                let mut count_query = Statement::new("select count(*) from logs");
                push_log_filter(&mut count_query, filter, None);
                count_query
            });
            let (rows, total) = self.read_log_page(select, total).await?;
            Ok(Page { total: count(total), rows })
        }

        async fn logs_after(&self, after_id: i64, filter: &LogFilter, limit: u32) -> DbResult<Vec<LogRecord>> {
            let mut select = Statement::new(format!("select {LOG_COLUMNS} from logs{}", Backend::LOGS_BY_ID));
            push_log_filter(&mut select, filter, Some(after_id));
            select.push(" order by id limit ").bind(i64::from(limit));
            self.read_logs(select).await
        }

        async fn last_log_id(&self) -> DbResult<i64> {
            let (id,): (i64,) = sqlx::query_as("select coalesce(max(id), 0) from logs").fetch_one(&self.pool).await?;
            Ok(id)
        }

        async fn log_histogram(&self, filter: &LogFilter, bucket_minutes: u32) -> DbResult<Vec<HistogramBucket>> {
            let width = i64::from(bucket_minutes.max(1)) * 60_000;
            let mut select = if is_unfiltered(filter) {
                // Whole minutes add up to any bucket aligned to the epoch.
                let mut select = Statement::new("select minute - minute % ");
                select.bind(width).push(" as bucket, cast(sum(total) as signed integer) from log_minutes");
                select
            } else {
                let mut select = Statement::new("select timestamp - timestamp % ");
                select.bind(width).push(" as bucket, count(*) from logs");
                push_log_filter(&mut select, filter, None);
                select
            };
            select.push(" group by bucket order by bucket");
            let rows: Vec<(i64, i64)> = select.query_as::<Sql, _>().fetch_all(&self.pool).await?;
            rows.into_iter().map(|(start, n)| Ok(HistogramBucket { start: time(start)?, count: count(n) })).collect()
        }

        async fn log_stats(&self) -> DbResult<LogStats> {
            let mut counts = Statement::new(format!(
                "select (select {TOTAL} from log_totals), (select count(*) from log_attackers where attacker_ip <> "
            ));
            counts.bind(UNKNOWN_IP.to_string()).push(")");
            let (total_logs, unique_attackers) = self.read_counts(counts).await?;
            Ok(LogStats { total_logs: count(total_logs), unique_attackers: count(unique_attackers) })
        }

        async fn bounties(&self, filter: &BountyFilter, limit: u32, offset_rows: u64) -> DbResult<Page<BountyRecord>> {
            let narrowed = filter.bounty_type.is_some() || filter.attacker_ip.is_some();
            let hint = if narrowed { "" } else { Backend::BOUNTIES_BY_TIME };
            let mut select = QueryBuilder::<Sql>::new(format!(
                "select id, timestamp, decky, service, attacker_ip, bounty_type, payload from bounty{hint}"
            ));
            push_bounty_filter(&mut select, filter);
            select.push(" order by timestamp desc, id desc limit ").push_bind(i64::from(limit));
            select.push(" offset ").push_bind(bigint(offset_rows));
            let rows: Vec<BountyRow> = select.build_query_as().fetch_all(&self.pool).await?;

            let mut count_query = QueryBuilder::<Sql>::new("select count(*) from bounty");
            push_bounty_filter(&mut count_query, filter);
            let (total,): (i64,) = count_query.build_query_as().fetch_one(&self.pool).await?;
            Ok(Page { total: count(total), rows: convert(rows)? })
        }

        async fn credentials(
            &self,
            filter: &CredentialFilter,
            limit: u32,
            offset_rows: u64,
        ) -> DbResult<Page<CredentialRecord>> {
            let narrowed = filter.service.is_some() || filter.attacker_ip.is_some();
            let hint = if narrowed { "" } else { Backend::CREDENTIALS_BY_LAST_SEEN };
            let mut select = QueryBuilder::<Sql>::new(format!(
                "select id, attacker_ip, decky, service, secret_kind, secret_sha256, principal, secret_printable, \
                 secret_b64, outcome, attempt_count, first_seen, last_seen from credentials{hint}"
            ));
            push_credential_filter(&mut select, filter);
            select.push(" order by last_seen desc, id desc limit ").push_bind(i64::from(limit));
            select.push(" offset ").push_bind(bigint(offset_rows));
            let rows: Vec<CredentialRow> = select.build_query_as().fetch_all(&self.pool).await?;

            let mut count_query = QueryBuilder::<Sql>::new("select count(*) from credentials");
            push_credential_filter(&mut count_query, filter);
            let (total,): (i64,) = count_query.build_query_as().fetch_one(&self.pool).await?;
            Ok(Page { total: count(total), rows: convert(rows)? })
        }

        async fn credential_reuse(
            &self,
            min_targets: u32,
            secret_kind: Option<&str>,
            limit: u32,
            offset_rows: u64,
        ) -> DbResult<Page<CredentialReuse>> {
            let grouped = |query: &mut QueryBuilder<'_, Sql>| push_reuse_groups(query, secret_kind.map(Secret::Kind), min_targets);
            let mut select = QueryBuilder::<Sql>::new("");
            grouped(&mut select);
            select.push(" order by target_count desc, last_seen desc, secret_sha256, principal_key limit ");
            select.push_bind(i64::from(limit)).push(" offset ").push_bind(bigint(offset_rows));
            let groups: Vec<ReuseRow> = select.build_query_as().fetch_all(&self.pool).await?;

            let mut count_query = QueryBuilder::<Sql>::new("select count(*) from (");
            grouped(&mut count_query);
            count_query.push(") as findings");
            let (total,): (i64,) = count_query.build_query_as().fetch_one(&self.pool).await?;

            let mut findings = Vec::with_capacity(groups.len());
            for group in groups {
                findings.push(reuse_finding(&self.pool, group).await?);
            }
            Ok(Page { total: count(total), rows: findings })
        }

        async fn credential_reuse_finding(&self, id: &str) -> DbResult<CredentialReuse> {
            let secrets: Vec<(String, String, String)> =
                sqlx::query_as("select distinct secret_sha256, secret_kind, principal_key from credentials")
                    .fetch_all(&self.pool)
                    .await?;
            let (sha256, kind, principal_key) = secrets
                .into_iter()
                .find(|(sha256, kind, principal_key)| reuse_id(sha256, kind, principal_key) == id)
                .ok_or(DbError::NotFound)?;
            let mut select = QueryBuilder::<Sql>::new("");
            push_reuse_groups(&mut select, Some(Secret::Exact(&sha256, &kind, &principal_key)), MIN_REUSE_TARGETS);
            let group: ReuseRow = select.build_query_as().fetch_optional(&self.pool).await?.ok_or(DbError::NotFound)?;
            reuse_finding(&self.pool, group).await
        }
    }

    /// The statement that groups credentials into reuse findings of `min_targets` targets or more,
    /// of the secrets `only` names (all when `None`). One row per target first, so the outer count
    /// is of distinct (decky, service) pairs without a concatenation the dialects spell differently.
    fn push_reuse_groups(query: &mut QueryBuilder<'_, Sql>, only: Option<Secret<'_>>, min_targets: u32) {
        query.push(format!(
            "select secret_sha256, secret_kind, principal_key, max(principal) as principal, \
             max(secret_printable) as secret_printable, max(secret_b64) as secret_b64, \
             count(*) as target_count, {ATTEMPTS} as attempt_count, min(first_seen) as first_seen, \
             max(last_seen) as last_seen from (select secret_sha256, secret_kind, principal_key, \
             max(principal) as principal, max(secret_printable) as secret_printable, \
             max(secret_b64) as secret_b64, sum(attempt_count) as attempts, \
             min(first_seen) as first_seen, max(last_seen) as last_seen from credentials"
        ));
        match only {
            Some(Secret::Kind(kind)) => {
                query.push(" where secret_kind = ").push_bind(Backend::indexed(kind).to_string());
            }
            Some(Secret::Exact(sha256, kind, principal_key)) => {
                query.push(" where secret_sha256 = ").push_bind(sha256.to_string());
                query.push(" and secret_kind = ").push_bind(kind.to_string());
                query.push(" and principal_key = ").push_bind(principal_key.to_string());
            }
            None => {}
        }
        query.push(
            " group by secret_sha256, secret_kind, principal_key, decky, service) as targets \
             group by secret_sha256, secret_kind, principal_key having count(*) >= ",
        );
        query.push_bind(i64::from(min_targets));
    }

    /// The finding of `group`, with the (address, decky, service) of each of its credential rows.
    async fn reuse_finding(pool: &sqlx::Pool<Sql>, group: ReuseRow) -> DbResult<CredentialReuse> {
        let targets: Vec<(String, String, String)> = sqlx::query_as(
            "select attacker_ip, decky, service from credentials \
             where secret_sha256 = ? and secret_kind = ? and principal_key = ?",
        )
        .bind(&group.secret_sha256)
        .bind(&group.secret_kind)
        .bind(&group.principal_key)
        .fetch_all(pool)
        .await?;
        group.into_finding(targets)
    }

    /// ` and` the row is not a recipient event (whose `value` is a recipient).
    fn push_not_recipient_event(query: &mut Statement) {
        query.push(" and event_type not in (");
        for (n, event) in RECIPIENT_EVENTS.iter().enumerate() {
            query.push(if n == 0 { "" } else { ", " }).bind(event.to_string());
        }
        query.push(")");
    }

    /// ` and` the row carries no admin-only field: neither a recipient event nor a field of those
    /// names (the key, quoted, in the stored JSON object).
    fn push_no_admin_only(query: &mut Statement) {
        push_not_recipient_event(query);
        for key in ADMIN_ONLY_FIELDS {
            query.push(" and fields not like ").bind(format!("%\"{key}\"%"));
        }
    }

    /// Appends the `where` clause of `filter` (and of `id > after_id`), if it has any condition.
    fn push_log_filter(query: &mut Statement, filter: &LogFilter, after_id: Option<i64>) {
        let mut joiner = " where ";
        let mut next = |query: &mut Statement| {
            query.push(joiner);
            joiner = " and ";
        };
        if let Some(after_id) = after_id {
            next(query);
            query.push("id > ").bind(after_id);
        }
        for term in &filter.terms {
            next(query);
            match term {
                SearchTerm::Column(column, value) => {
                    query.push(column.name()).push(" = ").bind(value.clone());
                }
                SearchTerm::Field(key, value) => {
                    // The key is reduced to [A-Za-z0-9_] here too, whoever built the term: nothing else
                    // may reach the quoted JSON path.
                    query.push(&Backend::json_text("fields", &field_key(key))).push(" = ").bind(value.clone());
                    if filter.text_outside_admin_only && field_key(key) == "value" {
                        push_not_recipient_event(query);
                    }
                }
                SearchTerm::Text(text) => {
                    let pattern = contains_pattern(text);
                    query.push("((raw_line like ").bind(pattern.clone()).push(Backend::LIKE_ESCAPE);
                    if filter.text_outside_admin_only {
                        push_no_admin_only(query);
                    }
                    query.push(")");
                    for column in ["decky", "service", "attacker_ip"] {
                        query.push(" or ").push(column).push(" like ").bind(pattern.clone()).push(Backend::LIKE_ESCAPE);
                    }
                    query.push(")");
                }
            }
        }
        if let Some(since) = filter.since {
            next(query);
            query.push("timestamp >= ").bind(millis(since));
        }
        if let Some(until) = filter.until {
            next(query);
            query.push("timestamp <= ").bind(millis(until));
        }
    }

    fn push_credential_filter(query: &mut QueryBuilder<'_, Sql>, filter: &CredentialFilter) {
        let mut joiner = " where ";
        if let Some(service) = &filter.service {
            query.push(joiner).push("service = ").push_bind(Backend::indexed(service).to_string());
            joiner = " and ";
        }
        if let Some(attacker_ip) = &filter.attacker_ip {
            query.push(joiner).push("attacker_ip = ").push_bind(Backend::indexed(attacker_ip).to_string());
            joiner = " and ";
        }
        if let Some(search) = &filter.search {
            let pattern = contains_pattern(search);
            query.push(joiner).push("(principal like ").push_bind(pattern.clone());
            for column in ["secret_printable", "attacker_ip", "decky", "service"] {
                query.push(Backend::LIKE_ESCAPE).push(" or ").push(column).push(" like ").push_bind(pattern.clone());
            }
            query.push(Backend::LIKE_ESCAPE).push(")");
        }
    }

    fn push_bounty_filter(query: &mut QueryBuilder<'_, Sql>, filter: &BountyFilter) {
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
                query.push(Backend::LIKE_ESCAPE).push(" or ").push(column).push(" like ").push_bind(pattern.clone());
            }
            query.push(Backend::LIKE_ESCAPE).push(")");
        }
    }
}
