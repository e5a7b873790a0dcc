//! What the log pipeline stores and reads: log rows, bounties, credentials, the ingest cursor and
//! lease, and the filters of the log and bounty views. Domain types only; each backend owns its SQL.

use chrono::{DateTime, Utc};

/// A log line as the ingester stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLog {
    pub timestamp: DateTime<Utc>,
    pub decky: String,
    pub service: String,
    pub event_type: String,
    pub attacker_ip: String,
    pub raw_line: String,
    /// A JSON object text (DECNET's dashboard reads `fields` as a string and decodes it itself).
    pub fields: String,
    pub msg: Option<String>,
}

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
}

/// A captured artifact or fingerprint, stored once per (`bounty_type`, `attacker_ip`, `payload`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewBounty {
    pub timestamp: DateTime<Utc>,
    pub decky: String,
    pub service: String,
    pub attacker_ip: String,
    /// `credential`, `fingerprint`, `artifact`, …
    pub bounty_type: String,
    /// A JSON object text.
    pub payload: String,
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

/// A captured secret. One row per (attacker_ip, decky, service, secret_kind, secret_sha256,
/// principal or ""); seeing it again counts an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCredential {
    pub seen_at: DateTime<Utc>,
    pub attacker_ip: String,
    pub decky: String,
    pub service: String,
    /// `plaintext` unless the line says otherwise (`http_bearer`, `http_digest_md5`, …).
    pub secret_kind: String,
    /// Hex SHA-256 of the decoded secret bytes.
    pub secret_sha256: String,
    pub principal: Option<String>,
    pub secret_printable: String,
    pub secret_b64: String,
    pub outcome: Option<String>,
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

/// Where ingestion of one source stands: which file (device and inode, `"<dev>:<ino>"`) and the
/// byte offset of the first byte not yet stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestCursor {
    pub file_id: String,
    pub offset: u64,
}

/// What one ingest transaction stores, and where the source stands after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestBatch {
    pub logs: Vec<NewLog>,
    pub bounties: Vec<NewBounty>,
    pub credentials: Vec<NewCredential>,
    pub cursor: Option<IngestCursor>,
}

/// What a committed batch stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    pub logs: u64,
    /// The highest log id now stored (0 when the table is empty).
    pub last_log_id: i64,
    /// Bounties not seen before.
    pub new_bounties: u64,
    /// Credentials not seen before (a repeat only counts an attempt).
    pub new_credentials: u64,
}

/// One page of a listing and the total it is part of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub total: u64,
    pub rows: Vec<T>,
}

/// The columns the search grammar's `key:value` names match exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogColumn {
    Decky,
    Service,
    EventType,
    AttackerIp,
}

/// One AND-ed term of a log search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SearchTerm {
    /// `decky:`, `service:`, `event:`, `attacker:` / `attacker-ip:` / `attacker_ip:` → column equals.
    Column(LogColumn, String),
    /// Any other `key:value` → the field `key` (only `[A-Za-z0-9_]` kept) equals the value.
    Field(String, String),
    /// A bare token → a substring of the raw line, decky, service or attacker IP.
    Text(String),
}

/// Which log rows a view shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogFilter {
    pub terms: Vec<SearchTerm>,
    /// Inclusive bounds on the log's timestamp.
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Which bounties a view shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BountyFilter {
    pub bounty_type: Option<String>,
    /// A substring of the decky, service, attacker IP or payload.
    pub search: Option<String>,
}

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

/// The dashboard's search grammar (`reference/decnet-api.md` §8): shell-like tokens (quotes group
/// words; an unbalanced quote falls back to splitting on whitespace), AND-ed. `null`, `NULL`,
/// `undefined` and the empty string mean no search.
pub fn parse_search(search: &str) -> Vec<SearchTerm> {
    let _ = search;
    Vec::new()
}
