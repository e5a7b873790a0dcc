//! The threat-intel downloads, DECNET's routes and file names: `GET /attackers/export` (DECNET's
//! JSON export), `/attackers/export/stix` and `/attackers/export/misp` (the whole fleet, streamed a
//! page of attackers at a time so memory stays bounded, optionally only the attackers active between
//! `since` and `until`), `/attackers/{uuid}/export/stix` and `/attackers/{uuid}/export/misp` (one
//! attacker with its files and the logins it tried; `include_secrets=true`, admins only, adds the
//! secrets), and `/ttp/export/navigator` (an ATT&CK Navigator layer of the techniques seen). The
//! mappings are `crate::export`'s; these only read and stream.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::SinkExt;
use futures::channel::mpsc;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::OrNotFound;
use super::extract::{FieldError, ValidPath, ValidQuery, Validate, check_datetime, given};
use super::guard::{INSUFFICIENT_PERMISSIONS, Viewer};
use super::identities::identity_or_404;
use super::responses::{NotAUuid, ViewerOnly};
use super::{ApiError, AppState, Result};
use crate::db::{AttackerWindow, ChangePosition, Db, DbError, Role};
use crate::export::navigator::TechniqueTally;
use crate::export::record::{FLEET_PAGE, attacker_record, fleet_records};
use crate::export::{AttackerRecord, FleetFormat, FleetWriter, misp, stix};
use crate::time::parse_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export_json))
        .routes(routes!(export_fleet_stix))
        .routes(routes!(export_fleet_misp))
        .routes(routes!(export_attacker_stix))
        .routes(routes!(export_attacker_misp))
        .routes(routes!(export_navigator))
        .routes(routes!(export_identity_navigator))
}

/// Pages of text a fleet export may have written ahead of a slow reader.
const STREAM_AHEAD: usize = 4;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    /// Only attackers last seen at or after this: RFC 3339 or `YYYY-MM-DD HH:MM:SS` (UTC).
    pub since: Option<String>,
    /// Only attackers first seen at or before this: RFC 3339 or `YYYY-MM-DD HH:MM:SS` (UTC).
    pub until: Option<String>,
}

impl Validate for WindowQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_datetime("since", self.since.as_deref(), errors);
        check_datetime("until", self.until.as_deref(), errors);
    }
}

impl WindowQuery {
    fn window(&self) -> AttackerWindow {
        let time = |value: &Option<String>| given(value).and_then(|v| parse_utc(v).ok());
        AttackerWindow { since: time(&self.since), until: time(&self.until), changed_after: None }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SecretsQuery {
    /// Carry the plaintext of each secret the attacker tried (admins only); by default only the
    /// logins are exported.
    pub include_secrets: Option<bool>,
}

impl Validate for SecretsQuery {
    fn validate(&self, _errors: &mut Vec<FieldError>) {}
}

/// DECNET's export JSON for every attacker, streamed.
#[utoipa::path(
    get, path = "/attackers/export", tag = "export", security(("bearer" = [])), params(WindowQuery),
    responses(
        (status = 200, description = "`{observations, export_metadata}` as an attachment `decnet-export-<ts>.json`",
         content_type = "application/json", body = Object),
        (status = 422, description = "`since` or `until` is not a date and time"),
        ViewerOnly,
    )
)]
pub async fn export_json(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<WindowQuery>,
) -> Response {
    stream_fleet(&state.db, query.window(), FleetFormat::Json, "decnet-export", "json")
}

/// A STIX 2.1 bundle of every attacker, streamed.
#[utoipa::path(
    get, path = "/attackers/export/stix", tag = "export", security(("bearer" = [])), params(WindowQuery),
    responses(
        (status = 200, description = "A STIX 2.1 bundle as an attachment `decnet-fleet-<ts>.stix.json`",
         content_type = "application/json", body = Object),
        (status = 422, description = "`since` or `until` is not a date and time"),
        ViewerOnly,
    )
)]
pub async fn export_fleet_stix(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<WindowQuery>,
) -> Response {
    stream_fleet(&state.db, query.window(), FleetFormat::Stix, "decnet-fleet", "stix.json")
}

