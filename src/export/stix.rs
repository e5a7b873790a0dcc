//! STIX 2.1 objects of an attacker, DECNET's mapping (`decnet/ttp/stix_export.py`) with
//! deterministic ids throughout: the producer `identity`; the address (`ipv4-addr`/`ipv6-addr`) and
//! an `observed-data` of it (first/last seen, events); the `threat-actor`, carrying its services,
//! deckies and protocol fingerprints (JA3, JA4, HASSH…) in a property extension defined by an
//! `extension-definition`; an `attack-pattern` with the canonical ATT&CK id and a `uses`
//! relationship per technique its commands show; its commands as `process` objects with their
//! `command_line` in one `observed-data`; the files it dropped (`file` with the SHA-256) and the
//! accounts it tried (`user-account`, the secret as `credential` only when the operator asks) each
//! in an `observed-data`; and a `sighting` of the threat actor that ties the observations to it.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Map, Value, json};

use super::ids::{object_id, observable_id, quoted, random_shaped_id, stix_time};
use super::record::{AttackerRecord, CapturedAccount};
use super::techniques::Technique;

/// The name DECNET derives its producer identity from: the same id here, so consumers correlate.
const PRODUCER_SEED: &str = "decnet-honeypot";
const EXTENSION_SEED: &str = "decnet-actor-fingerprint-v1";
/// `created`/`modified` of the objects that never change (identity, extension, attack patterns).
const EPOCH_OF_DEFINITIONS: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

pub fn producer_id() -> String {
    object_id("identity", PRODUCER_SEED)
}

fn extension_id() -> String {
    object_id("extension-definition", EXTENSION_SEED)
}

fn definitions_time() -> String {
    stix_time(Utc.timestamp_opt(EPOCH_OF_DEFINITIONS, 0).single().unwrap_or_default())
}

/// Objects every document carries once: the producer and the extension the threat actors use.
pub fn preamble() -> Vec<Value> {
    let at = definitions_time();
    vec![
        json!({
            "type": "identity", "spec_version": "2.1", "id": producer_id(), "created": at, "modified": at,
            "name": "svc", "identity_class": "organization",
            "description": "svc honeypot control plane: automated observation of attackers",
        }),
        json!({
            "type": "extension-definition", "spec_version": "2.1", "id": extension_id(),
            "created_by_ref": producer_id(), "created": at, "modified": at,
            "name": "Honeypot attacker fingerprint",
            "description": "What the honeypot saw of a threat actor: services and decoys touched, events, and the \
                            protocol fingerprints of its clients (JA3, JA4, HASSH…).",
            "schema": "https://github.com/4nt11/DECNET/blob/main/decnet/ttp/stix_custom.py",
            "version": "1.0.0", "extension_types": ["property-extension"],
        }),
    ]
}

/// The ATT&CK technique as an attack pattern, with its canonical id as the external reference.
pub fn attack_pattern(technique: &Technique) -> Value {
    let at = definitions_time();
    json!({
        "type": "attack-pattern", "spec_version": "2.1", "id": object_id("attack-pattern", technique.id),
        "created_by_ref": producer_id(), "created": at, "modified": at, "name": technique.name,
        "external_references": [{"source_name": "mitre-attack", "external_id": technique.id, "url": technique.url()}],
        "kill_chain_phases": [{"kill_chain_name": "mitre-attack", "phase_name": technique.tactic}],
    })
}

/// A single attacker's bundle: the preamble, its attack patterns and its own objects.
pub fn attacker_bundle(record: &AttackerRecord) -> Value {
    let mut objects = preamble();
    objects.extend(record.techniques().iter().map(attack_pattern));
    objects.extend(attacker_objects(record));
    let seed = format!("bundle:{}:{}", record.profile.uuid, record.profile.updated_at.timestamp_millis());
    json!({"type": "bundle", "id": object_id("bundle", &seed), "objects": objects})
}

