//! Every NATS subject svc uses is built here and nowhere else. Subjects are the spec's topics
//! verbatim (`system.<worker>.health`); a name that would add a token or a wildcard is refused, so
//! a caller can never publish to, or listen on, more than the subject it meant.

/// Log pipeline notices: the ingester's `batch_committed` after every stored batch.
pub const SYSTEM_LOG: &str = "system.log";

/// Requests to `svc supervise` to start one of its workers again (`{"worker": name}`, answered
/// with `{"started": bool, "detail": text}`).
pub const SUPERVISOR_START: &str = "system.supervisor.start";

/// The bus's own heartbeat (round trip, reconnects), one per process; `system.*.health` hears it too.
pub const BUS_HEALTH: &str = "system.bus.health";

/// Every worker's heartbeat, for the registry.
pub const ALL_WORKER_HEALTH: &str = "system.*.health";

/// An address profiled for the first time.
pub const ATTACKER_OBSERVED: &str = "attacker.observed";

/// A profile the profiler changed, with its counts.
pub const ATTACKER_SCORED: &str = "attacker.scored";

/// A credential stored for the first time (a repeat only counts an attempt).
pub const CREDENTIAL_CAPTURED: &str = "credential.captured";

/// The webhook set changed: the delivery worker reloads it at once instead of at its next poll.
pub const WEBHOOKS_CHANGED: &str = "system.webhook.subscriptions_changed";

/// The topic of the one-off delivery `POST /webhooks/{uuid}/test` sends; never on the bus.
pub const TEST_PING: &str = "test.ping";

/// Every subject: what webhook delivery listens on, matching each webhook's patterns itself.
pub const EVERYTHING: &str = ">";

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

/// `system.<worker>.status`: a worker's health tier changed (`ok`, `stale`, `unknown`).
pub fn worker_status(worker: &str) -> Result<String, BadToken> {
    Ok(format!("system.{}.status", token(worker)?))
}

/// `decky.<name>.state`: a decky's fleet state changed (DECNET's `DeckyStatus` webhooks select it).
pub fn decky_state(decky: &str) -> Result<String, BadToken> {
    Ok(format!("decky.{}.state", token(decky)?))
}

/// `decky.<name>.lifecycle`: a deploy or mutate operation on the decky changed status.
pub fn decky_lifecycle(decky: &str) -> Result<String, BadToken> {
    Ok(format!("decky.{}.lifecycle", token(decky)?))
}

/// Every `topology.<id>.mutation.enqueued`: what wakes the mutator early.
pub const ALL_MUTATIONS_ENQUEUED: &str = "topology.*.mutation.enqueued";

/// `topology.<id>.mutation.<state>`: a mutation was `enqueued`, or is `applying`, `applied`, `failed`.
pub fn topology_mutation(topology: uuid::Uuid, state: &str) -> Result<String, BadToken> {
    Ok(format!("topology.{topology}.mutation.{}", token(state)?))
}

/// `canary.<token uuid>.triggered`: a canary token's callback was requested (DECNET's subject).
pub fn canary_triggered(token: uuid::Uuid) -> String {
    format!("canary.{token}.triggered")
}

/// `topology.<id>.status`: the topology's status changed.
pub fn topology_status(topology: uuid::Uuid) -> String {
    format!("topology.{topology}.status")
}

/// Everything under `topology.<id>.`, for its event stream.
pub fn topology_events(topology: uuid::Uuid) -> String {
    format!("topology.{topology}.>")
}

/// `decky.<name>.service_added` or `decky.<name>.service_removed`: a mutation gave a topology
/// decky a service, or took one away.
pub fn decky_service(decky: &str, change: ServiceChange) -> Result<String, BadToken> {
    Ok(format!("decky.{}.{}", token(decky)?, change.as_str()))
}

/// What happened to one of a decky's services.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceChange {
    Added,
    Removed,
}

impl ServiceChange {
    /// The subject's last token, and the event's type.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceChange::Added => "service_added",
            ServiceChange::Removed => "service_removed",
        }
    }
}

/// Every `decky.<name>.<leaf>`: what a topology's event stream picks its own deckies' events from.
pub const ALL_DECKY_EVENTS: &str = "decky.*.*";

/// The leaf of a `decky.<name>.<leaf>` subject (`service_added` of `decky.web-01.service_added`).
pub fn decky_event_leaf(subject: &str) -> Option<&str> {
    let (decky, leaf) = subject.strip_prefix("decky.")?.split_once('.')?;
    token(decky).ok()?;
    token(leaf).ok()
}

