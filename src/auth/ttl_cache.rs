//! A small map whose entries expire: how long another replica's revocation may go unseen here.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct TtlCache<K, V> {
    ttl: Duration,
    max_entries: usize,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub(super) fn new(ttl: Duration, max_entries: usize) -> Self {
        TtlCache { ttl, max_entries, entries: Mutex::new(HashMap::new()) }
    }

    pub(super) fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap();
        entries.get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, value)| value.clone())
    }

    pub(super) fn insert(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= self.max_entries {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() >= self.max_entries {
                // Still full of live entries: dropping them costs only re-reads from the database.
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    pub(super) fn remove(&self, key: &K) {
        self.entries.lock().unwrap().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_stays_bounded() {
        let cache = TtlCache::new(Duration::from_secs(60), 3);
        cache.insert(1, "a");
        assert_eq!(cache.get(&1), Some("a"));
        for key in 2..100 {
            cache.insert(key, "b");
        }
        assert!(cache.entries.lock().unwrap().len() <= 3);
        assert_eq!(cache.get(&99), Some("b"));
        cache.remove(&99);
        assert_eq!(cache.get(&99), None);
    }

    #[test]
    fn expired_entries_are_not_returned() {
        let cache = TtlCache::new(Duration::ZERO, 3);
        cache.insert(1, "a");
        assert_eq!(cache.get(&1), None);
    }
}
