//! Freed device allocations kept for reuse, by byte length, for devices whose allocator is
//! slow (a GPU's `cuMemAlloc` synchronizes and costs microseconds to milliseconds): a kernel
//! output is usually the length of a buffer the previous step of the same loop freed, so
//! [`MemoryPool::take`] hands that memory back instead of asking the device again. The pool
//! holds at most a byte limit of freed memory; past it, freed memory goes back to the device.
//! (The CPU has its own recycler: `cpu::recycle`.)

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Freed allocations of type `M` by byte length (see the module docs).
#[derive(Debug)]
pub struct MemoryPool<M> {
    state: Mutex<PoolState<M>>,
    limit_bytes: usize,
}

#[derive(Debug)]
struct PoolState<M> {
    free: HashMap<usize, Vec<M>>,
    held_bytes: usize,
    reused: u64,
}

impl<M> MemoryPool<M> {
    /// A pool holding at most `limit_bytes` of freed memory.
    pub fn new(limit_bytes: usize) -> MemoryPool<M> {
        MemoryPool {
            state: Mutex::new(PoolState {
                free: HashMap::new(),
                held_bytes: 0,
                reused: 0,
            }),
            limit_bytes,
        }
    }

    /// A freed allocation of exactly `bytes` bytes, contents as it was left, if one is held.
    pub fn take(&self, bytes: usize) -> Option<M> {
        let mut state = self.lock();
        let memory = state.free.get_mut(&bytes).and_then(Vec::pop)?;
        state.held_bytes -= bytes;
        state.reused += 1;
        Some(memory)
    }

    /// Keeps `memory` (of `bytes` bytes) for a later [`MemoryPool::take`]; returns it when the
    /// pool is full, for the caller to free.
    pub fn give(&self, bytes: usize, memory: M) -> Option<M> {
        let mut state = self.lock();
        if state.held_bytes + bytes > self.limit_bytes {
            return Some(memory);
        }
        state.held_bytes += bytes;
        state.free.entry(bytes).or_default().push(memory);
        None
    }

    /// Bytes of freed memory held now.
    pub fn held_bytes(&self) -> usize {
        self.lock().held_bytes
    }

    /// How many allocations [`MemoryPool::take`] has handed back so far.
    pub fn reused(&self) -> u64 {
        self.lock().reused
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState<M>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The most freed memory a device's pool holds when `TENSOR_DEVICE_POOL_BYTES` is unset.
pub const DEFAULT_POOL_BYTES: usize = 1 << 30;

/// The pool limit `TENSOR_DEVICE_POOL_BYTES` asks for, else [`DEFAULT_POOL_BYTES`]; a
/// malformed value is an error naming the variable.
pub fn pool_bytes_from_env() -> crate::Result<usize> {
    let bytes = crate::error::positive_setting(
        "TENSOR_DEVICE_POOL_BYTES",
        crate::settings::var("TENSOR_DEVICE_POOL_BYTES"),
        DEFAULT_POOL_BYTES as u64,
    )?;
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_allocation_is_handed_back_for_the_same_length_only() {
        let pool = MemoryPool::new(1 << 20);
        assert!(pool.give(4096, vec![7u8; 4096]).is_none());
        assert_eq!(pool.held_bytes(), 4096);
        assert!(pool.take(8192).is_none(), "another length is not reused");
        assert_eq!(pool.take(4096), Some(vec![7u8; 4096]));
        assert_eq!((pool.held_bytes(), pool.reused()), (0, 1));
        assert!(pool.take(4096).is_none());
    }

    #[test]
    fn a_full_pool_returns_the_memory_to_free() {
        let pool = MemoryPool::new(6000);
        assert!(pool.give(4096, vec![0u8; 4096]).is_none());
        assert_eq!(pool.give(4096, vec![1u8; 4096]), Some(vec![1u8; 4096]));
        assert_eq!(pool.held_bytes(), 4096);
    }
}
