//! The primitive registry: which primitives exist and what type of `value` each takes. Loaded once
//! from `schemas/observation/primitives.json` (a copy of the reference registry), compiled into the
//! binary so a deployed `svc` cannot disagree with the one it was tested against.
//!
//! What each kind accepts:
//! - `categorical`: a string among the entry's `allowed` values.
//! - `hash`: a non-empty string with no whitespace or control characters. Fingerprints come in
//!   several alphabets (hex MD5 for JA3/HASSH, JA4's `t13d…_…_…` form, JARM's 62 hex characters),
//!   so no alphabet is imposed; whitespace is refused because it means a banner or a sentence was
//!   put where a digest belongs.
//! - `free_string`: any string, empty included.
//! - `numeric`: a JSON integer or number (never a boolean), within `min`/`max` when the entry has
//!   them.
//! - `array`: an array whose every element is of `array_of` (`numeric` or `free_string`); empty is
//!   allowed (no samples yet).
//! - `bool`: `true` or `false`.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::Value;

use super::Problem;

/// The registry's file; the one data file the observation module loads.
const REGISTRY_JSON: &str = include_str!("../../schemas/observation/primitives.json");

/// What type of `value` one primitive takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Categorical { allowed: Vec<String> },
    Hash,
    FreeString,
    Numeric { min: Option<f64>, max: Option<f64> },
    Array { of: Element },
    Bool,
}

/// The element type of an `array` primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    Numeric,
    FreeString,
}

/// One entry as the file spells it.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Entry {
    Categorical {
        allowed: Vec<String>,
    },
    Hash {},
    FreeString {},
    Numeric {
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    Array {
        array_of: Element,
    },
    Bool {},
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "numeric" => Ok(Element::Numeric),
            "free_string" => Ok(Element::FreeString),
            other => Err(serde::de::Error::custom(format!("unsupported array_of `{other}`"))),
        }
    }
}

impl From<Entry> for Kind {
    fn from(entry: Entry) -> Kind {
        match entry {
            Entry::Categorical { allowed } => Kind::Categorical { allowed },
            Entry::Hash {} => Kind::Hash,
            Entry::FreeString {} => Kind::FreeString,
            Entry::Numeric { min, max } => Kind::Numeric { min, max },
            Entry::Array { array_of } => Kind::Array { of: array_of },
            Entry::Bool {} => Kind::Bool,
        }
    }
}

static REGISTRY: LazyLock<HashMap<String, Kind>> = LazyLock::new(|| {
    // The file is part of the source tree and a test loads it, so a bad one never ships.
    let entries: HashMap<String, Entry> =
        serde_json::from_str(REGISTRY_JSON).expect("schemas/observation/primitives.json is a valid registry");
    entries.into_iter().map(|(name, entry)| (name, entry.into())).collect()
});

/// The kind of `primitive`, if the registry has it.
pub fn kind(primitive: &str) -> Option<&'static Kind> {
    REGISTRY.get(primitive)
}

/// Every primitive the registry has, in no particular order.
pub fn primitives() -> impl Iterator<Item = (&'static str, &'static Kind)> {
    REGISTRY.iter().map(|(name, kind)| (name.as_str(), kind))
}

/// Whether `value` is of the type `primitive`'s entry names; the problem, on `primitive` or
/// `value`, when it is not.
pub fn check(primitive: &str, value: &Value) -> Result<(), Problem> {
    let Some(kind) = kind(primitive) else {
        return Err(problem("primitive", format!("`{primitive}` is not in the primitive registry")));
    };
    check_kind(kind, value).map_err(|reason| problem("value", format!("{reason} (primitive `{primitive}`)")))
}

fn check_kind(kind: &Kind, value: &Value) -> Result<(), String> {
    match kind {
        Kind::Categorical { allowed } => {
            let Value::String(s) = value else {
                return Err(expected("one of ".to_string() + &allowed.join(", "), value));
            };
            if allowed.iter().any(|a| a == s) {
                Ok(())
            } else {
                Err(format!("`{s}` is not one of {}", allowed.join(", ")))
            }
        }
        Kind::Hash => match value {
            Value::String(s) if s.is_empty() => Err("a hash must not be empty".into()),
            Value::String(s) if s.chars().any(|c| c.is_whitespace() || c.is_control()) => {
                Err("a hash must not contain whitespace or control characters".into())
            }
            Value::String(_) => Ok(()),
            _ => Err(expected("a hash string".into(), value)),
        },
        Kind::FreeString => match value {
            Value::String(_) => Ok(()),
            _ => Err(expected("a string".into(), value)),
        },
        Kind::Numeric { min, max } => {
            let Some(n) = value.as_f64() else { return Err(expected("a number".into(), value)) };
            if let Some(min) = min.filter(|min| n < *min) {
                return Err(format!("{value} is below the minimum {min}"));
            }
            if let Some(max) = max.filter(|max| n > *max) {
                return Err(format!("{value} is above the maximum {max}"));
            }
            Ok(())
        }
        Kind::Array { of } => {
            let Value::Array(items) = value else { return Err(expected(element_name(*of, "an array of "), value)) };
            let fits = |item: &Value| match of {
                Element::Numeric => item.is_number(),
                Element::FreeString => item.is_string(),
            };
            match items.iter().position(|item| !fits(item)) {
                None => Ok(()),
                Some(i) => Err(format!("element {i} is {}, expected {}", type_name(&items[i]), element_name(*of, ""))),
            }
        }
        Kind::Bool => match value {
            Value::Bool(_) => Ok(()),
            _ => Err(expected("true or false".into(), value)),
        },
    }
}

fn element_name(of: Element, prefix: &str) -> String {
    match of {
        Element::Numeric => format!("{prefix}numbers"),
        Element::FreeString => format!("{prefix}strings"),
    }
}

fn expected(what: String, got: &Value) -> String {
    format!("expected {what}, got {}", type_name(got))
}

/// The JSON type of `value`, for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn problem(field: &str, reason: String) -> Problem {
    Problem { field: field.into(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_loads_every_entry() {
        assert_eq!(primitives().count(), 82);
        assert_eq!(kind("toolchain.c2.beacon_interval_ms"), Some(&Kind::Numeric { min: Some(0.0), max: None }));
        assert_eq!(kind("temporal.circadian.hour_histogram"), Some(&Kind::Array { of: Element::Numeric }));
        assert_eq!(kind("toolchain.protocol_abuse.mitm6_signature"), Some(&Kind::Bool));
    }
}
