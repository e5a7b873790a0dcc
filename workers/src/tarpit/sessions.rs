//! The watcher's edge detection: from the sessions open in the store and the connections seen in
//! each decky's tables this poll, which sessions open (`tarpit_enter`) and which close
//! (`tarpit_exit`). A session is one attacker address on one rule port of one decky: parallel
//! connections from one address to one port are one session. A decky whose tables could not be
//! read this poll is left as it is; a decky without a rule any more closes all its sessions.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use svc::db::TarpitSession;
use svc::netns::conntable::Connection;

/// What one poll changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub open: Vec<TarpitSession>,
    pub close: Vec<TarpitSession>,
}

/// The edges between `open` (the store's sessions) and `seen` (per decky read this poll, its
/// established connections on its rule's ports). `ruled` names every decky that has a rule.
pub fn diff(
    open: &[TarpitSession],
    seen: &HashMap<String, Vec<Connection>>,
    ruled: &HashSet<&str>,
    now: DateTime<Utc>,
) -> Changes {
    let mut changes = Changes::default();
    let mut by_decky: HashMap<&str, Vec<&TarpitSession>> = HashMap::new();
    for session in open {
        by_decky.entry(session.decky_name.as_str()).or_default().push(session);
    }
    for (decky, connections) in seen {
        // Addresses as text, the one spelling the store keys sessions by; one per address and port.
        let caught: BTreeSet<(String, u16)> = connections.iter().map(|c| (c.remote.to_string(), c.port)).collect();
        let before = by_decky.remove(decky.as_str()).unwrap_or_default();
        let held: HashSet<(&str, u16)> = before.iter().map(|s| (s.attacker_ip.as_str(), s.port)).collect();
        for (ip, port) in &caught {
            if !held.contains(&(ip.as_str(), *port)) {
                changes.open.push(TarpitSession {
                    decky_name: decky.clone(),
                    attacker_ip: ip.clone(),
                    port: *port,
                    entered_at: now,
                });
            }
        }
        let still: HashSet<(&str, u16)> = caught.iter().map(|(ip, port)| (ip.as_str(), *port)).collect();
        changes
            .close
            .extend(before.into_iter().filter(|s| !still.contains(&(s.attacker_ip.as_str(), s.port))).cloned());
    }
    // Deckies not read this poll: kept, unless their rule is gone.
    for (decky, sessions) in by_decky {
        if !ruled.contains(decky) {
            changes.close.extend(sessions.into_iter().cloned());
        }
    }
    changes
}

/// Whole seconds from `entered_at` to `now`.
pub fn duration_s(entered_at: DateTime<Utc>, now: DateTime<Utc>) -> i64 {
    (now - entered_at).num_seconds().max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(decky: &str, ip: &str, port: u16, at: i64) -> TarpitSession {
        TarpitSession {
            decky_name: decky.into(),
            attacker_ip: ip.into(),
            port,
            entered_at: DateTime::from_timestamp(at, 0).unwrap(),
        }
    }

    fn conn(ip: &str, port: u16) -> Connection {
        Connection { remote: ip.parse().unwrap(), port }
    }

    #[test]
    fn new_connections_enter_and_gone_ones_exit_once() {
        let now = DateTime::from_timestamp(100, 0).unwrap();
        let open = vec![session("a", "10.0.0.9", 22, 10), session("a", "10.0.0.8", 22, 20)];
        let seen = HashMap::from([(
            "a".to_string(),
            vec![conn("10.0.0.9", 22), conn("10.0.0.9", 22), conn("fd7a::9", 22), conn("fd7a::9", 80)],
        )]);
        let ruled = HashSet::from(["a"]);
        let changes = diff(&open, &seen, &ruled, now);
        let opened: Vec<(&str, u16)> = changes.open.iter().map(|s| (s.attacker_ip.as_str(), s.port)).collect();
        assert_eq!(opened, [("fd7a::9", 22), ("fd7a::9", 80)], "parallel connections are one session");
        assert_eq!(changes.close, [session("a", "10.0.0.8", 22, 20)]);
        assert_eq!(duration_s(changes.close[0].entered_at, now), 80);
    }

    #[test]
    fn an_unread_decky_keeps_its_sessions_and_a_removed_rule_closes_them() {
        let now = DateTime::from_timestamp(100, 0).unwrap();
        let open = vec![session("a", "10.0.0.9", 22, 10), session("b", "10.0.0.9", 22, 10)];
        let seen = HashMap::new();
        // `a` has a rule but was not read (its engine did not answer); `b` has no rule any more.
        let changes = diff(&open, &seen, &HashSet::from(["a"]), now);
        assert_eq!(changes, Changes { open: vec![], close: vec![session("b", "10.0.0.9", 22, 10)] });
        // Nothing seen, everything held: a quiet poll changes nothing.
        let seen = HashMap::from([("a".to_string(), vec![conn("10.0.0.9", 22)])]);
        let changes = diff(&open[..1], &seen, &HashSet::from(["a"]), now);
        assert_eq!(changes, Changes::default());
    }
}
