//! How many triggers one token may make a minute (`SVC_CANARY_TRIGGERS_PER_MINUTE`): a bait looked
//! up in a loop, or a callback URL hammered, must not flood the store, the logs and the webhooks.
//! A window per token opens at its first trigger and lasts a minute. Past the limit the callback
//! still answers as ever; only the record is skipped, and the caller warns once per window. Pure:
//! the caller says when; the map is bounded.

use std::collections::HashMap;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);
/// The most tokens remembered; past it closed windows are forgotten, and if that is not enough, all.
const MAX_TOKENS: usize = 10_000;

/// The windows of every token heard from lately.
#[derive(Debug)]
pub struct TriggerLimit {
    per_minute: u32,
    windows: HashMap<uuid::Uuid, Window>,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    opened: Instant,
    count: u32,
    warned: bool,
}

/// What to do with one callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Record,
    /// Over the limit, and the first time in this window: say so.
    DropAndWarn,
    Drop,
}

impl TriggerLimit {
    pub fn new(per_minute: u32) -> TriggerLimit {
        TriggerLimit { per_minute, windows: HashMap::new() }
    }

    /// Counts one callback of `token` at `now`.
    pub fn admit(&mut self, token: uuid::Uuid, now: Instant) -> Admission {
        if self.windows.len() >= MAX_TOKENS && !self.windows.contains_key(&token) {
            self.windows.retain(|_, window| now.saturating_duration_since(window.opened) < WINDOW);
            if self.windows.len() >= MAX_TOKENS {
                self.windows.clear();
            }
        }
        let window = self.windows.entry(token).or_insert(Window { opened: now, count: 0, warned: false });
        if now.saturating_duration_since(window.opened) >= WINDOW {
            *window = Window { opened: now, count: 0, warned: false };
        }
        if window.count < self.per_minute {
            window.count += 1;
            Admission::Record
        } else if window.warned {
            Admission::Drop
        } else {
            window.warned = true;
            Admission::DropAndWarn
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_over_its_limit_is_dropped_until_its_minute_ends_and_warned_of_once() {
        let mut limit = TriggerLimit::new(3);
        let (token, other) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let start = Instant::now();
        let seen: Vec<_> = (0..6).map(|i| limit.admit(token, start + Duration::from_secs(i))).collect();
        use Admission::*;
        assert_eq!(seen, [Record, Record, Record, DropAndWarn, Drop, Drop]);
        assert_eq!(limit.admit(other, start + Duration::from_secs(7)), Record, "per token");
        assert_eq!(limit.admit(token, start + Duration::from_secs(59)), Drop);
        assert_eq!(limit.admit(token, start + Duration::from_secs(60)), Record, "a new window");
    }

    #[test]
    fn the_map_stays_bounded() {
        let mut limit = TriggerLimit::new(1);
        let start = Instant::now();
        for _ in 0..MAX_TOKENS + 5 {
            assert_eq!(limit.admit(uuid::Uuid::new_v4(), start), Admission::Record);
        }
        assert!(limit.windows.len() <= MAX_TOKENS);
        let later = start + WINDOW;
        limit.admit(uuid::Uuid::new_v4(), later);
        assert!(limit.windows.len() <= MAX_TOKENS);
    }
}
