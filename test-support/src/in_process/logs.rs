//! Log rows and bounties stored the way the ingester stores them: through `commit_ingest`, under
//! the worker lease, each batch moving a cursor.

use chrono::{DateTime, Utc};
use serde_json::Value;
use svc::db::{Committed, Db, DbResult, IngestBatch, IngestCursor, NewBounty, NewCredential, NewLog};

const SOURCE: &str = "tests";
const HOLDER: &str = "test-ingester";

/// Commits batches as the only ingester of its source.
pub struct LogWriter {
    db: Db,
    cursor: Option<IngestCursor>,
}

impl LogWriter {
    pub async fn new(db: &Db) -> LogWriter {
        let leased =
            db.acquire_worker_lease(SOURCE, HOLDER, Utc::now(), std::time::Duration::from_secs(3600)).await.unwrap();
        assert!(leased, "the test ingester holds the lease");
        LogWriter { db: db.clone(), cursor: db.ingest_cursor(SOURCE).await.unwrap() }
    }

    pub async fn commit(&mut self, logs: Vec<NewLog>, bounties: Vec<NewBounty>) -> Committed {
        self.commit_with_credentials(logs, bounties, vec![]).await
    }

    pub async fn commit_with_credentials(
        &mut self,
        logs: Vec<NewLog>,
        bounties: Vec<NewBounty>,
        credentials: Vec<NewCredential>,
    ) -> Committed {
        let batch = IngestBatch { logs, bounties, credentials, cursor: None, host_uuid: None };
        self.try_commit(batch).await.unwrap()
    }

    /// Commits `batch` at the next position; on an error (a transaction the database rolled
    /// back) the position stays, so the same batch can be committed again, as the ingester does.
    pub async fn try_commit(&mut self, mut batch: IngestBatch) -> DbResult<Committed> {
        let offset = self.cursor.as_ref().map_or(0, |c| c.offset) + 1;
        let next = IngestCursor { file_id: "1:1".into(), offset, ..Default::default() };
        batch.cursor = Some(next.clone());
        let committed = self.db.commit_ingest(SOURCE, HOLDER, self.cursor.as_ref(), &batch).await?;
        self.cursor = Some(next);
        Ok(committed)
    }

    pub async fn logs(&mut self, logs: Vec<NewLog>) -> Committed {
        self.commit(logs, vec![]).await
    }
}

/// A log line from `decky`/`service` about `attacker_ip`, with `fields`, at `at`.
pub fn log(
    decky: &str,
    service: &str,
    event_type: &str,
    attacker_ip: &str,
    fields: Value,
    at: DateTime<Utc>,
) -> NewLog {
    let sd: String = fields
        .as_object()
        .map(|o| o.iter().map(|(k, v)| format!(" {k}=\"{}\"", v.as_str().unwrap_or_default())).collect())
        .unwrap_or_default();
    NewLog {
        timestamp: at,
        decky: decky.into(),
        service: service.into(),
        event_type: event_type.into(),
        attacker_ip: attacker_ip.into(),
        raw_line: format!(
            "<134>1 {} {decky} {service} - {event_type} [relay@55555 src_ip=\"{attacker_ip}\"{sd}]",
            svc::time::format_utc(at)
        ),
        fields: fields.to_string(),
        msg: None,
        trace: None,
    }
}

pub fn bounty(bounty_type: &str, attacker_ip: &str, payload: &str, at: DateTime<Utc>) -> NewBounty {
    NewBounty {
        timestamp: at,
        decky: "web-01".into(),
        service: "http".into(),
        attacker_ip: attacker_ip.into(),
        bounty_type: bounty_type.into(),
        payload: payload.into(),
    }
}

/// `2026-11-21T14:00:00Z` plus `minutes`.
pub fn at(minutes: i64) -> DateTime<Utc> {
    svc::time::parse_utc("2026-11-21T14:00:00Z").unwrap() + chrono::Duration::minutes(minutes)
}
