//! The mutation queue's statements, the same on both backends: enqueue under an edit's guard,
//! list, claim, finish. A claim locks the topology's row (`for update` on MySQL; sqlite's writer
//! holds the whole database) before it looks for a mutation already applying, so claimers of one
//! topology go one after another.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::rows::stored;
use super::sql::live_list;
use super::{ABANDONED_MUTATION, Claim, EditGuard, Mutation, MutationState};
use crate::db::codec::{convert, found, json_text, millis, parse_uuid, settle, time};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};

/// How often ending a mutation is tried when it keeps losing a deadlock.
const FINISH_ATTEMPTS: u32 = 5;

/// Whether the statement was rolled back as a deadlock victim (SQLSTATE 40001).
fn is_deadlock(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.code().as_deref() == Some("40001"))
}

const MUTATION_COLUMNS: &str = "id, topology_id, op, payload, state, requested_at, applied_at, reason";

#[derive(sqlx::FromRow)]
struct MutationRow {
    id: String,
    topology_id: String,
    op: String,
    payload: String,
    state: String,
    requested_at: i64,
    applied_at: Option<i64>,
    reason: Option<String>,
}

impl TryFrom<MutationRow> for Mutation {
    type Error = DbError;

    fn try_from(row: MutationRow) -> Result<Self, DbError> {
        Ok(Mutation {
            id: parse_uuid(&row.id)?,
            topology_id: parse_uuid(&row.topology_id)?,
            op: row.op,
            payload: stored(&row.payload, "mutation payload")?,
            state: row.state.parse().map_err(DbError::Corrupt)?,
            requested_at: time(row.requested_at)?,
            applied_at: row.applied_at.map(time).transpose()?,
            reason: row.reason,
        })
    }
}

