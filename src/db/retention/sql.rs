//! The prune transaction, written once for both backends: the oldest rows, deleted, and taken out
//! of the counters under the empty source (which no ingester uses; a total is the sum over
//! sources), with the minutes and attackers no row is left for removed.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{RETENTION_LEASE_SOURCE, RetentionStore};
use crate::db::DbResult;
use crate::db::codec::{MAX_IN_LIST, millis, settle, time};
use crate::db::dialect::both_backends;
use crate::db::ingest::sql::per_minute;
use crate::db::{CountedColumns, LogColumn};

/// What the counters know of a log row.
#[derive(sqlx::FromRow)]
struct PrunedRow {
    id: i64,
    timestamp: i64,
    decky: String,
    service: String,
    event_type: String,
    attacker_ip: String,
}

impl CountedColumns for PrunedRow {
    fn counted_columns(&self) -> [&str; 4] {
        [&self.decky, &self.service, &self.event_type, &self.attacker_ip]
    }
}

/// The source the pruner takes rows away under.
const PRUNED_SOURCE: &str = "";

both_backends! {
    type Connection = <Sql as sqlx::Database>::Connection;

    #[async_trait]
    impl RetentionStore for Backend {
        async fn prune_oldest_logs(
            &self,
            holder: &str,
            older_than: Option<DateTime<Utc>>,
            limit: u32,
        ) -> DbResult<u64> {
            let mut tx = self.begin_write().await?;
            let result = async {
                Backend::check_lease(&mut tx, RETENTION_LEASE_SOURCE, holder, Utc::now()).await?;
                let mut select = QueryBuilder::<Sql>::new(
                    "select id, timestamp, decky, service, event_type, attacker_ip from logs",
                );
                if let Some(cutoff) = older_than {
                    select.push(" where timestamp < ").push_bind(millis(cutoff));
                }
                select.push(" order by timestamp, id limit ").push_bind(i64::from(limit).min(MAX_IN_LIST as i64));
                let rows: Vec<PrunedRow> = select.build_query_as().fetch_all(&mut *tx).await?;
                if rows.is_empty() {
                    return Ok(0);
                }
                let mut delete = QueryBuilder::<Sql>::new("delete from logs where id in (");
                let mut ids = delete.separated(", ");
                for row in &rows {
                    ids.push_bind(row.id);
                }
                delete.push(")");
                let deleted = delete.build().execute(&mut *tx).await?.rows_affected();
                uncount(&mut tx, &rows).await?;
                Ok(deleted)
            }
            .await;
            let pruned = settle(tx, result).await?;
            if pruned > 0 {
                // Pages read before the prune must not be served again.
                crate::db::logs::logs_committed();
            }
            Ok(pruned)
        }
    }

    /// Takes `rows` out of the counters, then drops the minutes whose count is down to nothing
    /// (the histogram would show them as empty buckets) and the attackers no row is left for.
    async fn uncount(tx: &mut Connection, rows: &[PrunedRow]) -> DbResult<()> {
        let times = rows.iter().map(|row| time(row.timestamp)).collect::<DbResult<Vec<_>>>()?;
        let minutes: Vec<(i64, i64)> =
            per_minute(times.into_iter()).into_iter().map(|(minute, n)| (minute, -n)).collect();
        let values: Vec<(&'static str, &str, i64)> = Backend::per_column_value(rows)
            .into_iter()
            .map(|(column, value, n)| (column, value, -n))
            .collect();
        Backend::count_logs(&mut *tx, PRUNED_SOURCE, -(rows.len() as i64), &minutes, &values).await?;

        // Every source has a total row: the sources and the minutes name the minutes' rows by their
        // key, which MySQL looks up instead of scanning the table. (A source is bytes on MySQL:
        // read as text, it compares the same.)
        let sources: Vec<(String,)> = sqlx::query_as("select cast(source as char) from log_totals").fetch_all(&mut *tx).await?;
        let minute_rows = |start: &str, minutes: &mut dyn Iterator<Item = i64>| {
            let mut query = QueryBuilder::<Sql>::new(start);
            let mut list = query.separated(", ");
            for (source,) in &sources {
                list.push_bind(source.clone());
            }
            query.push(") and minute in (");
            let mut list = query.separated(", ");
            for minute in minutes {
                list.push_bind(minute);
            }
            query.push(")");
            query
        };
        let mut emptied =
            minute_rows("select minute from log_minutes where source in (", &mut minutes.iter().map(|(m, _)| *m));
        emptied.push(" group by minute having sum(total) <= 0");
        let empty: Vec<(i64,)> = emptied.build_query_as().fetch_all(&mut *tx).await?;
        if !empty.is_empty() {
            let mut delete = minute_rows("delete from log_minutes where source in (", &mut empty.iter().map(|(m,)| *m));
            delete.build().execute(&mut *tx).await?;
        }

        let mut gone = QueryBuilder::<Sql>::new("delete from log_attackers where attacker_ip in (");
        let mut list = gone.separated(", ");
        for (column, value, _) in &values {
            if *column == LogColumn::AttackerIp.name() {
                list.push_bind(*value);
            }
        }
        gone.push(") and not exists (select 1 from logs where logs.attacker_ip = log_attackers.attacker_ip)");
        gone.build().execute(&mut *tx).await?;
        Ok(())
    }
}
