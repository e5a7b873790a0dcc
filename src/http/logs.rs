//! `GET /logs` (a page of log rows, newest first) and `GET /logs/histogram` (rows per time bucket),
//! with the filter every log view shares: the dashboard's search grammar and a time window. The
//! row and bucket shapes here are also what the log stream sends.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{FieldError, ValidQuery, Validate, check_datetime, check_max_chars, check_range, given};
use super::guard::Viewer;
use super::paging::{Listed, MAX_LIMIT, Page, Paging};
use super::redact;
use super::responses::ViewerOnly;
use super::{AppState, Result};
use crate::db::{ADMIN_ONLY_FIELDS, HistogramBucket, LogFilter, LogRecord, Role, SearchTerm, parse_search};
use crate::time::{format_utc, parse_utc};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_logs)).routes(routes!(histogram))
}

/// The longest `search` accepted, in characters.
pub const MAX_SEARCH_CHARS: usize = 512;
pub const DEFAULT_INTERVAL_MINUTES: i64 = 15;
/// A week: wider buckets make a histogram of one or two bars.
pub const MAX_INTERVAL_MINUTES: i64 = 7 * 24 * 60;

/// Checks the filter parameters every log view takes.
pub(super) fn check_filter(
    search: &Option<String>,
    start_time: &Option<String>,
    end_time: &Option<String>,
    errors: &mut Vec<FieldError>,
) {
    check_max_chars("search", search.as_deref(), MAX_SEARCH_CHARS, errors);
    check_datetime("start_time", start_time.as_deref(), errors);
    check_datetime("end_time", end_time.as_deref(), errors);
}

/// The filter of checked parameters ([`check_filter`]) for a reader of `role`. A viewer's search
/// cannot probe what `redact` hides from them: a term on an admin-only field is ignored (the
/// answer is the same whatever its value), and free text does not look into rows carrying one.
pub(super) fn log_filter(
    role: Role,
    search: &Option<String>,
    start_time: &Option<String>,
    end_time: &Option<String>,
) -> LogFilter {
    let time = |value: &Option<String>| given(value).and_then(|v| parse_utc(v).ok());
    let viewer = role != Role::Admin;
    let mut terms = given(search).map(parse_search).unwrap_or_default();
    if viewer {
        terms.retain(|term| !matches!(term, SearchTerm::Field(key, _) if ADMIN_ONLY_FIELDS.contains(&key.as_str())));
    }
    LogFilter { terms, text_outside_admin_only: viewer, since: time(start_time), until: time(end_time) }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Rows per page, 1 to 1000.
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// Space-separated terms, all of which must match: `decky:`, `service:`, `event:` or
    /// `attacker:` match a column exactly, any other `key:value` a field of the line, a bare word a
    /// substring of the line, decky, service or attacker address. Quotes group words. At most 512
    /// characters.
    #[param(max_length = 512)]
    pub search: Option<String>,
    /// Earliest timestamp, inclusive: RFC 3339, or `YYYY-MM-DD HH:MM:SS` taken as UTC.
    pub start_time: Option<String>,
    /// Latest timestamp, inclusive, in the same forms.
    pub end_time: Option<String>,
}

impl Validate for LogsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_LIMIT, errors);
        check_filter(&self.search, &self.start_time, &self.end_time, errors);
    }
}

/// A stored log line. `fields` is the JSON object as text, which DECNET's dashboard decodes itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
// The OpenAPI document keeps publishing the name clients were generated from.
#[schema(as = LogRow)]
pub struct LogEntry {
    pub id: i64,
    /// RFC 3339, UTC, milliseconds.
    pub timestamp: String,
    pub decky: String,
    pub service: String,
    pub event_type: String,
    pub attacker_ip: String,
    pub raw_line: String,
    /// A JSON object, as text.
    pub fields: String,
    pub msg: Option<String>,
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    /// The swarm host (uuid) whose forwarder shipped the line; null for the master's own lines.
    pub host_uuid: Option<String>,
}

