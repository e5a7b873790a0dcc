//! Deterministic identifiers and STIX's timestamp format. Names are hashed into UUIDv5 under
//! DECNET's namespace, so an attacker exports to the ids DECNET gives it (the producer identity and
//! the threat actor are DECNET's exactly); STIX cyber-observables use STIX's own namespace over their
//! ID-contributing properties, as STIX 2.1 §2.9 asks, so any producer names one address alike.

use chrono::{DateTime, SecondsFormat, Utc};
use sha1::{Digest, Sha1};
use uuid::Uuid;

/// DECNET's namespace for the ids it derives (`decnet/ttp/stix_export.py`).
pub const NAMESPACE: Uuid = Uuid::from_u128(0xb5d2c3a1_8f4e_4d1b_9a6c_0e7f5b3d2c1a);
/// STIX 2.1's namespace for cyber-observable ids.
pub const STIX_SCO_NAMESPACE: Uuid = Uuid::from_u128(0x00abedb4_aa42_466c_9c01_fed23315a9b7);

/// RFC 4122 version 5: SHA-1 of the namespace and the name.
pub fn uuid5(namespace: Uuid, name: &str) -> Uuid {
    let digest = Sha1::new().chain_update(namespace.as_bytes()).chain_update(name.as_bytes()).finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_sha1_bytes(bytes).into_uuid()
}

/// `<kind>--<uuid>` for the kinds STIX requires a version 4 id of (`process`, which has no
/// id-contributing property): the bits of the name's UUIDv5 with version 4 set, so the id is as
/// stable as the others and still the version the specification asks for.
pub fn random_shaped_id(kind: &str, name: &str) -> String {
    format!("{kind}--{}", uuid::Builder::from_random_bytes(uuid5(NAMESPACE, name).into_bytes()).into_uuid())
}

/// `<kind>--<uuid5 of name>` in DECNET's namespace.
pub fn object_id(kind: &str, name: &str) -> String {
    format!("{kind}--{}", uuid5(NAMESPACE, name))
}

/// The id of a cyber-observable whose ID-contributing properties are these (key, JSON value text)
/// pairs: their canonical JSON (keys sorted, no whitespace) under STIX's namespace.
pub fn observable_id(kind: &str, properties: &[(&str, String)]) -> String {
    let mut sorted: Vec<&(&str, String)> = properties.iter().collect();
    sorted.sort_by_key(|(key, _)| *key);
    let members: Vec<String> = sorted.iter().map(|(key, value)| format!("{}:{value}", quoted(key))).collect();
    format!("{kind}--{}", uuid5(STIX_SCO_NAMESPACE, &format!("{{{}}}", members.join(","))))
}

/// A JSON string literal.
pub fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// STIX's timestamp: RFC 3339, UTC, `Z`, milliseconds.
pub fn stix_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_5_as_python_computes_it() {
        // uuid.uuid5(uuid.NAMESPACE_DNS, "python.org") in Python's documentation.
        let dns = Uuid::from_u128(0x6ba7b810_9dad_11d1_80b4_00c04fd430c8);
        assert_eq!(uuid5(dns, "python.org").to_string(), "886313e1-3b8a-5372-9b90-0c9aee199e5d");
    }

    #[test]
    fn observables_follow_stix_canonical_ids() {
        // What OASIS's stix2 library computes for this address.
        let id = observable_id("ipv4-addr", &[("value", quoted("198.51.100.3"))]);
        assert_eq!(id, "ipv4-addr--28bb3599-77cd-5a82-a950-b5bc3caf07c4");
        let hashes = format!("{{\"SHA-256\":{}}}", quoted(&"a".repeat(64)));
        let file = observable_id("file", &[("name", quoted("x")), ("hashes", hashes)]);
        assert_eq!(file, "file--37d1e0f3-5e31-5839-8f8d-64734edbe2ef");
        let account = observable_id("user-account", &[("account_login", quoted("root"))]);
        assert_eq!(account, "user-account--3d209579-8f71-5179-b6a3-49509efb52cc");
    }
}
