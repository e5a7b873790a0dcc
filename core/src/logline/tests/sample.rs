//! The reference sample (`core/tests/data/logline-sample.jsonl`): every line reads as DECNET reads
//! it, and the rules behind those readings hold beyond the sample's own lines.

use chrono::DateTime;
use proptest::prelude::*;

use super::*;

/// The reference sample (`core/tests/data/logline-sample.jsonl`, from `reference/logline-sample.jsonl`):
/// 400 lines of every shape decoys, sniffers, rsyslog and the bash wrapper emit, damaged and
/// hostile ones among them, each with the reading DECNET gives it (or the correct one where
/// DECNET's is wrong). Two differences are allowed: an unparsable timestamp may be kept as `None`,
/// and an empty address parameter may read as `Unknown` or as empty.
#[test]
fn the_reference_sample_reads_as_decnet_reads_it() {
    let sample = include_str!("../../../tests/data/logline-sample.jsonl");
    let mut wrong = Vec::new();
    for (n, entry) in sample.lines().enumerate() {
        let entry: serde_json::Value = serde_json::from_str(entry).unwrap();
        let line = entry["line"].as_str().unwrap();
        let expected = &entry["reading"];
        let got = match parse(line) {
            Err(_) => serde_json::Value::Null,
            Ok(parsed) => {
                let fields: serde_json::Map<String, serde_json::Value> =
                    parsed.fields.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect();
                let address_is_empty =
                    fields.iter().any(|(k, v)| attacker::ADDRESS_FIELDS.contains(&k.as_str()) && v == "");
                let attacker_ip =
                    if address_is_empty && expected["attacker_ip"] == "" && parsed.attacker_ip == UNKNOWN_IP {
                        String::new()
                    } else {
                        parsed.attacker_ip
                    };
                let timestamp = parsed.timestamp.map(|t| t.timestamp_nanos_opt().unwrap());
                let expected_timestamp = expected["timestamp_utc"]
                    .as_str()
                    .map(|t| DateTime::parse_from_rfc3339(t).unwrap().timestamp_nanos_opt().unwrap());
                serde_json::json!({
                    "decky": parsed.decky,
                    "service": parsed.service,
                    "event_type": parsed.event_type,
                    "attacker_ip": attacker_ip,
                    "fields": fields,
                    "msg": parsed.msg.unwrap_or_default(),
                    "timestamp_utc": if timestamp == expected_timestamp { expected["timestamp_utc"].clone() } else { timestamp.into() },
                })
            }
        };
        if &got != expected {
            wrong.push(format!("line {}: {line:?}\n  want {expected}\n  got  {got}", n + 1));
        }
    }
    assert!(wrong.is_empty(), "{} of 400 lines read differently:\n{}", wrong.len(), wrong.join("\n"));
}

/// The readings of the reference sample, by line.
fn sample_readings() -> Vec<(String, serde_json::Value)> {
    include_str!("../../../tests/data/logline-sample.jsonl")
        .lines()
        .map(|entry| {
            let entry: serde_json::Value = serde_json::from_str(entry).unwrap();
            (entry["line"].as_str().unwrap().to_owned(), entry["reading"].clone())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// The rules behind the sample hold beyond its lines: any PRI digits read alike, and padding
    /// after a nil structured data never reaches the MSG.
    #[test]
    fn sample_readings_hold_for_any_pri_and_padding(
        which in 0..400usize,
        pri in 0u32..1_000_000,
        padding in prop::collection::vec(prop::sample::select(vec![' ', '\t', '\u{a0}', '\u{3000}', '\u{1f}']), 0..4),
    ) {
        let (line, reading) = &sample_readings()[which];
        let Some((digits, rest)) = line.strip_prefix('<').and_then(|l| l.split_once('>')) else { return Ok(()) };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(());
        }
        let repri = format!("<{pri}>{rest}");
        let (original, again) = (parse(line).ok(), parse(&repri).ok());
        prop_assert_eq!(original.is_some(), again.is_some(), "{}", repri);
        if let (Some(original), Some(mut again)) = (original, again) {
            again.pri = original.pri;
            prop_assert_eq!(&original, &again);
            // Nil structured data followed by a MSG: more whitespace before the MSG changes nothing.
            let nil_sd = format!(" {} - ", original.event_type);
            let plain = !matches!(original.event_type.as_str(), "-" | "command") && line.matches(&nil_sd).count() == 1;
            if !reading.is_null() && plain && original.fields.is_empty() && original.msg.is_some() {
                let padded: String = padding.iter().collect();
                let line = line.replacen(&nil_sd, &format!("{nil_sd}{padded}"), 1);
                let read = parse(&line).map_err(|e| TestCaseError::fail(format!("{line:?}: {e}")))?;
                prop_assert_eq!(read.msg, original.msg, "{:?}", line);
            }
        }
    }
}
