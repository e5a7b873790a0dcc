//! Every NATS subject svc uses is built here and nowhere else. Subjects are the spec's topics
//! verbatim (`system.<worker>.health`); a name that would add a token or a wildcard is refused, so
//! a caller can never publish to, or listen on, more than the subject it meant.

/// Log pipeline notices: the ingester's `batch_committed` after every stored batch.
pub const SYSTEM_LOG: &str = "system.log";

/// Every worker's heartbeat, for the registry.
pub const ALL_WORKER_HEALTH: &str = "system.*.health";

/// An address profiled for the first time.
pub const ATTACKER_OBSERVED: &str = "attacker.observed";

/// A profile the profiler changed, with its counts.
pub const ATTACKER_SCORED: &str = "attacker.scored";

/// Every observation, whatever its primitive: what the profiler's intake listens on.
pub const ALL_ATTACKER_OBSERVATIONS: &str = "attacker.observation.>";

/// `attacker.observation.<primitive>`: one Observation envelope. The primitive's dots become
/// subject token separators, each part checked like any other token.
pub fn attacker_observation(primitive: &str) -> Result<String, BadToken> {
    for part in primitive.split('.') {
        token(part).map_err(|_| BadToken(primitive.to_string()))?;
    }
    Ok(format!("attacker.observation.{primitive}"))
}

/// Why a name cannot be one token of a subject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` cannot be a subject token (empty, or contains `.`, `*`, `>` or whitespace)")]
pub struct BadToken(pub String);

/// `system.<worker>.health`: the worker's heartbeat.
pub fn worker_health(worker: &str) -> Result<String, BadToken> {
    Ok(format!("system.{}.health", token(worker)?))
}

/// `system.<worker>.control`: stop intents for the worker.
pub fn worker_control(worker: &str) -> Result<String, BadToken> {
    Ok(format!("system.{}.control", token(worker)?))
}

/// `decky.<decky>.traffic`: what the sniffer saw of the decky's traffic (one event per fingerprint).
pub fn decky_traffic(decky: &str) -> Result<String, BadToken> {
    Ok(format!("decky.{}.traffic", token(decky)?))
}

/// The worker a `system.<worker>.health` subject is about.
pub fn worker_of_health(subject: &str) -> Option<&str> {
    let worker = subject.strip_prefix("system.")?.strip_suffix(".health")?;
    token(worker).ok()
}

fn token(name: &str) -> Result<&str, BadToken> {
    let bad = name.is_empty() || name.chars().any(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace());
    if bad { Err(BadToken(name.to_string())) } else { Ok(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_the_spec_topics() {
        assert_eq!(worker_health("api").unwrap(), "system.api.health");
        assert_eq!(worker_control("sniffer").unwrap(), "system.sniffer.control");
        assert_eq!(worker_of_health("system.collector.health"), Some("collector"));
        assert_eq!(decky_traffic("web-01").unwrap(), "decky.web-01.traffic");
        assert!(decky_traffic("a.b").is_err());
    }

    #[test]
    fn names_that_would_widen_a_subject_are_refused() {
        for bad in ["", "a.b", "*", ">", "a b", "x\n"] {
            assert!(worker_control(bad).is_err(), "{bad:?}");
        }
        assert_eq!(worker_of_health("system.a.b.health"), None);
        assert_eq!(worker_of_health("system..health"), None);
    }

    #[test]
    fn an_observation_subject_carries_the_dotted_primitive() {
        assert_eq!(
            attacker_observation("motor.shell_mastery.tab_completion").unwrap(),
            "attacker.observation.motor.shell_mastery.tab_completion"
        );
        for bad in ["", "motor.", ".x", "motor..x", "motor.*", "motor.>", "a b"] {
            assert!(attacker_observation(bad).is_err(), "{bad:?}");
        }
    }
}
