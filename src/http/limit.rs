//! Rate limits: fixed windows per key (client address, username), in memory and per replica as the
//! spec allows. The client is the socket peer; `X-Forwarded-For` is never read. Each limiter holds
//! at most [`MAX_KEYS`] keys, so a flood of distinct addresses or usernames cannot grow it without
//! bound: when full, the oldest window is dropped first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ApiError;

/// Keys per limiter. Evicting a key forgives its count, so this is set well above what a window of
/// legitimate traffic holds; an attacker needs this many fresh keys inside one window to reset one.
pub const MAX_KEYS: usize = 100_000;

#[derive(Debug)]
pub struct FixedWindow {
    limit: u32,
    window: Duration,
    /// For the 429 body, in DECNET's words: "10 per 5 minute".
    description: &'static str,
    max_keys: usize,
    state: Mutex<Windows>,
}

#[derive(Debug, Default)]
struct Windows {
    counts: HashMap<String, (Instant, u32)>,
    /// Keys in the order their windows opened, which is also the order they expire in.
    opened: VecDeque<(Instant, String)>,
}

impl FixedWindow {
    pub fn new(limit: u32, window: Duration, description: &'static str) -> Self {
        FixedWindow::with_capacity(limit, window, description, MAX_KEYS)
    }

    pub fn with_capacity(limit: u32, window: Duration, description: &'static str, max_keys: usize) -> Self {
        FixedWindow { limit, window, description, max_keys, state: Mutex::new(Windows::default()) }
    }

    /// Counts one request for `key`. `Err(retry_after)` when this request is over the limit.
    pub fn hit(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut state = self.state.lock().unwrap();
        state.forget_closed(now, self.window);
        if let Some((opened, count)) = state.counts.get_mut(key) {
            *count += 1;
            return if *count > self.limit { Err(self.window.saturating_sub(now - *opened)) } else { Ok(()) };
        }
        while state.counts.len() >= self.max_keys {
            let Some((_, oldest)) = state.opened.pop_front() else { break };
            state.counts.remove(&oldest);
        }
        state.counts.insert(key.to_string(), (now, 1));
        state.opened.push_back((now, key.to_string()));
        if self.limit == 0 { Err(self.window) } else { Ok(()) }
    }
}

impl Windows {
    fn forget_closed(&mut self, now: Instant, window: Duration) {
        while let Some((opened, _)) = self.opened.front() {
            if now.duration_since(*opened) < window {
                break;
            }
            let (_, key) = self.opened.pop_front().expect("front exists");
            self.counts.remove(&key);
        }
    }
}

/// The limits of this API's routes (spec Limits), or none when `SVC_LIMITER_ENABLED=false`.
#[derive(Debug)]
pub struct RateLimits {
    enabled: bool,
    login_by_address: FixedWindow,
    login_by_username: FixedWindow,
    change_password: FixedWindow,
    webhook_create: FixedWindow,
    enroll_bundle: FixedWindow,
    host_delete: FixedWindow,
}

impl RateLimits {
    pub fn new(enabled: bool) -> Self {
        const FIVE_MINUTES: Duration = Duration::from_secs(300);
        const MINUTE: Duration = Duration::from_secs(60);
        RateLimits {
            enabled,
            login_by_address: FixedWindow::new(10, FIVE_MINUTES, "10 per 5 minute"),
            login_by_username: FixedWindow::new(10, FIVE_MINUTES, "10 per 5 minute"),
            change_password: FixedWindow::new(5, MINUTE, "5 per 1 minute"),
            webhook_create: FixedWindow::new(20, MINUTE, "20 per 1 minute"),
            enroll_bundle: FixedWindow::new(10, MINUTE, "10 per 1 minute"),
            host_delete: FixedWindow::new(20, MINUTE, "20 per 1 minute"),
        }
    }

    /// Both buckets count every attempt, successful or not; either one full refuses it.
    pub fn login(&self, client: std::net::IpAddr, username: &str) -> Result<(), ApiError> {
        if !self.enabled {
            return Ok(());
        }
        let now = Instant::now();
        let by_address = self.login_by_address.hit(&client.to_string(), now);
        let by_username = self.login_by_username.hit(&username.to_lowercase(), now);
        match (by_address, by_username) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(a), Err(b)) => Err(limited(&self.login_by_address, a.max(b))),
            (Err(wait), _) => Err(limited(&self.login_by_address, wait)),
            (_, Err(wait)) => Err(limited(&self.login_by_username, wait)),
        }
    }

    pub fn change_password(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.change_password, client)
    }

    pub fn webhook_create(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.webhook_create, client)
    }

    pub fn enroll_bundle(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.enroll_bundle, client)
    }

    pub fn host_delete(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.host_delete, client)
    }

    fn by_address(&self, limiter: &FixedWindow, client: std::net::IpAddr) -> Result<(), ApiError> {
        if !self.enabled {
            return Ok(());
        }
        limiter.hit(&client.to_string(), Instant::now()).map_err(|wait| limited(limiter, wait))
    }
}

fn limited(limiter: &FixedWindow, retry_after: Duration) -> ApiError {
    ApiError::RateLimited { limit: limiter.description, retry_after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eleventh_hit_in_a_window_is_refused_until_it_closes() {
        let limiter = FixedWindow::new(10, Duration::from_secs(300), "10 per 5 minute");
        let start = Instant::now();
        for _ in 0..10 {
            assert!(limiter.hit("a", start).is_ok());
        }
        let wait = limiter.hit("a", start + Duration::from_secs(100)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(200));
        assert!(limiter.hit("b", start).is_ok(), "other keys have their own window");
        assert!(limiter.hit("a", start + Duration::from_secs(300)).is_ok(), "a new window opens");
    }

    #[test]
    fn a_flood_of_distinct_keys_stays_bounded() {
        let limiter = FixedWindow::with_capacity(10, Duration::from_secs(300), "10 per 5 minute", 1000);
        let now = Instant::now();
        for i in 0..50_000 {
            limiter.hit(&format!("10.0.{}.{}", i / 256, i % 256), now).unwrap();
        }
        let state = limiter.state.lock().unwrap();
        assert_eq!((state.counts.len(), state.opened.len()), (1000, 1000));
    }

    #[test]
    fn disabled_limits_never_refuse() {
        let limits = RateLimits::new(false);
        let client = "127.0.0.1".parse().unwrap();
        for _ in 0..100 {
            assert!(limits.login(client, "admin").is_ok());
            assert!(limits.change_password(client).is_ok());
            assert!(limits.webhook_create(client).is_ok());
            assert!(limits.enroll_bundle(client).is_ok());
            assert!(limits.host_delete(client).is_ok());
        }
    }
}
