//! An ATT&CK Navigator layer (layer format 4.5) of the techniques the fleet's attackers showed:
//! each technique scored by the number of attackers whose commands show it, so the heat map says
//! how common a technique is on this fleet.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::record::AttackerRecord;
use super::techniques::Technique;

/// Attackers counted per technique.
#[derive(Debug, Default)]
pub struct TechniqueTally {
    attackers: BTreeMap<Technique, u64>,
}

impl TechniqueTally {
    pub fn add(&mut self, record: &AttackerRecord) {
        for technique in record.techniques() {
            *self.attackers.entry(technique).or_default() += 1;
        }
    }

    /// The layer: one entry per technique seen, its score the attackers that showed it.
    pub fn layer(&self, name: &str) -> Value {
        let most = self.attackers.values().copied().max().unwrap_or(1);
        let techniques: Vec<Value> = self
            .attackers
            .iter()
            .map(|(technique, count)| {
                json!({
                    "techniqueID": technique.id, "tactic": technique.tactic, "score": count, "enabled": true,
                    "comment": format!("{count} attacker(s) ran commands that show {}", technique.name),
                    "showSubtechniques": false,
                })
            })
            .collect();
        json!({
            "name": name,
            "versions": {"attack": "16", "navigator": "5.1.0", "layer": "4.5"},
            "domain": "enterprise-attack",
            "description": "Techniques the honeypot fleet's attackers showed, named from the shell commands they ran; \
                            score = attackers.",
            "sorting": 3,
            "hideDisabled": false,
            "techniques": techniques,
            "gradient": {"colors": ["#ffe766ff", "#ff6666ff"], "minValue": 0, "maxValue": most},
            "legendItems": [],
            "metadata": [],
            "showTacticRowBackground": false,
            "selectTechniquesAcrossTactics": true,
            "selectSubtechniquesWithParent": false,
        })
    }
}
