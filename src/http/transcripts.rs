//! Recorded shell sessions, in DECNET's shapes: `GET /attackers/{uuid}/transcripts` (the attacker's
//! `session_recorded` rows, newest first, without their events), `GET /transcripts/{decky}/{sid}`
//! (one session's asciinema v2 header and a page of its events, admins only as in DECNET, because
//! what attackers type is theirs to read) and, beyond DECNET, `GET /transcripts/{decky}/{sid}/cast`
//! (the whole session as an asciinema v2 file, for `asciinema play` or any player). The decoys put
//! the events in the row's `cast` field (`svc_decoy::transcript`), so the row is all there is.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::attacker_evidence::{AttackerRowsResponse, rows_of};
use super::attackers::ATTACKER_NOT_FOUND;
use super::error::OrNotFound;
use super::export::download;
use super::extract::{FieldError, ValidPath, ValidQuery, Validate, check_range, is_lowercase_name};
use super::guard::{Admin, Viewer};
use super::logs::LogEntry;
use super::paging::MAX_OFFSET;
use super::redact;
use super::responses::{AdminOnly, AttackerNotFound, NotAUuid, ViewerOnly};
use super::{ApiError, AppState, Result};
use crate::db::{LogColumn, LogFilter, LogRecord, SearchTerm};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(attacker_transcripts))
        .routes(routes!(transcript))
        .routes(routes!(transcript_cast))
}

/// The event type of a recorded session.
const SESSION_RECORDED: &str = "session_recorded";
/// Sessions an attacker's list holds at most: the newest (`total` counts them all).
const MAX_SESSIONS: u32 = 200;
/// What a list row shows in place of the events, which `/transcripts/{decky}/{sid}` serves.
pub const CAST_ELIDED: &str = "[see /transcripts]";

/// The attacker's recorded shell sessions (SSH, telnet), newest first, each without its events.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/transcripts",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "Recorded sessions, newest first", body = AttackerRowsResponse),
        ViewerOnly, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_transcripts(
    State(state): State<AppState>,
    Viewer(session): Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<AttackerRowsResponse>> {
    let profile = state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let page = rows_of(&state.db, &profile, &[SESSION_RECORDED], MAX_SESSIONS).await?;
    let mut listed = AttackerRowsResponse::of(session.user.role, page);
    listed.data = listed.data.into_iter().map(without_cast).collect();
    Ok(Json(listed))
}

/// A session row with its `cast` replaced by [`CAST_ELIDED`], in `fields` and in `raw_line`.
fn without_cast(row: LogEntry) -> LogEntry {
    redact::replace_field(row, "cast", CAST_ELIDED)
}

/// Which session: its decky and its id.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SessionPath {
    /// The decky the session was on.
    #[param(pattern = r"^[a-z0-9][a-z0-9-]{0,62}$")]
    pub decky: String,
    /// The session's id (`sid` of its row).
    #[param(pattern = r"^[a-f0-9-]{36}$")]
    pub sid: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TranscriptQuery {
    /// Events to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// Events in this page, 1 to 5000.
    #[param(minimum = 1, maximum = 5000, default = 500)]
    pub limit: Option<i64>,
}

const DEFAULT_EVENTS: i64 = 500;
const MAX_EVENTS: i64 = 5000;

impl Validate for TranscriptQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_range("offset", self.offset.unwrap_or(0), 0, MAX_OFFSET, errors);
        check_range("limit", self.limit.unwrap_or(DEFAULT_EVENTS), 1, MAX_EVENTS, errors);
    }
}

/// A page of one session's events, DECNET's shape.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TranscriptPage {
    pub sid: String,
    pub service: String,
    /// The asciinema v2 header: `version`, `width`, `height`, `timestamp` (the session's start,
    /// Unix seconds), `env`.
    #[schema(value_type = Object)]
    pub header: Value,
    /// `[seconds since the start, "i" (typed) or "o" (shown), text]`.
    #[schema(value_type = Vec<Vec<Object>>)]
    pub events: Vec<Value>,
    pub offset: u64,
    pub limit: u64,
    /// Events in the session.
    pub total: u64,
    pub has_more: bool,
    /// The decoy stopped recording at its size cap.
    pub truncated: bool,
}

