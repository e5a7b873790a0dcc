//! The Observation envelope: one measurement a behavioural sensor made of an attacker over a time
//! window (spec: Observation and Window). The wire form is `schemas/observation/v1.json`; a record is
//! accepted only when it passes that schema and the primitive registry (`registry`).

mod reader;
pub mod registry;
pub mod schema;
mod strict;

use serde::{Deserialize, Serialize};

pub use reader::{MAX_LINE_BYTES, read_records};
pub use strict::parse_strict;

/// The envelope version this build writes and accepts.
pub const ENVELOPE_VERSION: i64 = 1;

/// One observation, exactly the schema's fields. Absent optional fields are left out when
/// serialised, so a record round-trips to what the sensor sent (plus `v`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// Fully-qualified primitive path, e.g. `motor.keystroke_cadence`.
    pub primitive: String,
    /// Its type is governed by the primitive's registry entry.
    pub value: serde_json::Value,
    /// 0.0 to 1.0 inclusive: the sensor's confidence in the measurement.
    pub confidence: f64,
    pub window: Window,
    /// The sensor's canonical identifier (a source-file-style path); never empty.
    pub source: String,
    /// UUID used for de-duplication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The attacker's profile UUID when the observation is pre-attributed.
    #[serde(default)]
    pub identity_ref: Option<String>,
    /// A pointer to raw evidence, never the evidence itself.
    #[serde(default)]
    pub evidence_ref: Option<String>,
    /// Emission time, epoch seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    /// JSON Schema counts `1.0` and `1e0` as the integer 1, and so does this.
    #[serde(default = "envelope_version", deserialize_with = "integral")]
    pub v: i64,
}

/// The measurement window, epoch seconds; `start_ts == end_ts` for a point observation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub start_ts: f64,
    pub end_ts: f64,
}

fn envelope_version() -> i64 {
    ENVELOPE_VERSION
}

/// An integer, also when written with a zero fraction or an exponent (`1.0`, `1e0`).
fn integral<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(whole) = number.as_i64() {
        return Ok(whole);
    }
    match number.as_f64() {
        Some(float) if float.fract() == 0.0 && float.abs() < 9.0e15 => Ok(float as i64),
        _ => Err(serde::de::Error::custom(format!("{number} is not an integer"))),
    }
}

/// Why a record was refused: every problem found, each naming its field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub problems: Vec<Problem>,
}

/// One reason a record was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where, as a dotted path from the record's root (`window.end_ts`, `value`); empty for the
    /// record as a whole.
    pub field: String,
    pub reason: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match problem.field.as_str() {
                "" => write!(f, "{}", problem.reason)?,
                field => write!(f, "{field}: {}", problem.reason)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}

/// Checks one record against the schema and the primitive registry; the typed record when it
/// passes both. Every schema problem is reported, plus the window order and the registry's verdict
/// where the fields they read are sound. Never panics, whatever the JSON.
pub fn validate(record: &serde_json::Value) -> Result<Observation, Invalid> {
    let mut problems = schema::problems(record);
    let faulted = |field: &str| problems.iter().any(|p| p.field == field || p.field.starts_with(&format!("{field}.")));
    // Draft 2020-12 cannot compare two fields, so the window's order is checked here.
    let start = record.pointer("/window/start_ts").and_then(serde_json::Value::as_f64);
    let end = record.pointer("/window/end_ts").and_then(serde_json::Value::as_f64);
    let window_problem = match (start, end) {
        (Some(start), Some(end)) if end < start => {
            Some(Problem { field: "window.end_ts".into(), reason: format!("{end} is before window.start_ts {start}") })
        }
        _ => None,
    };
    // A value of a type the envelope does not carry already has its problem; the registry would
    // only repeat it.
    let registry_problem = match (record.get("primitive"), record.get("value")) {
        (Some(serde_json::Value::String(primitive)), Some(value)) if !faulted("primitive") && !faulted("value") => {
            registry::check(primitive, value).err()
        }
        _ => None,
    };
    problems.extend(window_problem);
    problems.extend(registry_problem);
    if !problems.is_empty() {
        return Err(Invalid { problems });
    }
    // Deserialising from a reference: no copy of the record.
    Observation::deserialize(record)
        .map_err(|err| Invalid { problems: vec![Problem { field: String::new(), reason: err.to_string() }] })
}