/// `decky.<name>.mutation`: a fleet decky got new services.
pub fn decky_mutation(decky: &str) -> Result<String, BadToken> {
    Ok(format!("decky.{}.mutation", token(decky)?))
}

/// Why a text cannot be a subject pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a subject pattern: tokens are non-empty, without whitespace; `*` and `>` stand alone, `>` last")]
pub struct BadPattern;

/// The longest subject pattern accepted.
pub const MAX_PATTERN_CHARS: usize = 255;

/// Checks a NATS subject pattern: dot-separated tokens, `*` one token, `>` one or more trailing ones.
pub fn check_pattern(pattern: &str) -> Result<(), BadPattern> {
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(BadPattern);
    }
    let tokens: Vec<&str> = pattern.split('.').collect();
    let last = tokens.len() - 1;
    for (i, part) in tokens.iter().enumerate() {
        let wildcard = *part == "*" || (*part == ">" && i == last);
        if !wildcard && token(part).is_err() {
            return Err(BadPattern);
        }
    }
    Ok(())
}

/// `_SVC.echo.<id>`: the liveness echo one connection sends itself (see `liveness`).
pub fn bus_echo(connection: &uuid::Uuid) -> String {
    format!("{HOUSEKEEPING_PREFIX}echo.{}", connection.simple())
}

const HOUSEKEEPING_PREFIX: &str = "_SVC.";

/// Whether `subject` is the bus's own housekeeping (an echo, a reply inbox), never an event.
pub fn is_housekeeping(subject: &str) -> bool {
    subject.starts_with(HOUSEKEEPING_PREFIX) || subject.starts_with("_INBOX.")
}

/// Whether `subject` is one of the subjects `pattern` selects, as NATS matches them.
pub fn matches(pattern: &str, subject: &str) -> bool {
    let mut subject_tokens = subject.split('.');
    for part in pattern.split('.') {
        if part == ">" {
            return subject_tokens.next().is_some();
        }
        match subject_tokens.next() {
            Some(token) if part == "*" || part == token => {}
            _ => return false,
        }
    }
    subject_tokens.next().is_none()
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
    fn patterns_select_as_nats_does() {
        assert!(matches("attacker.>", "attacker.observed"));
        assert!(matches("attacker.>", "attacker.observation.motor.x"));
        assert!(!matches("attacker.>", "attacker"));
        assert!(matches("decky.*.state", "decky.web-01.state"));
        assert!(!matches("decky.*.state", "decky.web-01.traffic"));
        assert!(!matches("decky.*.state", "decky.a.b.state"));
        assert!(matches("credential.captured", "credential.captured"));
        assert!(!matches("credential.captured", "credential.captured.x"));
        assert!(matches(">", "system.api.health"));
        assert_eq!(decky_state("web-01").unwrap(), "decky.web-01.state");
        assert_eq!(decky_lifecycle("web-01").unwrap(), "decky.web-01.lifecycle");
        assert!(decky_state("a.b").is_err());
    }

    #[test]
    fn a_decky_event_subject_names_its_leaf() {
        assert_eq!(decky_service("web-01", ServiceChange::Added).unwrap(), "decky.web-01.service_added");
        assert_eq!(decky_service("web-01", ServiceChange::Removed).unwrap(), "decky.web-01.service_removed");
        assert!(decky_service("a.b", ServiceChange::Added).is_err());
        assert_eq!(decky_event_leaf("decky.web-01.service_added"), Some("service_added"));
        assert!(matches(ALL_DECKY_EVENTS, "decky.web-01.service_added"));
        for other in ["decky.web-01", "decky.a.b.c", "topology.x.status", "decky..state"] {
            assert_eq!(decky_event_leaf(other), None, "{other}");
        }
    }

    #[test]
    fn only_well_formed_patterns_are_accepted() {
        for good in [">", "attacker.>", "decky.*.state", "a.*.*", "credential.captured"] {
            assert_eq!(check_pattern(good), Ok(()), "{good}");
        }
        for bad in ["", ".", "a..b", "a.>.b", "a*", "a.b>", "a b", "a.\n", &"x".repeat(256)] {
            assert_eq!(check_pattern(bad), Err(BadPattern), "{bad:?}");
        }
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
