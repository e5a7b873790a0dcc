//! The ingest statements, written once for both backends: the lease, the cursor, and the one
//! transaction that stores a batch and moves the cursor.

use std::collections::{BTreeSet, HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{Committed, IngestBatch, IngestCursor, IngestStore, NewBounty, NewCredential, NewLog};
use crate::db::codec::{MAX_IN_LIST, MAX_ROWS_PER_INSERT, dedup_key, millis, row_sets, settle};
use crate::db::dialect::both_backends;
use crate::db::{CountedColumns, DbError, DbResult, LogColumn};

#[derive(sqlx::FromRow)]
struct CursorRow {
    file_id: String,
    byte_offset: i64,
    fingerprint: String,
}

impl TryFrom<CursorRow> for IngestCursor {
    type Error = DbError;

    fn try_from(row: CursorRow) -> Result<Self, DbError> {
        let offset = u64::try_from(row.byte_offset)
            .map_err(|_| DbError::Other(anyhow::anyhow!("negative ingest offset {}", row.byte_offset)))?;
        Ok(IngestCursor { file_id: row.file_id, offset, fingerprint: row.fingerprint })
    }
}

/// A cursor offset as the BIGINT column holds it.
fn stored_offset(cursor: &IngestCursor) -> DbResult<i64> {
    i64::try_from(cursor.offset)
        .map_err(|_| DbError::Other(anyhow::anyhow!("ingest offset {} too large", cursor.offset)))
}

/// When a lease taken at `now` for `ttl` runs out.
fn lease_end(now: DateTime<Utc>, ttl: std::time::Duration) -> DbResult<DateTime<Utc>> {
    chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|ttl| now.checked_add_signed(ttl))
        .ok_or_else(|| DbError::Other(anyhow::anyhow!("lease time to live {ttl:?} out of range")))
}

/// What makes a bounty the same bounty: its type, its attacker and its payload.
fn bounty_key(bounty: &NewBounty) -> String {
    dedup_key(&[&bounty.bounty_type, &bounty.attacker_ip, &bounty.payload])
}

/// The principal as the unique key sees it: none is the empty principal.
fn principal_key(credential: &NewCredential) -> &str {
    credential.principal.as_deref().unwrap_or("")
}

/// What makes a credential the same credential: who tried which secret, for whom, where.
fn credential_key(credential: &NewCredential) -> String {
    dedup_key(&[
        &credential.attacker_ip,
        &credential.decky,
        &credential.service,
        &credential.secret_kind,
        &credential.secret_sha256,
        principal_key(credential),
    ])
}

/// Bytes a log row sends to the server, roughly: its text plus a little per column.
fn log_size(log: &NewLog) -> usize {
    const PER_COLUMN: usize = 16;
    log.decky.len()
        + log.service.len()
        + log.event_type.len()
        + log.attacker_ip.len()
        + log.raw_line.len()
        + log.fields.len()
        + log.msg.as_ref().map_or(0, String::len)
        + log.trace.as_ref().map_or(0, |t| t.trace_id.len() + t.span_id.len())
        + 10 * PER_COLUMN
}

fn bounty_size(bounty: &NewBounty) -> usize {
    bounty.decky.len()
        + bounty.service.len()
        + bounty.attacker_ip.len()
        + bounty.bounty_type.len()
        + bounty.payload.len()
        + 64
        + 7 * 16
}

fn credential_size(credential: &NewCredential) -> usize {
    credential.attacker_ip.len()
        + credential.decky.len()
        + credential.service.len()
        + credential.secret_kind.len()
        + credential.secret_sha256.len()
        + 2 * credential.principal.as_ref().map_or(0, String::len)
        + credential.secret_printable.len()
        + credential.secret_b64.len()
        + credential.outcome.as_ref().map_or(0, String::len)
        + 64
        + 13 * 16
}

/// Rows counted per minute (epoch milliseconds of the minute's start), oldest first.
pub(in crate::db) fn per_minute(times: impl Iterator<Item = DateTime<Utc>>) -> Vec<(i64, i64)> {
    let mut minutes = std::collections::BTreeMap::new();
    for timestamp in times {
        let at = millis(timestamp);
        *minutes.entry(at - at.rem_euclid(60_000)).or_insert(0) += 1;
    }
    minutes.into_iter().collect()
}

impl CountedColumns for NewLog {
    fn counted_columns(&self) -> [&str; 4] {
        [&self.decky, &self.service, &self.event_type, &self.attacker_ip]
    }
}