/// One recorded session's events, a page at a time. Admins only.
#[utoipa::path(
    get,
    path = "/transcripts/{decky}/{sid}",
    tag = "attackers",
    security(("bearer" = [])),
    params(SessionPath, TranscriptQuery),
    responses(
        (status = 200, description = "The header and a page of events", body = TranscriptPage),
        (status = 400, description = "`invalid decky name` or `invalid sid`"),
        (status = 404, description = "session not found"),
        (status = 422, description = "offset or limit out of range"),
        AdminOnly,
    )
)]
pub async fn transcript(
    State(state): State<AppState>,
    _admin: Admin,
    Path(SessionPath { decky, sid }): Path<SessionPath>,
    ValidQuery(query): ValidQuery<TranscriptQuery>,
) -> Result<Json<TranscriptPage>> {
    let session = Session::find(&state, &decky, &sid).await?;
    let offset = query.offset.unwrap_or(0) as u64;
    let limit = query.limit.unwrap_or(DEFAULT_EVENTS) as u64;
    let total = session.events.len() as u64;
    let events = session.events.iter().skip(offset as usize).take(limit as usize).cloned().collect();
    Ok(Json(TranscriptPage {
        header: session.header(),
        service: session.service,
        sid,
        events,
        offset,
        limit,
        total,
        has_more: offset + limit < total,
        truncated: session.truncated,
    }))
}

/// One recorded session as an asciinema v2 file (`asciinema play <file>`). Admins only.
#[utoipa::path(
    get,
    path = "/transcripts/{decky}/{sid}/cast",
    tag = "attackers",
    security(("bearer" = [])),
    params(SessionPath),
    responses(
        (status = 200, description = "The asciicast: a header line, then one line per event", content_type = "application/x-asciicast", body = String),
        (status = 400, description = "`invalid decky name` or `invalid sid`"),
        (status = 404, description = "session not found"),
        AdminOnly,
    )
)]
pub async fn transcript_cast(
    State(state): State<AppState>,
    _admin: Admin,
    Path(SessionPath { decky, sid }): Path<SessionPath>,
) -> Result<Response> {
    let session = Session::find(&state, &decky, &sid).await?;
    let mut text = session.header().to_string();
    for event in &session.events {
        text.push('\n');
        text.push_str(&event.to_string());
    }
    text.push('\n');
    // Both parts were checked against [a-z0-9-] above: nothing to escape.
    Ok(download(text, "application/x-asciicast", &format!("{decky}-{sid}.cast")))
}

/// A recorded session as its row holds it.
struct Session {
    service: String,
    /// Unix seconds at which it started (the row's time is its end).
    started: f64,
    width: u64,
    height: u64,
    events: Vec<Value>,
    truncated: bool,
}

impl Session {
    /// The session `sid` on `decky`: 400 for a name or id of the wrong form, 404 when none is stored.
    async fn find(state: &AppState, decky: &str, sid: &str) -> Result<Session> {
        if !is_lowercase_name(decky) {
            return Err(ApiError::bad_request("invalid decky name"));
        }
        if sid.len() != 36 || !sid.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-') {
            return Err(ApiError::bad_request("invalid sid"));
        }
        let filter = LogFilter {
            terms: vec![
                SearchTerm::Column(LogColumn::Decky, decky.to_string()),
                SearchTerm::Column(LogColumn::EventType, SESSION_RECORDED.to_string()),
                SearchTerm::Field("sid".into(), sid.to_string()),
            ],
            ..LogFilter::default()
        };
        let row =
            state.db.logs(&filter, 1, 0).await?.rows.pop().ok_or_else(|| ApiError::not_found("session not found"))?;
        Ok(Session::of(row))
    }

    fn of(row: LogRecord) -> Session {
        let fields: Value = serde_json::from_str(&row.fields).unwrap_or_default();
        let text = |key: &str| fields[key].as_str().unwrap_or_default().to_string();
        let number = |key: &str| text(key).parse::<f64>().ok();
        let events: Vec<Value> = serde_json::from_str(&text("cast")).unwrap_or_default();
        let ended = row.timestamp.timestamp_millis() as f64 / 1000.0;
        Session {
            service: if text("service").is_empty() { row.service } else { text("service") },
            started: ended - number("duration_s").unwrap_or(0.0),
            width: number("width").map_or(80, |w| w as u64),
            height: number("height").map_or(24, |h| h as u64),
            // Only well-formed events: a player stops at the first it cannot read.
            events: events.into_iter().filter(is_event).collect(),
            truncated: text("truncated") == "true",
        }
    }

    fn header(&self) -> Value {
        json!({
            "version": 2,
            "width": self.width,
            "height": self.height,
            "timestamp": self.started.floor() as i64,
            "env": {"TERM": "xterm-256color", "SHELL": "/bin/bash"},
        })
    }
}

/// `[seconds, "i" | "o" | "r", text]`.
fn is_event(event: &Value) -> bool {
    matches!(event.as_array().map(Vec::as_slice),
        Some([Value::Number(_), Value::String(channel), Value::String(_)]) if ["i", "o", "r"].contains(&channel.as_str()))
}
