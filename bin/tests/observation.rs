//! `svc observation validate|ingest` as an operator runs them: the real binary on real files and
//! stdin, and for `ingest` a real database read back afterwards.

use svc_test_support::in_process as store;
use svc_test_support::processes as common;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use common::svc;
use serde_json::json;
use store::TestDb;

const ATTACKER: &str = "0b7c1a52-3d4e-4f60-8a9b-c0d1e2f3a4b5";

/// A valid record attributed to [`ATTACKER`], its window ending at `end`.
fn record(primitive: &str, value: serde_json::Value, end: f64) -> serde_json::Value {
    json!({
        "primitive": primitive,
        "value": value,
        "confidence": 0.9,
        "window": {"start_ts": 1_777_000_000.0, "end_ts": end},
        "source": "sensors/shell/test.py",
        "identity_ref": ATTACKER,
    })
}

fn lines(records: &[serde_json::Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Good records on lines 1, 3, 6; bad ones on 2 (categorical value), 4 (not JSON) and 7
/// (confidence); line 5 is blank.
fn mixed() -> String {
    let good = record("motor.keystroke_cadence", json!("bursty"), 1_777_000_010.0);
    let mut bad_value = good.clone();
    bad_value["value"] = json!("fast");
    let mut bad_confidence = good.clone();
    bad_confidence["confidence"] = json!(1.5);
    format!(
        "{good}\n{bad_value}\n{}\n{{\"primitive\":\n\n{}\n{bad_confidence}\n",
        record("toolchain.c2.beacon_interval_ms", json!(30_000), 1_777_000_020.0),
        record("toolchain.tls.ja3_client", json!("e7d705a3286e19ea42f587b344ee6865"), 1_777_000_030.0),
    )
}

#[test]
fn validate_reports_exactly_the_bad_lines_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mixed.jsonl", &mixed());
    // No database and no secrets: validate must not need them.
    let output = svc(dir.path(), &["observation", "validate", &file])
        .env_remove("SVC_JWT_SECRET")
        .env_remove("SVC_ADMIN_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said: Vec<String> = stdout(&output).lines().map(str::to_string).collect();
    assert_eq!(said.len(), 3, "{said:?}");
    assert_eq!(
        said[0],
        "line 2: value: `fast` is not one of steady, bursty, hunt_and_peck, machine (primitive `motor.keystroke_cadence`)"
    );
    assert!(said[1].starts_with("line 4: not JSON: "), "{said:?}");
    assert_eq!(said[2], "line 7: confidence: 1.5 is above the maximum 1");
    assert!(stderr(&output).contains("6 records, 3 invalid"), "{}", stderr(&output));
    assert!(!dir.path().join("data").exists(), "validate created a database");
}

#[test]
fn validate_of_good_records_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let good = lines(&[
        record("motor.keystroke_cadence", json!("machine"), 1_777_000_010.0),
        record("temporal.circadian.hour_histogram", json!([0, 1, 2.5]), 1_777_000_010.0),
    ]);
    let file = write(dir.path(), "good.jsonl", &good);
    let output = svc(dir.path(), &["observation", "validate", &file]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    assert!(stderr(&output).contains("2 records, 0 invalid"), "{}", stderr(&output));
}

#[test]
fn validate_reads_stdin_for_a_dash() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = svc(dir.path(), &["observation", "validate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(mixed().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = stdout(&output);
    let numbers: Vec<&str> = said.lines().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(numbers, ["line 2", "line 4", "line 7"]);
}

#[test]
fn validate_of_a_missing_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = svc(dir.path(), &["observation", "validate", "/nonexistent/obs.jsonl"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot open /nonexistent/obs.jsonl"), "{}", stderr(&output));
}

#[tokio::test]
async fn ingest_stores_each_valid_record_once_and_rejects_the_rest() {
    for backend in TestDb::all() {
        ingest_story(&backend).await;
    }
}

async fn ingest_story(backend: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let mut first = record("motor.keystroke_cadence", json!("steady"), 1_777_000_010.0);
    first["id"] = json!("5f0c6d1e-8a3b-4c2d-9e1f-0a1b2c3d4e5f");
    let mut same_id = record("motor.keystroke_cadence", json!("bursty"), 1_777_000_011.0);
    same_id["id"] = first["id"].clone();
    let mut second = record("toolchain.tls.ja3_client", json!("e7d705a3286e19ea42f587b344ee6865"), 1_777_000_020.0);
    second["evidence_ref"] = json!("session/42#clienthello");
    let mut same_evidence = second.clone();
    same_evidence["window"]["end_ts"] = json!(1_777_000_021.0);
    let third = record("toolchain.c2.beacon_interval_ms", json!(30_000), 1_777_000_030.0);
    let mut bad = third.clone();
    bad["value"] = json!(-5);
    let file = write(
        dir.path(),
        "obs.jsonl",
        &lines(&[first.clone(), same_id, second.clone(), same_evidence, bad, third.clone()]),
    );

    let output = svc(dir.path(), &["observation", "ingest", &file]).envs(backend.vars()).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "line 5: value: -5 is below the minimum 0 (primitive `toolchain.c2.beacon_interval_ms`)\n"
    );
    assert!(stderr(&output).contains("stored 3, duplicates 2, rejected 1"), "{}", stderr(&output));

    let db = backend.open().await;
    let stored = db.attacker_observations(ATTACKER.parse().unwrap(), 100).await.unwrap();
    let mut primitives: Vec<(&str, &serde_json::Value)> =
        stored.iter().map(|o| (o.primitive.as_str(), &o.value)).collect();
    primitives.sort_by_key(|(p, _)| *p);
    assert_eq!(
        primitives,
        [
            ("motor.keystroke_cadence", &json!("steady")),
            ("toolchain.c2.beacon_interval_ms", &json!(30_000)),
            ("toolchain.tls.ja3_client", &json!("e7d705a3286e19ea42f587b344ee6865")),
        ]
    );
    // The first of the two with one evidence reference is the one kept.
    let ja3 = stored.iter().find(|o| o.primitive == "toolchain.tls.ja3_client").unwrap();
    assert_eq!(ja3.window.end_ts, 1_777_000_020.0);
    db.close().await;

    // Again: what has an id or an evidence reference is held already; `third` has neither, so it is
    // stored anew, as `--help` warns.
    let good_only = write(dir.path(), "good.jsonl", &lines(&[first, second, third]));
    let output = svc(dir.path(), &["observation", "ingest", &good_only]).envs(backend.vars()).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("stored 1, duplicates 2, rejected 0"), "{}", stderr(&output));
}
