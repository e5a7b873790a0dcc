//! A value found lately, believed for a while so that repeated asks cost one finding: [`Recent`]
//! (the fleet's engine health and decky counts, the log streams' summaries, the database probe of
//! `/health`, the installed units of `/workers`) and [`RecentByKey`], the same per key with a bound
//! on its entries (the sessions' users and revocations).
//!
//! A [`Recent`] value can be forgotten when what it describes changed here; a value whose finding
//! began before the forget is then not kept, as it may describe the world before the change.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One value, believed for the while each caller names.
#[derive(Debug)]
pub struct Recent<T> {
    state: Mutex<State<T>>,
    /// Held while [`get_or_try_find`](Recent::get_or_try_find) finds a value, so that concurrent
    /// callers wait for one finding instead of each making their own.
    finding: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct State<T> {
    found: Option<(Instant, T)>,
    /// How often the value was forgotten: one found before the last forget is not kept.
    forgets: u64,
}

/// What [`Recent::found`] needs to keep a fresh value: when its finding began.
#[derive(Debug)]
pub struct Finding {
    forgets: u64,
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent { state: Mutex::new(State { found: None, forgets: 0 }), finding: tokio::sync::Mutex::new(()) }
    }
}

impl<T: Clone> Recent<T> {
    /// The value found within `within`, or what to keep a fresh one with.
    pub fn get(&self, within: Duration) -> Result<T, Finding> {
        let state = self.state.lock().expect("the recent lock is never poisoned");
        match &state.found {
            Some((at, value)) if at.elapsed() < within => Ok(value.clone()),
            _ => Err(Finding { forgets: state.forgets }),
        }
    }

    /// Keeps `value` unless it was forgotten since its finding began (it may describe the world
    /// before the change).
    pub fn found(&self, finding: Finding, value: T) {
        let mut state = self.state.lock().expect("the recent lock is never poisoned");
        if state.forgets == finding.forgets {
            state.found = Some((Instant::now(), value));
        }
    }

    pub fn forget(&self) {
        let mut state = self.state.lock().expect("the recent lock is never poisoned");
        state.found = None;
        state.forgets += 1;
    }

    /// The value found within `within`, else the one `find` finds, kept for the next callers. Of
    /// concurrent callers one finds and the others wait for its value. A failed finding keeps
    /// nothing: the next caller tries again.
    pub async fn get_or_try_find<E>(&self, within: Duration, find: impl Future<Output = Result<T, E>>) -> Result<T, E> {
        if let Ok(value) = self.get(within) {
            return Ok(value);
        }
        let _one_finding = self.finding.lock().await;
        let finding = match self.get(within) {
            Ok(value) => return Ok(value),
            Err(finding) => finding,
        };
        let value = find.await?;
        self.found(finding, value.clone());
        Ok(value)
    }

    /// [`get_or_try_find`](Recent::get_or_try_find) for a finding that cannot fail.
    pub async fn get_or_find(&self, within: Duration, find: impl Future<Output = T>) -> T {
        let Ok(value) = self.get_or_try_find(within, async { Ok::<T, Infallible>(find.await) }).await;
        value
    }
}

/// A value per key, each believed for `ttl`; at most `max_entries` are kept (past it, expired
/// entries go, and if all are live all go: dropping them costs only finding them again).
#[derive(Debug)]
pub struct RecentByKey<K, V> {
    ttl: Duration,
    max_entries: usize,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> RecentByKey<K, V> {
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        RecentByKey { ttl, max_entries, entries: Mutex::new(HashMap::new()) }
    }

    /// The value of `key`, if found within the ttl.
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().expect("the recent lock is never poisoned");
        entries.get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, value)| value.clone())
    }

    pub fn insert(&self, key: K, value: V) {
        let mut entries = self.entries.lock().expect("the recent lock is never poisoned");
        if entries.len() >= self.max_entries {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() >= self.max_entries {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    /// Forgets `key`'s value: it changed here.
    pub fn remove(&self, key: &K) {
        self.entries.lock().expect("the recent lock is never poisoned").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    const A_WHILE: Duration = Duration::from_secs(60);

    #[test]
    fn a_value_is_believed_for_a_while_and_forgotten_on_a_change() {
        let recent = Recent::<u32>::default();
        let finding = recent.get(A_WHILE).unwrap_err();
        recent.found(finding, 7);
        assert_eq!(recent.get(A_WHILE).ok(), Some(7));
        assert!(recent.get(Duration::ZERO).is_err(), "older than the while");
        recent.forget();
        assert!(recent.get(A_WHILE).is_err());
    }

    #[test]
    fn a_value_found_across_a_change_is_not_kept() {
        let recent = Recent::<u32>::default();
        let finding = recent.get(A_WHILE).unwrap_err();
        recent.forget();
        recent.found(finding, 7);
        assert!(recent.get(A_WHILE).is_err(), "the value may describe the world before the change");
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_finding_and_a_failure_is_not_kept() {
        let recent = Arc::new(Recent::<u32>::default());
        let findings = Arc::new(AtomicU32::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let callers: Vec<_> = (0..5)
            .map(|_| {
                let (recent, findings, mut released) = (recent.clone(), findings.clone(), released.clone());
                tokio::spawn(async move {
                    recent
                        .get_or_find(A_WHILE, async move {
                            findings.fetch_add(1, Ordering::SeqCst);
                            released.wait_for(|&go| go).await.unwrap();
                            9
                        })
                        .await
                })
            })
            .collect();
        // On this test's one thread, yielding lets every caller run until it waits: the first on
        // its finding, the others on it (or, were the finding not shared, on their own).
        while findings.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        for _ in 0..callers.len() {
            tokio::task::yield_now().await;
        }
        release.send(true).unwrap();
        for caller in callers {
            assert_eq!(caller.await.unwrap(), 9);
        }
        assert_eq!(findings.load(Ordering::SeqCst), 1);

        let failing = Recent::<u32>::default();
        assert_eq!(failing.get_or_try_find(A_WHILE, async { Err("down") }).await, Err("down"));
        assert_eq!(failing.get_or_try_find(A_WHILE, async { Ok::<_, &str>(3) }).await, Ok(3));
        assert_eq!(failing.get_or_try_find(A_WHILE, async { Err("down") }).await, Ok(3), "found a moment ago");
    }

    #[test]
    fn a_keyed_value_expires_and_the_map_stays_bounded() {
        let recent = RecentByKey::new(A_WHILE, 3);
        recent.insert(1, "a");
        assert_eq!(recent.get(&1), Some("a"));
        for key in 2..100 {
            recent.insert(key, "b");
        }
        assert!(recent.entries.lock().unwrap().len() <= 3);
        assert_eq!(recent.get(&99), Some("b"));
        recent.remove(&99);
        assert_eq!(recent.get(&99), None);

        let expired = RecentByKey::new(Duration::ZERO, 3);
        expired.insert(1, "a");
        assert_eq!(expired.get(&1), None);
    }
}
