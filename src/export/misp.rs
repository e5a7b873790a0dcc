//! A MISP event per attacker, in MISP's own JSON (`{"Event": {…}}`, what MISP's REST API returns and
//! its "Import from MISP JSON" reads). DECNET converts its STIX bundle with misp-stix; svc writes
//! the event directly from the same record, with deterministic uuids: the address (`ip-src`, for
//! IDS), the commands (`text`), the files dropped (`sha256`, `filename`), fingerprints (`ja3`/`hassh`
//! MD5 types when the value is one, the prober's `jarm-fingerprint` and `x509-fingerprint-sha256`,
//! else `text`), the logins tried (`target-user`; the secrets as
//! `text` only when the operator asks), and a MITRE ATT&CK galaxy tag per technique.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::ids::{NAMESPACE, uuid5};
use super::record::AttackerRecord;

/// `{"Event": …}` for one attacker.
pub fn attacker_event(record: &AttackerRecord) -> Value {
    let profile = &record.profile;
    let uuid = profile.uuid;
    let mut attributes = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |kind: &str, category: &str, value: &str, to_ids: bool, comment: String| {
        if value.is_empty() || !seen.insert((kind.to_string(), value.to_string())) {
            return;
        }
        let id = uuid5(NAMESPACE, &format!("misp-attribute:{uuid}:{kind}:{value}"));
        attributes.push(json!({
            "uuid": id, "type": kind, "category": category, "value": value, "to_ids": to_ids,
            "comment": comment, "timestamp": profile.updated_at.timestamp().to_string(), "distribution": "5",
        }));
    };
    add(
        "ip-src",
        "Network activity",
        &profile.ip,
        true,
        format!("{} events on {}", profile.event_count, profile.services.join(", ")),
    );
    for command in &record.commands {
        add(
            "text",
            "Other",
            &command.command,
            false,
            format!("shell command on {} ({})", command.decky, command.service),
        );
    }
    for file in &record.files {
        add("sha256", "Payload delivery", &file.sha256, true, "file dropped on a decoy".into());
        if let Some(path) = &file.path {
            add(
                "filename",
                "Payload delivery",
                path,
                false,
                format!("where the file with SHA-256 {} was put", file.sha256),
            );
        }
    }
    for fingerprint in record.fingerprints() {
        let Some(kind) = fingerprint.get("fingerprint_type").and_then(Value::as_str) else { continue };
        for (key, value) in fingerprint.as_object().into_iter().flatten() {
            let Some(value) = value.as_str() else { continue };
            let identity =
                key == kind || key == "hash" || key == "value" || key == "cert_sha256" || key.starts_with("ja");
            if key == "fingerprint_type" || !identity {
                continue;
            }
            let hex_of = |len: usize| value.len() == len && value.bytes().all(|b| b.is_ascii_hexdigit());
            let misp_type = match key.as_str() {
                "ja3" if hex_of(32) => "ja3-fingerprint-md5",
                "hash" if hex_of(32) && kind.starts_with("hassh") => "hassh-md5",
                // The prober's: the JARM of a server the attacker runs, its certificate's digest.
                "hash" if hex_of(62) && kind == "jarm" => "jarm-fingerprint",
                "cert_sha256" if hex_of(64) => "x509-fingerprint-sha256",
                _ => "text",
            };
            add(misp_type, "Network activity", value, false, format!("{key} fingerprint ({kind})"));
        }
    }
    for account in &record.accounts {
        if let Some(login) = &account.principal {
            add("target-user", "Targeting data", login, false, format!("login tried on {}", account.service));
        }
        if let Some(secret) = &account.secret {
            add("text", "Other", secret, false, format!("secret tried on {}", account.service));
        }
    }
    let mut tags = vec![json!({"name": "svc:honeypot"})];
    for technique in record.techniques() {
        tags.push(
            json!({"name": format!("misp-galaxy:mitre-attack-pattern=\"{} - {}\"", technique.name, technique.id)}),
        );
    }
    json!({"Event": {
        "uuid": uuid5(NAMESPACE, &format!("misp-event:{uuid}")),
        "info": format!("svc honeypot: attacker {}", profile.ip),
        "date": profile.first_seen.format("%Y-%m-%d").to_string(),
        "timestamp": profile.updated_at.timestamp().to_string(),
        "threat_level_id": "3", "analysis": "2", "distribution": "0", "published": false,
        "Orgc": {"name": "svc", "uuid": uuid5(NAMESPACE, "decnet-honeypot")},
        "Attribute": attributes,
        "Tag": tags,
    }})
}
