//! `GET /swarm/deckies`: each decky on a worker host as its heartbeats last reported it, with its
//! host's name, address and status, in DECNET's `DeckyShardView` (the card fields lifted from the
//! stored decky config), by decky name.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::db::{DeckyShard, ShardFilter, ShardState, SwarmHost};
use crate::http::extract::{FieldError, ValidQuery, Validate, check_max_chars, given};
use crate::http::guard::Admin;
use crate::http::responses::AdminOnly;
use crate::http::{AppState, Result};
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_deckies))
}

/// One decky on one host, as the dashboard's fleet page reads it in swarm mode.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeckyShardView {
    pub decky_name: String,
    pub decky_ip: Option<String>,
    pub host_uuid: Uuid,
    /// `<unknown>` if the host is gone.
    pub host_name: String,
    pub host_address: String,
    /// The host's status, `unknown` if it is gone.
    pub host_status: String,
    pub services: Vec<String>,
    pub state: ShardState,
    pub last_error: Option<String>,
    pub compose_hash: Option<String>,
    pub updated_at: String,
    pub hostname: Option<String>,
    pub distro: Option<String>,
    pub archetype: Option<String>,
    pub service_config: BTreeMap<String, BTreeMap<String, String>>,
    pub mutate_interval: Option<u32>,
    pub last_mutated: f64,
    pub last_seen: Option<String>,
}

impl DeckyShardView {
    fn new(shard: DeckyShard, host: Option<&SwarmHost>) -> Self {
        let config = shard.decky_config;
        DeckyShardView {
            decky_ip: shard.decky_ip.or_else(|| config.as_ref().map(|c| c.ip.clone())),
            host_uuid: shard.host_uuid,
            host_name: host.map_or_else(|| "<unknown>".to_string(), |h| h.name.clone()),
            host_address: host.map(|h| h.address.clone()).unwrap_or_default(),
            host_status: host.map_or("unknown", |h| h.status.as_str()).to_string(),
            services: shard.services,
            state: shard.state,
            last_error: shard.last_error,
            compose_hash: shard.compose_hash,
            updated_at: format_utc(shard.updated_at),
            hostname: config.as_ref().map(|c| c.hostname.clone()),
            distro: config.as_ref().map(|c| c.distro.clone()),
            archetype: config.as_ref().and_then(|c| c.archetype.clone()),
            service_config: config.as_ref().map(|c| c.service_config.clone()).unwrap_or_default(),
            mutate_interval: config.as_ref().and_then(|c| c.mutate_interval),
            last_mutated: config.as_ref().map_or(0.0, |c| c.last_mutated),
            last_seen: shard.last_seen.map(format_utc),
            decky_name: shard.decky_name,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeckiesQuery {
    /// Only the deckies of this host (blank, `null` or `undefined`: every host). The pattern is what
    /// the server accepts: those, or a uuid as the uuid crate reads one.
    #[param(
        pattern = r"^([ \t\n\r\x0b\x0c]*(|null|NULL|undefined)[ \t\n\r\x0b\x0c]*|[0-9a-fA-F]{32}|(urn:uuid:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\{[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\})$"
    )]
    pub host_uuid: Option<String>,
    /// Only deckies in this state; any other value matches none.
    pub state: Option<String>,
}

impl Validate for DeckiesQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if given(&self.host_uuid).is_some_and(|text| text.parse::<Uuid>().is_err()) {
            errors.push(FieldError::new("uuid_parsing", &["query", "host_uuid"], "Input should be a valid UUID"));
        }
        check_max_chars("state", self.state.as_deref(), 32, errors);
    }
}

/// Every decky on a worker host, by name.
#[utoipa::path(
    get, path = "/swarm/deckies", tag = "swarm", security(("bearer" = [])),
    params(DeckiesQuery),
    responses(
        (status = 200, description = "The deckies, by name", body = [DeckyShardView]),
        (status = 422, description = "A host that is not a uuid, or a state over 32 characters"),
        AdminOnly,
    )
)]
pub async fn list_deckies(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    ValidQuery(query): ValidQuery<DeckiesQuery>,
) -> Result<Json<Vec<DeckyShardView>>> {
    let shard_state = match given(&query.state) {
        None => None,
        Some(text) => match text.parse::<ShardState>() {
            Ok(shard_state) => Some(shard_state),
            Err(_) => return Ok(Json(Vec::new())),
        },
    };
    let host_uuid = given(&query.host_uuid).and_then(|text| text.parse().ok());
    let shards = state.db.decky_shards(&ShardFilter { host_uuid, decky_name: None, state: shard_state }).await?;
    let hosts: HashMap<Uuid, SwarmHost> =
        state.db.swarm_hosts(None).await?.into_iter().map(|host| (host.uuid, host)).collect();
    Ok(Json(
        shards
            .into_iter()
            .map(|shard| {
                let host = hosts.get(&shard.host_uuid);
                DeckyShardView::new(shard, host)
            })
            .collect(),
    ))
}
