//! Counters of compile work, for `DEBUG` output and for tests that assert a cache was used.
//!
//! Each device keeps its own [`CompileStats`] (so tests running in parallel do not see each
//! other's work) and every event is also added to a process-wide total.

use std::sync::atomic::{AtomicU64, Ordering};

/// What happened when programs were requested: compiled, found on disk, or found in memory.
#[derive(Default, Debug)]
pub struct CompileStats {
    compiler_invocations: AtomicU64,
    disk_cache_hits: AtomicU64,
    memory_cache_hits: AtomicU64,
}

/// A point-in-time copy of [`CompileStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileCounts {
    /// Times the compiler (cc, or NVRTC for CUDA) was run to build a kernel (version queries are not counted).
    pub compiler_invocations: u64,
    /// Times a compiled kernel was taken from the on-disk cache.
    pub disk_cache_hits: u64,
    /// Times a loaded program was reused from memory without touching the disk.
    pub memory_cache_hits: u64,
}

static PROCESS: CompileStats = CompileStats {
    compiler_invocations: AtomicU64::new(0),
    disk_cache_hits: AtomicU64::new(0),
    memory_cache_hits: AtomicU64::new(0),
};

impl CompileStats {
    /// Counts one run of the compiler.
    pub(crate) fn record_compile(&self) {
        bump(&self.compiler_invocations);
        bump(&PROCESS.compiler_invocations);
    }

    /// Counts one kernel read back from the disk cache.
    pub(crate) fn record_disk_hit(&self) {
        bump(&self.disk_cache_hits);
        bump(&PROCESS.disk_cache_hits);
    }

    /// Counts one program reused from memory.
    pub(crate) fn record_memory_hit(&self) {
        bump(&self.memory_cache_hits);
        bump(&PROCESS.memory_cache_hits);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> CompileCounts {
        CompileCounts {
            compiler_invocations: self.compiler_invocations.load(Ordering::Relaxed),
            disk_cache_hits: self.disk_cache_hits.load(Ordering::Relaxed),
            memory_cache_hits: self.memory_cache_hits.load(Ordering::Relaxed),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Compile work done by every device in this process so far.
pub fn process_compile_counts() -> CompileCounts {
    PROCESS.snapshot()
}

/// Times the C compiler was run in this process.
pub fn compiler_invocations() -> u64 {
    PROCESS.snapshot().compiler_invocations
}

/// Times a kernel was loaded from the on-disk cache in this process.
pub fn disk_cache_hits() -> u64 {
    PROCESS.snapshot().disk_cache_hits
}

/// Work of the compiler pipeline in this process, for tests that assert a warm call skips it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PipelineCounts {
    /// Graphs scheduled (callify, rangeify, kernel split): one per plan built.
    pub schedules: u64,
    /// Kernels generated (OptOps, linearize, render to source).
    pub kernels_generated: u64,
    /// Realizes that found their graph's plan in the plan cache.
    pub plan_hits: u64,
    /// Plans read from the disk ([`crate::plan_store`]) instead of being built.
    pub disk_plan_hits: u64,
}

impl PipelineCounts {
    /// Plans this process made for graphs it had no plan for in memory: scheduled anew or
    /// read from the disk. A graph of a new structure adds one, whether or not an earlier run
    /// of the program left its plan on disk.
    pub fn plans_made(&self) -> u64 {
        self.schedules + self.disk_plan_hits
    }
}

static SCHEDULES: AtomicU64 = AtomicU64::new(0);
static KERNELS_GENERATED: AtomicU64 = AtomicU64::new(0);
static PLAN_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_PLAN_HITS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The same counts for the realizes called on this thread: plans are looked up, built
    /// and their kernels generated on the thread that realizes, so a test can count its own
    /// work while other tests of its binary realize in parallel.
    static THIS_THREAD: std::cell::Cell<PipelineCounts> = const {
        std::cell::Cell::new(PipelineCounts {
            schedules: 0,
            kernels_generated: 0,
            plan_hits: 0,
            disk_plan_hits: 0,
        })
    };
}

fn bump_this_thread(field: fn(&mut PipelineCounts) -> &mut u64) {
    THIS_THREAD.with(|counts| {
        let mut now = counts.get();
        *field(&mut now) += 1;
        counts.set(now);
    });
}

/// Counts one graph scheduled.
pub(crate) fn record_schedule() {
    bump(&SCHEDULES);
    bump_this_thread(|c| &mut c.schedules);
}

/// Counts one kernel generated.
pub(crate) fn record_kernel_generated() {
    bump(&KERNELS_GENERATED);
    bump_this_thread(|c| &mut c.kernels_generated);
}

/// Counts one realize answered from the plan cache.
pub(crate) fn record_plan_hit() {
    bump(&PLAN_HITS);
    bump_this_thread(|c| &mut c.plan_hits);
}

/// Counts one plan read from the disk instead of being built.
pub(crate) fn record_disk_plan_hit() {
    bump(&DISK_PLAN_HITS);
    bump_this_thread(|c| &mut c.disk_plan_hits);
}

/// The pipeline work of the realizes called on this thread so far: what a test asserts
/// about its own graphs while other threads realize (a kernel not generated is not compiled,
/// so `kernels_generated` unchanged also means no compile for this thread's graphs).
pub fn thread_pipeline_counts() -> PipelineCounts {
    THIS_THREAD.with(std::cell::Cell::get)
}

/// The pipeline work done in this process so far.
pub fn pipeline_counts() -> PipelineCounts {
    PipelineCounts {
        schedules: SCHEDULES.load(Ordering::Relaxed),
        kernels_generated: KERNELS_GENERATED.load(Ordering::Relaxed),
        plan_hits: PLAN_HITS.load(Ordering::Relaxed),
        disk_plan_hits: DISK_PLAN_HITS.load(Ordering::Relaxed),
    }
}

static BEAM_SEARCHES: AtomicU64 = AtomicU64::new(0);
static BEAM_CACHE_HITS: AtomicU64 = AtomicU64::new(0);

/// Counts one BEAM search run to its end.
pub(crate) fn record_beam_search() {
    bump(&BEAM_SEARCHES);
}

/// Counts one kernel whose BEAM winner came from the disk cache.
pub(crate) fn record_beam_cache_hit() {
    bump(&BEAM_CACHE_HITS);
}

/// BEAM searches run and cached winners used in this process so far.
pub fn beam_counts() -> (u64, u64) {
    (
        BEAM_SEARCHES.load(Ordering::Relaxed),
        BEAM_CACHE_HITS.load(Ordering::Relaxed),
    )
}
