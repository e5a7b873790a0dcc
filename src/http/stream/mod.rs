//! `GET /stream`: Server-Sent Events of live log rows, in DECNET's frames (`event: message`, data
//! `{"type": "stats" | "histogram" | "logs", "data": …}`) plus what DECNET lacks: every `logs` frame
//! carries `id: <its last row id>`, and a client that reconnects with `Last-Event-ID` (or the
//! dashboard's `?lastEventId=`) gets every row it missed before the live ones.
//!
//! Each stream waits on the process's [`LogTail`] and reads rows only when a commit moved it;
//! statistics and the histogram are re-sent after rows (at most once a second) and otherwise every
//! 10 s. A database failure ends the stream with an `error` frame; server shutdown ends it at once,
//! so the drain does not wait on open streams.
//!
//! This module owns the route, its query and `Last-Event-ID` parsing, and each stream's feed; the
//! rest of the stream sits beside it: [`sse`] (the event-stream response and the per-user cap),
//! [`log_tail`] (the newest committed log id every stream waits on) and [`summaries`] (the
//! statistics and histogram the streams share). The two bus-fed streams, [`attacker_events`] and
//! [`topology_events`], open the same way through [`bus_events`].

pub mod attacker_events;
pub mod bus_events;
pub mod identity_events;
pub mod log_tail;
pub mod revocation;
pub mod sse;
pub mod summaries;
pub mod topology_events;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use axum::response::sse::Event;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::sse::SseSlot;
use self::summaries::histogram;
use super::extract::{FieldError, InvalidDetail, ValidQuery, Validate, check_range, reject};
use super::guard::StreamViewer;
use super::logs::{LogEntry, check_filter, log_filter};
use super::redact;
use super::responses::EventStream;
use super::{ApiError, AppState, Result};
use crate::db::{Db, DbResult, LogFilter, Role};
use crate::fleet::Fleet;

pub use log_tail::LogTail;
pub use sse::SseSlots;
pub use summaries::Summaries;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(stream))
        .routes(routes!(attacker_events::attacker_events))
        .routes(routes!(topology_events::topology_events))
        .routes(routes!(identity_events::identity_events))
        .routes(routes!(identity_events::campaign_events))
}

/// Rows per `logs` frame.
pub const BATCH: u32 = 50;
/// After rows, statistics follow once this has passed since they were last sent.
const SUMMARY_AFTER_ROWS: Duration = Duration::from_secs(1);
/// Without rows, statistics are refreshed this often.
const SUMMARY_IDLE: Duration = Duration::from_secs(10);

const RESUME_HEADER: &str = "last-event-id";

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// A single-use ticket from `POST /auth/sse-ticket`, for clients that cannot send a header.
    pub ticket: Option<String>,
    /// Where to resume, as DECNET's dashboard sends it: the id of the last row received. 0 or
    /// absent means no resume. The `Last-Event-ID` header wins when both are present.
    #[serde(rename = "lastEventId")]
    #[param(minimum = 0)]
    pub last_event_id: Option<i64>,
    /// As for `GET /logs`.
    #[param(max_length = 512)]
    pub search: Option<String>,
    /// As for `GET /logs`.
    pub start_time: Option<String>,
    /// As for `GET /logs`.
    pub end_time: Option<String>,
}

impl Validate for StreamQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(id) = self.last_event_id {
            check_range("lastEventId", id, 0, i64::MAX, errors);
        }
        check_filter(&self.search, &self.start_time, &self.end_time, errors);
    }
}

/// The `Last-Event-ID` header an `EventSource` sends when it reconnects: the `id:` of the last frame
/// it received. Anything but a non-negative integer in decimal digits (an empty value too: an
/// `EventSource` without an id sends no header) is a 422, rather than a silent start from now.
#[derive(Debug)]
pub struct LastEventId(pub Option<i64>);

impl FromRequestParts<AppState> for LastEventId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(RESUME_HEADER) else { return Ok(LastEventId(None)) };
        let text = value.to_str().map(str::trim).unwrap_or("");
        let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
        match text.parse::<i64>() {
            Ok(id) if digits => Ok(LastEventId(Some(id))),
            _ => {
                let error = FieldError::new(
                    "int_parsing",
                    &["header", "Last-Event-ID"],
                    "Input should be a non-negative integer (a log id)",
                );
                Err(ApiError::Invalid(reject(
                    &[error],
                    InvalidDetail::of(&parts.extensions),
                    state.config.api.developer,
                )))
            }
        }
    }
}

/// Live log rows as Server-Sent Events. On connect: a `stats` and a `histogram` frame (15-minute
/// buckets, same filter); then every matching row after the resume point (or from now, without
/// one), oldest first, 50 to a `logs` frame whose `id:` is its last row's id; statistics again after
/// rows and every 10 s; `: keepalive` after 15 s of silence. A database failure sends
/// `event: error` and ends the stream, as does the session's revocation (logout, expiry, a password
/// or role change, the user's deletion) within `SVC_SSE_RECHECK_SECS`.
#[utoipa::path(
    get,
    path = "/stream",
    tag = "logs",
    security(("bearer" = [])),
    params(
        StreamQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this log id (sent by EventSource on reconnect)"),
    ),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = sse::SseFrame),
        (status = 422, description = "A parameter out of range, too long or malformed"),
        EventStream,
    )
)]
pub async fn stream(
    State(state): State<AppState>,
    StreamViewer(session): StreamViewer,
    LastEventId(header): LastEventId,
    ValidQuery(query): ValidQuery<StreamQuery>,
) -> Result<Response> {
    // DECNET's default `lastEventId=0` means "from now", so only a positive one resumes.
    let resume = header.or(query.last_event_id.filter(|id| *id > 0));
    let slot = state.sse.acquire(session.user.uuid)?;
    tracing::debug!(user = %session.user.username, ?resume, "Log stream opened");
    let filter = log_filter(session.user.role, &query.search, &query.start_time, &query.end_time);
    let feed = LogFeed::new(&state, filter, resume, slot, session.user.role);
    let frames = futures::stream::unfold(feed, |mut feed| async move {
        feed.next_event().await.map(|event| (Ok::<_, Infallible>(event), feed))
    });
    Ok(revocation::response(&state, &session, frames))
}

