//! Ingestion: what one ingest transaction stores (log rows, bounties, credentials), where each
//! source's ingestion stands (its cursor) and who may move it (its lease). The statements are
//! written once in `sql.rs`; the dialects differ only in how the credential upsert tells new
//! credentials from repeated ones (`sqlite.rs`: `returning`; `mysql.rs`: the affected-row count).

mod mysql;
pub(in crate::db) mod sql;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::DbResult;

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
    /// The trace the line was carried in (`crate::traces`), when it carried one.
    pub trace: Option<LogTrace>,
}

/// The OpenTelemetry ids stored with a row: 32 and 16 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTrace {
    pub trace_id: String,
    pub span_id: String,
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

/// Where ingestion of one source stands: which file (device and inode, `"<dev>:<ino>"`) and the
/// byte offset of the first byte not yet stored, and a fingerprint of the bytes before it (empty
/// when unknown), so a file rewritten under the same identity is told apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IngestCursor {
    pub file_id: String,
    pub offset: u64,
    pub fingerprint: String,
}

/// What one ingest transaction stores, and where the source stands after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestBatch {
    pub logs: Vec<NewLog>,
    pub bounties: Vec<NewBounty>,
    pub credentials: Vec<NewCredential>,
    pub cursor: Option<IngestCursor>,
    /// The swarm host every line of the batch came from (its forwarder shipped them); `None` for
    /// this host's own file.
    pub host_uuid: Option<uuid::Uuid>,
}

/// What a committed batch stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    pub logs: u64,
    /// The highest log id now stored (0 when the table is empty).
    pub last_log_id: i64,
    /// Bounties not seen before.
    pub new_bounties: u64,
    /// Credentials not seen before (a repeat only counts an attempt).
    pub new_credentials: u64,
    /// Which of the batch's credentials were stored for the first time (indexes into
    /// `IngestBatch::credentials`, one per credential even when the batch repeats it): what the
    /// ingester announces as `credential.captured`.
    pub captured: Vec<usize>,
}

#[async_trait]
pub trait IngestStore {
    /// Takes, or renews, the worker lease on `source` for `holder` until `now + ttl`: true when
    /// `holder` holds it afterwards. Another holder's lease is taken only once it has expired, so
    /// one worker per source works at a time, across processes and replicas: an ingester per log
    /// file, one profiler ([`PROFILER_LEASE_SOURCE`](crate::db::PROFILER_LEASE_SOURCE)), one
    /// webhook deliverer. (Its table, `ingest_leases`, is named for the first of them.)
    async fn acquire_worker_lease(
        &self,
        source: &str,
        holder: &str,
        now: DateTime<Utc>,
        ttl: std::time::Duration,
    ) -> DbResult<bool>;

    /// Gives the lease up at once (on a clean stop), if `holder` holds it.
    async fn release_worker_lease(&self, source: &str, holder: &str) -> DbResult<()>;

    /// Where ingestion of `source` stands; `None` before its first batch.
    async fn ingest_cursor(&self, source: &str) -> DbResult<Option<IngestCursor>>;

    /// In one transaction: checks that `holder` still holds the lease on `source` and that its
    /// cursor is still `expected`, stores the batch (logs; bounties not stored before; credentials
    /// inserted or their attempt counted) and moves the cursor to `batch.cursor`. `Conflict`, with
    /// nothing stored, when the lease or the cursor moved meanwhile. A crash at any moment leaves
    /// either all of the batch and its cursor, or none.
    async fn commit_ingest(
        &self,
        source: &str,
        holder: &str,
        expected: Option<&IngestCursor>,
        batch: &IngestBatch,
    ) -> DbResult<Committed>;
}
