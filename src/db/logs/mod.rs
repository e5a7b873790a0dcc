//! The log views: log rows, bounties and credentials as the dashboard pages, searches, streams
//! and counts them. The statements are written once in `sql.rs`; the dialects differ in the
//! index each view must walk, which MySQL/MariaDB must be told (`mysql.rs`: with the limit a
//! placeholder and lagging statistics it was seen to scan and sort instead) and sqlite must be
//! kept from a column index when it follows the ids (`sqlite.rs`), and in how the log rows are
//! read: through sqlx on MySQL, on sqlite's own read path (`db::sqlite::reads`) on sqlite.

mod mysql;
mod search;
mod sql;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use search::{CountedColumns, LogColumn, SearchTerm, parse_search};

/// Ingest transactions committed by this process, through any handle.
static LOG_COMMITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many ingest transactions this process has committed: what a reader that reuses log pages
/// compares, so a row committed here is in the next page read.
pub fn log_commits() -> u64 {
    LOG_COMMITS.load(std::sync::atomic::Ordering::Acquire)
}

/// Counts an ingest transaction just committed.
pub(in crate::db) fn logs_committed() {
    LOG_COMMITS.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
}

use super::{DbResult, Page};

/// A stored log row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Increases with every row stored: the stream's resume point.
    pub id: i64,
    pub timestamp: DateTime<Utc>,
    pub decky: String,
    pub service: String,
    pub event_type: String,
    pub attacker_ip: String,
    pub raw_line: String,
    pub fields: String,
    pub msg: Option<String>,
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    /// The swarm host the line came from; `None` for this host's own lines.
    pub host_uuid: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BountyRecord {
    pub id: i64,
    pub timestamp: DateTime<Utc>,
    pub decky: String,
    pub service: String,
    pub attacker_ip: String,
    pub bounty_type: String,
    pub payload: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRecord {
    pub id: i64,
    pub attacker_ip: String,
    pub decky: String,
    pub service: String,
    pub secret_kind: String,
    pub secret_sha256: String,
    pub principal: Option<String>,
    pub secret_printable: String,
    pub secret_b64: String,
    pub outcome: Option<String>,
    pub attempt_count: u64,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
}

/// Which log rows a view shows.
/// Fields admin-only on every row: the mail an attacker sent (recipients, subject), captured
/// bodies (mail, HTTP) and recorded shell sessions (`cast`: what was typed, passwords included).
pub const ADMIN_ONLY_FIELDS: [&str; 4] = ["rcpt_to", "subject", "body", "cast"];
/// Events whose `value` field is a recipient (DECNET's recipient events): admin-only too.
pub const RECIPIENT_EVENTS: [&str; 2] = ["rcpt_to", "rcpt_denied"];

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogFilter {
    pub terms: Vec<SearchTerm>,
    /// For a reader who may not see admin-only fields ([`ADMIN_ONLY_FIELDS`]): a free-text term
    /// does not look into the raw line of a row that carries one, so a search cannot probe them.
    pub text_outside_admin_only: bool,
    /// Inclusive bounds on the log's timestamp.
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Which bounties a view shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BountyFilter {
    pub bounty_type: Option<String>,
    /// Only this attacker address, exactly.
    pub attacker_ip: Option<String>,
    /// A substring of the decky, service, attacker IP or payload.
    pub search: Option<String>,
}

/// Which credentials a view shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialFilter {
    /// A substring of the principal, printable secret, attacker IP, decky or service.
    pub search: Option<String>,
    /// Only this service, exactly.
    pub service: Option<String>,
    /// Only this attacker address, exactly.
    pub attacker_ip: Option<String>,
}

/// One secret (with its principal) tried against several targets (decky and service pairs),
/// from any number of addresses: the credentials table grouped, never stored apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialReuse {
    /// 32 hex digits derived from the secret, its kind and principal: the same finding keeps it.
    pub id: String,
    pub secret_sha256: String,
    pub secret_kind: String,
    pub principal: Option<String>,
    /// The principal, or "" when there is none.
    pub principal_key: String,
    pub secret_printable: String,
    pub secret_b64: String,
    /// Distinct (decky, service) pairs it was tried against.
    pub target_count: u64,
    /// Attempts over all of them.
    pub attempt_count: u64,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// Distinct, sorted; the addresses at most [`MAX_REUSE_ADDRESSES`].
    pub attacker_ips: Vec<String>,
    pub deckies: Vec<String>,
    pub services: Vec<String>,
}

/// A reuse finding is one secret tried against two targets at least.
pub const MIN_REUSE_TARGETS: u32 = 2;

/// The addresses a reuse finding lists at most: a common password is tried by thousands of bots.
pub const MAX_REUSE_ADDRESSES: usize = 100;

/// Log rows counted per time bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistogramBucket {
    pub start: DateTime<Utc>,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    pub total_logs: u64,
    /// Distinct attacker addresses in the logs.
    pub unique_attackers: u64,
}

#[async_trait]
pub trait LogStore {
    /// Newest first (timestamp, then id, descending), with the total that match.
    async fn logs(&self, filter: &LogFilter, limit: u32, offset: u64) -> DbResult<Page<LogRecord>>;

    /// Rows with an id above `after_id` that match, oldest first (id ascending), at most `limit`.
    async fn logs_after(&self, after_id: i64, filter: &LogFilter, limit: u32) -> DbResult<Vec<LogRecord>>;

    /// The highest log id stored, 0 when there is none.
    async fn last_log_id(&self) -> DbResult<i64>;

    /// Matching rows counted per bucket of `bucket_minutes`, buckets aligned to the epoch, oldest
    /// first, empty buckets left out.
    async fn log_histogram(&self, filter: &LogFilter, bucket_minutes: u32) -> DbResult<Vec<HistogramBucket>>;

    async fn log_stats(&self) -> DbResult<LogStats>;

    /// Newest first (timestamp, then id, descending), with the total that match.
    async fn bounties(&self, filter: &BountyFilter, limit: u32, offset: u64) -> DbResult<Page<BountyRecord>>;

    /// Most recently seen first (then id, descending), with the total that match.
    async fn credentials(&self, filter: &CredentialFilter, limit: u32, offset: u64)
    -> DbResult<Page<CredentialRecord>>;

    /// Secrets tried against at least `min_targets` distinct (decky, service) pairs, optionally of
    /// one kind; most targets first, then most recently seen, with the total that match. Grouped
    /// over the whole credentials table on every call.
    async fn credential_reuse(
        &self,
        min_targets: u32,
        secret_kind: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> DbResult<Page<CredentialReuse>>;

    /// The reuse finding whose `id` this is (`NotFound` when no secret with that id is tried
    /// against two targets or more). Reads the distinct secrets to find the id's.
    async fn credential_reuse_finding(&self, id: &str) -> DbResult<CredentialReuse>;
}
