//! `GET /attackers` (a page of attacker profiles), `GET /attackers/{uuid}` (one profile with its
//! observations) and `GET /attackers/{uuid}/commands` (its commands, paged). The profiler worker
//! writes the profiles; these views only read them.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::bounty::decoded;
use super::error::OrNotFound;
use super::extract::{FieldError, ValidPath, ValidQuery, Validate, check_max_chars, given};
use super::guard::Viewer;
use super::logs::MAX_SEARCH_CHARS;
use super::paging::{Listed, MAX_LIMIT, Page, Paging};
use super::responses::{AttackerNotFound, NotAUuid, ViewerOnly};
use super::{AppState, Result};
use crate::db::{AttackerCommand, AttackerFilter, AttackerProfile, AttackerSort, BountyFilter};
use crate::observation::Observation;
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_attackers))
        .routes(routes!(attacker_detail))
        .routes(routes!(attacker_commands))
}

const SORT_PATTERN: &str = r"^(recent|active|traversals)$|^\s*(null|NULL|undefined)?\s*$";
/// The commands a detail carries; the rest are a page of `/commands` away.
const DETAIL_COMMANDS: u32 = 50;
/// The commands a list row carries: DECNET's Attackers page shows the last one and their number,
/// and a page of rows must stay small whatever one attacker ran (`command_count` is exact).
const ROW_COMMANDS: u32 = 20;
/// Characters of each command text a list row carries; the detail and `/commands` have them whole.
const ROW_COMMAND_CHARS: u32 = 256;
/// The observations a detail carries, newest first.
const DETAIL_OBSERVATIONS: u32 = 200;
/// The `ip_leak` bounties a detail carries, as DECNET's does.
const DETAIL_IP_LEAKS: u32 = 10;
const MAX_COMMANDS_LIMIT: i64 = 200;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AttackersQuery {
    /// Rows per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// A substring of the attacker's address, matched literally; at most 512 characters.
    #[param(max_length = 512)]
    pub search: Option<String>,
    /// `recent` (last seen), `active` (most events) or `traversals` (multi-decky attackers first);
    /// blank, `null`, `NULL` or `undefined` (what dashboards send for unset) mean the default.
    #[param(pattern = r"^(recent|active|traversals)$|^\s*(null|NULL|undefined)?\s*$", default = "recent")]
    pub sort_by: Option<String>,
    /// Only attackers seen on this service, exactly.
    pub service: Option<String>,
}

impl Validate for AttackersQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_LIMIT, errors);
        check_max_chars("search", self.search.as_deref(), MAX_SEARCH_CHARS, errors);
        if let Some(sort_by) = given(&self.sort_by)
            && sort(sort_by).is_none()
        {
            errors.push(FieldError::new(
                "string_pattern_mismatch",
                &["query", "sort_by"],
                format!("String should match pattern '{SORT_PATTERN}'"),
            ));
        }
    }
}

fn sort(sort_by: &str) -> Option<AttackerSort> {
    match sort_by {
        "recent" => Some(AttackerSort::Recent),
        "active" => Some(AttackerSort::Active),
        "traversals" => Some(AttackerSort::Traversals),
        _ => None,
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CommandsQuery {
    /// Rows per page, 1 to 200.
    #[param(minimum = 1, maximum = 200, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// Only commands run on this service, exactly.
    pub service: Option<String>,
}

impl Validate for CommandsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_COMMANDS_LIMIT, errors);
    }
}

/// One attacker profile, DECNET's attacker row with its `behavior`. The enrichment DECNET adds from
/// outside sources (GeoIP, ASN, RPKI, reverse DNS, IPv6 leaks) is not collected here: those fields are
/// present and null (or zero) so a dashboard reading them finds them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
// The OpenAPI document keeps publishing the name clients were generated from.
#[schema(as = AttackerRow)]
pub struct AttackerSummary {
    pub uuid: Uuid,
    pub ip: String,
    /// The identity it is linked into, as the last linking (an identity route, attribution) found
    /// it; null before one ran, or when it is linked to no one.
    pub identity_id: Option<String>,
    /// RFC 3339, UTC, milliseconds.
    pub first_seen: String,
    pub last_seen: String,
    pub event_count: i64,
    pub service_count: i64,
    pub decky_count: i64,
    /// Distinct services, sorted.
    pub services: Vec<String>,
    /// Distinct deckies in the order of first contact.
    pub deckies: Vec<String>,
    /// The deckies joined by ` → `.
    pub traversal_path: String,
    /// Two or more deckies (not counting the fleet's own `decnet-` hosts).
    pub is_traversal: bool,
    pub bounty_count: i64,
    pub credential_count: i64,
    /// The payload of every fingerprint bounty of this address (a payload that is not JSON, as text).
    pub fingerprints: Vec<Value>,
    /// The newest commands, oldest first as DECNET keeps them (the last is the newest): at most 20
    /// in a list row, each text cut to 256 characters; at most 50, whole, in the detail.
    pub commands: Vec<CommandEntry>,
    /// How many commands the attacker ran, all of them; `/attackers/{uuid}/commands` lists them.
    pub command_count: i64,
    pub country_code: Option<String>,
    pub country_source: Option<String>,
    pub asn: Option<i64>,
    pub as_name: Option<String>,
    pub bgp_prefix: Option<String>,
    pub asn_source: Option<String>,
    pub rpki_status: Option<String>,
    pub rpki_source: Option<String>,
    pub ptr_record: Option<String>,
    pub rotation_count: i64,
    pub last_rotation_at: Option<String>,
    pub ipv6_leak_count: i64,
    pub last_ipv6_leak_at: Option<String>,
    pub last_ipv6_link_local: Option<String>,
    pub last_ipv6_iid_kind: Option<String>,
    pub last_ipv6_mac_oui: Option<String>,
    pub updated_at: String,
    /// Behaviour class, timing statistics and attack phases; null before the first fold.
    #[schema(value_type = Option<Object>)]
    pub behavior: Option<Value>,
}

