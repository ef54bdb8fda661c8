//! The libraries a device has loaded, at most a fixed number of them: when one more is
//! loaded, the one used least recently is dropped. Dropping only gives up this cache's
//! reference: programs already handed out keep their library mapped through their `Arc`.

use super::program::LoadedLibrary;
use crate::lru::Lru;
use std::sync::Arc;

/// How many loaded libraries a device keeps unless configured otherwise.
pub const DEFAULT_PROGRAM_CACHE_SIZE: usize = 1024;

/// Loaded libraries by cache key, bounded, least recently used first out.
pub type LoadedLibraries = Lru<u128, Arc<LoadedLibrary>>;
