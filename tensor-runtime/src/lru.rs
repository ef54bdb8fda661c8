//! A bounded map that drops the least recently used entry beyond its limit: the one policy of
//! the runtime's caches (plans, loaded libraries, a jit's signatures).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// At most `limit` entries; a lookup or an insert marks an entry as just used.
#[derive(Debug)]
pub struct Lru<K, V, S = std::collections::hash_map::RandomState> {
    limit: usize,
    clock: u64,
    entries: HashMap<K, (V, u64), S>,
}

impl<K: Hash + Eq + Clone, V: Clone, S: BuildHasher + Default> Lru<K, V, S> {
    /// An empty map keeping at most `limit` entries (0 counts as 1).
    pub fn new(limit: usize) -> Self {
        Lru {
            limit: limit.max(1),
            clock: 0,
            entries: HashMap::default(),
        }
    }

    /// The most entries kept.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How many entries are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `key` is kept (without counting as a use).
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The value of `key`, marked as just used.
    pub fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let (value, last_use) = self.entries.get_mut(key)?;
        *last_use = self.clock;
        Some(value.clone())
    }

    /// Keeps `value` under `key`, dropping the least recently used entries beyond the limit.
    pub fn insert(&mut self, key: K, value: V) {
        self.clock += 1;
        self.entries.insert(key, (value, self.clock));
        while self.entries.len() > self.limit {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, last_use))| *last_use)
                .map(|(key, _)| key.clone())
                .expect("over the limit, so not empty");
            self.entries.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut lru: Lru<u32, &str> = Lru::new(2);
        lru.insert(1, "a");
        lru.insert(2, "b");
        assert_eq!(lru.get(&1), Some("a"));
        lru.insert(3, "c");
        assert!(lru.contains(&1) && lru.contains(&3) && !lru.contains(&2));
        assert_eq!(lru.len(), 2);
    }
}
