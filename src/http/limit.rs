//! Rate limits: fixed windows per key (client address, username), counted for the whole
//! deployment. Each attempt adds one to its window's row in the database ([`LimitStore`]), so
//! every API replica on that database counts against the same total; when the database cannot
//! be reached, the replica falls back to its own in-memory window (still limited, per replica)
//! for [`FALLBACK_SPELL`] before asking the database again, and says so in its log, once per
//! outage. The client is the socket peer; `X-Forwarded-For` is never read. Each in-memory limiter
//! holds at most [`MAX_KEYS`] keys, so a flood of distinct addresses or usernames cannot grow it
//! without bound: when full, the oldest window is dropped first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::ApiError;
use crate::db::{Db, LimitWindow};

/// How often closed windows are pruned from the database.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// After the database failed a count, how long this replica counts in memory before asking it
/// again: an unreachable server would otherwise cost every limited request a connect timeout.
pub const FALLBACK_SPELL: Duration = Duration::from_secs(5);

/// Keys per limiter. Evicting a key forgives its count, so this is set well above what a window of
/// legitimate traffic holds; an attacker needs this many fresh keys inside one window to reset one.
pub const MAX_KEYS: usize = 100_000;

#[derive(Debug)]
pub struct FixedWindow {
    /// The limit's name in the database.
    name: &'static str,
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
    pub fn new(name: &'static str, limit: u32, window: Duration, description: &'static str) -> Self {
        FixedWindow::with_capacity(name, limit, window, description, MAX_KEYS)
    }

    pub fn with_capacity(
        name: &'static str,
        limit: u32,
        window: Duration,
        description: &'static str,
        max_keys: usize,
    ) -> Self {
        FixedWindow { name, limit, window, description, max_keys, state: Mutex::new(Windows::default()) }
    }

    /// The window of the deployment's count that `now_millis` (since the epoch) falls in, and how
    /// long until it closes.
    fn shared_window<'a>(&self, key: &'a str, now_millis: i64) -> (LimitWindow<'a>, Duration) {
        let length = i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX).max(1);
        let index = now_millis.div_euclid(length);
        let closes = (index + 1).saturating_mul(length);
        let closes_at = chrono::DateTime::from_timestamp_millis(closes).unwrap_or(chrono::DateTime::<Utc>::MAX_UTC);
        let wait = Duration::from_millis(u64::try_from(closes - now_millis).unwrap_or(0));
        (LimitWindow { limit: self.name, key, index, closes_at }, wait)
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
pub struct RateLimits {
    enabled: bool,
    /// Where the deployment's counts live; `None`: this replica counts alone (tests of one API).
    shared: Option<Db>,
    /// Whether the last count fell back to memory, so an outage is logged once, not per request.
    falling_back: AtomicBool,
    /// Until when counts stay in memory without asking the database (see [`FALLBACK_SPELL`]).
    memory_until: Mutex<Option<Instant>>,
    login_by_address: FixedWindow,
    login_by_username: FixedWindow,
    change_password: FixedWindow,
    webhook_create: FixedWindow,
    enroll_bundle: FixedWindow,
    host_delete: FixedWindow,
}

impl RateLimits {
    /// Limits counted in this process only.
    pub fn new(enabled: bool) -> Self {
        const FIVE_MINUTES: Duration = Duration::from_secs(300);
        const MINUTE: Duration = Duration::from_secs(60);
        RateLimits {
            enabled,
            shared: None,
            falling_back: AtomicBool::new(false),
            memory_until: Mutex::new(None),
            login_by_address: FixedWindow::new("login_by_address", 10, FIVE_MINUTES, "10 per 5 minute"),
            login_by_username: FixedWindow::new("login_by_username", 10, FIVE_MINUTES, "10 per 5 minute"),
            change_password: FixedWindow::new("change_password", 5, MINUTE, "5 per 1 minute"),
            webhook_create: FixedWindow::new("webhook_create", 20, MINUTE, "20 per 1 minute"),
            enroll_bundle: FixedWindow::new("enroll_bundle", 10, MINUTE, "10 per 1 minute"),
            host_delete: FixedWindow::new("host_delete", 20, MINUTE, "20 per 1 minute"),
        }
    }

    /// Limits counted in `db` for every replica on it, in memory while it is unreachable.
    pub fn shared(enabled: bool, db: Db) -> Self {
        RateLimits { shared: Some(db), ..RateLimits::new(enabled) }
    }

