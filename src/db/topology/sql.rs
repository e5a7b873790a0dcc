//! The topologies' statements, the same on both backends: the topology, its parts and its status
//! history (the rows they read are in `rows`). The mutation queue's statements are in `queue`; this
//! module's trait implementation hands those verbs over.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::rows::{DeckyRow, EdgeRow, LanRow, StatusEventRow, TopologyRow};
use super::{
    Claim, Edge, EditGuard, Lan, Mutation, MutationState, StatusEvent, Topology, TopologyDecky, TopologyDetail,
    TopologyEdit, TopologyStatus, TopologyStore,
};
use crate::db::codec::{bigint, convert, count, found, json_text, millis, settle};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult, Page};

const TOPOLOGY_COLUMNS: &str = "id, name, mode, target_host_uuid, config_snapshot, status, status_changed_at, \
    created_at, version, needs_resync, email_personas, language_default";
const LAN_COLUMNS: &str = "id, topology_id, name, subnet, is_dmz, docker_network_id, x, y";
const DECKY_COLUMNS: &str = "uuid, topology_id, name, services, decky_config, ip, state, last_error, x, y";
const EDGE_COLUMNS: &str = "id, topology_id, decky_uuid, lan_id, ip, is_bridge, forwards_l3";

/// `('a', 'b')`: statuses are our own words, so they are written into the statement.
pub(super) fn status_list(statuses: &[TopologyStatus]) -> String {
    let words: Vec<String> = statuses.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!("({})", if words.is_empty() { "''".to_string() } else { words.join(", ") })
}

pub(super) fn live_list() -> String {
    status_list(&[TopologyStatus::Active, TopologyStatus::Degraded])
}

/// The statement that takes an edit's guard: it bumps the version only when the guard holds.
fn guarded_bump(guard: &EditGuard<'_>) -> String {
    format!("update topologies set version = version + 1 where {}", guard_condition(guard))
}

/// Which topology row an edit's guard accepts (binds: id, version, version).
fn guard_condition(guard: &EditGuard<'_>) -> String {
    format!("id = ? and status in {} and (? is null or version = ?)", status_list(guard.statuses))
}