both_backends! {
    type Connection = <Sql as sqlx::Database>::Connection;

    #[async_trait]
    impl IngestStore for Backend {
        async fn acquire_worker_lease(
            &self,
            source: &str,
            holder: &str,
            now: DateTime<Utc>,
            ttl: std::time::Duration,
        ) -> DbResult<bool> {
            let expires_at = millis(lease_end(now, ttl)?);
            // Two statements, each atomic: renew or take over an expired lease; else create it. Of two
            // racing acquirers, the row lock lets one update and the other re-read the row as taken,
            // and the primary key lets one insert and the other fail. MySQL reports matched rows
            // (sqlx sets CLIENT_FOUND_ROWS), so a renewal to the same instant still counts.
            let taken = sqlx::query(
                "update ingest_leases set holder = ?, expires_at = ? \
                 where source = ? and (holder = ? or expires_at <= ?)",
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

        async fn release_worker_lease(&self, source: &str, holder: &str) -> DbResult<()> {
            sqlx::query("delete from ingest_leases where source = ? and holder = ?")
                .bind(source)
                .bind(holder)
                .execute(&self.pool)
                .await?;
            Ok(())
        }

        async fn ingest_cursor(&self, source: &str) -> DbResult<Option<IngestCursor>> {
            let row: Option<CursorRow> =
                sqlx::query_as("select file_id, byte_offset, fingerprint from ingest_cursors where source = ?")
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
            let mut tx = self.begin_write().await?;
            let result: DbResult<Committed> = async {
                check_lease_and_cursor(&mut tx, source, holder, expected, now).await?;
                insert_logs(&mut tx, source, &batch.logs, batch.host_uuid).await?;
                let new_bounties = insert_bounties(&mut tx, &batch.bounties).await?;
                let captured = first_captures(&mut tx, &batch.credentials).await?;
                let new_credentials = upsert_credentials(&mut tx, &batch.credentials).await?;
                if let Some(cursor) = &batch.cursor {
                    let upsert = format!(
                        "insert into ingest_cursors (source, file_id, byte_offset, fingerprint, updated_at) values (?, ?, ?, ?, ?){}",
                        Backend::replace("source", &["file_id", "byte_offset", "fingerprint", "updated_at"])
                    );
                    sqlx::query(&upsert)
                        .bind(source)
                        .bind(&cursor.file_id)
                        .bind(stored_offset(cursor)?)
                        .bind(&cursor.fingerprint)
                        .bind(millis(now))
                        .execute(&mut *tx)
                        .await?;
                }
                let (last_log_id,): (i64,) =
                    sqlx::query_as("select coalesce(max(id), 0) from logs").fetch_one(&mut *tx).await?;
                Ok(Committed { logs: batch.logs.len() as u64, last_log_id, new_bounties, new_credentials, captured })
            }
            .await;
            let committed = settle(tx, result).await?;
            crate::db::logs::logs_committed();
            Ok(committed)
        }
    }

    impl Backend {
        /// `Conflict` unless `holder` holds a live lease on `source`. On MySQL the lease row stays
        /// locked to the end of the transaction, so it cannot move under it.
        pub(in crate::db) async fn check_lease(
            tx: &mut Connection,
            source: &str,
            holder: &str,
            now: DateTime<Utc>,
        ) -> DbResult<()> {
            let lease: Option<(i64,)> = sqlx::query_as(&format!(
                "select expires_at from ingest_leases where source = ? and holder = ?{}",
                Backend::FOR_UPDATE
            ))
            .bind(source)
            .bind(holder)
            .fetch_optional(&mut *tx)
            .await?;
            if !matches!(lease, Some((expires_at,)) if expires_at > millis(now)) {
                return Err(DbError::Conflict);
            }
            Ok(())
        }
    }

    /// `Conflict` unless `holder` holds a live lease on `source` and the cursor is still `expected`.
    async fn check_lease_and_cursor(
        tx: &mut Connection,
        source: &str,
        holder: &str,
        expected: Option<&IngestCursor>,
        now: DateTime<Utc>,
    ) -> DbResult<()> {
        Backend::check_lease(tx, source, holder, now).await?;
        let stored: Option<CursorRow> = sqlx::query_as(&format!(
            "select file_id, byte_offset, fingerprint from ingest_cursors where source = ?{}",
            Backend::FOR_UPDATE
        ))
        .bind(source)
        .fetch_optional(&mut *tx)
        .await?;
        if stored.map(IngestCursor::try_from).transpose()?.as_ref() != expected {
            return Err(DbError::Conflict);
        }
        Ok(())
    }

    impl Backend {
        /// Adds `total` rows (negative: takes them away) to the counters the log views read, under
        /// `source`: the total, the rows per minute, the rows per column value (as
        /// [`per_column_value`](Self::per_column_value) counts them, in its key order).
        pub(in crate::db) async fn count_logs(
            tx: &mut Connection,
            source: &str,
            total: i64,
            minutes: &[(i64, i64)],
            values: &[(&'static str, &str, i64)],
        ) -> DbResult<()> {
            let add_to_total = format!("total = total + {}", Backend::incoming("total"));
            sqlx::query(&format!(
                "insert into log_totals (source, total) values (?, ?){}{add_to_total}",
                Backend::on_conflict_update("source")
            ))
            .bind(source)
            .bind(total)
            .execute(&mut *tx)
            .await?;

            for rows in row_sets(minutes, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, |_| 64) {
                let mut upsert = QueryBuilder::<Sql>::new("insert into log_minutes (source, minute, total) ");
                upsert.push_values(rows, |mut row, (minute, total)| {
                    row.push_bind(source).push_bind(*minute).push_bind(*total);
                });
                upsert.push(Backend::on_conflict_update("source, minute")).push(&add_to_total);
                upsert.build().execute(&mut *tx).await?;
            }

            for rows in row_sets(values, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, |(_, value, _)| {
                value.len() + source.len() + 64
            }) {
                let mut upsert = QueryBuilder::<Sql>::new(
                    "insert into log_column_totals (column_name, column_value, source, total) ",
                );
                upsert.push_values(rows, |mut row, (column, value, total)| {
                    row.push_bind(*column).push_bind(*value).push_bind(source).push_bind(*total);
                });
                upsert.push(Backend::on_conflict_update("column_name, column_value, source")).push(&add_to_total);
                upsert.build().execute(&mut *tx).await?;
            }
            Ok(())
        }

        /// Rows counted per column and value as stored, in the counters' key order (the column's
        /// name, then the value as the column compares it), so two transactions lock rows and the
        /// gaps between them in the same order. Values the column holds as one (on MySQL: letter
        /// case) stay apart here; the upsert adds them into one row.
        pub(in crate::db) fn per_column_value<R: CountedColumns>(rows: &[R]) -> Vec<(&'static str, &str, i64)> {
            let mut counts: HashMap<(&'static str, &str), i64> = HashMap::new();
            for row in rows {
                for (column, value) in LogColumn::ALL.into_iter().zip(row.counted_columns()) {
                    *counts.entry((column.name(), Backend::indexed(value))).or_insert(0) += 1;
                }
            }
            let mut values: Vec<(&'static str, &str, i64)> =
                counts.into_iter().map(|((column, value), total)| (column, value, total)).collect();
            values.sort_by_cached_key(|(column, value, _)| (*column, Backend::compared(value), *value));
            values
        }
    }

    /// The rows, and what the counters learn from them: the total, the minutes, the attackers.
    async fn insert_logs(tx: &mut Connection, source: &str, logs: &[NewLog], host: Option<uuid::Uuid>) -> DbResult<()> {
        if logs.is_empty() {
            return Ok(());
        }
        for rows in row_sets(logs, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, log_size) {
            let mut insert = QueryBuilder::<Sql>::new(format!(
                "{} into logs (timestamp, decky, service, event_type, attacker_ip, raw_line, fields, msg, host_uuid, trace_id, span_id) ",
                Backend::INSERT_ROWS
            ));
            insert.push_values(rows, |mut row, log| {
                row.push_bind(millis(log.timestamp))
                    .push_bind(Backend::indexed(&log.decky))
                    .push_bind(Backend::indexed(&log.service))
                    .push_bind(Backend::indexed(&log.event_type))
                    .push_bind(Backend::indexed(&log.attacker_ip))
                    .push_bind(log.raw_line.as_str())
                    .push_bind(log.fields.as_str())
                    .push_bind(log.msg.as_deref())
                    .push_bind(host.map(|uuid| uuid.to_string()))
                    .push_bind(log.trace.as_ref().map(|t| t.trace_id.as_str()))
                    .push_bind(log.trace.as_ref().map(|t| t.span_id.as_str()));
            });
            insert.build().execute(&mut *tx).await?;
        }

        let values = Backend::per_column_value(logs);
        Backend::count_logs(&mut *tx, source, logs.len() as i64, &per_minute(logs.iter().map(|log| log.timestamp)), &values)
            .await?;

        // In key order, so two transactions lock shared rows in the same order.
        let attackers: Vec<&str> =
            logs.iter().map(|log| Backend::indexed(&log.attacker_ip)).collect::<BTreeSet<_>>().into_iter().collect();
        for rows in row_sets(&attackers, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, |ip| ip.len() + 16) {
            let mut insert =
                QueryBuilder::<Sql>::new(format!("{} into log_attackers (attacker_ip) ", Backend::INSERT_OR_SKIP));
            insert.push_values(rows, |mut row, ip| {
                row.push_bind(*ip);
            });
            insert.push(Backend::SKIP_HELD);
            insert.build().execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Stores the bounties not stored before; returns how many that was.
    async fn insert_bounties(tx: &mut Connection, bounties: &[NewBounty]) -> DbResult<u64> {
        let mut new = 0;
        for rows in row_sets(bounties, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, bounty_size) {
            let mut insert = QueryBuilder::<Sql>::new(format!(
                "{} into bounty (timestamp, decky, service, attacker_ip, bounty_type, payload, dedup_key) ",
                Backend::INSERT_OR_SKIP
            ));
            insert.push_values(rows, |mut row, bounty| {
                row.push_bind(millis(bounty.timestamp))
                    .push_bind(Backend::indexed(&bounty.decky))
                    .push_bind(Backend::indexed(&bounty.service))
                    .push_bind(Backend::indexed(&bounty.attacker_ip))
                    .push_bind(Backend::indexed(&bounty.bounty_type))
                    .push_bind(bounty.payload.as_str())
                    .push_bind(bounty_key(bounty));
            });
            insert.push(Backend::SKIP_HELD);
            new += insert.build().execute(&mut *tx).await?.rows_affected();
        }
        Ok(new)
    }

    /// Which credentials the upsert about to run will store for the first time: those whose key is
    /// not stored yet, each key once. Read inside the batch's transaction, before the upsert.
    async fn first_captures(tx: &mut Connection, credentials: &[NewCredential]) -> DbResult<Vec<usize>> {
        let keys: Vec<String> = credentials.iter().map(credential_key).collect();
        let mut seen: HashSet<String> = HashSet::new();
        let unique: Vec<&String> = keys.iter().collect::<BTreeSet<_>>().into_iter().collect();
        for chunk in unique.chunks(MAX_IN_LIST) {
            let mut query = QueryBuilder::<Sql>::new("select dedup_key from credentials where dedup_key in (");
            let mut list = query.separated(", ");
            for key in chunk {
                list.push_bind(key.as_str());
            }
            query.push(")");
            let stored: Vec<(String,)> = query.build_query_as().fetch_all(&mut *tx).await?;
            seen.extend(stored.into_iter().map(|(key,)| key));
        }
        Ok(keys.into_iter().enumerate().filter_map(|(i, key)| seen.insert(key).then_some(i)).collect())
    }

    /// Inserts each credential not seen before and counts an attempt on the others; returns how many
    /// were new.
    async fn upsert_credentials(tx: &mut Connection, credentials: &[NewCredential]) -> DbResult<u64> {
        let mut new = 0;
        for rows in row_sets(credentials, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, credential_size) {
            let mut upsert = QueryBuilder::<Sql>::new(
                "insert into credentials (attacker_ip, decky, service, secret_kind, secret_sha256, principal, \
                 principal_key, secret_printable, secret_b64, outcome, attempt_count, first_seen, last_seen, \
                 dedup_key) ",
            );
            upsert.push_values(rows, |mut row, credential| {
                row.push_bind(Backend::indexed(&credential.attacker_ip))
                    .push_bind(Backend::indexed(&credential.decky))
                    .push_bind(Backend::indexed(&credential.service))
                    .push_bind(Backend::indexed(&credential.secret_kind))
                    .push_bind(Backend::clip(&credential.secret_sha256, 64))
                    .push_bind(credential.principal.as_deref())
                    .push_bind(principal_key(credential))
                    .push_bind(credential.secret_printable.as_str())
                    .push_bind(credential.secret_b64.as_str())
                    .push_bind(credential.outcome.as_deref().map(Backend::indexed))
                    .push("1")
                    .push_bind(millis(credential.seen_at))
                    .push_bind(millis(credential.seen_at))
                    .push_bind(credential_key(credential));
            });
            upsert.push(Backend::on_conflict_update("dedup_key")).push(format!(
                "attempt_count = attempt_count + 1, last_seen = {}(last_seen, {}), outcome = coalesce({}, outcome)",
                Backend::GREATEST,
                Backend::incoming("last_seen"),
                Backend::incoming("outcome"),
            ));
            new += Backend::upsert_new_credentials(&mut *tx, upsert, rows.len()).await?;
        }
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keys_separate_their_parts() {
        let bounty = |t: &str, ip: &str, p: &str| NewBounty {
            timestamp: Utc::now(),
            decky: "d".into(),
            service: "s".into(),
            attacker_ip: ip.into(),
            bounty_type: t.into(),
            payload: p.into(),
        };
        assert_eq!(bounty_key(&bounty("a", "b", "c")).len(), 64);
        assert_ne!(bounty_key(&bounty("a", "bc", "")), bounty_key(&bounty("ab", "c", "")));
        // Only type, attacker and payload count.
        let mut other = bounty("a", "b", "c");
        other.decky = "elsewhere".into();
        assert_eq!(bounty_key(&bounty("a", "b", "c")), bounty_key(&other));
    }
}
