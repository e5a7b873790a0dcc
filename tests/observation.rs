//! The Observation envelope: the schema document itself, one accepted and one rejected example for
//! every rule of the spec's Observation and Window tables and of the primitive registry (asserting
//! the field and reason, not only that it failed), and that no JSON makes `validate` panic.

use proptest::prelude::*;
use serde_json::{Value, json};
use svc::observation::{Invalid, Observation, Problem, registry, schema, validate};

/// A valid record; tests change one thing in it.
fn good() -> Value {
    json!({
        "primitive": "motor.keystroke_cadence",
        "value": "bursty",
        "confidence": 0.8,
        "window": {"start_ts": 1_777_000_000.0, "end_ts": 1_777_000_060.5},
        "source": "sensors/motor/cadence.py",
    })
}

fn with(path: &[&str], value: Value) -> Value {
    let mut record = good();
    let (last, parents) = path.split_last().unwrap();
    let mut at = &mut record;
    for key in parents {
        at = &mut at[*key];
    }
    at[*last] = value;
    record
}

fn without(field: &str) -> Value {
    let mut record = good();
    record.as_object_mut().unwrap().remove(field);
    record
}

fn accepted(record: &Value) -> Observation {
    validate(record).unwrap_or_else(|e| panic!("{record} was refused: {e}"))
}

fn problems(record: &Value) -> Vec<Problem> {
    match validate(record) {
        Ok(_) => panic!("{record} was accepted"),
        Err(Invalid { problems }) => problems,
    }
}

/// Refused with exactly one problem, on `field`, whose reason contains `says`.
fn refused(record: &Value, field: &str, says: &str) {
    let problems = problems(record);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, field, "{problems:?}");
    assert!(problems[0].reason.contains(says), "{:?} does not say {says:?}", problems[0].reason);
}

