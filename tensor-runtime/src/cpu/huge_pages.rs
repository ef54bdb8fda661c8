//! Transparent huge pages for large buffers. Fresh memory is mapped one page at a time on
//! first touch; asking Linux for 2 MiB pages on a large allocation turns hundreds of page
//! faults into one each, which halves the time a kernel takes to first write a fresh output of
//! hundreds of megabytes (a per-sample gradient, for one). Elsewhere this does nothing.

/// The huge page size on x86-64 and aarch64 Linux.
const HUGE_PAGE: usize = 2 << 20;

/// Advises the OS to back the 2 MiB-aligned part of `memory` with huge pages, if it spans one.
/// `memory` may be the uninitialized spare capacity of a vector, advised before its first
/// touch.
pub fn advise<T>(memory: &[T]) {
    let start = memory.as_ptr() as usize;
    let end = start + std::mem::size_of_val(memory);
    let aligned_start = start.next_multiple_of(HUGE_PAGE);
    let aligned_end = end / HUGE_PAGE * HUGE_PAGE;
    if aligned_end > aligned_start {
        advise_range(aligned_start, aligned_end - aligned_start);
    }
}

#[cfg(target_os = "linux")]
fn advise_range(start: usize, len: usize) {
    use std::ffi::{c_int, c_void};
    /// `MADV_HUGEPAGE` of `<sys/mman.h>` on Linux.
    const MADV_HUGEPAGE: c_int = 14;
    unsafe extern "C" {
        fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
    }
    // SAFETY: `[start, start + len)` lies inside one live allocation the caller borrows, and is
    // page aligned; MADV_HUGEPAGE only changes how the kernel backs those pages, never their
    // contents, so no Rust reference observes a change. A failure (THP disabled) is harmless
    // and ignored: the memory stays in ordinary pages.
    unsafe {
        madvise(start as *mut c_void, len, MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_range(_start: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn advising_small_and_large_allocations_keeps_their_contents() {
        for words in [1, 1 << 10, 1 << 20] {
            let mut memory = vec![0u128; words];
            super::advise(&memory);
            memory[words - 1] = 7;
            assert!(memory[..words - 1].iter().all(|&w| w == 0));
            assert_eq!(memory[words - 1], 7);
        }
    }
}
