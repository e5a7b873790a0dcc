//! The fleet-wide documents, written a page of attackers at a time: [`FleetWriter`] gives the
//! opening text, the text of each page, and the closing text, so the HTTP layer can stream them and
//! hold one page in memory. What it keeps across pages is bounded: a count and the ATT&CK
//! techniques emitted so far (at most the static map's).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::ids::object_id;
use super::record::AttackerRecord;
use super::{json as export_json, misp, stix};
use crate::time::format_utc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetFormat {
    /// DECNET's JSON export: `{"observations": […], "export_metadata": {…}}`.
    Json,
    /// A STIX 2.1 bundle.
    Stix,
    /// A MISP collection: `{"response": [{"Event": …}, …]}`.
    Misp,
}

pub struct FleetWriter {
    format: FleetFormat,
    exported_at: DateTime<Utc>,
    written: u64,
    patterns: BTreeSet<&'static str>,
}

impl FleetWriter {
    pub fn new(format: FleetFormat, exported_at: DateTime<Utc>) -> FleetWriter {
        FleetWriter { format, exported_at, written: 0, patterns: BTreeSet::new() }
    }

    /// The document's opening text.
    pub fn open(&mut self) -> String {
        match self.format {
            FleetFormat::Json => "{\"observations\":[\n".into(),
            FleetFormat::Misp => "{\"response\":[\n".into(),
            FleetFormat::Stix => {
                let id = object_id("bundle", &format!("fleet:{}", self.exported_at.timestamp_nanos_opt().unwrap_or(0)));
                let mut text = format!("{{\"type\":\"bundle\",\"id\":\"{id}\",\"objects\":[\n");
                let preamble: Vec<Value> = stix::preamble();
                self.push_all(&mut text, &preamble);
                text
            }
        }
    }

    /// The text of one page of attackers.
    pub fn page(&mut self, records: &[AttackerRecord]) -> String {
        let mut text = String::new();
        for record in records {
            match self.format {
                FleetFormat::Json => self.push(&mut text, &export_json::observation(record)),
                FleetFormat::Misp => self.push(&mut text, &misp::attacker_event(record)),
                FleetFormat::Stix => {
                    let fresh: Vec<Value> = record
                        .techniques()
                        .into_iter()
                        .filter(|t| self.patterns.insert(t.id))
                        .map(|t| stix::attack_pattern(&t))
                        .collect();
                    self.push_all(&mut text, &fresh);
                    self.push_all(&mut text, &stix::attacker_objects(record));
                }
            }
        }
        text
    }

    /// The closing text; the JSON export's metadata carries the number of attackers written.
    pub fn close(&mut self, attackers: u64) -> String {
        match self.format {
            FleetFormat::Json => {
                let metadata = json!({
                    "source": export_json::SOURCE, "version": export_json::VERSION,
                    "exported_at": format_utc(self.exported_at), "total_records": attackers,
                    "schema_version": export_json::SCHEMA_VERSION,
                });
                format!("\n],\"export_metadata\":{metadata}}}\n")
            }
            FleetFormat::Stix | FleetFormat::Misp => "\n]}\n".into(),
        }
    }

    fn push_all(&mut self, text: &mut String, values: &[Value]) {
        for value in values {
            self.push(text, value);
        }
    }

    fn push(&mut self, text: &mut String, value: &Value) {
        if self.written > 0 {
            text.push_str(",\n");
        }
        text.push_str(&value.to_string());
        self.written += 1;
    }
}
