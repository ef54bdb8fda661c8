//! Freed allocations kept for reuse. A kernel's output is usually the size of a buffer freed
//! by the previous step of the same loop (a training step, a benchmark iteration), and handing
//! that memory back zeroed costs one memset, where fresh memory costs a page fault per 4 KiB
//! page on first touch (the OS zeroes and maps each one), several times slower than writing it.
//!
//! Fresh large allocations ask for huge pages (`huge_pages`). Only large allocations are kept (the system allocator already recycles small ones quickly),
//! and only up to a byte limit, so an idle device holds a bounded amount of freed memory.

use super::buffer::Block;
use super::huge_pages;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Allocations smaller than this many bytes are not kept.
const MIN_KEPT_BYTES: usize = 64 << 10;

/// Free allocations by length in blocks, with the bytes they hold.
#[derive(Debug)]
pub struct Recycler {
    free: Mutex<FreeLists>,
    limit_bytes: usize,
}

#[derive(Debug, Default)]
struct FreeLists {
    by_blocks: HashMap<usize, Vec<Vec<Block>>>,
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

    /// `blocks` zeroed blocks: a freed allocation of that length if one is kept, else fresh;
    /// `None` when the memory cannot be had.
    pub fn take(&self, blocks: usize) -> Option<Vec<Block>> {
        let mut memory = self.take_unzeroed(blocks)?;
        memory.fill(Block::ZERO);
        Some(memory)
    }

    /// `blocks` blocks with unspecified contents: a freed allocation of that length as it was
    /// left, else fresh (zeroed) memory; for a kernel output that is overwritten entirely,
    /// where zeroing would be one more pass over memory than the kernel itself makes.
    pub fn take_unzeroed(&self, blocks: usize) -> Option<Vec<Block>> {
        let reused = {
            let mut free = self.lock();
            let reused = free.by_blocks.get_mut(&blocks).and_then(Vec::pop);
            if reused.is_some() {
                free.held_bytes -= blocks * BLOCK;
            }
            reused
        };
        reused.or_else(|| fresh_zeroed(blocks))
    }

    /// Keeps `memory` for a later `take` of the same length, unless it is small or the
    /// recycler is full (then it is freed).
    pub fn give(&self, memory: Vec<Block>) {
        let bytes = memory.len() * BLOCK;
        if bytes < MIN_KEPT_BYTES {
            return;
        }
        let mut free = self.lock();
        if free.held_bytes + bytes <= self.limit_bytes {
            free.held_bytes += bytes;
            free.by_blocks.entry(memory.len()).or_default().push(memory);
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

const BLOCK: usize = std::mem::size_of::<Block>();

/// `blocks` zeroed blocks from the allocator, or `None` where it has no such memory (a
/// refusal is an error to report, where `vec!` would abort the process). The memory is
/// advised to use huge pages before it is first touched, then zeroed: a 64-byte aligned
/// block type has no lazily zeroed (`calloc`) path, so the zeroing maps the pages here,
/// 2 MiB at a time where the OS grants huge pages.
fn fresh_zeroed(blocks: usize) -> Option<Vec<Block>> {
    let mut memory: Vec<Block> = Vec::new();
    memory.try_reserve_exact(blocks).ok()?;
    huge_pages::advise(memory.spare_capacity_mut());
    memory.resize(blocks, Block::ZERO);
    Some(memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKS: usize = (1 << 20) / BLOCK;

    #[test]
    fn a_freed_allocation_comes_back_zeroed_at_the_same_address() {
        let recycler = Recycler::new(16 << 20);
        let mut memory = recycler.take(BLOCKS).unwrap();
        memory.fill(Block([7; 4]));
        let address = memory.as_ptr() as usize;
        recycler.give(memory);
        assert_eq!(recycler.held_bytes(), 1 << 20);
        let again = recycler.take(BLOCKS).unwrap();
        assert_eq!(
            again.as_ptr() as usize,
            address,
            "the same memory is reused"
        );
        assert!(
            again.iter().all(|b| b.0 == [0; 4]),
            "reused memory is zeroed"
        );
        assert_eq!(recycler.held_bytes(), 0);
    }

    #[test]
    fn an_unzeroed_take_hands_back_freed_memory_as_it_was() {
        let recycler = Recycler::new(16 << 20);
        let mut memory = recycler.take_unzeroed(BLOCKS).unwrap();
        assert!(
            memory.iter().all(|b| *b == Block::ZERO),
            "fresh memory is zeroed"
        );
        memory.fill(Block([3; 4]));
        recycler.give(memory);
        let again = recycler.take_unzeroed(BLOCKS).unwrap();
        assert!(
            again.iter().all(|b| *b == Block([3; 4])),
            "not zeroed again"
        );
    }

    #[test]
    fn small_allocations_and_those_past_the_limit_are_freed() {
        let recycler = Recycler::new(1 << 20);
        recycler.give(vec![Block::ZERO; 16]);
        assert_eq!(recycler.held_bytes(), 0, "small allocations are not kept");
        recycler.give(vec![Block::ZERO; BLOCKS]);
        recycler.give(vec![Block::ZERO; BLOCKS]);
        assert_eq!(
            recycler.held_bytes(),
            1 << 20,
            "the second would pass the limit"
        );
    }

    #[test]
    fn a_length_with_nothing_kept_is_allocated_fresh() {
        let recycler = Recycler::new(16 << 20);
        recycler.give(vec![Block::ZERO; BLOCKS]);
        assert_eq!(recycler.take(BLOCKS * 2).unwrap().len(), BLOCKS * 2);
        assert_eq!(recycler.held_bytes(), 1 << 20);
    }

    #[test]
    fn memory_beyond_the_address_space_is_refused_not_aborted() {
        let recycler = Recycler::new(16 << 20);
        assert!(recycler.take(usize::MAX / BLOCK).is_none());
        assert!(recycler.take(1 << 48).is_none(), "16 PiB");
    }
}