both_backends! {
    impl Backend {
        pub(super) async fn queue_mutation(
            &self,
            id: Uuid,
            guard: EditGuard<'_>,
            op: &str,
            payload: &serde_json::Value,
            at: DateTime<Utc>,
        ) -> DbResult<Mutation> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<_> = async {
            Self::take_guard(&mut tx, id, &guard).await?;
            let topology = Self::read_topology(&mut *tx, id).await?;
            let mutation = Mutation {
                id: Uuid::new_v4(),
                topology_id: id,
                op: op.to_string(),
                payload: payload.clone(),
                state: MutationState::Pending,
                requested_at: at,
                applied_at: None,
                reason: None,
            };
            sqlx::query(
                "insert into topology_mutations (id, topology_id, seq, op, payload, state, requested_at) \
                 values (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(mutation.id.to_string())
            .bind(id.to_string())
            .bind(topology.version)
            .bind(op)
            .bind(json_text(payload))
            .bind(MutationState::Pending.as_str())
            .bind(millis(at))
            .execute(&mut *tx)
            .await?;
            Ok(mutation)
            }
            .await;
            settle(tx, result).await
        }

        pub(super) async fn list_mutations(&self, id: Uuid, state: Option<MutationState>) -> DbResult<Vec<Mutation>> {
            Self::read_topology(&self.pool, id).await?;
            let filter = if state.is_some() { "and state = ?" } else { "and ? is null" };
            let rows: Vec<MutationRow> = sqlx::query_as(&format!(
                "select {MUTATION_COLUMNS} from topology_mutations where topology_id = ? {filter} \
                 order by requested_at desc, seq desc"
            ))
            .bind(id.to_string())
            .bind(state.map(MutationState::as_str))
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        pub(super) async fn claim_next_mutation(&self, holder: &str, now: DateTime<Utc>, stale_before: DateTime<Utc>) -> DbResult<Claim> {
            let applying = MutationState::Applying.as_str();
            // A dead mutator's claims first, each failed by exactly one claimer.
            let stale: Vec<MutationRow> = sqlx::query_as(&format!(
                "select {MUTATION_COLUMNS} from topology_mutations where state = ? and claimed_at < ?"
            ))
            .bind(applying)
            .bind(millis(stale_before))
            .fetch_all(&self.pool)
            .await?;
            let mut abandoned = Vec::new();
            for row in stale {
                let done = sqlx::query(
                    "update topology_mutations set state = ?, reason = ?, applied_at = ? \
                     where id = ? and state = ? and claimed_at < ?",
                )
                .bind(MutationState::Failed.as_str())
                .bind(ABANDONED_MUTATION)
                .bind(millis(now))
                .bind(&row.id)
                .bind(applying)
                .bind(millis(stale_before))
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 1 {
                    let mut mutation = Mutation::try_from(row)?;
                    mutation.state = MutationState::Failed;
                    mutation.reason = Some(ABANDONED_MUTATION.to_string());
                    mutation.applied_at = Some(now);
                    abandoned.push(mutation);
                }
            }

            let mut tx = self.begin_write().await?;
            let result: DbResult<_> = async {
            let next: Option<(String, String)> = sqlx::query_as(&format!(
                "select m.id, m.topology_id from topology_mutations m join topologies t on t.id = m.topology_id \
                 where m.state = ? and t.status in {} and not exists \
                 (select 1 from topology_mutations a where a.topology_id = m.topology_id and a.state = ?) \
                 order by m.requested_at, m.seq limit 1",
                live_list()
            ))
            .bind(MutationState::Pending.as_str())
            .bind(applying)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((mutation_id, topology_id)) = next else {
                return Ok(None);
            };
            // Claimers of one topology queue here; the checks below read what the one before committed.
            let live: Option<(String,)> = sqlx::query_as(&format!(
                "select id from topologies where id = ? and status in {}{}",
                live_list(),
                Backend::FOR_UPDATE
            ))
            .bind(&topology_id)
            .fetch_optional(&mut *tx)
            .await?;
            let (busy,): (i64,) = sqlx::query_as(&format!(
                "select count(*) from topology_mutations where topology_id = ? and state = ?{}",
                Backend::FOR_UPDATE
            ))
            .bind(&topology_id)
            .bind(applying)
            .fetch_one(&mut *tx)
            .await?;
            if live.is_none() || busy > 0 {
                return Ok(None);
            }
            let claimed = sqlx::query(
                "update topology_mutations set state = ?, claimed_at = ?, claimed_by = ? where id = ? and state = ?",
            )
            .bind(applying)
            .bind(millis(now))
            .bind(holder)
            .bind(&mutation_id)
            .bind(MutationState::Pending.as_str())
            .execute(&mut *tx)
            .await?;
            if claimed.rows_affected() == 0 {
                return Ok(None);
            }
            let row: MutationRow =
                sqlx::query_as(&format!("select {MUTATION_COLUMNS} from topology_mutations where id = ?"))
                    .bind(&mutation_id)
                    .fetch_one(&mut *tx)
                    .await?;
            Ok(Some(Mutation::try_from(row)?))
            }
            .await;
            let mutation = settle(tx, result).await?;
            Ok(Claim { mutation, abandoned })
        }

        pub(super) async fn end_mutation(
            &self,
            id: Uuid,
            state: MutationState,
            reason: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<()> {
            let mut attempt = 1;
            loop {
                let done = sqlx::query(
                    "update topology_mutations set state = ?, reason = ?, applied_at = ? where id = ? and state = ?",
                )
                .bind(state.as_str())
                .bind(reason.map(|r| crate::text::prefix_chars(r, 2000)))
                .bind(millis(at))
                .bind(id.to_string())
                .bind(MutationState::Applying.as_str())
                .execute(&self.pool)
                .await;
                match done {
                    Ok(done) => return found(done.rows_affected()),
                    // MySQL may pick this lone update as a deadlock victim of concurrent claims
                    // (their range locks); it is rolled back whole, so doing it again is safe, and
                    // giving up would leave the mutation `applying` until its claim times out.
                    Err(err) if attempt < FINISH_ATTEMPTS && is_deadlock(&err) => attempt += 1,
                    Err(err) => return Err(err.into()),
                }
            }
        }

        pub(super) async fn any_pending_mutation(&self) -> DbResult<bool> {
            let (pending,): (i64,) = sqlx::query_as(&format!(
                "select count(*) from topology_mutations m join topologies t on t.id = m.topology_id \
                 where m.state = ? and t.status in {}",
                live_list()
            ))
            .bind(MutationState::Pending.as_str())
            .fetch_one(&self.pool)
            .await?;
            Ok(pending > 0)
        }
    }
}