/// One stream's state: where it stands and the frames ready to go.
struct LogFeed {
    /// The reader's role: a viewer's rows are redacted (`redact`).
    role: Role,
    db: Db,
    fleet: Fleet,
    summaries: Arc<Summaries>,
    filter: LogFilter,
    /// Every row up to this id has been sent or does not match; `None` until the newest id at
    /// connect is read (no resume point).
    cursor: Option<i64>,
    newest: watch::Receiver<i64>,
    closing: CancellationToken,
    ready: VecDeque<Event>,
    started: bool,
    caught_up: bool,
    done: bool,
    last_summary: Instant,
    rows_since_summary: bool,
    /// Frees the user's slot when the stream is dropped, however it ends.
    _slot: SseSlot,
}

impl LogFeed {
    fn new(state: &AppState, filter: LogFilter, resume: Option<i64>, slot: SseSlot, role: Role) -> LogFeed {
        LogFeed {
            role,
            db: state.db.clone(),
            fleet: state.fleet.clone(),
            summaries: state.summaries.clone(),
            filter,
            cursor: resume,
            newest: state.log_tail.watch(),
            closing: state.closing.clone(),
            ready: VecDeque::new(),
            started: false,
            caught_up: false,
            done: false,
            last_summary: Instant::now(),
            rows_since_summary: false,
            _slot: slot,
        }
    }

    /// The next frame, or `None` once the stream is over.
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            if let Err(err) = self.step().await {
                tracing::warn!(error = %format!("{err:#}"), "Log stream interrupted by a database error");
                self.ready.push_back(
                    Event::default()
                        .event("error")
                        .data(json!({"type": "error", "message": "Stream interrupted"}).to_string()),
                );
                self.done = true;
            }
        }
    }

    /// Queues the next frames, waiting for news when there is nothing to send.
    async fn step(&mut self) -> DbResult<()> {
        if self.closing.is_cancelled() {
            self.done = true;
        } else if !self.started {
            self.started = true;
            if self.cursor.is_none() {
                self.cursor = Some(self.db.last_log_id().await?);
            }
            self.queue_summary().await?;
        } else if !self.caught_up {
            self.queue_rows().await?;
        } else {
            self.wait().await?;
        }
        Ok(())
    }

    /// One frame of rows after the cursor; caught up when fewer than a frame's worth are left.
    async fn queue_rows(&mut self) -> DbResult<()> {
        // Marked seen before reading, so a commit during the read wakes the stream again.
        self.newest.mark_unchanged();
        let cursor = self.cursor.unwrap_or_default();
        // With a filter, rows that do not match are skipped for good: every id up to the newest
        // read here was committed before the query (the ingester is the only writer of log rows,
        // one batch at a time), so a rare filter does not re-scan them on every commit.
        let skip_to = if self.filter == LogFilter::default() { None } else { Some(self.db.last_log_id().await?) };
        let rows = self.db.logs_after(cursor, &self.filter, BATCH).await?;
        let full = rows.len() == BATCH as usize;
        if let Some(last) = rows.last().map(|row| row.id) {
            let rows: Vec<LogEntry> =
                rows.into_iter().map(|row| redact::for_reader(self.role, LogEntry::from(row))).collect();
            self.ready.push_back(message(&json!({"type": "logs", "data": rows})).id(last.to_string()));
            self.cursor = Some(last);
            self.rows_since_summary = true;
        }
        if !full {
            self.caught_up = true;
            self.cursor = self.cursor.max(skip_to);
        }
        Ok(())
    }

    /// Until a commit, the statistics are due, or the server shuts down.
    async fn wait(&mut self) -> DbResult<()> {
        let due = self.last_summary + if self.rows_since_summary { SUMMARY_AFTER_ROWS } else { SUMMARY_IDLE };
        tokio::select! {
            () = self.closing.cancelled() => self.done = true,
            changed = self.newest.changed() => match changed {
                // Rows the stream has not seen, as far as the tail knows.
                Ok(()) => self.caught_up = *self.newest.borrow() <= self.cursor.unwrap_or_default(),
                Err(_) => self.done = true,
            },
            () = tokio::time::sleep_until(due) => self.queue_summary().await?,
        }
        Ok(())
    }

    async fn queue_summary(&mut self) -> DbResult<()> {
        let stats = self.summaries.stats(&self.db, &self.fleet).await?;
        let histogram = if self.filter == LogFilter::default() {
            self.summaries.histogram(&self.db).await?
        } else {
            histogram(&self.db, &self.filter).await?
        };
        self.ready.push_back(message(&json!({"type": "stats", "data": stats})));
        self.ready.push_back(message(&json!({"type": "histogram", "data": histogram})));
        self.last_summary = Instant::now();
        self.rows_since_summary = false;
        Ok(())
    }
}

fn message(data: &serde_json::Value) -> Event {
    Event::default().event("message").data(data.to_string())
}