both_backends! {
    impl Backend {
        /// After a guard matched nothing: `NotFound` when there is no such topology, else `Conflict`.
        async fn missing_or_conflict<'c>(
            tx: &mut sqlx::Transaction<'c, Sql>,
            id: Uuid,
        ) -> DbError {
            let exists: Result<Option<(String,)>, sqlx::Error> =
                sqlx::query_as("select id from topologies where id = ?").bind(id.to_string()).fetch_optional(&mut **tx).await;
            match exists {
                Ok(Some(_)) => DbError::Conflict,
                Ok(None) => DbError::NotFound,
                Err(err) => err.into(),
            }
        }

        async fn insert_decky<'c>(tx: &mut sqlx::Transaction<'c, Sql>, decky: &TopologyDecky, at: i64) -> DbResult<()> {
            sqlx::query(&format!(
                "insert into topology_deckies ({DECKY_COLUMNS}, updated_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(decky.uuid.to_string())
            .bind(decky.topology_id.to_string())
            .bind(&decky.name)
            .bind(json_text(&decky.services))
            .bind(decky.decky_config.as_ref().map(json_text))
            .bind(&decky.ip)
            .bind(&decky.state)
            .bind(&decky.last_error)
            .bind(decky.x)
            .bind(decky.y)
            .bind(at)
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        async fn insert_lan<'c>(tx: &mut sqlx::Transaction<'c, Sql>, lan: &Lan) -> DbResult<()> {
            sqlx::query(&format!("insert into topology_lans ({LAN_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?)"))
                .bind(lan.id.to_string())
                .bind(lan.topology_id.to_string())
                .bind(&lan.name)
                .bind(&lan.subnet)
                .bind(lan.is_dmz)
                .bind(&lan.docker_network_id)
                .bind(lan.x)
                .bind(lan.y)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        async fn insert_edge<'c>(tx: &mut sqlx::Transaction<'c, Sql>, edge: &Edge) -> DbResult<()> {
            sqlx::query(&format!("insert into topology_edges ({EDGE_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?)"))
                .bind(edge.id.to_string())
                .bind(edge.topology_id.to_string())
                .bind(edge.decky_uuid.to_string())
                .bind(edge.lan_id.to_string())
                .bind(&edge.ip)
                .bind(edge.is_bridge)
                .bind(edge.forwards_l3)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        async fn apply_edit<'c>(tx: &mut sqlx::Transaction<'c, Sql>, id: Uuid, edit: &TopologyEdit) -> DbResult<()> {
            let topology = id.to_string();
            let now = millis(Utc::now());
            match edit {
                TopologyEdit::AddLan(lan) => Self::insert_lan(tx, lan).await,
                TopologyEdit::UpdateLan(lan) => {
                    let done = sqlx::query(
                        "update topology_lans set name = ?, subnet = ?, is_dmz = ?, x = ?, y = ? where id = ? and topology_id = ?",
                    )
                    .bind(&lan.name)
                    .bind(&lan.subnet)
                    .bind(lan.is_dmz)
                    .bind(lan.x)
                    .bind(lan.y)
                    .bind(lan.id.to_string())
                    .bind(&topology)
                    .execute(&mut **tx)
                    .await?;
                    found(done.rows_affected())
                }
                TopologyEdit::RemoveLan(lan) => {
                    // Edges go first: MySQL checks each foreign key as rows go, whatever the order.
                    sqlx::query("delete from topology_edges where lan_id = ? and topology_id = ?")
                        .bind(lan.to_string())
                        .bind(&topology)
                        .execute(&mut **tx)
                        .await?;
                    let done = sqlx::query("delete from topology_lans where id = ? and topology_id = ?")
                        .bind(lan.to_string())
                        .bind(&topology)
                        .execute(&mut **tx)
                        .await?;
                    found(done.rows_affected())
                }
                TopologyEdit::AddDecky(decky, edges) => {
                    Self::insert_decky(tx, decky, now).await?;
                    for edge in edges {
                        Self::insert_edge(tx, edge).await?;
                    }
                    Ok(())
                }
                TopologyEdit::UpdateDecky(decky) => {
                    let done = sqlx::query(
                        "update topology_deckies set name = ?, services = ?, decky_config = ?, ip = ?, x = ?, y = ?, \
                         updated_at = ? where uuid = ? and topology_id = ?",
                    )
                    .bind(&decky.name)
                    .bind(json_text(&decky.services))
                    .bind(decky.decky_config.as_ref().map(json_text))
                    .bind(&decky.ip)
                    .bind(decky.x)
                    .bind(decky.y)
                    .bind(now)
                    .bind(decky.uuid.to_string())
                    .bind(&topology)
                    .execute(&mut **tx)
                    .await?;
                    found(done.rows_affected())
                }
                TopologyEdit::RemoveDecky(decky) => {
                    sqlx::query("delete from topology_edges where decky_uuid = ? and topology_id = ?")
                        .bind(decky.to_string())
                        .bind(&topology)
                        .execute(&mut **tx)
                        .await?;
                    let done = sqlx::query("delete from topology_deckies where uuid = ? and topology_id = ?")
                        .bind(decky.to_string())
                        .bind(&topology)
                        .execute(&mut **tx)
                        .await?;
                    found(done.rows_affected())
                }
                TopologyEdit::AddEdge(edge) => Self::insert_edge(tx, edge).await,
                TopologyEdit::UpdateEdge(edge) => {
                    let done = sqlx::query(
                        "update topology_edges set ip = ?, is_bridge = ?, forwards_l3 = ? where id = ? and topology_id = ?",
                    )
                    .bind(&edge.ip)
                    .bind(edge.is_bridge)
                    .bind(edge.forwards_l3)
                    .bind(edge.id.to_string())
                    .bind(&topology)
                    .execute(&mut **tx)
                    .await?;
                    found(done.rows_affected())
                }
                TopologyEdit::RemoveEdge(edge) => {
                    let done = sqlx::query("delete from topology_edges where id = ? and topology_id = ?")
                        .bind(edge.to_string())
                        .bind(&topology)
                        .execute(&mut **tx)
                        .await?;
                    found(done.rows_affected())
                }
            }
        }

        /// Bumps the version if the guard holds (and says to), else ends with why not. A guard
        /// that does not bump locks the row it checked instead.
        pub(super) async fn take_guard<'c>(tx: &mut sqlx::Transaction<'c, Sql>, id: Uuid, guard: &EditGuard<'_>) -> DbResult<()> {
            let held = if guard.bump {
                let done = sqlx::query(&guarded_bump(guard))
                    .bind(id.to_string())
                    .bind(guard.version)
                    .bind(guard.version)
                    .execute(&mut **tx)
                    .await?;
                done.rows_affected() > 0
            } else {
                let row: Option<(String,)> = sqlx::query_as(&format!(
                    "select id from topologies where {}{}",
                    guard_condition(guard),
                    Backend::FOR_UPDATE
                ))
                .bind(id.to_string())
                .bind(guard.version)
                .bind(guard.version)
                .fetch_optional(&mut **tx)
                .await?;
                row.is_some()
            };
            if !held {
                return Err(Self::missing_or_conflict(tx, id).await);
            }
            Ok(())
        }

        pub(super) async fn read_topology<'e, E>(executor: E, id: Uuid) -> DbResult<Topology>
        where
            E: sqlx::Executor<'e, Database = Sql>,
        {
            let row: TopologyRow = sqlx::query_as(&format!("select {TOPOLOGY_COLUMNS} from topologies where id = ?"))
                .bind(id.to_string())
                .fetch_one(executor)
                .await?;
            row.try_into()
        }
    }

    #[async_trait]
    impl TopologyStore for Backend {
        async fn create_topology(&self, detail: &TopologyDetail) -> DbResult<()> {
            let t = &detail.topology;
            let mut tx = self.begin_write().await?;
            let result: DbResult<_> = async {
            sqlx::query(&format!(
                "insert into topologies ({TOPOLOGY_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(t.id.to_string())
            .bind(&t.name)
            .bind(&t.mode)
            .bind(&t.target_host_uuid)
            .bind(json_text(&t.config_snapshot))
            .bind(t.status.as_str())
            .bind(millis(t.status_changed_at))
            .bind(millis(t.created_at))
            .bind(t.version)
            .bind(t.needs_resync)
            .bind(&t.email_personas)
            .bind(&t.language_default)
            .execute(&mut *tx)
            .await?;
            for lan in &detail.lans {
                Self::insert_lan(&mut tx, lan).await?;
            }
            for decky in &detail.deckies {
                Self::insert_decky(&mut tx, decky, millis(t.created_at)).await?;
            }
            for edge in &detail.edges {
                Self::insert_edge(&mut tx, edge).await?;
            }
            Ok(())
            }
            .await;
            settle(tx, result).await
        }

        async fn topologies(&self, status: Option<TopologyStatus>, limit: u32, skip: u64) -> DbResult<Page<Topology>> {
            let filter = if status.is_some() { "where status = ?" } else { "where ? is null" };
            let (total,): (i64,) = sqlx::query_as(&format!("select count(*) from topologies {filter}"))
                .bind(status.map(TopologyStatus::as_str))
                .fetch_one(&self.pool)
                .await?;
            let rows: Vec<TopologyRow> = sqlx::query_as(&format!(
                "select {TOPOLOGY_COLUMNS} from topologies {filter} order by created_at desc, id limit ? offset ?"
            ))
            .bind(status.map(TopologyStatus::as_str))
            .bind(i64::from(limit))
            .bind(bigint(skip))
            .fetch_all(&self.pool)
            .await?;
            Ok(Page { total: count(total), rows: convert(rows)? })
        }

        async fn set_email_personas(&self, id: Uuid, personas: &str) -> DbResult<()> {
            let done = sqlx::query("update topologies set email_personas = ? where id = ?")
                .bind(personas)
                .bind(id.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }

        async fn live_topologies_on_host(&self, host: Uuid) -> DbResult<Vec<Topology>> {
            let rows: Vec<TopologyRow> = sqlx::query_as(&format!(
                "select {TOPOLOGY_COLUMNS} from topologies where target_host_uuid = ? and status in {} order by created_at, id",
                live_list()
            ))
            .bind(host.to_string())
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn topology(&self, id: Uuid) -> DbResult<Topology> {
            Self::read_topology(&self.pool, id).await
        }

        async fn topology_detail(&self, id: Uuid) -> DbResult<TopologyDetail> {
            let mut tx = self.pool.begin().await?;
            let topology = Self::read_topology(&mut *tx, id).await?;
            let key = id.to_string();
            let lans: Vec<LanRow> =
                sqlx::query_as(&format!("select {LAN_COLUMNS} from topology_lans where topology_id = ? order by name"))
                    .bind(&key)
                    .fetch_all(&mut *tx)
                    .await?;
            let deckies: Vec<DeckyRow> = sqlx::query_as(&format!(
                "select {DECKY_COLUMNS} from topology_deckies where topology_id = ? order by name"
            ))
            .bind(&key)
            .fetch_all(&mut *tx)
            .await?;
            let edges: Vec<EdgeRow> = sqlx::query_as(&format!(
                "select {EDGE_COLUMNS} from topology_edges where topology_id = ? order by decky_uuid, id"
            ))
            .bind(&key)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(TopologyDetail { topology, lans: convert(lans)?, deckies: convert(deckies)?, edges: convert(edges)? })
        }

        async fn delete_topology(&self, id: Uuid, statuses: &[TopologyStatus]) -> DbResult<()> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<_> = async {
            let key = id.to_string();
            let done = sqlx::query(&format!("delete from topologies where id = ? and status in {}", status_list(statuses)))
                .bind(&key)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() == 0 {
                return Err(Self::missing_or_conflict(&mut tx, id).await);
            }
            Ok(())
            }
            .await;
            settle(tx, result).await
        }

        async fn set_topology_status(
            &self,
            id: Uuid,
            from: Option<&[TopologyStatus]>,
            to: TopologyStatus,
            reason: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<TopologyStatus> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<_> = async {
            let key = id.to_string();
            let (current,): (String,) =
                sqlx::query_as(&format!("select status from topologies where id = ?{}", Backend::FOR_UPDATE))
                    .bind(&key)
                    .fetch_one(&mut *tx)
                    .await?;
            let current: TopologyStatus = current.parse().map_err(DbError::Corrupt)?;
            if !current.can_move_to(to) || from.is_some_and(|from| !from.contains(&current)) {
                return Err(DbError::Conflict);
            }
            sqlx::query("update topologies set status = ?, status_changed_at = ? where id = ?")
                .bind(to.as_str())
                .bind(millis(at))
                .bind(&key)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "insert into topology_status_events (id, topology_id, from_status, to_status, at, reason) \
                 values (?, ?, ?, ?, ?, ?)",
            )
            .bind(Uuid::new_v4().to_string())
            .bind(&key)
            .bind(current.as_str())
            .bind(to.as_str())
            .bind(millis(at))
            .bind(reason)
            .execute(&mut *tx)
            .await?;
            Ok(current)
            }
            .await;
            settle(tx, result).await
        }

        async fn status_events(&self, id: Uuid, limit: u32) -> DbResult<Vec<StatusEvent>> {
            Self::read_topology(&self.pool, id).await?;
            let rows: Vec<StatusEventRow> = sqlx::query_as(
                "select id, topology_id, from_status, to_status, at, reason from topology_status_events \
                 where topology_id = ? order by at desc, id limit ?",
            )
            .bind(id.to_string())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn edit_topology(&self, id: Uuid, guard: EditGuard<'_>, edits: &[TopologyEdit]) -> DbResult<Topology> {
            let mut tx = self.begin_write().await?;
            let result: DbResult<_> = async {
            Self::take_guard(&mut tx, id, &guard).await?;
            for edit in edits {
                Self::apply_edit(&mut tx, id, edit).await?;
            }
            let topology = Self::read_topology(&mut *tx, id).await?;
            Ok(topology)
            }
            .await;
            settle(tx, result).await
        }

        async fn set_lan_network(&self, lan: Uuid, network_id: Option<&str>) -> DbResult<()> {
            let done = sqlx::query("update topology_lans set docker_network_id = ? where id = ?")
                .bind(network_id)
                .bind(lan.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }

        async fn set_topology_decky_state(
            &self,
            decky: Uuid,
            state: &str,
            error: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<()> {
            let done = sqlx::query("update topology_deckies set state = ?, last_error = ?, updated_at = ? where uuid = ?")
                .bind(state)
                .bind(error)
                .bind(millis(at))
                .bind(decky.to_string())
                .execute(&self.pool)
                .await?;
            found(done.rows_affected())
        }

        async fn enqueue_mutation(
            &self,
            id: Uuid,
            guard: EditGuard<'_>,
            op: &str,
            payload: &serde_json::Value,
            at: DateTime<Utc>,
        ) -> DbResult<Mutation> {
            self.queue_mutation(id, guard, op, payload, at).await
        }

        async fn mutations(&self, id: Uuid, state: Option<MutationState>) -> DbResult<Vec<Mutation>> {
            self.list_mutations(id, state).await
        }

        async fn claim_mutation(&self, holder: &str, now: DateTime<Utc>, stale_before: DateTime<Utc>) -> DbResult<Claim> {
            self.claim_next_mutation(holder, now, stale_before).await
        }

        async fn finish_mutation(
            &self,
            id: Uuid,
            state: MutationState,
            reason: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<()> {
            self.end_mutation(id, state, reason, at).await
        }

        async fn has_pending_mutations(&self) -> DbResult<bool> {
            self.any_pending_mutation().await
        }
    }
}