    /// Both buckets count every attempt, successful or not; either one full refuses it.
    pub async fn login(&self, client: std::net::IpAddr, username: &str) -> Result<(), ApiError> {
        if !self.enabled {
            return Ok(());
        }
        let by_address = self.hit(&self.login_by_address, &client.to_string()).await;
        let by_username = self.hit(&self.login_by_username, &username.to_lowercase()).await;
        match (by_address, by_username) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(a), Err(b)) => Err(limited(&self.login_by_address, a.max(b))),
            (Err(wait), _) => Err(limited(&self.login_by_address, wait)),
            (_, Err(wait)) => Err(limited(&self.login_by_username, wait)),
        }
    }

    pub async fn change_password(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.change_password, client).await
    }

    pub async fn webhook_create(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.webhook_create, client).await
    }

    pub async fn enroll_bundle(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.enroll_bundle, client).await
    }

    pub async fn host_delete(&self, client: std::net::IpAddr) -> Result<(), ApiError> {
        self.by_address(&self.host_delete, client).await
    }

    /// Forgets the closed windows in the database, every [`PRUNE_EVERY`] until `cancel`.
    pub async fn prune(&self, cancel: tokio_util::sync::CancellationToken) {
        let Some(db) = &self.shared else { return };
        loop {
            match db.prune_limit_windows(Utc::now()).await {
                Ok(pruned) if pruned > 0 => tracing::debug!(pruned, "Pruned closed rate-limit windows"),
                Ok(_) => {}
                Err(err) => tracing::debug!(error = %err, "Pruning rate-limit windows failed; retried later"),
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(PRUNE_EVERY) => {}
            }
        }
    }

    async fn by_address(&self, limiter: &FixedWindow, client: std::net::IpAddr) -> Result<(), ApiError> {
        if !self.enabled {
            return Ok(());
        }
        self.hit(limiter, &client.to_string()).await.map_err(|wait| limited(limiter, wait))
    }

    /// Counts one attempt for `key`: in the deployment's window when the database answers, else
    /// in this replica's. `Err(retry_after)` when the attempt is over the limit.
    async fn hit(&self, limiter: &FixedWindow, key: &str) -> Result<(), Duration> {
        let Some(db) = &self.shared else {
            return limiter.hit(key, Instant::now());
        };
        if self.memory_until.lock().unwrap().is_some_and(|until| Instant::now() < until) {
            return limiter.hit(key, Instant::now());
        }
        let (window, wait) = limiter.shared_window(key, Utc::now().timestamp_millis());
        match db.count_attempt(&window).await {
            Ok(hits) => {
                if self.falling_back.swap(false, Ordering::Relaxed) {
                    tracing::info!("Rate limits are counted in the database again, for every replica");
                }
                if hits > limiter.limit { Err(wait) } else { Ok(()) }
            }
            Err(err) => {
                *self.memory_until.lock().unwrap() = Some(Instant::now() + FALLBACK_SPELL);
                if !self.falling_back.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        error = %err,
                        "Rate limits cannot be counted in the database; this replica counts alone until it is back"
                    );
                }
                limiter.hit(key, Instant::now())
            }
        }
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
        let limiter = FixedWindow::new("test", 10, Duration::from_secs(300), "10 per 5 minute");
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
        let limiter = FixedWindow::with_capacity("test", 10, Duration::from_secs(300), "10 per 5 minute", 1000);
        let now = Instant::now();
        for i in 0..50_000 {
            limiter.hit(&format!("10.0.{}.{}", i / 256, i % 256), now).unwrap();
        }
        let state = limiter.state.lock().unwrap();
        assert_eq!((state.counts.len(), state.opened.len()), (1000, 1000));
    }

    #[tokio::test]
    async fn disabled_limits_never_refuse() {
        let limits = RateLimits::new(false);
        let client = "127.0.0.1".parse().unwrap();
        for _ in 0..100 {
            assert!(limits.login(client, "admin").await.is_ok());
            assert!(limits.change_password(client).await.is_ok());
            assert!(limits.webhook_create(client).await.is_ok());
            assert!(limits.enroll_bundle(client).await.is_ok());
            assert!(limits.host_delete(client).await.is_ok());
        }
    }
}
