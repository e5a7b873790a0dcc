//! What the profiler tells the bus once a batch is stored: `attacker.observed` for an address
//! profiled for the first time, `attacker.scored` for every profile the batch changed, and each
//! observation on `attacker.observation.<primitive>`. Webhooks subscribed to `attacker.>` hear
//! these. DECNET fires `attacker.observed` again after every restart of its engine; here it fires
//! once per address, when the address's profile is first stored.

use serde_json::{Value, json};
use svc::bus::{Event, topics};
use svc::db::{AttackerProfile, LogRecord};
use svc::observation::Observation;
use svc::time::format_utc;

/// `attacker.observed`, type `observed`: the address's first row. `first_seen` is that row's time.
pub fn observed(profile: &AttackerProfile, first: &LogRecord) -> Event {
    let payload = json!({
        "attacker_uuid": profile.uuid,
        "attacker_ip": profile.ip,
        "decky": first.decky,
        "service": first.service,
        "event_type": first.event_type,
        "first_seen": format_utc(profile.first_seen),
    });
    Event::new(topics::ATTACKER_OBSERVED, "observed", payload)
}

/// `attacker.scored`, type `scored`: DECNET's counts, plus the uuid and the behaviour class.
pub fn scored(profile: &AttackerProfile) -> Event {
    let behavior: Value = serde_json::from_str(&profile.behavior).unwrap_or(Value::Null);
    let payload = json!({
        "attacker_uuid": profile.uuid,
        "attacker_ip": profile.ip,
        "event_count": profile.event_count,
        "service_count": profile.service_count(),
        "decky_count": profile.decky_count(),
        "bounty_count": profile.bounty_count,
        "credential_count": profile.credential_count,
        "is_traversal": profile.is_traversal(),
        "behavior_class": behavior.get("behavior_class").cloned().unwrap_or(Value::Null),
    });
    Event::new(topics::ATTACKER_SCORED, "scored", payload)
}

/// `attacker.observation.<primitive>`, as DECNET publishes it: type = the primitive, payload =
/// the envelope plus `attacker_uuid`. `None` for a primitive that cannot be a subject.
pub fn observation(observation: &Observation) -> Option<Event> {
    let topic = topics::attacker_observation(&observation.primitive).ok()?;
    let mut payload = serde_json::to_value(observation).expect("an observation serialises");
    payload["attacker_uuid"] = observation.identity_ref.clone().into();
    Some(Event::new(topic, observation.primitive.clone(), payload))
}