/// A MISP collection, one event per attacker, streamed.
#[utoipa::path(
    get, path = "/attackers/export/misp", tag = "export", security(("bearer" = [])), params(WindowQuery),
    responses(
        (status = 200, description = "`{\"response\": [{\"Event\": …}, …]}` as an attachment `decnet-fleet-<ts>.misp.json`",
         content_type = "application/json", body = Object),
        (status = 422, description = "`since` or `until` is not a date and time"),
        ViewerOnly,
    )
)]
pub async fn export_fleet_misp(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<WindowQuery>,
) -> Response {
    stream_fleet(&state.db, query.window(), FleetFormat::Misp, "decnet-fleet", "misp.json")
}

/// One attacker's STIX 2.1 bundle.
#[utoipa::path(
    get, path = "/attackers/{uuid}/export/stix", tag = "export", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker"), SecretsQuery),
    responses(
        (status = 200, description = "A STIX 2.1 bundle as an attachment `decnet-attacker-<uuid[:8]>.stix.json`",
         content_type = "application/json", body = Object),
        (status = 403, description = "`include_secrets` asked by a non-admin"),
        (status = 404, description = "`unknown attacker uuid: '<uuid>'`"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn export_attacker_stix(
    State(state): State<AppState>,
    viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<SecretsQuery>,
) -> Result<Response> {
    let record = one_attacker(&state.db, &viewer, uuid, &query).await?;
    Ok(attachment(pretty(&stix::attacker_bundle(&record)), &format!("decnet-attacker-{}.stix.json", short(uuid))))
}

/// One attacker's MISP event.
#[utoipa::path(
    get, path = "/attackers/{uuid}/export/misp", tag = "export", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker"), SecretsQuery),
    responses(
        (status = 200, description = "`{\"Event\": …}` as an attachment `decnet-attacker-<uuid[:8]>.misp.json`",
         content_type = "application/json", body = Object),
        (status = 403, description = "`include_secrets` asked by a non-admin"),
        (status = 404, description = "`unknown attacker uuid: '<uuid>'`"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn export_attacker_misp(
    State(state): State<AppState>,
    viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(query): ValidQuery<SecretsQuery>,
) -> Result<Response> {
    let record = one_attacker(&state.db, &viewer, uuid, &query).await?;
    Ok(attachment(pretty(&misp::attacker_event(&record)), &format!("decnet-attacker-{}.misp.json", short(uuid))))
}

/// An ATT&CK Navigator layer (format 4.5) of the techniques the attackers' commands show.
#[utoipa::path(
    get, path = "/ttp/export/navigator", tag = "export", security(("bearer" = [])), params(WindowQuery),
    responses(
        (status = 200, description = "A Navigator layer as an attachment `decnet-navigator-<ts>.json`",
         content_type = "application/json", body = Object),
        (status = 422, description = "`since` or `until` is not a date and time"),
        ViewerOnly,
    )
)]
pub async fn export_navigator(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<WindowQuery>,
) -> Result<Response> {
    let window = query.window();
    let mut tally = TechniqueTally::default();
    let mut after = None;
    loop {
        let profiles = state.db.attackers_changed(&window, after, FLEET_PAGE).await?;
        let Some(last) = profiles.last() else { break };
        after = Some(ChangePosition::of(last));
        let full = profiles.len() == FLEET_PAGE as usize;
        for record in fleet_records(&state.db, profiles).await? {
            tally.add(&record);
        }
        if !full {
            break;
        }
    }
    let now = Utc::now();
    let layer = tally.layer("svc: techniques seen");
    Ok(attachment(pretty(&layer), &format!("decnet-navigator-{}.json", stamp(now))))
}

/// An ATT&CK Navigator layer of the techniques one identity's attackers showed (DECNET's identity
/// page, NAVIGATOR).
#[utoipa::path(
    get, path = "/ttp/export/navigator/identity/{uuid}", tag = "export", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The identity")),
    responses(
        (status = 200, description = "A Navigator layer as an attachment `decnet-navigator-identity-<uuid8>.json`",
         content_type = "application/json", body = Object),
        (status = 404, description = "Identity not found"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn export_identity_navigator(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Response> {
    let snapshot = state.identities.snapshot(&state.db).await?;
    let identity = identity_or_404(&snapshot, uuid)?;
    let ips: Vec<String> = identity.members.iter().map(|m| m.ip.clone()).collect();
    let profiles = state.db.attackers_by_ip(&ips).await?;
    let mut tally = TechniqueTally::default();
    for record in fleet_records(&state.db, profiles).await? {
        tally.add(&record);
    }
    let layer = tally.layer(&format!("svc: techniques of identity {uuid}"));
    Ok(attachment(pretty(&layer), &format!("decnet-navigator-identity-{}.json", short(uuid))))
}

async fn one_attacker(db: &Db, viewer: &Viewer, uuid: Uuid, query: &SecretsQuery) -> Result<AttackerRecord> {
    let secrets = query.include_secrets.unwrap_or(false);
    if secrets && viewer.0.user.role != Role::Admin {
        return Err(ApiError::forbidden(INSUFFICIENT_PERMISSIONS));
    }
    let profile = db.attacker(uuid).await.or_not_found(format!("unknown attacker uuid: '{uuid}'"))?;
    Ok(attacker_record(db, profile, secrets).await?)
}

/// The fleet-wide document, written by a task a page of attackers at a time while the client reads.
/// A store failure midway is logged and cuts the body short, so the client sees a broken transfer,
/// never a document that looks whole.
fn stream_fleet(db: &Db, window: AttackerWindow, format: FleetFormat, name: &str, extension: &str) -> Response {
    let now = Utc::now();
    let (mut sender, receiver) = mpsc::channel::<std::io::Result<Bytes>>(STREAM_AHEAD);
    let db = db.clone();
    tokio::spawn(async move {
        if let Err(Some(err)) = write_fleet(&db, window, FleetWriter::new(format, now), &mut sender).await {
            tracing::error!(error = %err, ?format, "Fleet export failed midway; the download was cut short");
            let _ = sender.send(Err(std::io::Error::other("export failed"))).await;
        }
    });
    attachment(Body::from_stream(receiver), &format!("{name}-{}.{extension}", stamp(now)))
}

type Sender = mpsc::Sender<std::io::Result<Bytes>>;

/// `Err(None)` when the client went away, `Err(Some(_))` when the store failed.
async fn write_fleet(
    db: &Db,
    window: AttackerWindow,
    mut writer: FleetWriter,
    sender: &mut Sender,
) -> std::result::Result<(), Option<DbError>> {
    send(sender, writer.open()).await?;
    let mut after = None;
    let mut attackers = 0u64;
    loop {
        let profiles = db.attackers_changed(&window, after, FLEET_PAGE).await.map_err(Some)?;
        let Some(last) = profiles.last() else { break };
        after = Some(ChangePosition::of(last));
        let full = profiles.len() == FLEET_PAGE as usize;
        let records = fleet_records(db, profiles).await.map_err(Some)?;
        attackers += records.len() as u64;
        send(sender, writer.page(&records)).await?;
        if !full {
            break;
        }
    }
    send(sender, writer.close(attackers)).await
}

async fn send(sender: &mut Sender, text: String) -> std::result::Result<(), Option<DbError>> {
    if text.is_empty() {
        return Ok(());
    }
    sender.send(Ok(Bytes::from(text))).await.map_err(|_| None)
}

fn attachment(body: impl Into<Body>, filename: &str) -> Response {
    download(body, "application/json", filename)
}

/// A 200 whose body the client saves as `filename` (a name of the route's own making, quoted as is).
pub(super) fn download(body: impl Into<Body>, content_type: &'static str, filename: &str) -> Response {
    let mut response = (StatusCode::OK, body.into()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn short(uuid: Uuid) -> String {
    uuid.to_string()[..8].to_string()
}

/// `20261126T021500Z`, DECNET's file-name stamp.
fn stamp(at: DateTime<Utc>) -> String {
    at.format("%Y%m%dT%H%M%SZ").to_string()
}
