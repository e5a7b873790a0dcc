//! The stored rows of a topology and its parts, and how each becomes its domain type.

use super::{Edge, Lan, StatusEvent, Topology, TopologyDecky};
use crate::db::codec::{parse_uuid, time};
use crate::db::{DbError, DbResult};

/// A JSON column as stored, decoded.
pub(super) fn stored<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> DbResult<T> {
    serde_json::from_str(text).map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored {what}: {e}")))
}

#[derive(sqlx::FromRow)]
pub(super) struct TopologyRow {
    id: String,
    name: String,
    mode: String,
    target_host_uuid: Option<String>,
    config_snapshot: String,
    status: String,
    status_changed_at: i64,
    created_at: i64,
    version: i64,
    needs_resync: bool,
    email_personas: String,
    language_default: String,
}

impl TryFrom<TopologyRow> for Topology {
    type Error = DbError;

    fn try_from(row: TopologyRow) -> Result<Self, DbError> {
        Ok(Topology {
            id: parse_uuid(&row.id)?,
            name: row.name,
            mode: row.mode,
            target_host_uuid: row.target_host_uuid,
            status: row.status.parse().map_err(DbError::Corrupt)?,
            version: row.version,
            needs_resync: row.needs_resync,
            created_at: time(row.created_at)?,
            status_changed_at: time(row.status_changed_at)?,
            email_personas: row.email_personas,
            language_default: row.language_default,
            config_snapshot: stored(&row.config_snapshot, "config snapshot")?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct LanRow {
    id: String,
    topology_id: String,
    name: String,
    subnet: String,
    is_dmz: bool,
    docker_network_id: Option<String>,
    x: Option<f64>,
    y: Option<f64>,
}

impl TryFrom<LanRow> for Lan {
    type Error = DbError;

    fn try_from(row: LanRow) -> Result<Self, DbError> {
        Ok(Lan {
            id: parse_uuid(&row.id)?,
            topology_id: parse_uuid(&row.topology_id)?,
            name: row.name,
            subnet: row.subnet,
            is_dmz: row.is_dmz,
            docker_network_id: row.docker_network_id,
            x: row.x,
            y: row.y,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct DeckyRow {
    uuid: String,
    topology_id: String,
    name: String,
    services: String,
    decky_config: Option<String>,
    ip: Option<String>,
    state: String,
    last_error: Option<String>,
    x: Option<f64>,
    y: Option<f64>,
}

impl TryFrom<DeckyRow> for TopologyDecky {
    type Error = DbError;

    fn try_from(row: DeckyRow) -> Result<Self, DbError> {
        Ok(TopologyDecky {
            uuid: parse_uuid(&row.uuid)?,
            topology_id: parse_uuid(&row.topology_id)?,
            name: row.name,
            services: stored(&row.services, "services")?,
            decky_config: row.decky_config.as_deref().map(|c| stored(c, "decky config")).transpose()?,
            ip: row.ip,
            state: row.state,
            last_error: row.last_error,
            x: row.x,
            y: row.y,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct EdgeRow {
    id: String,
    topology_id: String,
    decky_uuid: String,
    lan_id: String,
    ip: Option<String>,
    is_bridge: bool,
    forwards_l3: bool,
}

impl TryFrom<EdgeRow> for Edge {
    type Error = DbError;

    fn try_from(row: EdgeRow) -> Result<Self, DbError> {
        Ok(Edge {
            id: parse_uuid(&row.id)?,
            topology_id: parse_uuid(&row.topology_id)?,
            decky_uuid: parse_uuid(&row.decky_uuid)?,
            lan_id: parse_uuid(&row.lan_id)?,
            ip: row.ip,
            is_bridge: row.is_bridge,
            forwards_l3: row.forwards_l3,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct StatusEventRow {
    id: String,
    topology_id: String,
    from_status: String,
    to_status: String,
    at: i64,
    reason: Option<String>,
}

impl TryFrom<StatusEventRow> for StatusEvent {
    type Error = DbError;

    fn try_from(row: StatusEventRow) -> Result<Self, DbError> {
        Ok(StatusEvent {
            id: parse_uuid(&row.id)?,
            topology_id: parse_uuid(&row.topology_id)?,
            from_status: row.from_status.parse().map_err(DbError::Corrupt)?,
            to_status: row.to_status.parse().map_err(DbError::Corrupt)?,
            at: time(row.at)?,
            reason: row.reason,
        })
    }
}