impl From<AttackerProfile> for AttackerSummary {
    fn from(profile: AttackerProfile) -> Self {
        let behavior = match serde_json::from_str::<Value>(&profile.behavior) {
            Ok(Value::Object(mut behavior)) => {
                behavior.insert("attacker_uuid".into(), Value::String(profile.uuid.to_string()));
                behavior.insert("updated_at".into(), Value::String(format_utc(profile.updated_at)));
                Some(Value::Object(behavior))
            }
            _ => None,
        };
        AttackerSummary {
            uuid: profile.uuid,
            identity_id: None,
            first_seen: format_utc(profile.first_seen),
            last_seen: format_utc(profile.last_seen),
            event_count: profile.event_count,
            service_count: profile.service_count(),
            decky_count: profile.decky_count(),
            traversal_path: profile.traversal_path(),
            is_traversal: profile.is_traversal(),
            bounty_count: profile.bounty_count,
            credential_count: profile.credential_count,
            fingerprints: serde_json::from_str(&profile.fingerprints).unwrap_or_default(),
            commands: Vec::new(),
            command_count: profile.command_count,
            country_code: None,
            country_source: None,
            asn: None,
            as_name: None,
            bgp_prefix: None,
            asn_source: None,
            rpki_status: None,
            rpki_source: None,
            ptr_record: None,
            rotation_count: 0,
            last_rotation_at: None,
            ipv6_leak_count: 0,
            last_ipv6_leak_at: None,
            last_ipv6_link_local: None,
            last_ipv6_iid_kind: None,
            last_ipv6_mac_oui: None,
            updated_at: format_utc(profile.updated_at),
            behavior,
            ip: profile.ip,
            services: profile.services,
            deckies: profile.deckies,
        }
    }
}

impl Listed for AttackerSummary {
    const PAGE: &'static str = "AttackersResponse";
    const COUNTED: &'static str = "Profiles matching the filter, on every page.";
}

pub type AttackersResponse = Page<AttackerSummary>;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
// The OpenAPI document keeps publishing the name clients were generated from.
#[schema(as = CommandRow)]
pub struct CommandEntry {
    pub service: String,
    pub decky: String,
    pub command: String,
    /// RFC 3339, UTC, milliseconds.
    pub timestamp: String,
}

impl From<AttackerCommand> for CommandEntry {
    fn from(command: AttackerCommand) -> Self {
        CommandEntry {
            service: command.service,
            decky: command.decky,
            command: command.command,
            timestamp: format_utc(command.timestamp),
        }
    }
}

impl Listed for CommandEntry {
    const PAGE: &'static str = "CommandsResponse";
    const COUNTED: &'static str = "Commands matching the filter, on every page.";
}

pub type CommandsResponse = Page<CommandEntry>;

/// Which services the attacker did more than knock on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ServiceActivity {
    /// Services it ran commands on.
    pub interacted: Vec<String>,
    /// The other services it was seen on.
    pub scanned: Vec<String>,
}

/// An observation as the detail shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
// The OpenAPI document keeps publishing the name clients were generated from.
#[schema(as = ObservationRow)]
pub struct ObservationEntry {
    pub primitive: String,
    /// Of the type the primitive's registry entry names: a string, number, boolean, array or object.
    pub value: Value,
    pub confidence: f64,
    /// Emission time, epoch seconds.
    pub ts: Option<f64>,
    pub source: String,
    /// The measurement window, epoch seconds.
    pub window_start: f64,
    pub window_end: f64,
    pub evidence_ref: Option<String>,
}

