//! The realism planner's tunables, in DECNET's wire shape (`GET/PUT /realism/config`): how often
//! each content class is picked among the user classes, the system classes and the canary classes,
//! and how often a pick is a canary at all. A change names only the lists it replaces; each list
//! is checked whole before anything is kept, with DECNET's rules and messages
//! (`decnet/realism/planner.py`): a class valid but not of that list is dropped and reported, an
//! unknown one, a negative or fractional weight, a list left empty or summing to zero refuse the
//! change.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::Refused;

/// What a planted file is; the values are DECNET's, stored and filtered on as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContentClass {
    Note,
    Todo,
    Draft,
    Script,
    LogCron,
    LogDaemon,
    CacheTmp,
    Email,
    CanaryAwsCreds,
    CanaryEnvFile,
    CanaryGitConfig,
    CanarySshKey,
    CanaryHoneydoc,
    CanaryHoneydocDocx,
    CanaryHoneydocPdf,
    CanaryMysqlDump,
    CanaryFingerprintHtml,
    CanaryFingerprintSvg,
}

impl ContentClass {
    pub const USER: [ContentClass; 4] =
        [ContentClass::Note, ContentClass::Todo, ContentClass::Draft, ContentClass::Script];
    pub const SYSTEM: [ContentClass; 3] = [ContentClass::LogCron, ContentClass::LogDaemon, ContentClass::CacheTmp];
    pub const CANARY: [ContentClass; 10] = [
        ContentClass::CanaryAwsCreds,
        ContentClass::CanaryEnvFile,
        ContentClass::CanaryGitConfig,
        ContentClass::CanarySshKey,
        ContentClass::CanaryHoneydoc,
        ContentClass::CanaryHoneydocDocx,
        ContentClass::CanaryHoneydocPdf,
        ContentClass::CanaryMysqlDump,
        ContentClass::CanaryFingerprintHtml,
        ContentClass::CanaryFingerprintSvg,
    ];

    /// The wire name (`log_cron`).
    pub fn as_str(self) -> &'static str {
        match self {
            ContentClass::Note => "note",
            ContentClass::Todo => "todo",
            ContentClass::Draft => "draft",
            ContentClass::Script => "script",
            ContentClass::LogCron => "log_cron",
            ContentClass::LogDaemon => "log_daemon",
            ContentClass::CacheTmp => "cache_tmp",
            ContentClass::Email => "email",
            ContentClass::CanaryAwsCreds => "canary_aws_creds",
            ContentClass::CanaryEnvFile => "canary_env_file",
            ContentClass::CanaryGitConfig => "canary_git_config",
            ContentClass::CanarySshKey => "canary_ssh_key",
            ContentClass::CanaryHoneydoc => "canary_honeydoc",
            ContentClass::CanaryHoneydocDocx => "canary_honeydoc_docx",
            ContentClass::CanaryHoneydocPdf => "canary_honeydoc_pdf",
            ContentClass::CanaryMysqlDump => "canary_mysql_dump",
            ContentClass::CanaryFingerprintHtml => "canary_fingerprint_html",
            ContentClass::CanaryFingerprintSvg => "canary_fingerprint_svg",
        }
    }

    pub fn parse(name: &str) -> Option<ContentClass> {
        let every = Self::USER.iter().chain(&Self::SYSTEM).chain(&[ContentClass::Email]).chain(&Self::CANARY);
        every.copied().find(|class| class.as_str() == name)
    }
}

/// One class and its share of its list's picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClassWeight {
    pub content_class: ContentClass,
    /// A non-negative integer; a class's chance is its weight over its list's sum.
    #[schema(minimum = 0)]
    pub weight: u64,
}

/// The planner's tunables as `GET /realism/config` answers them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RealismWeights {
    pub user_class_weights: Vec<ClassWeight>,
    pub system_class_weights: Vec<ClassWeight>,
    pub canary_class_weights: Vec<ClassWeight>,
    /// The chance, 0 to 1, that a pick is a canary.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub canary_probability: f64,
}

impl Default for RealismWeights {
    /// DECNET's: user content most, system content as filler, canaries rarely (3 %), evenly.
    fn default() -> Self {
        let of = |pairs: &[(ContentClass, u64)]| {
            pairs.iter().map(|&(content_class, weight)| ClassWeight { content_class, weight }).collect()
        };
        RealismWeights {
            user_class_weights: of(&[
                (ContentClass::Note, 30),
                (ContentClass::Todo, 20),
                (ContentClass::Draft, 15),
                (ContentClass::Script, 10),
            ]),
            system_class_weights: of(&[
                (ContentClass::LogCron, 12),
                (ContentClass::LogDaemon, 8),
                (ContentClass::CacheTmp, 5),
            ]),
            canary_class_weights: ContentClass::CANARY
                .iter()
                .map(|&content_class| ClassWeight { content_class, weight: 1 })
                .collect(),
            canary_probability: 0.03,
        }
    }
}

impl RealismWeights {
    /// The stored text read back (the defaults when it no longer reads).
    pub fn stored(text: &str) -> RealismWeights {
        super::stored_or_default(text, super::WEIGHTS)
    }

