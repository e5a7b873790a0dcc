//! The observations' statements, written once for both backends, and the columns a record is
//! stored as (the profiler's commit stores its own records through the same insert).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::{ObservationStore, ObservationsStored};
use crate::db::codec::{MAX_ROWS_PER_INSERT, convert, dedup_key, json_text, millis, row_sets, settle};
use crate::db::dialect::both_backends;
use crate::db::{DbError, DbResult};
use crate::observation::{Observation, Window};

/// An observation as its row stores it: its id (a new one when it has none), the attacker it is
/// attributed to, its value as JSON text and its evidence key.
pub(in crate::db) struct ObservationColumns<'a> {
    pub observation: &'a Observation,
    pub id: String,
    pub attacker_uuid: Option<String>,
    pub value: String,
    pub evidence_key: Option<String>,
}

impl<'a> ObservationColumns<'a> {
    pub fn new(observation: &'a Observation) -> Self {
        ObservationColumns {
            observation,
            id: observation.id.clone().unwrap_or_else(|| Uuid::new_v4().to_string()),
            attacker_uuid: observation
                .identity_ref
                .as_deref()
                .and_then(|r| r.trim().parse::<Uuid>().ok())
                .map(|u| u.to_string()),
            value: json_text(&observation.value),
            evidence_key: observation.evidence_ref.as_deref().map(|r| dedup_key(&[r, &observation.primitive])),
        }
    }

    pub fn size(&self) -> usize {
        let o = self.observation;
        self.id.len()
            + o.identity_ref.as_ref().map_or(0, String::len)
            + o.primitive.len()
            + self.value.len()
            + o.source.len()
            + o.evidence_ref.as_ref().map_or(0, String::len)
            + 64
            + 36
            + 15 * 16
    }
}

#[derive(sqlx::FromRow)]
struct ObservationRow {
    id: String,
    identity_ref: Option<String>,
    primitive: String,
    value: String,
    confidence: f64,
    window_start: f64,
    window_end: f64,
    source: String,
    evidence_ref: Option<String>,
    envelope_v: i64,
    ts: Option<f64>,
}

/// The columns an [`ObservationRow`] reads.
const OBSERVATION_COLUMNS: &str =
    "id, identity_ref, primitive, value, confidence, window_start, window_end, source, evidence_ref, envelope_v, ts";

impl TryFrom<ObservationRow> for Observation {
    type Error = DbError;

    fn try_from(row: ObservationRow) -> Result<Self, DbError> {
        let value = serde_json::from_str(&row.value).map_err(|e| {
            DbError::Corrupt(anyhow::anyhow!("stored value of observation {} is not JSON: {e}", row.id))
        })?;
        Ok(Observation {
            primitive: row.primitive,
            value,
            confidence: row.confidence,
            window: Window { start_ts: row.window_start, end_ts: row.window_end },
            source: row.source,
            id: Some(row.id),
            identity_ref: row.identity_ref,
            evidence_ref: row.evidence_ref,
            ts: row.ts,
            v: row.envelope_v,
        })
    }
}

both_backends! {
    #[async_trait]
    impl ObservationStore for Backend {
        async fn add_observations(&self, observations: &[Observation]) -> DbResult<ObservationsStored> {
            let now = Utc::now();
            let columns: Vec<ObservationColumns<'_>> = observations.iter().map(ObservationColumns::new).collect();
            let mut tx = self.begin_write().await?;
            let result: DbResult<u64> = async {
                let mut stored = 0;
                for rows in row_sets(&columns, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, ObservationColumns::size)
                {
                    // Row by row: a record whose id or evidence key is held, by the table or by an
                    // earlier row of the statement, is skipped, and only inserted rows are counted.
                    let mut insert = Backend::insert_observations(Backend::INSERT_OR_SKIP, rows, now);
                    insert.push(Backend::SKIP_HELD);
                    stored += insert.build().execute(&mut *tx).await?.rows_affected();
                }
                Ok(stored)
            }
            .await;
            let stored = settle(tx, result).await?;
            Ok(ObservationsStored { stored, duplicates: (observations.len() as u64).saturating_sub(stored) })
        }

        async fn attacker_observations(&self, attacker: Uuid, limit: u32) -> DbResult<Vec<Observation>> {
            let rows: Vec<ObservationRow> = sqlx::query_as(&format!(
                "select {OBSERVATION_COLUMNS} from observations where attacker_uuid = ? \
                 order by window_end desc, ts desc, id desc limit ?"
            ))
            .bind(attacker.to_string())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
            convert(rows)
        }
    }

    impl Backend {
        /// `verb` (an insert, or the dialect's insert-or-skip) of `rows` into the observations,
        /// received at `now`; the caller adds any conflict clause.
        pub(in crate::db) fn insert_observations<'a>(
            verb: &str,
            rows: &'a [ObservationColumns<'a>],
            now: DateTime<Utc>,
        ) -> QueryBuilder<'a, Sql> {
            let mut insert = QueryBuilder::<Sql>::new(format!(
                "{verb} into observations (id, attacker_uuid, identity_ref, primitive, value, confidence, \
                 window_start, window_end, source, evidence_ref, evidence_key, envelope_v, ts, received_at) "
            ));
            insert.push_values(rows, |mut row, o| {
                row.push_bind(Backend::indexed(&o.id))
                    .push_bind(o.attacker_uuid.as_deref())
                    .push_bind(o.observation.identity_ref.as_deref())
                    .push_bind(Backend::indexed(&o.observation.primitive))
                    .push_bind(o.value.as_str())
                    .push_bind(o.observation.confidence)
                    .push_bind(o.observation.window.start_ts)
                    .push_bind(o.observation.window.end_ts)
                    .push_bind(o.observation.source.as_str())
                    .push_bind(o.observation.evidence_ref.as_deref())
                    .push_bind(o.evidence_key.as_deref())
                    .push_bind(o.observation.v)
                    .push_bind(o.observation.ts)
                    .push_bind(millis(now));
            });
            insert
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observation_columns_attribute_and_key_the_record() {
        let uuid = Uuid::new_v4();
        let record = Observation {
            primitive: "motor.keystroke_cadence".into(),
            value: serde_json::json!({"a": [1, 2]}),
            confidence: 1.0,
            window: Window { start_ts: 1.0, end_ts: 2.0 },
            source: "s".into(),
            id: None,
            identity_ref: Some(uuid.to_string().to_uppercase()),
            evidence_ref: None,
            ts: None,
            v: 1,
        };
        let columns = ObservationColumns::new(&record);
        assert!(columns.id.parse::<Uuid>().is_ok(), "a record without an id gets a UUID");
        assert_eq!(columns.attacker_uuid, Some(uuid.to_string()));
        assert_eq!(columns.value, r#"{"a":[1,2]}"#);
        assert_eq!(columns.evidence_key, None, "no evidence, no key: such records never collide");

        let other = Observation { identity_ref: Some("someone".into()), evidence_ref: Some("e".into()), ..record };
        let columns = ObservationColumns::new(&other);
        assert_eq!(columns.attacker_uuid, None);
        assert_eq!(columns.evidence_key, Some(dedup_key(&["e", "motor.keystroke_cadence"])));
        let key = columns.evidence_key.clone();
        let shifted =
            Observation { evidence_ref: Some("em".into()), primitive: "otor.keystroke_cadence".into(), ..other };
        assert_ne!(ObservationColumns::new(&shifted).evidence_key, key);
    }
}
