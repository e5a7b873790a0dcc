//! The envelope's JSON Schema (`schemas/observation/v1.json`, draft 2020-12), compiled once, and the
//! translation of its errors into [`Problem`]s that name a field as a dotted path.

use std::sync::LazyLock;

use jsonschema::Validator;
use jsonschema::error::{TypeKind, ValidationError, ValidationErrorKind};
use serde_json::Value;

use super::Problem;
use super::registry::type_name;

/// The schema document, as shipped in `schemas/`.
pub const SCHEMA_JSON: &str = include_str!("../../schemas/observation/v1.json");

/// The schema document, parsed.
pub static SCHEMA: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(SCHEMA_JSON).expect("schemas/observation/v1.json is JSON"));

// Compiling costs far more than validating, so it happens once per process. Formats are asserted
// (draft 2020-12 only annotates them by default) so `format: uuid` is enforced.
static VALIDATOR: LazyLock<Validator> = LazyLock::new(|| {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&SCHEMA)
        .expect("schemas/observation/v1.json compiles")
});

/// Every schema violation of `record`; empty when it conforms.
pub fn problems(record: &Value) -> Vec<Problem> {
    // The common case, a valid record, takes the fast path that builds no errors.
    if VALIDATOR.is_valid(record) {
        return Vec::new();
    }
    let mut problems = Vec::new();
    for error in VALIDATOR.iter_errors(record) {
        describe(&error, &mut problems);
    }
    problems
}

/// One schema error as problems (several for several unexpected properties).
fn describe(error: &ValidationError<'_>, problems: &mut Vec<Problem>) {
    let field = dotted(error.instance_path().as_str());
    let instance = error.instance();
    let reason = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map_or_else(|| property.to_string(), str::to_string);
            problems.push(Problem { field: join(&field, &name), reason: "is required".into() });
            return;
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            for name in unexpected {
                problems.push(Problem { field: join(&field, name), reason: "is not a field of the envelope".into() });
            }
            return;
        }
        ValidationErrorKind::Type { kind } => format!("expected {}, got {}", type_list(kind), type_name(instance)),
        ValidationErrorKind::Minimum { limit } => format!("{instance} is below the minimum {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("{instance} is above the maximum {limit}"),
        ValidationErrorKind::MinLength { limit: 1 } => "must not be empty".into(),
        ValidationErrorKind::Format { format } => format!("{instance} is not a valid {format}"),
        ValidationErrorKind::Constant { expected_value } => format!("must be {expected_value}, got {instance}"),
        ValidationErrorKind::Pattern { .. } if field == "primitive" => format!(
            "{instance} is not a primitive path: two or more dot-separated segments of lowercase letters, digits \
             and `_`, e.g. `motor.keystroke_cadence`"
        ),
        ValidationErrorKind::AnyOf { .. } if field == "id" => {
            format!("{instance} is not a UUID: hyphenated, or 32 hex digits (uuid4().hex)")
        }
        ValidationErrorKind::AnyOf { .. } if field == "value" => format!(
            "expected a string, integer, number, boolean, array of strings, array of numbers or object, got {}",
            value_shape(instance)
        ),
        _ => error.to_string(),
    };
    problems.push(Problem { field, reason });
}

/// `/window/end_ts` → `window.end_ts` (JSON Pointer unescaping included).
fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() { name.to_string() } else { format!("{parent}.{name}") }
}

fn type_list(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => t.to_string(),
        // Null last: "string or null" reads as the spec's tables do.
        TypeKind::Multiple(set) => {
            let (null, mut types): (Vec<_>, Vec<_>) = set.iter().map(|t| t.to_string()).partition(|t| t == "null");
            types.extend(null);
            types.join(" or ")
        }
    }
}

/// What a rejected `value` was, saying which element spoiled an array.
fn value_shape(value: &Value) -> String {
    match value {
        Value::Array(items) => match items.iter().find(|i| !i.is_string() && !i.is_number()) {
            Some(odd) => format!("an array holding {}", type_name(odd)),
            None => "an array mixing strings and numbers".into(),
        },
        other => type_name(other).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_dotted_paths() {
        assert_eq!(dotted(""), "");
        assert_eq!(dotted("/window/end_ts"), "window.end_ts");
        assert_eq!(dotted("/a~1b/c~0d"), "a/b.c~d");
    }
}
