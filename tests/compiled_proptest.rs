//! Property test (proptest) through the real compiled path: random recipe graphs (the
//! generator of `tensor-core`'s property tests, `tensor-core/src/proptests/recipe.rs`) are
//! realized on the CPU (scheduled, code-generated, rendered to C, compiled, run) and compared
//! with the reference interpreter under the tolerance policy of `common::tolerance`
//! (integers exactly, floats within `1e-4` relative plus `1e-4 * max(1, bound)` absolute,
//! where `bound` is the recipe's bound of the output's magnitude).
//!
//! Every case compiles C kernels (tens of milliseconds each), so this runs 64 cases by
//! default; `TENSOR_PROPTEST_COMPILED_CASES=N` runs more. A failure prints the minimal
//! recipe, the seed, and the command that replays it (`PROPTEST_RNG_SEED=<seed>`). The
//! executor-based property tests in `tensor-core` run thousands of cases without a compiler.

mod common;

#[allow(dead_code, unused_imports)]
#[path = "../tensor-core/src/proptests/recipe.rs"]
mod recipe;

use common::tolerance::{FLOAT_ATOL, FLOAT_RTOL, agree};
use common::values;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use recipe::{Graph, Options, build, graph, input};
use tensor::core::interp::evaluate;
#[allow(unused_imports)]
use tensor::core::{DType, Tensor};

/// Indices stay inside their axis here: out-of-range gathers are covered by the executor
/// tests in `tensor-core`, while the C renderer's index bounds are being reworked.
const OPTIONS: Options = Options {
    ints: true,
    wild_indices: false,
    away_from_kinks: false,
};

fn compiled_equals_interpreted(g: &Graph) -> Result<(), String> {
    let (out, _) = build(g, input(g, &[]), OPTIONS);
    let want = evaluate(&out.t.uop());
    let got = values(&out.t);
    let expected = want.to_f64_vec();
    let close = agree(&got, &expected, want.dtype.is_float(), out.bound);
    if close {
        Ok(())
    } else {
        Err(format!(
            "compiled values differ from the interpreter (rtol {FLOAT_RTOL}, atol {FLOAT_ATOL} x max(1, {}))\n got {got:?}\nwant {expected:?}",
            out.bound
        ))
    }
}

#[test]
fn random_graphs_compiled_equal_the_interpreter() {
    let cases = std::env::var("TENSOR_PROPTEST_COMPILED_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(64);
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64 >> 1)
                .unwrap_or(0)
        });
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&graph(6, true), |g| {
        compiled_equals_interpreted(&g).map_err(TestCaseError::fail)
    });
    let replay = format!(
        "PROPTEST_RNG_SEED={seed} TENSOR_PROPTEST_COMPILED_CASES={cases} cargo test --test compiled_proptest"
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => panic!(
            "compiled property failed (seed {seed}, {cases} cases).\nminimal failing case:\n{minimal:#?}\nreason: {reason}\nreplay: {replay}"
        ),
        Err(TestError::Abort(reason)) => {
            panic!("aborted (seed {seed}): {reason}\nreplay: {replay}")
        }
    }
}
