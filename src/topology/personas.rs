//! A topology's email personas: the fictional employees its mail deckies and planted files speak
//! as, in DECNET's shape (`decnet/realism/personas.py`). The list is stored as JSON text on the
//! topology. Reading and writing drop invalid entries one by one (a typo in one persona must not
//! lose the others) and fill an unset `language` with the topology's default.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The voice a persona writes in; `custom` needs `tone_custom`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    #[default]
    Formal,
    Direct,
    Casual,
    Technical,
    Custom,
}

/// How soon a persona answers mail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplyLatency {
    Fast,
    #[default]
    Normal,
    Slow,
}

/// One fictional employee: the sender of mail and the author of planted files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Persona {
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
    /// `user@domain.tld`.
    #[schema(min_length = 3, max_length = 255, pattern = r"^.+@[^@]*\.[^@]*$")]
    pub email: String,
    #[schema(min_length = 1, max_length = 128)]
    pub role: String,
    #[serde(default)]
    pub tone: Tone,
    /// The voice in words when `tone` is `custom` (required then).
    #[serde(default)]
    #[schema(max_length = 128)]
    pub tone_custom: Option<String>,
    #[serde(default)]
    #[schema(max_items = 12)]
    pub mannerisms: Vec<String>,
    /// ISO 639-1; the topology's `language_default` when unset.
    #[serde(default)]
    #[schema(max_length = 8)]
    pub language: Option<String>,
    #[serde(default)]
    #[schema(max_length = 512)]
    pub signature: Option<String>,
    /// `HH:MM-HH:MM`.
    #[serde(default = "working_day")]
    #[schema(max_length = 32)]
    pub active_hours: String,
    #[serde(default)]
    pub reply_latency: ReplyLatency,
    /// Lifts the suppression of LLM tells (em dashes) in what this persona writes.
    #[serde(default)]
    pub uses_llms_heavily: bool,
}

fn working_day() -> String {
    "09:00-18:00".into()
}

/// What is wrong with `value` as a persona, DECNET's checks.
fn check(value: Value) -> Result<Persona, String> {
    let persona: Persona = serde_json::from_value(value).map_err(|err| err.to_string())?;
    let chars = |text: &str| text.chars().count();
    let within = |field: &str, text: &str, min: usize, max: usize| {
        let n = chars(text);
        if (min..=max).contains(&n) { Ok(()) } else { Err(format!("{field}: {n} characters, not {min} to {max}")) }
    };
    within("name", &persona.name, 1, 128)?;
    within("email", &persona.email, 3, 255)?;
    within("role", &persona.role, 1, 128)?;
    within("active_hours", &persona.active_hours, 0, 32)?;
    for (field, text, max) in [
        ("tone_custom", &persona.tone_custom, 128),
        ("language", &persona.language, 8),
        ("signature", &persona.signature, 512),
    ] {
        if let Some(text) = text {
            within(field, text, 0, max)?;
        }
    }
    if persona.mannerisms.len() > 12 {
        return Err(format!("mannerisms: {} entries, at most 12", persona.mannerisms.len()));
    }
    let (local, domain) = persona.email.rsplit_once('@').unwrap_or_default();
    if local.is_empty() || domain.is_empty() || !domain.contains('.') {
        return Err("email must look like user@domain.tld".into());
    }
    if persona.tone == Tone::Custom && persona.tone_custom.as_deref().is_none_or(|t| t.trim().is_empty()) {
        return Err("tone_custom is required when tone is 'custom'".into());
    }
    Ok(persona)
}

/// The valid personas of `entries`, in order, each with a language; an invalid entry is logged and
/// dropped.
pub fn parse(entries: Vec<Value>, language_default: &str) -> Vec<Persona> {
    let mut personas = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        match check(entry) {
            Ok(mut persona) => {
                persona.language.get_or_insert_with(|| language_default.to_string());
                personas.push(persona);
            }
            Err(reason) => tracing::warn!(index, reason, "Persona dropped: invalid"),
        }
    }
    personas
}

/// The personas stored as `text` (a JSON list; anything else is none).
pub fn stored(text: &str, language_default: &str) -> Vec<Persona> {
    match serde_json::from_str(text) {
        Ok(Value::Array(entries)) => parse(entries, language_default),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_entries_are_dropped_one_by_one_and_languages_filled() {
        let entries = vec![
            json!({"name": "Ana Ruiz", "email": "ana@corp.example", "role": "CFO", "language": "es"}),
            json!({"name": "No Domain", "email": "bob@localhost", "role": "IT"}),
            json!({"name": "Custom", "email": "c@corp.example", "role": "IT", "tone": "custom"}),
            json!({"name": "", "email": "d@corp.example", "role": "IT"}),
            json!({"name": "Too chatty", "email": "e@corp.example", "role": "IT", "mannerisms": vec!["x"; 13]}),
            json!({"name": "Dee", "email": "dee@corp.example", "role": "Ops", "tone": "casual", "extra": 1}),
            json!("not an object"),
        ];
        let personas = parse(entries, "en");
        let kept: Vec<(&str, Option<&str>, Tone)> =
            personas.iter().map(|p| (p.name.as_str(), p.language.as_deref(), p.tone)).collect();
        assert_eq!(kept, [("Ana Ruiz", Some("es"), Tone::Formal), ("Dee", Some("en"), Tone::Casual)]);
        assert_eq!(
            (personas[1].active_hours.as_str(), personas[1].reply_latency),
            ("09:00-18:00", ReplyLatency::Normal)
        );
        assert!(stored("{}", "en").is_empty() && stored("not json", "en").is_empty());
    }
}
