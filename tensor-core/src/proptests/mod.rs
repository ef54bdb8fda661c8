//! Property tests (proptest): random well-typed graphs, built from a shrinkable recipe
//! ([`recipe::Graph`]), scheduled and run by the test executor (`schedule::exec`, the kernel
//! ASTs run in Rust, no C compiler) and compared with the reference interpreter; and random
//! per-sample functions under the transforms (`vmap_with` by every `VmapMethod`, `jvp`,
//! `vjp`, `grad`) compared with what they must equal.
//!
//! # What is compared, and how closely
//!
//! - Integers and bools: exactly.
//! - Floats (`f32`): `|got - want| <= RTOL * |want| + ATOL * scale` with `RTOL = ATOL = 1e-4`
//!   and `scale = max(1, bound)`, where `bound` is the builder's upper bound of the output's
//!   magnitude (the recipe keeps every intermediate small; see [`recipe`]). Transform
//!   identities that sum products (`<J t, c> = <t, Jᵀ c>`) allow `1e-3` of the sum of the
//!   products' magnitudes.
//!
//! # Running more cases, replaying a failure
//!
//! Each property runs `TENSOR_PROPTEST_CASES` (or proptest's own `PROPTEST_CASES`) cases,
//! 256 by default; CI runs 4,000 in the release profile (any
//! number works; here 10,000):
//!
//! ```text
//! PROPTEST_CASES=10000 cargo test --release -p tensor-core --lib proptests
//! ```
//!
//! The random seed is printed when a property fails, with the minimal (shrunk) recipe and
//! the command that replays the run: `PROPTEST_RNG_SEED=<seed>` with the same case count.
//! proptest also records the failing case's seed under `tensor-core/proptest-regressions/`,
//! and replays the recorded cases first on every later run (commit that file with the fix).

mod graphs;
mod hostile;
mod recipe;
mod transforms;

use crate::interp::HostArray;
use crate::tensor::Tensor;
use crate::uop::DType;
use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner,
};
use std::fmt::Debug;

/// Relative tolerance of float comparisons.
pub const RTOL: f64 = 1e-4;
/// Absolute tolerance of float comparisons, per unit of the output's magnitude bound.
pub const ATOL: f64 = 1e-4;

/// The number of cases per property: `TENSOR_PROPTEST_CASES`, else `PROPTEST_CASES`, else
/// `default`.
pub fn case_count(default: u32) -> u32 {
    ["TENSOR_PROPTEST_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
        .unwrap_or(default)
}

/// The seed of this run: `PROPTEST_RNG_SEED` when set (a replay), else a fresh one.
fn run_seed() -> u64 {
    if let Some(seed) = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // Different for tests started in the same nanosecond on other threads.
    let thread = std::thread::current().id();
    let mut h = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&(nanos, thread), &mut h);
    std::hash::Hasher::finish(&h) >> 1
}

/// Runs `test` on `cases` values of `strategy` from the random seed `seed`, shrinking a
/// failure to a minimal value; with `persist` (the test's source file), failing cases are recorded for replay
/// in `proptest-regressions/` beside it.
pub fn run_cases<S>(
    strategy: &S,
    test: impl Fn(&S::Value) -> Result<(), String>,
    cases: u32,
    seed: u64,
    persist: Option<&'static str>,
) -> Result<(), TestError<S::Value>>
where
    S: Strategy,
    S::Value: Debug,
{
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        source_file: persist,
        failure_persistence: persist.map(|_| {
            Box::new(FileFailurePersistence::SourceParallel(
                "proptest-regressions",
            )) as _
        }),
        // Shrinking schedules the graph each time; a minute is plenty for recipes this small.
        max_shrink_time: 60_000,
        ..Config::default()
    };
    TestRunner::new(config).run(strategy, |value| {
        let watchdog = SlowCaseWatchdog::start(seed, &value);
        let result = test(&value);
        watchdog.finish();
        result.map_err(TestCaseError::fail)
    })
}

/// Writes `line` to stderr past the test harness's output capture, so that a run that hangs
/// still shows it.
fn uncaptured(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A case still running after this long is printed with its recipe and seed (a recipe the
/// scheduler handles badly is a bug to find, and a run that takes minutes shows nothing else).
const SLOW_CASE: std::time::Duration = std::time::Duration::from_secs(20);

/// Prints the case it was started for if [`SlowCaseWatchdog::finish`] is not called within
/// [`SLOW_CASE`].
struct SlowCaseWatchdog {
    done: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl SlowCaseWatchdog {
    fn start(seed: u64, value: &impl Debug) -> Self {
        let case = format!("{value:#?}");
        let (done, finished) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                finished.recv_timeout(SLOW_CASE)
            {
                uncaptured(&format!(
                    "proptest: a case is still running after {SLOW_CASE:?} (run seed {seed}):\n{case}"
                ));
            }
        });
        SlowCaseWatchdog { done, thread }
    }

    fn finish(self) {
        let _ = self.done.send(());
        let _ = self.thread.join();
    }
}

/// Runs the property `test` on values of `strategy` ([`case_count`] cases, `default_cases`
/// unless set). On a failure, panics with the minimal failing value (its `Debug`, a
/// replayable recipe), the reason, and how to replay the run.
#[track_caller]
pub fn check_property<S>(
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(&S::Value) -> Result<(), String>,
) where
    S: Strategy,
    S::Value: Debug,
{
    check_property_cases(name, case_count(default_cases), strategy, test);
}

/// [`check_property`] with an explicit number of cases: for a property split into several
/// runs that share one case budget.
#[track_caller]
pub fn check_property_cases<S>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(&S::Value) -> Result<(), String>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let seed = run_seed();
    uncaptured(&format!("proptest: {name}: seed {seed}, {cases} cases"));
    let replay = format!(
        "PROPTEST_RNG_SEED={seed} PROPTEST_CASES={cases} cargo test --release -p tensor-core --lib proptests::{name}"
    );
    let file = std::panic::Location::caller().file();
    match run_cases(&strategy, test, cases, seed, Some(file)) {
        Ok(()) => {}
        Err(TestError::Fail(reason, value)) => panic!(
            "property {name} failed (seed {seed}, {cases} cases).\n\
             minimal failing case:\n{value:#?}\n\
             reason: {reason}\n\
             replay: {replay}"
        ),
        Err(TestError::Abort(reason)) => {
            panic!("property {name} aborted (seed {seed}): {reason}\nreplay: {replay}")
        }
    }
}

/// `Ok` when `got` equals `want`: same dtype and shape, integers and bools exactly, floats
/// within `RTOL` and `ATOL * max(1, bound)`.
pub fn compare(what: &str, got: &HostArray, want: &HostArray, bound: f64) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!(
            "{what}: got {} {:?} but want {} {:?}",
            got.dtype, got.shape, want.dtype, want.shape
        ));
    }
    let (rtol, atol) = if want.dtype.is_float() {
        (RTOL, ATOL * bound.max(1.0))
    } else {
        (0.0, 0.0)
    };
    if got.allclose(want, rtol, atol) {
        Ok(())
    } else {
        Err(format!(
            "{what}: values differ (rtol {rtol}, atol {atol})\n got {:?}\nwant {:?}",
            got.to_f64_vec(),
            want.to_f64_vec()
        ))
    }
}