impl From<LogRecord> for LogEntry {
    fn from(log: LogRecord) -> Self {
        LogEntry {
            id: log.id,
            timestamp: format_utc(log.timestamp),
            decky: log.decky,
            service: log.service,
            event_type: log.event_type,
            attacker_ip: log.attacker_ip,
            raw_line: log.raw_line,
            fields: log.fields,
            msg: log.msg,
            trace_id: log.trace_id,
            span_id: log.span_id,
            host_uuid: log.host_uuid,
        }
    }
}

impl Listed for LogEntry {
    const PAGE: &'static str = "LogsResponse";
    const COUNTED: &'static str = "Rows matching the filter, on every page.";
}

pub type LogsResponse = Page<LogEntry>;

/// One page of log rows, newest first.
#[utoipa::path(
    get,
    path = "/logs",
    tag = "logs",
    security(("bearer" = [])),
    params(LogsQuery),
    responses(
        (status = 200, description = "A page of rows, newest first", body = LogsResponse),
        (status = 422, description = "A parameter out of range, too long or malformed"),
        ViewerOnly,
    )
)]
pub async fn list_logs(
    State(state): State<AppState>,
    Viewer(session): Viewer,
    ValidQuery(query): ValidQuery<LogsQuery>,
) -> Result<Response> {
    let paging = Paging::of(query.limit, query.offset);
    let LogsQuery { search, start_time, end_time, .. } = query;
    let Paging { limit, offset } = paging;
    let role = session.user.role;
    // Per role: a viewer's body is redacted (`redact`), an admin's is not.
    let key = format!("logs {role:?} {limit} {offset} {search:?} {start_time:?} {end_time:?}");
    let read = async {
        let filter = log_filter(role, &search, &start_time, &end_time);
        let page = state.db.logs(&filter, limit, offset).await?;
        let rows = page.rows.into_iter().map(|row| redact::for_reader(role, LogEntry::from(row))).collect();
        Ok::<LogsResponse, _>(paging.page_of(page.total, rows))
    };
    state.hot_reads.json(key, read).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistogramQuery {
    /// As for `GET /logs`.
    #[param(max_length = 512)]
    pub search: Option<String>,
    /// As for `GET /logs`.
    pub start_time: Option<String>,
    /// As for `GET /logs`.
    pub end_time: Option<String>,
    /// Bucket width in minutes, 1 to 10080 (a week).
    #[param(minimum = 1, maximum = 10080, default = 15)]
    pub interval_minutes: Option<i64>,
}

impl Validate for HistogramQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        let interval = self.interval_minutes.unwrap_or(DEFAULT_INTERVAL_MINUTES);
        check_range("interval_minutes", interval, 1, MAX_INTERVAL_MINUTES, errors);
        check_filter(&self.search, &self.start_time, &self.end_time, errors);
    }
}

/// Rows in one time bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HistogramPoint {
    /// The bucket's start, RFC 3339 UTC; buckets are aligned to the epoch.
    pub time: String,
    pub count: u64,
}

impl From<HistogramBucket> for HistogramPoint {
    fn from(bucket: HistogramBucket) -> Self {
        HistogramPoint { time: format_utc(bucket.start), count: bucket.count }
    }
}

/// Matching rows counted per bucket, oldest first; empty buckets are left out.
#[utoipa::path(
    get,
    path = "/logs/histogram",
    tag = "logs",
    security(("bearer" = [])),
    params(HistogramQuery),
    responses(
        (status = 200, description = "Buckets, oldest first", body = [HistogramPoint]),
        (status = 422, description = "A parameter out of range, too long or malformed"),
        ViewerOnly,
    )
)]
pub async fn histogram(
    State(state): State<AppState>,
    Viewer(session): Viewer,
    ValidQuery(query): ValidQuery<HistogramQuery>,
) -> Result<Json<Vec<HistogramPoint>>> {
    let interval = query.interval_minutes.unwrap_or(DEFAULT_INTERVAL_MINUTES) as u32;
    let filter = log_filter(session.user.role, &query.search, &query.start_time, &query.end_time);
    let buckets = state.db.log_histogram(&filter, interval).await?;
    Ok(Json(buckets.into_iter().map(HistogramPoint::from).collect()))
}
