//! Zero-initialised, 64-byte aligned host memory whose pages cost nothing until touched.
//!
//! The memory comes from the system allocator's zeroed path (`calloc`), which for large sizes
//! maps fresh pages from the OS without writing them: each 4 KiB page is zeroed and mapped on
//! first touch, by whichever thread touches it. So a kernel whose cores write disjoint parts
//! of a fresh output fault its pages in parallel, and nothing zeroes memory that a kernel is
//! about to overwrite anyway. (Measured on the 2-core machine, a fresh 98 MiB output: zeroed
//! up front with huge pages, 12 ms when the OS had them at hand and 170–290 ms when it did not;
//! in 4 KiB pages on one thread 40–56 ms; faulted by the kernel's two threads, 25 ms.)
//!
//! The allocator aligns such memory to 16 bytes only, so the allocation is
//! [`ALIGNMENT_SLACK`] words longer than asked and the usable words start at the first 64-byte
//! boundary inside it. The zeroed allocation is asked of the allocator directly
//! (`std::alloc::alloc_zeroed`), since `vec!` has no fallible form: a refused allocation is
//! `None` for the caller to report, not an abort of the process.

/// The alignment of the usable memory in bytes: a cache line, and the widest vector load
/// (AVX-512).
pub const ALIGNMENT: usize = 64;

/// Bytes in one word, the unit memory is counted in.
pub const WORD: usize = std::mem::size_of::<u128>();

/// The extra words allocated so that a 64-byte boundary lies within the first of them.
const ALIGNMENT_SLACK: usize = ALIGNMENT / WORD - 1;

/// `len` zero-initialised 16-byte words starting on a 64-byte boundary.
pub struct AlignedWords {
    words: Vec<u128>,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for AlignedWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedWords({} words)", self.len)
    }
}

impl AlignedWords {
    /// No words, allocating nothing.
    pub const EMPTY: AlignedWords = AlignedWords {
        words: Vec::new(),
        start: 0,
        len: 0,
    };

    /// `len` zero words, or `None` where the allocator refuses that much memory (an error to
    /// report, where `vec!` would abort the process).
    pub fn zeroed(len: usize) -> Option<AlignedWords> {
        let padded = len.checked_add(ALIGNMENT_SLACK)?;
        let words = zeroed_vec(padded)?;
        let misalignment = words.as_ptr() as usize % ALIGNMENT;
        let start = (ALIGNMENT - misalignment) % ALIGNMENT / WORD;
        Some(AlignedWords { words, start, len })
    }

    /// The usable words.
    pub fn words(&self) -> &[u128] {
        &self.words[self.start..self.start + self.len]
    }

    /// The usable words, writable.
    pub fn words_mut(&mut self) -> &mut [u128] {
        &mut self.words[self.start..self.start + self.len]
    }

    /// How many usable words there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The address of the first usable word, for a kernel argument.
    pub fn as_mut_ptr(&mut self) -> *mut u128 {
        self.words_mut().as_mut_ptr()
    }

    /// Sets every word to zero (touching every page).
    pub fn fill_zero(&mut self) {
        self.words_mut().fill(0);
    }
}

/// A vector of `len` zero words from the allocator's zeroed path, or `None` where the
/// allocator refuses.
fn zeroed_vec(len: usize) -> Option<Vec<u128>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u128>(len).ok()?;
    // SAFETY: `layout` has a non-zero size (`len` > 0 words of 16 bytes), as `alloc_zeroed`
    // requires.
    let pointer = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u128>();
    if pointer.is_null() {
        return None;
    }
    // SAFETY: `pointer` was allocated by the global allocator with the layout of `len`
    // `u128`s, which is the layout a `Vec<u128>` of capacity `len` frees with; its `len`
    // elements are initialised (zero bits are a valid `u128`).
    Some(unsafe { Vec::from_raw_parts(pointer, len, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_words_are_aligned_zero_and_as_many_as_asked() {
        for len in [0, 1, 3, 4, 5, 1000, 1 << 20] {
            let mut memory = AlignedWords::zeroed(len).unwrap();
            assert_eq!(memory.len(), len);
            assert_eq!(memory.words().len(), len);
            assert!(memory.words().iter().all(|&w| w == 0));
            assert_eq!(memory.as_mut_ptr() as usize % ALIGNMENT, 0, "{len} words");
        }
    }

    #[test]
    fn writes_stay_in_the_usable_words() {
        let mut memory = AlignedWords::zeroed(6).unwrap();
        memory.words_mut().fill(u128::MAX);
        assert_eq!(memory.words(), &[u128::MAX; 6]);
        memory.fill_zero();
        assert_eq!(memory.words(), &[0; 6]);
    }

    #[test]
    fn memory_beyond_the_address_space_is_refused_not_aborted() {
        assert!(AlignedWords::zeroed(usize::MAX).is_none());
        assert!(AlignedWords::zeroed(usize::MAX / WORD).is_none());
        assert!(AlignedWords::zeroed(1 << 50).is_none(), "16 PiB");
    }
}
