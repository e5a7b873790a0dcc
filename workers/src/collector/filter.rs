//! DECNET's collector filters: lines of system noise (`SVC_COLLECTOR_DROP_APPS`) are dropped, and
//! connection events (`SVC_COLLECTOR_RL_EVENT_TYPES`) are kept at most once a window
//! (`SVC_COLLECTOR_RL_WINDOW_SEC`) per attacker, decky, service and event type. A line that is not
//! an RFC 5424 line is dropped: the ingester could not read it either.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use svc::config::CollectorConfig;
use svc::logline::{self, LogLine};

/// Rate-limit keys remembered at most; older ones are forgotten first when it fills.
const MAX_KEYS: usize = 10_000;

pub struct Filter {
    drop_apps: Vec<String>,
    limited: Vec<String>,
    window: Duration,
    last_kept: HashMap<(String, String, String, String), Instant>,
}

impl Filter {
    pub fn new(config: &CollectorConfig) -> Filter {
        Filter {
            drop_apps: config.drop_apps.clone(),
            limited: config.rate_limited_events.clone(),
            window: config.rate_limit_window,
            last_kept: HashMap::new(),
        }
    }

    /// `line`, read, when it goes on to the ingest file.
    pub fn keep(&mut self, line: &str) -> Option<LogLine> {
        self.keep_at(line, Instant::now())
    }

    fn keep_at(&mut self, line: &str, now: Instant) -> Option<LogLine> {
        let parsed = logline::parse(line).ok()?;
        if self.drop_apps.contains(&parsed.service) {
            return None;
        }
        if !self.limited.contains(&parsed.event_type) {
            return Some(parsed);
        }
        let key = (parsed.attacker_ip.clone(), parsed.decky.clone(), parsed.service.clone(), parsed.event_type.clone());
        if self.last_kept.get(&key).is_some_and(|at| now.duration_since(*at) < self.window) {
            return None;
        }
        if self.last_kept.len() >= MAX_KEYS {
            let window = self.window;
            self.last_kept.retain(|_, at| now.duration_since(*at) < window * 60);
            if self.last_kept.len() >= MAX_KEYS {
                self.last_kept.clear();
            }
        }
        self.last_kept.insert(key, now);
        Some(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter() -> Filter {
        Filter {
            drop_apps: vec!["sshd".into()],
            limited: vec!["connect".into()],
            window: Duration::from_secs(1),
            last_kept: HashMap::new(),
        }
    }

    const CONNECT: &str = "<134>1 2026-11-23T10:00:00Z web ssh - connect [relay@55555 src_ip=\"203.0.113.9\"]";

    #[test]
    fn noise_and_repeated_connects_are_dropped() {
        let mut f = filter();
        let t0 = Instant::now();
        assert!(f.keep_at(CONNECT, t0).is_some());
        assert!(f.keep_at(CONNECT, t0 + Duration::from_millis(500)).is_none(), "same attacker within the window");
        assert!(f.keep_at(&CONNECT.replace("203.0.113.9", "203.0.113.10"), t0).is_some(), "another attacker");
        assert!(f.keep_at(CONNECT, t0 + Duration::from_millis(1500)).is_some(), "after the window");
        assert!(f.keep_at(&CONNECT.replace(" connect ", " login_attempt "), t0).is_some(), "not rate limited");
        assert!(f.keep_at(&CONNECT.replace(" ssh ", " sshd "), t0).is_none(), "a dropped app");
        assert!(f.keep_at("not a log line", t0).is_none());
    }
}
