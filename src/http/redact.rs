//! What a viewer may not read of a stored log row, and the one place that takes it out. The
//! admin-only fields are the mail an attacker sent through the SMTP decoys: its recipients
//! (`rcpt_to`, and `value` on the recipient events `rcpt_to` and `rcpt_denied`, DECNET's field for
//! them), its subject and any captured body (`subject`, `body`), and a recorded shell session's
//! events (`cast`, which hold whatever was typed). `/attackers/{uuid}/mail` and `/transcripts` are
//! admin only and `/smtp-targets` never shows a local part for the same reason: recipients are
//! third parties, and subjects and bodies are attacker content. For a viewer each such value is
//! replaced by [`REDACTED`] in `fields`, in `raw_line` (the RFC 5424 structured-data parameter, and
//! the value wherever else it appears) and in `msg`; the same keys are redacted in a bounty's
//! payload (a stored mail's `mail` artifact). Admins read rows whole. Every route that returns
//! log rows or bounties applies [`for_reader`] or [`for_bounty`] (`/logs`, `/stream`,
//! `/attackers/{uuid}/artifacts`, `/attackers/{uuid}/mail`, `/attackers/{uuid}/transcripts`,
//! `/bounty`); `tests/redaction.rs` checks each as a viewer and as an admin.

use serde_json::Value;

use super::logs::LogEntry;
use crate::db::{ADMIN_ONLY_FIELDS, RECIPIENT_EVENTS, Role};

/// What a viewer reads in place of an admin-only value.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not searched for outside their field: they would match anything.
const MIN_FREE_TEXT_VALUE: usize = 3;

/// Whether `key` of a row of `event_type` is admin-only.
fn admin_only(event_type: &str, key: &str) -> bool {
    ADMIN_ONLY_FIELDS.contains(&key) || (key == "value" && RECIPIENT_EVENTS.contains(&event_type))
}

/// The row as a reader of `role` may see it.
pub fn for_reader(role: Role, mut row: LogEntry) -> LogEntry {
    if role == Role::Admin {
        return row;
    }
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(&row.fields) else { return row };
    let mut hidden = Vec::new();
    for (key, value) in fields.iter_mut() {
        if admin_only(&row.event_type, key) && value.as_str().is_some_and(|v| !v.is_empty() && v != REDACTED) {
            let text = value.as_str().unwrap_or_default().to_string();
            hidden.push((key.clone(), text));
            *value = Value::String(REDACTED.into());
        }
    }
    if hidden.is_empty() {
        return row;
    }
    row.fields = Value::Object(fields).to_string();
    for (key, value) in &hidden {
        let param = |v: &str| format!("{key}=\"{v}\"");
        row.raw_line = row.raw_line.replace(&param(&sd_escaped(value)), &param(REDACTED));
        // The value elsewhere in the line or the message, itself and each of a list's items.
        for text in std::iter::once(value.as_str()).chain(value.split(',')) {
            let text = text.trim();
            if text.chars().count() >= MIN_FREE_TEXT_VALUE {
                row.raw_line = row.raw_line.replace(text, REDACTED);
                row.msg = row.msg.map(|msg| msg.replace(text, REDACTED));
            }
        }
    }
    row
}

/// The row with the value of its field `key` replaced by `with`, in `fields` and as its
/// structured-data parameter in `raw_line`; unchanged when it has no such text field.
pub fn replace_field(mut row: LogEntry, key: &str, with: &str) -> LogEntry {
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(&row.fields) else { return row };
    let Some(Value::String(old)) = fields.insert(key.to_string(), Value::String(with.into())) else { return row };
    let param = |v: &str| format!("{key}=\"{v}\"");
    row.raw_line = row.raw_line.replace(&param(&sd_escaped(&old)), &param(&sd_escaped(with)));
    row.fields = Value::Object(fields).to_string();
    row
}

/// A bounty payload as a reader of `role` may see it.
pub fn for_bounty(role: Role, mut payload: Value) -> Value {
    if role == Role::Admin {
        return payload;
    }
    if let Value::Object(map) = &mut payload {
        for (key, value) in map.iter_mut() {
            if ADMIN_ONLY_FIELDS.contains(&key.as_str()) && !value.is_null() {
                *value = Value::String(REDACTED.into());
            }
        }
    }
    payload
}

/// A structured-data parameter value as RFC 5424 writes it (`"`, `\` and `]` escaped).
fn sd_escaped(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace(']', "\\]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mail_row() -> LogEntry {
        let raw = r#"<134>1 2026-01-01T00:00:00Z mail-01 smtp - message_accepted [decnet@55555 mail_from="x@evil.test" rcpt_to="ceo@victim.example,cfo@victim.example" subject="Pay \"now\"" src_ip="1.2.3.4"] queued for ceo@victim.example"#;
        LogEntry {
            id: 1,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            decky: "mail-01".into(),
            service: "smtp".into(),
            event_type: "message_accepted".into(),
            attacker_ip: "1.2.3.4".into(),
            raw_line: raw.into(),
            fields: json!({"mail_from": "x@evil.test", "rcpt_to": "ceo@victim.example,cfo@victim.example", "subject": "Pay \"now\"", "src_ip": "1.2.3.4"}).to_string(),
            msg: Some("queued for ceo@victim.example".into()),
            trace_id: None,
            span_id: None,
            host_uuid: None,
        }
    }

    #[test]
    fn a_viewer_reads_no_recipient_or_subject_anywhere_in_the_row_and_an_admin_reads_it_whole() {
        let row = mail_row();
        assert_eq!(for_reader(Role::Admin, row.clone()), row);
        let seen = for_reader(Role::Viewer, row);
        let text = serde_json::to_string(&seen).unwrap();
        for secret in ["ceo@", "cfo@", "victim.example", "Pay"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let fields: Value = serde_json::from_str(&seen.fields).unwrap();
        assert_eq!(fields["rcpt_to"], REDACTED);
        assert_eq!(fields["mail_from"], "x@evil.test", "the attacker's own address stays");
        assert!(seen.raw_line.contains(r#"subject="[redacted]""#), "{}", seen.raw_line);
        assert!(seen.raw_line.contains(r#"src_ip="1.2.3.4""#));
    }

    #[test]
    fn a_recipient_events_value_is_admin_only_and_other_events_values_are_not() {
        let mut row = mail_row();
        row.event_type = "rcpt_denied".into();
        row.fields = json!({"value": "boss@victim.example"}).to_string();
        row.raw_line = r#"… [decnet@55555 value="boss@victim.example"]"#.into();
        let seen = for_reader(Role::Viewer, row.clone());
        assert!(!seen.raw_line.contains("boss@") && !seen.fields.contains("boss@"), "{seen:?}");
        row.event_type = "request".into();
        assert_eq!(for_reader(Role::Viewer, row.clone()), row);
    }

    #[test]
    fn a_bounty_payloads_mail_fields_are_admin_only() {
        let payload = json!({"kind": "mail", "rcpt_to": "a@b.example", "subject": "s", "size": "9"});
        assert_eq!(for_bounty(Role::Admin, payload.clone()), payload);
        let seen = for_bounty(Role::Viewer, payload);
        assert_eq!(seen, json!({"kind": "mail", "rcpt_to": REDACTED, "subject": REDACTED, "size": "9"}));
    }
}
