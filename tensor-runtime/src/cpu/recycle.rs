//! Freed allocations kept for reuse. A kernel's output is usually the size of a buffer freed
//! by the previous step of the same loop (a training step, a benchmark iteration), and handing
//! that memory back zeroed costs one memset, where fresh memory costs a page fault per 4 KiB
//! page on first touch (the OS zeroes and maps each one), several times slower than writing it.
//!
//! Fresh memory is mapped lazily (`memory`). Only large allocations are kept (the system
//! allocator already recycles small ones quickly), and only up to a byte limit, so an idle
//! device holds a bounded amount of freed memory.

use super::memory::{AlignedWords, WORD};
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
    by_words: HashMap<usize, Vec<AlignedWords>>,
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
    pub fn take(&self, words: usize) -> Option<AlignedWords> {
        match self.take_kept(words) {
            Some(mut memory) => {
                memory.fill_zero();
                Some(memory)
            }
            None => AlignedWords::zeroed(words),
        }
    }

    /// `words` words with unspecified contents: a freed allocation of that length as it was
    /// left, else fresh (zeroed) memory; for a kernel output that is overwritten entirely,
    /// where zeroing would be one more pass over memory than the kernel itself makes.
    pub fn take_unzeroed(&self, words: usize) -> Option<AlignedWords> {
        self.take_kept(words)
            .or_else(|| AlignedWords::zeroed(words))
    }

    fn take_kept(&self, words: usize) -> Option<AlignedWords> {
        let mut free = self.lock();
        let kept = free.by_words.get_mut(&words).and_then(Vec::pop);
        if kept.is_some() {
            free.held_bytes -= words * WORD;
        }
        kept
    }

    /// Keeps `memory` for a later `take` of the same length, unless it is small or the
    /// recycler is full (then it is freed).
    pub fn give(&self, memory: AlignedWords) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: usize = (1 << 20) / WORD;

    #[test]
    fn a_freed_allocation_comes_back_zeroed_at_the_same_address() {
        let recycler = Recycler::new(16 << 20);
        let mut memory = recycler.take(WORDS).unwrap();
        memory.words_mut().fill(7);
        let address = memory.as_mut_ptr() as usize;
        recycler.give(memory);
        assert_eq!(recycler.held_bytes(), 1 << 20);
        let mut again = recycler.take(WORDS).unwrap();
        assert_eq!(
            again.as_mut_ptr() as usize,
            address,
            "the same memory is reused"
        );
        assert!(
            again.words().iter().all(|&w| w == 0),
            "reused memory is zeroed"
        );
        assert_eq!(recycler.held_bytes(), 0);
    }

    #[test]
    fn an_unzeroed_take_hands_back_freed_memory_as_it_was() {
        let recycler = Recycler::new(16 << 20);
        let mut memory = recycler.take_unzeroed(WORDS).unwrap();
        assert!(
            memory.words().iter().all(|&w| w == 0),
            "fresh memory is zeroed"
        );
        memory.words_mut().fill(3);
        recycler.give(memory);
        let again = recycler.take_unzeroed(WORDS).unwrap();
        assert!(again.words().iter().all(|&w| w == 3), "not zeroed again");
    }

    #[test]
    fn small_allocations_and_those_past_the_limit_are_freed() {
        let recycler = Recycler::new(1 << 20);
        let fresh = |words| AlignedWords::zeroed(words).unwrap();
        recycler.give(fresh(64));
        assert_eq!(recycler.held_bytes(), 0, "small allocations are not kept");
        recycler.give(fresh(WORDS));
        recycler.give(fresh(WORDS));
        assert_eq!(
            recycler.held_bytes(),
            1 << 20,
            "the second would pass the limit"
        );
    }

    #[test]
    fn a_length_with_nothing_kept_is_allocated_fresh() {
        let recycler = Recycler::new(16 << 20);
        recycler.give(AlignedWords::zeroed(WORDS).unwrap());
        assert_eq!(recycler.take(WORDS * 2).unwrap().len(), WORDS * 2);
        assert_eq!(recycler.held_bytes(), 1 << 20);
    }

    #[test]
    fn memory_beyond_the_address_space_is_refused_not_aborted() {
        let recycler = Recycler::new(16 << 20);
        assert!(recycler.take(usize::MAX / WORD).is_none());
        assert!(recycler.take_unzeroed(1 << 50).is_none(), "16 PiB");
    }
}
