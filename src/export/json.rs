//! A row of DECNET's JSON export (`GET /attackers/export`): the attacker as DECNET's `observations`
//! list carries it. The enrichment DECNET adds from outside sources (GeoIP, ASN, threat intel) is
//! not collected by svc: present and null, so a reader finds the fields.

use serde_json::{Value, json};

use super::record::AttackerRecord;
use crate::time::format_utc;

pub const SOURCE: &str = "svc honeypot";
pub const VERSION: &str = "1.0";
pub const SCHEMA_VERSION: &str = "1.0";

pub fn observation(record: &AttackerRecord) -> Value {
    let profile = &record.profile;
    let commands: Vec<Value> = record
        .commands
        .iter()
        .map(|c| json!({"service": c.service, "decky": c.decky, "command": c.command, "timestamp": format_utc(c.timestamp)}))
        .collect();
    json!({
        "uuid": profile.uuid, "ip": profile.ip,
        "first_seen": format_utc(profile.first_seen), "last_seen": format_utc(profile.last_seen),
        "identity_id": null, "event_count": profile.event_count,
        "service_count": profile.service_count(), "decky_count": profile.decky_count(),
        "services": profile.services, "deckies": profile.deckies,
        "traversal_path": profile.traversal_path(), "is_traversal": profile.is_traversal(),
        "bounty_count": profile.bounty_count, "credential_count": profile.credential_count,
        "fingerprints": record.fingerprints(), "commands": commands,
        "geoip": {"country_code": null, "source": null},
        "network": {"asn": null, "as_name": null, "bgp_prefix": null, "asn_source": null, "rpki_status": null,
                    "rpki_source": null, "ptr_record": null},
        "threat_intel": null,
    })
}
