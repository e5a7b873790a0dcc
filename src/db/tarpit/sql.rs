//! The tarpit's statements, the same on both backends (the upsert's update clause comes from the
//! dialect). Sessions are opened and closed one statement each inside one transaction, so each
//! call knows which edges it made.

use async_trait::async_trait;
use uuid::Uuid;

use super::{Enforced, StoredRule, TarpitRule, TarpitSession, TarpitStore};
use crate::db::codec::{convert, found, json_text, millis, parse_uuid, settle, time};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};

#[derive(sqlx::FromRow)]
struct RuleRow {
    decky_name: String,
    id: String,
    ports: String,
    delay_ms: i64,
    created_at: i64,
    created_by: String,
    enforcement: String,
    enforced_in: Option<String>,
    enforced_at: Option<i64>,
}

impl TryFrom<RuleRow> for StoredRule {
    type Error = DbError;

    fn try_from(row: RuleRow) -> Result<Self, DbError> {
        let ports = serde_json::from_str(&row.ports)
            .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored tarpit ports are not a JSON list of ports: {e}")))?;
        Ok(StoredRule {
            rule: TarpitRule {
                id: parse_uuid(&row.id)?,
                decky_name: row.decky_name,
                ports,
                delay_ms: u32::try_from(row.delay_ms).unwrap_or_default(),
                created_at: time(row.created_at)?,
                created_by: row.created_by,
            },
            enforcement: row.enforcement.parse().map_err(DbError::Corrupt)?,
            enforced_in: row.enforced_in,
            enforced_at: row.enforced_at.map(time).transpose()?,
        })
    }
}

#[derive(sqlx::FromRow)]
struct SessionRow {
    decky_name: String,
    attacker_ip: String,
    port: i64,
    entered_at: i64,
}

impl TryFrom<SessionRow> for TarpitSession {
    type Error = DbError;

    fn try_from(row: SessionRow) -> Result<Self, DbError> {
        Ok(TarpitSession {
            decky_name: row.decky_name,
            attacker_ip: row.attacker_ip,
            port: u16::try_from(row.port).map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored port: {e}")))?,
            entered_at: time(row.entered_at)?,
        })
    }
}

const RULE_COLUMNS: &str =
    "decky_name, id, ports, delay_ms, created_at, created_by, enforcement, enforced_in, enforced_at";

both_backends! {
    #[async_trait]
    impl TarpitStore for Backend {
        async fn put_tarpit_rule(&self, rule: &TarpitRule, enforced: &Enforced) -> DbResult<()> {
            let upsert = format!(
                "insert into tarpit_rules ({RULE_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?){}",
                Backend::replace(
                    "decky_name",
                    &["id", "ports", "delay_ms", "created_at", "created_by", "enforcement", "enforced_in", "enforced_at"],
                )
            );
            sqlx::query(&upsert)
                .bind(&rule.decky_name)
                .bind(rule.id.to_string())
                .bind(json_text(&rule.ports))
                .bind(i64::from(rule.delay_ms))
                .bind(millis(rule.created_at))
                .bind(&rule.created_by)
                .bind(enforced.enforcement.as_str())
                .bind(&enforced.namespace)
                .bind(millis(enforced.at))
                .execute(&self.pool)
                .await?;
            Ok(())
        }

        async fn tarpit_rule(&self, decky: &str) -> DbResult<StoredRule> {
            let row: RuleRow = sqlx::query_as(&format!("select {RULE_COLUMNS} from tarpit_rules where decky_name = ?"))
                .bind(decky)
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn tarpit_rules(&self) -> DbResult<Vec<StoredRule>> {
            let rows: Vec<RuleRow> =
                sqlx::query_as(&format!("select {RULE_COLUMNS} from tarpit_rules order by decky_name"))
                    .fetch_all(&self.pool)
                    .await?;
            convert(rows)
        }

        async fn delete_tarpit_rule(&self, decky: &str) -> DbResult<()> {
            let done = sqlx::query("delete from tarpit_rules where decky_name = ?").bind(decky).execute(&self.pool).await?;
            found(done.rows_affected())
        }

        async fn set_tarpit_enforcement(&self, decky: &str, id: Uuid, enforced: &Enforced) -> DbResult<()> {
            sqlx::query(
                "update tarpit_rules set enforcement = ?, enforced_in = ?, enforced_at = ? where decky_name = ? and id = ?",
            )
            .bind(enforced.enforcement.as_str())
            .bind(&enforced.namespace)
            .bind(millis(enforced.at))
            .bind(decky)
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
            Ok(())
        }

        async fn tarpit_sessions(&self) -> DbResult<Vec<TarpitSession>> {
            let rows: Vec<SessionRow> = sqlx::query_as(
                "select decky_name, attacker_ip, port, entered_at from tarpit_sessions \
                 order by decky_name, attacker_ip, port",
            )
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }

        async fn open_tarpit_sessions(&self, sessions: &[TarpitSession]) -> DbResult<Vec<TarpitSession>> {
            let statement = format!(
                "{} into tarpit_sessions (decky_name, attacker_ip, port, entered_at) values (?, ?, ?, ?){}",
                Backend::INSERT_OR_SKIP,
                Backend::SKIP_HELD
            );
            self.sessions_changed(&statement, sessions).await
        }

        async fn close_tarpit_sessions(&self, sessions: &[TarpitSession]) -> DbResult<Vec<TarpitSession>> {
            let statement = "delete from tarpit_sessions where decky_name = ? and attacker_ip = ? and port = ? \
                             and entered_at = ?";
            self.sessions_changed(statement, sessions).await
        }
    }

    impl Backend {
        /// Runs `statement` (its four placeholders: decky, address, port, entry time) once per
        /// session in one transaction; returns the sessions whose statement changed a row.
        async fn sessions_changed(&self, statement: &str, sessions: &[TarpitSession]) -> DbResult<Vec<TarpitSession>> {
            if sessions.is_empty() {
                return Ok(Vec::new());
            }
            let mut tx = self.begin_write().await?;
            let result = async {
                let mut changed = Vec::new();
                for session in sessions {
                    let done = sqlx::query(statement)
                        .bind(&session.decky_name)
                        .bind(&session.attacker_ip)
                        .bind(i64::from(session.port))
                        .bind(millis(session.entered_at))
                        .execute(&mut *tx)
                        .await?;
                    if done.rows_affected() > 0 {
                        changed.push(session.clone());
                    }
                }
                Ok(changed)
            }
            .await;
            settle(tx, result).await
        }
    }
}