/// The objects of one attacker, without the preamble and attack patterns (shared by attackers).
pub fn attacker_objects(record: &AttackerRecord) -> Vec<Value> {
    let profile = &record.profile;
    let uuid = profile.uuid.to_string();
    let first = profile.first_seen;
    let last = profile.last_seen.max(first);
    let modified = profile.updated_at.max(first);
    let producer = producer_id();
    let mut objects = Vec::new();

    let address_kind = if profile.ip.contains(':') { "ipv6-addr" } else { "ipv4-addr" };
    let address_id = observable_id(address_kind, &[("value", quoted(&profile.ip))]);
    objects.push(json!({"type": address_kind, "spec_version": "2.1", "id": address_id, "value": profile.ip}));
    let seen_id = object_id("observed-data", &format!("address:{uuid}"));
    objects.push(observed(&seen_id, first, last, modified, profile.event_count, vec![address_id]));

    let actor_id = object_id("threat-actor", &uuid);
    let short = &uuid[..8];
    let mut actor = json!({
        "type": "threat-actor", "spec_version": "2.1", "id": actor_id, "created_by_ref": producer,
        "created": stix_time(first), "modified": stix_time(modified), "name": format!("svc-attacker-{short}"),
        "threat_actor_types": ["unknown"], "first_seen": stix_time(first), "last_seen": stix_time(last),
    });
    let behavior = json!({
        "extension_type": "property-extension",
        "network_behavior": {
            "event_count": profile.event_count, "services": profile.services, "deckies": profile.deckies,
            "is_traversal": profile.is_traversal(), "command_count": profile.command_count,
            "credential_count": profile.credential_count,
        },
        "protocol_fingerprints": record.fingerprints().iter().filter_map(fingerprint).collect::<Vec<_>>(),
    });
    actor["extensions"] = json!({ extension_id(): behavior });
    objects.push(actor);

    for technique in record.techniques() {
        let pattern = object_id("attack-pattern", technique.id);
        let id = object_id("relationship", &format!("uses:{uuid}:{}", technique.id));
        objects.push(json!({
            "type": "relationship", "spec_version": "2.1", "id": id, "created_by_ref": producer,
            "created": stix_time(first), "modified": stix_time(modified), "relationship_type": "uses",
            "source_ref": actor_id, "target_ref": pattern,
        }));
    }

    let mut observed_refs = vec![seen_id];
    if let (Some(oldest), Some(newest)) = (record.commands.first(), record.commands.last()) {
        let mut refs = Vec::new();
        for command in &record.commands {
            // A process has no id-contributing property: named by the attacker and the log row.
            let id = random_shaped_id("process", &format!("command:{uuid}:{}", command.log_id));
            objects.push(json!({"type": "process", "spec_version": "2.1", "id": id, "command_line": command.command}));
            refs.push(id);
        }
        let id = object_id("observed-data", &format!("commands:{uuid}"));
        let (from, to) = (oldest.timestamp.min(newest.timestamp), oldest.timestamp.max(newest.timestamp));
        objects.push(observed(&id, from, to, modified, refs.len() as i64, refs));
        observed_refs.push(id);
    }
    for file in &record.files {
        let hashes = format!("{{\"SHA-256\":{}}}", quoted(&file.sha256));
        let name = file.path.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p)).filter(|n| !n.is_empty());
        let mut contributing = vec![("hashes", hashes)];
        let mut object = json!({"type": "file", "spec_version": "2.1", "hashes": {"SHA-256": file.sha256}});
        if let Some(name) = name {
            contributing.push(("name", quoted(name)));
            object["name"] = json!(name);
        }
        if let Some(size) = file.size {
            object["size"] = json!(size);
        }
        let file_id = observable_id("file", &contributing);
        object["id"] = json!(file_id);
        objects.push(object);
        let id =
            object_id("observed-data", &format!("file:{uuid}:{}:{}", file.sha256, file.seen_at.timestamp_millis()));
        objects.push(observed(&id, file.seen_at, file.seen_at, modified, 1, vec![file_id]));
        observed_refs.push(id);
    }
    for (login, secret, accounts) in account_groups(record) {
        let mut contributing = vec![("account_login", quoted(&login))];
        let mut object = json!({"type": "user-account", "spec_version": "2.1", "account_login": login});
        if let Some(secret) = &secret {
            // With secrets asked for, one object per secret tried: the secret tells them apart.
            contributing.push(("credential", quoted(secret)));
            object["credential"] = json!(secret);
        }
        let account_id = observable_id("user-account", &contributing);
        object["id"] = json!(account_id);
        objects.push(object);
        let from = accounts.iter().map(|a| a.first_seen).min().unwrap_or(first);
        let to = accounts.iter().map(|a| a.last_seen).max().unwrap_or(last);
        let attempts: u64 = accounts.iter().map(|a| a.attempts).sum();
        let id = object_id("observed-data", &format!("account:{account_id}:{uuid}"));
        objects.push(observed(&id, from, to, modified, i64::try_from(attempts).unwrap_or(i64::MAX), vec![account_id]));
        observed_refs.push(id);
    }
    objects.push(json!({
        "type": "sighting", "spec_version": "2.1", "id": object_id("sighting", &format!("actor:{uuid}")),
        "created_by_ref": producer, "created": stix_time(first), "modified": stix_time(modified),
        "first_seen": stix_time(first), "last_seen": stix_time(last), "count": profile.event_count.clamp(1, 999_999_999),
        "sighting_of_ref": actor_id, "observed_data_refs": observed_refs, "where_sighted_refs": [producer],
    }));
    objects
}

/// The accounts tried, one group per login (and per secret, when secrets are carried).
fn account_groups(record: &AttackerRecord) -> Vec<(String, Option<String>, Vec<&CapturedAccount>)> {
    let mut groups: BTreeMap<(String, Option<String>), Vec<&CapturedAccount>> = BTreeMap::new();
    for account in &record.accounts {
        let key = (account.principal.clone().unwrap_or_default(), account.secret.clone());
        groups.entry(key).or_default().push(account);
    }
    groups.into_iter().map(|((login, secret), accounts)| (login, secret, accounts)).collect()
}

fn observed(
    id: &str,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    modified: DateTime<Utc>,
    count: i64,
    refs: Vec<String>,
) -> Value {
    let last = last.max(first);
    json!({
        "type": "observed-data", "spec_version": "2.1", "id": id, "created_by_ref": producer_id(),
        "created": stix_time(first), "modified": stix_time(modified.max(first)),
        "first_observed": stix_time(first), "last_observed": stix_time(last),
        "number_observed": count.clamp(1, 999_999_999), "object_refs": refs,
    })
}

/// A fingerprint bounty's payload as an extension property: its scalar members, as text, under
/// names STIX allows (lowercase, digits, `_`, 3 to 250 characters).
fn fingerprint(payload: &Value) -> Option<Value> {
    let members = payload.as_object()?;
    let mut out = Map::new();
    for (key, value) in members {
        let allowed = (3..=250).contains(&key.len())
            && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        let text = match value {
            Value::String(s) if !s.is_empty() => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => continue,
        };
        if allowed {
            out.insert(key.clone(), Value::String(text));
        }
    }
    out.contains_key("fingerprint_type").then_some(Value::Object(out))
}
