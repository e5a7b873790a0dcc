//! The fleet's statements, the same on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DeckyConfig, DeployState, Deployment, FleetDecky, FleetNetwork, FleetStore, StoredFleet};
use crate::db::codec::{json_text, millis, time};
use crate::db::dialect::both_backends;
use crate::db::lifecycle::insert_lifecycle;
use crate::db::{DbError, DbResult};

#[derive(sqlx::FromRow)]
struct NetworkRow {
    subnet: String,
    gateway: String,
    interface: Option<String>,
}

#[derive(sqlx::FromRow)]
struct DeckyRow {
    config: String,
    state: String,
    last_error: Option<String>,
    updated_at: i64,
}

impl TryFrom<DeckyRow> for FleetDecky {
    type Error = DbError;

    fn try_from(row: DeckyRow) -> Result<Self, DbError> {
        let config: DeckyConfig =
            serde_json::from_str(&row.config).map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored decky: {e}")))?;
        Ok(FleetDecky {
            config,
            state: row.state.parse().map_err(DbError::Corrupt)?,
            last_error: row.last_error,
            updated_at: time(row.updated_at)?,
        })
    }
}

fn stored_uuid(text: &str) -> DbResult<Uuid> {
    text.parse().map_err(|e| DbError::Other(anyhow::anyhow!("stored deployment id: {e}")))
}

fn network_driver(network: &FleetNetwork) -> &'static str {
    if network.interface.is_some() { "macvlan" } else { "bridge" }
}

both_backends! {
    #[async_trait]
    impl FleetStore for Backend {
        async fn fleet(&self) -> DbResult<StoredFleet> {
            let network: Option<NetworkRow> =
                sqlx::query_as("select subnet, gateway, interface from fleet_network where id = 1")
                    .fetch_optional(&self.pool)
                    .await?;
            let rows: Vec<DeckyRow> =
                sqlx::query_as("select config, state, last_error, updated_at from fleet_deckies order by name")
                    .fetch_all(&self.pool)
                    .await?;
            Ok(StoredFleet {
                network: network.map(|n| FleetNetwork { subnet: n.subnet, gateway: n.gateway, interface: n.interface }),
                deckies: rows.into_iter().map(FleetDecky::try_from).collect::<DbResult<_>>()?,
            })
        }

        async fn commit_deployment(&self, deployment: Deployment<'_>) -> DbResult<()> {
            let at = millis(deployment.at);
            let mut tx = self.begin_write().await?;
            let network = deployment.network;
            sqlx::query("delete from fleet_network where id = 1").execute(&mut *tx).await?;
            sqlx::query(
                "insert into fleet_network (id, subnet, gateway, interface, driver, updated_at) values (1, ?, ?, ?, ?, ?)",
            )
            .bind(&network.subnet)
            .bind(&network.gateway)
            .bind(&network.interface)
            .bind(network_driver(network))
            .bind(at)
            .execute(&mut *tx)
            .await?;
            if deployment.replace {
                sqlx::query("delete from fleet_deckies").execute(&mut *tx).await?;
            }
            for decky in deployment.deckies {
                // A decky an earlier deploy left unfinished (`pending`, `failed`) is deployed
                // again; a running one of that name still conflicts.
                sqlx::query("delete from fleet_deckies where name = ? and state <> ?")
                    .bind(&decky.name)
                    .bind(DeployState::Running.as_str())
                    .execute(&mut *tx)
                    .await?;
                let config = serde_json::to_string(decky).map_err(|e| DbError::Other(e.into()))?;
                sqlx::query(
                    "insert into fleet_deckies (name, host_uuid, ip, config, state, last_error, created_at, updated_at) \
                     values (?, ?, ?, ?, ?, null, ?, ?)",
                )
                .bind(&decky.name)
                .bind(&decky.host_uuid)
                .bind(&decky.ip)
                .bind(config)
                .bind(DeployState::Pending.as_str())
                .bind(at)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            }
            for record in deployment.lifecycles {
                insert_lifecycle::<Sql>(record).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn set_deploy_state(
            &self,
            name: &str,
            state: DeployState,
            error: Option<&str>,
            at: DateTime<Utc>,
        ) -> DbResult<()> {
            sqlx::query("update fleet_deckies set state = ?, last_error = ?, updated_at = ? where name = ?")
                .bind(state.as_str())
                .bind(error)
                .bind(millis(at))
                .bind(name)
                .execute(&self.pool)
                .await?;
            Ok(())
        }

        async fn replace_decky_config(&self, old: &DeckyConfig, new: &DeckyConfig, at: DateTime<Utc>) -> DbResult<()> {
            let (old_text, new_text) = (json_text(old), json_text(new));
            let done = sqlx::query("update fleet_deckies set config = ?, updated_at = ? where name = ? and config = ?")
                .bind(&new_text)
                .bind(millis(at))
                .bind(&old.name)
                .bind(&old_text)
                .execute(&self.pool)
                .await?;
            if done.rows_affected() == 1 {
                return Ok(());
            }
            let exists: Option<(String,)> = sqlx::query_as("select name from fleet_deckies where name = ?")
                .bind(&old.name)
                .fetch_optional(&self.pool)
                .await?;
            Err(if exists.is_some() { DbError::Conflict } else { DbError::NotFound })
        }

        async fn remove_decky(&self, name: &str) -> DbResult<bool> {
            let mut tx = self.begin_write().await?;
            let removed = sqlx::query("delete from fleet_deckies where name = ?").bind(name).execute(&mut *tx).await?;
            let (left,): (i64,) = sqlx::query_as("select count(*) from fleet_deckies").fetch_one(&mut *tx).await?;
            if left == 0 {
                sqlx::query("delete from fleet_network where id = 1").execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(removed.rows_affected() > 0)
        }

        async fn deployment_id(&self) -> DbResult<Uuid> {
            let read = || sqlx::query_as::<_, (String,)>("select deployment_id from deployment_identity where id = 1");
            if let Some((id,)) = read().fetch_optional(&self.pool).await? {
                return stored_uuid(&id);
            }
            let made = sqlx::query("insert into deployment_identity (id, deployment_id, created_at) values (1, ?, ?)")
                .bind(Uuid::new_v4().to_string())
                .bind(millis(Utc::now()))
                .execute(&self.pool)
                .await;
            match made.map_err(DbError::from) {
                // Another process made it first: its identity is the one.
                Ok(_) | Err(DbError::Conflict) => {}
                Err(err) => return Err(err),
            }
            let (id,) = read().fetch_one(&self.pool).await?;
            stored_uuid(&id)
        }
    }
}
