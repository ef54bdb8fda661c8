//! Recursion of any depth on bounded stacks.
//!
//! The lowering is a recursive descent (an op asks its operands for elements, with scoped
//! state: range bindings, the values it is computed within), once per op along a path of the
//! graph, so a chain of a million ops recurses a million levels. Each level calls [`grow`]:
//! while the current stack segment has room the call runs in place; when it is nearly used
//! up, the call runs on a fresh helper thread with a segment of its own (only the pages used
//! are committed) and the caller waits for it. The depth is then bounded by memory, not by
//! the stack of the thread that asked (a 2 MiB spawned thread, or the main thread's 8 MiB).

use std::cell::Cell;

/// The stack of each segment (address space; memory is committed as the recursion uses it).
const SEGMENT_BYTES: usize = 256 << 20;

/// The stack left unused at the end of a segment: room for the frames between two calls of
/// [`grow`] (one level of the recursion and the non-recursive work it calls).
const RED_ZONE_BYTES: usize = 16 << 20;

thread_local! {
    /// The lowest stack address this thread's recursion may reach before it moves to a new
    /// segment; 0 on a thread not started by [`on_new_segment`] (its stack size is unknown).
    static LIMIT: Cell<usize> = const { Cell::new(0) };
}

/// The address of a local of the caller's frame: where the stack pointer about is.
#[inline(never)]
fn stack_address() -> usize {
    let probe = 0u8;
    std::hint::black_box(&probe) as *const u8 as usize
}

/// Runs `f` on this thread if its stack segment has room left, else on a new segment.
pub(crate) fn grow<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let limit = LIMIT.with(Cell::get);
    // Stacks grow downward on every target this crate runs on.
    if limit != 0 && stack_address() > limit {
        return f();
    }
    on_new_segment(f)
}

/// Runs `f` on a helper thread with a stack segment of its own, re-raising its panic (with
/// its message) on the caller's thread.
pub(crate) fn on_new_segment<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("schedule".into())
            .stack_size(SEGMENT_BYTES)
            .spawn_scoped(scope, || {
                let top = stack_address();
                LIMIT.with(|l| l.set(top.saturating_sub(SEGMENT_BYTES - RED_ZONE_BYTES)));
                f()
            })
            .expect("schedule: could not start a thread for the lowering's stack");
        match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sum `1 + 2 + … + n`, one level of recursion per term.
    fn deep_sum(n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let frame = std::hint::black_box([n; 64]);
        grow(|| deep_sum(n - 1)) + frame[n as usize % 64] / n * n
    }

    #[test]
    fn a_recursion_deeper_than_any_segment_completes_on_a_small_stack() {
        // 1M levels of >512 bytes: twice a segment, 250 times the 2 MiB stack it starts on.
        let small = std::thread::Builder::new().stack_size(2 << 20);
        let sum = small.spawn(|| deep_sum(1_000_000)).unwrap().join().unwrap();
        assert_eq!(sum, 500_000_500_000);
    }

    #[test]
    fn a_panic_deep_in_the_recursion_reaches_the_caller_with_its_message() {
        fn fail_at(n: u64) -> u64 {
            match n {
                0 => panic!("the bottom"),
                _ => grow(|| fail_at(n - 1)) + std::hint::black_box([1u64; 64])[0],
            }
        }
        let payload = std::panic::catch_unwind(|| fail_at(600_000)).unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the bottom"));
    }
}