impl From<Observation> for ObservationEntry {
    fn from(observation: Observation) -> Self {
        ObservationEntry {
            primitive: observation.primitive,
            value: observation.value,
            confidence: observation.confidence,
            ts: observation.ts,
            source: observation.source,
            window_start: observation.window.start_ts,
            window_end: observation.window.end_ts,
            evidence_ref: observation.evidence_ref,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttackerDetail {
    /// With `commands`: the newest 50, oldest first.
    #[serde(flatten)]
    pub attacker: AttackerSummary,
    pub service_activity: ServiceActivity,
    /// The newest `ip_leak` bounties (at most 10), payload decoded.
    pub ip_leaks: Vec<Value>,
    pub ip_leaks_total: u64,
    /// Newest first (window end), at most 200.
    pub observations: Vec<ObservationEntry>,
}

/// One page of attacker profiles.
#[utoipa::path(
    get,
    path = "/attackers",
    tag = "attackers",
    security(("bearer" = [])),
    params(AttackersQuery),
    responses(
        (status = 200, description = "A page of attacker profiles", body = AttackersResponse),
        (status = 422, description = "A parameter out of range, too long, or an unknown sort_by"),
        ViewerOnly,
    )
)]
pub async fn list_attackers(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<AttackersQuery>,
) -> Result<Json<AttackersResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let filter = AttackerFilter {
        search: given(&query.search).map(str::to_string),
        service: given(&query.service).map(str::to_string),
        sort: given(&query.sort_by).and_then(sort).unwrap_or_default(),
    };
    let page = state.db.attackers(&filter, paging.limit, paging.offset).await?;
    let uuids: Vec<Uuid> = page.rows.iter().filter(|row| row.command_count > 0).map(|row| row.uuid).collect();
    let mut commands = state.db.recent_commands(&uuids, ROW_COMMANDS, ROW_COMMAND_CHARS).await?;
    let identities = state.identities.cached();
    let data = page
        .rows
        .into_iter()
        .map(|profile| {
            let recent = commands.remove(&profile.uuid).unwrap_or_default();
            AttackerSummary {
                identity_id: identity_of(identities.as_deref(), profile.uuid),
                commands: recent.into_iter().map(CommandEntry::from).collect(),
                ..profile.into()
            }
        })
        .collect();
    Ok(Json(paging.page_of(page.total, data)))
}

/// The identity `attacker` belongs to, as the last linking found it (it may be a little behind).
fn identity_of(identities: Option<&crate::identity::Snapshot>, attacker: Uuid) -> Option<String> {
    identities?.of_attacker(attacker).map(|identity| identity.uuid.to_string())
}

/// One attacker: the profile, its newest commands and observations, and where it interacted.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "The attacker", body = AttackerDetail),
        ViewerOnly, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_detail(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<AttackerDetail>> {
    let db = &state.db;
    let profile = db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let commands = db.attacker_commands(uuid, None, DETAIL_COMMANDS, 0).await?;
    let interacted = db.services_with_commands(uuid, &profile.services).await?;
    let scanned = profile.services.iter().filter(|service| !interacted.contains(service)).cloned().collect();
    let activity = ServiceActivity { interacted, scanned };
    let leaks_filter =
        BountyFilter { bounty_type: Some("ip_leak".into()), attacker_ip: Some(profile.ip.clone()), search: None };
    let leaks = db.bounties(&leaks_filter, DETAIL_IP_LEAKS, 0).await?;
    let observations = db.attacker_observations(uuid, DETAIL_OBSERVATIONS).await?;
    // Newest first from the page; DECNET's list runs oldest first.
    let commands = commands.rows.into_iter().rev().map(CommandEntry::from).collect();
    let identity_id = identity_of(state.identities.cached().as_deref(), uuid);
    Ok(Json(AttackerDetail {
        attacker: AttackerSummary { identity_id, commands, ..profile.into() },
        service_activity: activity,
        ip_leaks: leaks.rows.into_iter().map(|leak| decoded(leak.payload)).collect(),
        ip_leaks_total: leaks.total,
        observations: observations.into_iter().map(ObservationEntry::from).collect(),
    }))
}

/// One page of the attacker's commands, newest first.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/commands",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker"), CommandsQuery),
    responses(
        (status = 200, description = "A page of commands, newest first", body = CommandsResponse),
        (status = 422, description = "Not a uuid, or a parameter out of range"),
        ViewerOnly, AttackerNotFound,
    )
)]
pub async fn attacker_commands(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<CommandsQuery>,
) -> Result<Json<CommandsResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let page = state.db.attacker_commands(uuid, given(&query.service), paging.limit, paging.offset).await?;
    Ok(Json(paging.page(page)))
}

/// The 404 of a route naming an attacker that is not profiled.
pub(super) const ATTACKER_NOT_FOUND: &str = "Attacker not found";
