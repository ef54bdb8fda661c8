//! The libraries a device has loaded, at most a fixed number of them: when one more is
//! loaded, the one used least recently is dropped. Dropping only gives up this cache's
//! reference: programs already handed out keep their library mapped through their `Arc`.

use super::program::LoadedLibrary;
use std::collections::HashMap;
use std::sync::Arc;

/// How many loaded libraries a device keeps unless configured otherwise.
pub const DEFAULT_PROGRAM_CACHE_SIZE: usize = 1024;

/// Loaded libraries by cache key, bounded, least recently used first out.
#[derive(Debug)]
pub struct LoadedLibraries {
    limit: usize,
    clock: u64,
    entries: HashMap<u128, (Arc<LoadedLibrary>, u64)>,
}

impl LoadedLibraries {
    /// An empty cache keeping at most `limit` libraries (0 counts as 1).
    pub fn new(limit: usize) -> LoadedLibraries {
        LoadedLibraries {
            limit: limit.max(1),
            clock: 0,
            entries: HashMap::new(),
        }
    }

    /// The library for `key`, marked as just used.
    pub fn get(&mut self, key: u128) -> Option<Arc<LoadedLibrary>> {
        self.clock += 1;
        let (library, last_use) = self.entries.get_mut(&key)?;
        *last_use = self.clock;
        Some(library.clone())
    }

    /// Whether `key` is loaded (without counting as a use).
    pub fn contains(&self, key: u128) -> bool {
        self.entries.contains_key(&key)
    }

    /// Keeps `library` under `key`, dropping the least recently used libraries beyond the
    /// limit.
    pub fn insert(&mut self, key: u128, library: Arc<LoadedLibrary>) {
        self.clock += 1;
        self.entries.insert(key, (library, self.clock));
        while self.entries.len() > self.limit {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, last_use))| *last_use)
                .map(|(key, _)| *key);
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
    }

    /// How many libraries are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