    /// These weights with `change` applied: the lists and probability it names replace these, the
    /// rest stay; unknown fields are ignored. Also the classes dropped for not belonging to the
    /// list they were given in. Nothing is applied when anything is refused.
    pub fn changed(&self, change: &Map<String, Value>) -> Result<(RealismWeights, Vec<ContentClass>), Refused> {
        let mut next = self.clone();
        let mut dropped = Vec::new();
        let lists: [(&str, &[ContentClass], &mut Vec<ClassWeight>); 3] = [
            ("user_class_weights", &ContentClass::USER, &mut next.user_class_weights),
            ("system_class_weights", &ContentClass::SYSTEM, &mut next.system_class_weights),
            ("canary_class_weights", &ContentClass::CANARY, &mut next.canary_class_weights),
        ];
        for (field, allowed, list) in lists {
            if let Some(raw) = change.get(field) {
                *list = parse_list(raw, allowed, &mut dropped)?;
            }
        }
        if let Some(raw) = change.get("canary_probability") {
            next.canary_probability = raw
                .as_f64()
                .filter(|p| raw.is_number() && (0.0..=1.0).contains(p))
                .ok_or_else(|| Refused("canary_probability must be in [0.0, 1.0]".into()))?;
        }
        Ok((next, dropped))
    }
}

/// Python's `repr` of a JSON value, as DECNET's messages quote what they were given.
fn repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(text) => format!("'{text}'"),
        other => other.to_string(),
    }
}

/// A weight as JSON Schema counts an integer (`30`, also `30.0`), not negative, and at most the
/// document's maximum (i64's; schemathesis sent 2^63).
fn weight_of(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    let weight = value
        .as_u64()
        .or_else(|| value.as_f64().filter(|w| w.fract() == 0.0 && (0.0..9.0e18).contains(w)).map(|w| w as u64))?;
    (weight <= i64::MAX as u64).then_some(weight)
}

fn parse_list(
    raw: &Value,
    allowed: &[ContentClass],
    dropped: &mut Vec<ContentClass>,
) -> Result<Vec<ClassWeight>, Refused> {
    let entries = raw.as_array().ok_or_else(|| Refused("weights must be a list".into()))?;
    let mut list = Vec::with_capacity(entries.len());
    for entry in entries {
        let entry = entry.as_object().ok_or_else(|| Refused("each weight entry must be an object".into()))?;
        let name = entry.get("content_class").unwrap_or(&Value::Null);
        let Some(name) = name.as_str() else {
            return Err(Refused(format!("content_class must be a string, got {}", repr(name))));
        };
        let weight = weight_of(entry.get("weight"))
            .ok_or_else(|| Refused(format!("weight for '{name}' must be a non-negative integer")))?;
        let content_class =
            ContentClass::parse(name).ok_or_else(|| Refused(format!("unknown content_class: '{name}'")))?;
        if allowed.contains(&content_class) {
            list.push(ClassWeight { content_class, weight });
        } else {
            dropped.push(content_class);
        }
    }
    if list.is_empty() {
        return Err(Refused("weights list resolved to zero valid entries".into()));
    }
    if list.iter().map(|w| u128::from(w.weight)).sum::<u128>() == 0 {
        return Err(Refused("weights must sum to a positive number".into()));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(body: Value) -> Result<(RealismWeights, Vec<ContentClass>), Refused> {
        RealismWeights::default().changed(body.as_object().unwrap())
    }

    #[test]
    fn a_change_replaces_the_lists_it_names_and_reports_the_classes_dropped() {
        let (next, dropped) = change(json!({
            "user_class_weights": [{"content_class": "note", "weight": 5}, {"content_class": "canary_ssh_key", "weight": 9}],
            "canary_probability": 0,
            "unknown": true,
        }))
        .unwrap();
        assert_eq!(next.user_class_weights, [ClassWeight { content_class: ContentClass::Note, weight: 5 }]);
        assert_eq!(next.system_class_weights, RealismWeights::default().system_class_weights);
        assert_eq!((next.canary_probability, dropped), (0.0, vec![ContentClass::CanarySshKey]));
    }

    #[test]
    fn decnets_refusals_with_its_messages() {
        for (body, message) in [
            (json!({"user_class_weights": {}}), "weights must be a list"),
            (json!({"user_class_weights": [3]}), "each weight entry must be an object"),
            (json!({"user_class_weights": [{"weight": 3}]}), "content_class must be a string, got None"),
            (
                json!({"user_class_weights": [{"content_class": 3, "weight": 3}]}),
                "content_class must be a string, got 3",
            ),
            (
                json!({"user_class_weights": [{"content_class": "note", "weight": -1}]}),
                "weight for 'note' must be a non-negative integer",
            ),
            (
                json!({"user_class_weights": [{"content_class": "note", "weight": 1.5}]}),
                "weight for 'note' must be a non-negative integer",
            ),
            (
                json!({"user_class_weights": [{"content_class": "note", "weight": "1"}]}),
                "weight for 'note' must be a non-negative integer",
            ),
            (json!({"user_class_weights": [{"content_class": "nope", "weight": 1}]}), "unknown content_class: 'nope'"),
            (
                json!({"system_class_weights": [{"content_class": "note", "weight": 1}]}),
                "weights list resolved to zero valid entries",
            ),
            (json!({"system_class_weights": []}), "weights list resolved to zero valid entries"),
            (
                json!({"system_class_weights": [{"content_class": "log_cron", "weight": 0}]}),
                "weights must sum to a positive number",
            ),
            (json!({"canary_probability": 1.01}), "canary_probability must be in [0.0, 1.0]"),
            (json!({"canary_probability": "0.5"}), "canary_probability must be in [0.0, 1.0]"),
        ] {
            assert_eq!(change(body.clone()).unwrap_err().0, message, "{body}");
        }
    }

    #[test]
    fn the_defaults_are_decnets_and_round_trip() {
        let defaults = RealismWeights::default();
        let text = serde_json::to_string(&defaults).unwrap();
        assert!(text.contains(r#"{"content_class":"note","weight":30}"#), "{text}");
        assert_eq!(RealismWeights::stored(&text), defaults);
        assert_eq!(RealismWeights::stored("not json"), defaults);
    }
}
