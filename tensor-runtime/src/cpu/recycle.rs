//! Freed allocations kept for reuse. A kernel's output is usually the size of a buffer freed
//! by the previous step of the same loop (a training step, a benchmark iteration), and handing
//! that memory back zeroed costs one memset, where fresh memory costs a page fault per 4 KiB
//! page on first touch (the OS zeroes and maps each one), several times slower than writing it.
//!
//! Fresh large allocations ask for huge pages (`huge_pages`). Only large allocations are kept (the system allocator already recycles small ones quickly),
//! and only up to a byte limit, so an idle device holds a bounded amount of freed memory.

use super::huge_pages;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Allocations smaller than this many bytes are not kept.
const MIN_KEPT_BYTES: usize = 64 << 10;

/// Free allocations by length in words, with the bytes they hold.
#[derive(Debug)]
pub struct Recycler {
    free: Mutex<FreeLists>,
    limit_bytes: usize,
}

#[derive(Debug, Default)]
struct FreeLists {
    by_words: HashMap<usize, Vec<Vec<u128>>>,
    held_bytes: usize,
}

impl Recycler {
    /// A recycler that holds at most `limit_bytes` of freed memory.
    pub fn new(limit_bytes: usize) -> Recycler {
        Recycler {
            free: Mutex::new(FreeLists::default()),
            limit_bytes,
        }
    }

    /// `words` zeroed words: a freed allocation of that length if one is kept, else fresh;
    /// `None` when the memory cannot be had.
    pub fn take(&self, words: usize) -> Option<Vec<u128>> {
        let reused = {
            let mut free = self.lock();
            let reused = free.by_words.get_mut(&words).and_then(Vec::pop);
            if reused.is_some() {
                free.held_bytes -= words * WORD;
            }
            reused
        };
        match reused {
            Some(mut memory) => {
                memory.fill(0);
                Some(memory)
            }
            None => {
                let memory = fresh_zeroed(words)?;
                huge_pages::advise(&memory);
                Some(memory)
            }
        }
    }

    /// Keeps `memory` for a later `take` of the same length, unless it is small or the
    /// recycler is full (then it is freed).
    pub fn give(&self, memory: Vec<u128>) {
        let bytes = memory.len() * WORD;
        if bytes < MIN_KEPT_BYTES {
            return;
        }
        let mut free = self.lock();
        if free.held_bytes + bytes <= self.limit_bytes {
            free.held_bytes += bytes;
            free.by_words.entry(memory.len()).or_default().push(memory);
        }
    }

    /// Bytes of freed memory held for reuse.
    pub fn held_bytes(&self) -> usize {
        self.lock().held_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FreeLists> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

const WORD: usize = std::mem::size_of::<u128>();

/// `words` zeroed words from the allocator, or `None` where it has no such block. The probe
/// asks for the block without touching it (a refusal is an error to report, where `vec!`
/// would abort the process); the zeroed block is then mapped lazily, page by page on first
/// touch, as `vec!` maps it.
fn fresh_zeroed(words: usize) -> Option<Vec<u128>> {
    let mut probe: Vec<u128> = Vec::new();
    probe.try_reserve_exact(words).ok()?;
    drop(probe);
    Some(vec![0u128; words])
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: usize = (1 << 20) / WORD;

    #[test]
    fn a_freed_allocation_comes_back_zeroed_at_the_same_address() {
        let recycler = Recycler::new(16 << 20);
        let mut memory = recycler.take(WORDS).unwrap();
        memory.fill(7);
        let address = memory.as_ptr() as usize;
        recycler.give(memory);
        assert_eq!(recycler.held_bytes(), 1 << 20);
        let again = recycler.take(WORDS).unwrap();
        assert_eq!(
            again.as_ptr() as usize,
            address,
            "the same memory is reused"
        );
        assert!(again.iter().all(|&w| w == 0), "reused memory is zeroed");
        assert_eq!(recycler.held_bytes(), 0);
    }

    #[test]
    fn small_allocations_and_those_past_the_limit_are_freed() {
        let recycler = Recycler::new(1 << 20);
        recycler.give(vec![0u128; 16]);
        assert_eq!(recycler.held_bytes(), 0, "small allocations are not kept");
        recycler.give(vec![0u128; WORDS]);
        recycler.give(vec![0u128; WORDS]);
        assert_eq!(
            recycler.held_bytes(),
            1 << 20,
            "the second would pass the limit"
        );
    }

    #[test]
    fn a_length_with_nothing_kept_is_allocated_fresh() {
        let recycler = Recycler::new(16 << 20);
        recycler.give(vec![0u128; WORDS]);
        assert_eq!(recycler.take(WORDS * 2).unwrap().len(), WORDS * 2);
        assert_eq!(recycler.held_bytes(), 1 << 20);
    }

    #[test]
    fn memory_beyond_the_address_space_is_refused_not_aborted() {
        let recycler = Recycler::new(16 << 20);
        assert!(recycler.take(usize::MAX / WORD).is_none());
        assert!(recycler.take(1 << 50).is_none(), "16 PiB");
    }
}