#[test]
fn the_schema_is_valid_draft_2020_12_with_a_v1_id() {
    jsonschema::draft202012::meta::validate(&schema::SCHEMA).expect("valid against the 2020-12 meta-schema");
    assert_eq!(schema::SCHEMA["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert!(schema::SCHEMA["$id"].as_str().unwrap().ends_with("observation/v1.json"));
    assert_eq!(schema::SCHEMA["additionalProperties"], false);
    assert_eq!(schema::SCHEMA["$defs"]["window"]["additionalProperties"], false);
    // The rule the schema cannot express is at least written down in it.
    assert!(schema::SCHEMA["description"].as_str().unwrap().contains("end_ts"));
}

#[test]
fn every_registry_primitive_fits_the_schema_pattern() {
    let pattern = &schema::SCHEMA["properties"]["primitive"];
    let validator = jsonschema::validator_for(pattern).unwrap();
    for (name, _) in registry::primitives() {
        assert!(validator.is_valid(&json!(name)), "{name}");
    }
}

#[test]
fn a_good_record_becomes_an_observation_with_the_defaults() {
    let observation = accepted(&good());
    assert_eq!(observation.primitive, "motor.keystroke_cadence");
    assert_eq!(observation.value, json!("bursty"));
    assert_eq!(observation.window.end_ts, 1_777_000_060.5);
    assert_eq!(observation.v, 1, "v defaults to 1");
    assert_eq!(
        (observation.id, observation.identity_ref, observation.evidence_ref, observation.ts),
        (None, None, None, None)
    );
}

#[test]
fn every_optional_field_is_carried() {
    let mut record = good();
    let extra = json!({
        "id": "5f0c6d1e-8a3b-4c2d-9e1f-0a1b2c3d4e5f",
        "identity_ref": "0b7c1a52-3d4e-4f60-8a9b-c0d1e2f3a4b5",
        "evidence_ref": "session/42#keystrokes",
        "ts": 1_777_000_100,
        "v": 1,
    });
    record.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let observation = accepted(&record);
    assert_eq!(observation.id.as_deref(), Some("5f0c6d1e-8a3b-4c2d-9e1f-0a1b2c3d4e5f"));
    assert_eq!(observation.identity_ref.as_deref(), Some("0b7c1a52-3d4e-4f60-8a9b-c0d1e2f3a4b5"));
    assert_eq!(observation.evidence_ref.as_deref(), Some("session/42#keystrokes"));
    assert_eq!(observation.ts, Some(1_777_000_100.0));
    // Explicit nulls are the defaults.
    accepted(&with(&["identity_ref"], Value::Null));
    accepted(&with(&["evidence_ref"], Value::Null));
}

#[test]
fn confidence_is_between_0_and_1_inclusive() {
    accepted(&with(&["confidence"], json!(0)));
    accepted(&with(&["confidence"], json!(1)));
    accepted(&with(&["confidence"], json!(1.0)));
    refused(&with(&["confidence"], json!(-0.01)), "confidence", "below the minimum 0");
    refused(&with(&["confidence"], json!(1.01)), "confidence", "above the maximum 1");
    refused(&with(&["confidence"], json!("high")), "confidence", "expected number, got a string");
}

#[test]
fn the_window_ends_at_or_after_its_start() {
    accepted(&with(&["window"], json!({"start_ts": 5, "end_ts": 5})));
    refused(&with(&["window"], json!({"start_ts": 5, "end_ts": 4.5})), "window.end_ts", "before window.start_ts");
    refused(&with(&["window", "end_ts"], json!("soon")), "window.end_ts", "expected number");
    refused(&with(&["window"], json!({"start_ts": 5})), "window.end_ts", "is required");
    refused(&with(&["window"], json!([1, 2])), "window", "expected object, got an array");
}

#[test]
fn source_is_a_non_empty_string() {
    accepted(&with(&["source"], json!("s")));
    refused(&with(&["source"], json!("")), "source", "must not be empty");
    refused(&with(&["source"], json!(7)), "source", "expected string");
}

#[test]
fn no_property_outside_the_tables_is_allowed() {
    refused(&with(&["verdict"], json!("apt")), "verdict", "is not a field of the envelope");
    refused(&with(&["window", "duration"], json!(60)), "window.duration", "is not a field of the envelope");
}

#[test]
fn primitive_is_a_dotted_path_of_two_or_more_segments() {
    accepted(&with(&["primitive"], json!("cognitive.error_resilience.retry_tactic")).tap_value(json!("rerun")));
    for bad in ["keystroke_cadence", "Motor.keystroke_cadence", "motor..cadence", "motor.cadence.", "motor cadence.x"] {
        refused(&with(&["primitive"], json!(bad)), "primitive", "is not a primitive path");
    }
}

#[test]
fn every_value_type_of_the_envelope_passes_the_schema() {
    // Checked against the schema alone: the registry has no primitive for some of these (object).
    for value in [
        json!("s"),
        json!(3),
        json!(2.5),
        json!(true),
        json!(["a", "b"]),
        json!([1, 2]),
        json!([1.5, 2]),
        json!([]),
        json!({"k": [1, {"deep": null}]}),
    ] {
        let problems = schema::problems(&with(&["value"], value.clone()));
        assert!(problems.is_empty(), "{value}: {problems:?}");
    }
}

#[test]
fn a_value_type_outside_the_envelope_is_refused() {
    let says = "expected a string, integer, number, boolean, array of strings, array of numbers or object";
    refused(&with(&["value"], Value::Null), "value", &format!("{says}, got null"));
    refused(&with(&["value"], json!(["a", 1])), "value", "got an array mixing strings and numbers");
    refused(&with(&["value"], json!([{"a": 1}])), "value", "got an array holding an object");
    refused(&with(&["value"], json!([true])), "value", "got an array holding a boolean");
}

#[test]
fn v_is_1() {
    assert_eq!(accepted(&without("v")).v, 1);
    assert_eq!(accepted(&with(&["v"], json!(1))).v, 1);
    refused(&with(&["v"], json!(2)), "v", "must be 1");
    let problems = problems(&with(&["v"], json!(1.5)));
    assert!(problems.iter().all(|p| p.field == "v"), "{problems:?}");
    assert!(problems.iter().any(|p| p.reason == "expected integer, got a number"), "{problems:?}");
    // JSON Schema 2020-12: a number with a zero fraction is an integer, however it is written.
    for text in ["1.0", "1e0", "10e-1"] {
        let record = with(&["v"], serde_json::from_str(text).unwrap());
        assert_eq!(accepted(&record).v, 1, "{text}");
    }
    refused(&with(&["v"], json!(2.0)), "v", "must be 1");
}

#[test]
fn every_required_field_is_named_when_missing() {
    for field in ["primitive", "value", "confidence", "window", "source"] {
        refused(&without(field), field, "is required");
    }
    let all: Vec<String> = problems(&json!({})).into_iter().map(|p| p.field).collect();
    assert_eq!(all.len(), 5, "{all:?}");
    for field in ["primitive", "value", "confidence", "window", "source"] {
        assert!(all.iter().any(|f| f == field), "{all:?}");
    }
}

#[test]
fn ids_are_uuids() {
    let hyphenated = "5f0c6d1e-8a3b-4c2d-9e1f-0a1b2c3d4e5f";
    assert_eq!(accepted(&with(&["id"], json!(hyphenated))).id.as_deref(), Some(hyphenated));
    // behave-core's default, Python's `uuid4().hex`: what real sensors send.
    let hex = "5f0c6d1e8a3b4c2d9e1f0a1b2c3d4e5f";
    assert_eq!(accepted(&with(&["id"], json!(hex))).id.as_deref(), Some(hex));
    assert!(validate(&with(&["id"], json!(hex.to_uppercase()))).is_ok());
    let says = "is not a UUID: hyphenated, or 32 hex digits";
    refused(&with(&["id"], json!("not-a-uuid")), "id", says);
    refused(&with(&["id"], json!("5f0c6d1e8a3b4c2d9e1f0a1b2c3d4e5f0")), "id", says);
    refused(&with(&["id"], json!("5f0c6d1e8a3b4c2d9e1f0a1b2c3d4e5g")), "id", says);
    refused(&with(&["identity_ref"], json!("attacker-7")), "identity_ref", "is not a valid uuid");
    refused(&with(&["id"], Value::Null), "id", "expected string, got null");
    refused(&with(&["evidence_ref"], json!(3)), "evidence_ref", "expected string or null");
    refused(&with(&["ts"], json!("yesterday")), "ts", "expected number");
}

#[test]
fn every_schema_problem_is_reported_at_once() {
    let record = json!({
        "primitive": "x",
        "value": null,
        "confidence": 2,
        "window": {"start_ts": 1, "end_ts": 0, "extra": 1},
        "source": "",
        "id": "nope",
    });
    let mut fields: Vec<String> = problems(&record).into_iter().map(|p| p.field).collect();
    fields.sort();
    assert_eq!(fields, ["confidence", "id", "primitive", "source", "value", "window.end_ts", "window.extra"]);
}

#[test]
fn a_non_object_record_is_refused_as_a_whole() {
    refused(&json!([1, 2]), "", "expected object, got an array");
    refused(&json!("text"), "", "expected object, got a string");
}

// The registry.

#[test]
fn an_unknown_primitive_is_refused() {
    refused(
        &with(&["primitive"], json!("motor.telepathy")),
        "primitive",
        "`motor.telepathy` is not in the primitive registry",
    );
}

#[test]
fn a_categorical_value_is_one_of_its_allowed_set() {
    refused(&with(&["value"], json!("fast")), "value", "`fast` is not one of steady, bursty, hunt_and_peck, machine");
    refused(
        &with(&["value"], json!(3)),
        "value",
        "expected one of steady, bursty, hunt_and_peck, machine, got an integer",
    );
    refused(&with(&["value"], json!(0.5)), "value", "got a number");
    refused(&with(&["value"], json!(true)), "value", "got a boolean");
}

#[test]
fn a_numeric_value_is_a_number_at_or_above_its_minimum() {
    let beacon = with(&["primitive"], json!("toolchain.c2.beacon_interval_ms"));
    accepted(&beacon.clone().tap_value(json!(0)));
    accepted(&beacon.clone().tap_value(json!(60_000)));
    accepted(&beacon.clone().tap_value(json!(1.5)));
    refused(&beacon.clone().tap_value(json!(-1)), "value", "-1 is below the minimum 0");
    refused(&beacon.clone().tap_value(json!("60s")), "value", "expected a number, got a string");
    refused(&beacon.clone().tap_value(json!(true)), "value", "expected a number, got a boolean");
}

#[test]
fn an_array_value_holds_only_its_element_type() {
    let histogram = with(&["primitive"], json!("temporal.circadian.hour_histogram"));
    accepted(&histogram.clone().tap_value(json!([0, 3, 1.5])));
    accepted(&histogram.clone().tap_value(json!([])));
    refused(&histogram.clone().tap_value(json!(["3"])), "value", "element 0 is a string, expected numbers");
    refused(&histogram.clone().tap_value(json!(3)), "value", "expected an array of numbers, got an integer");
    let kex = with(&["primitive"], json!("toolchain.ssh.kex_algorithm_order"));
    accepted(&kex.clone().tap_value(json!(["curve25519-sha256", "ecdh-sha2-nistp256"])));
    refused(&kex.clone().tap_value(json!([1, 2])), "value", "element 0 is an integer, expected strings");
    // A mixed array is not a type the envelope carries: the schema refuses it first.
    refused(
        &kex.clone().tap_value(json!(["curve25519-sha256", 7])),
        "value",
        "got an array mixing strings and numbers",
    );
}

#[test]
fn a_hash_is_a_non_empty_token() {
    let ja3 = with(&["primitive"], json!("toolchain.tls.ja3_client"));
    accepted(&ja3.clone().tap_value(json!("e7d705a3286e19ea42f587b344ee6865")));
    let ja4 = with(&["primitive"], json!("toolchain.tls.ja4_client"));
    accepted(&ja4.clone().tap_value(json!("t13d1516h2_8daaf6152771_b0da82dd1658")));
    refused(&ja3.clone().tap_value(json!("")), "value", "must not be empty");
    refused(&ja3.clone().tap_value(json!("SSH-2.0 OpenSSH")), "value", "whitespace");
    refused(&ja3.clone().tap_value(json!(12345)), "value", "expected a hash string, got an integer");
}

#[test]
fn free_strings_and_bools_take_their_type() {
    let locale = with(&["primitive"], json!("environmental.locale"));
    accepted(&locale.clone().tap_value(json!("en_US.UTF-8")));
    refused(&locale.clone().tap_value(json!(["en"])), "value", "expected a string, got an array");
    let mitm6 = with(&["primitive"], json!("toolchain.protocol_abuse.mitm6_signature"));
    accepted(&mitm6.clone().tap_value(json!(false)));
    refused(&mitm6.clone().tap_value(json!("true")), "value", "expected true or false, got a string");
    // No registry kind takes an object, though the envelope carries one.
    refused(&locale.clone().tap_value(json!({"lang": "en"})), "value", "got an object");
}

#[test]
fn the_registry_is_the_reference_registry() {
    let ours: Value = serde_json::from_str(include_str!("../schemas/observation/primitives.json")).unwrap();
    assert_eq!(ours.as_object().unwrap().len(), 82);
    assert_eq!(registry::primitives().count(), 82);
}

trait TapValue {
    fn tap_value(self, value: Value) -> Value;
}

impl TapValue for Value {
    fn tap_value(mut self, value: Value) -> Value {
        self["value"] = value;
        self
    }
}

/// Any JSON at all, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("primitive".to_string()),
                    Just("value".to_string()),
                    Just("window".to_string()),
                    Just("start_ts".to_string()),
                    Just("end_ts".to_string()),
                    Just("confidence".to_string()),
                    Just("id".to_string()),
                    "[a-z_~/]{0,8}"
                ],
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn validate_never_panics(record in any_json()) {
        let _ = validate(&record);
    }

    #[test]
    fn a_good_record_with_any_one_field_replaced_never_panics(field in "[a-z_]{1,12}", value in any_json()) {
        let _ = validate(&with(&[field.as_str()], value.clone()));
        let _ = validate(&with(&["window", field.as_str()], value));
    }
}
