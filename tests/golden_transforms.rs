//! JAX's results for vmap, jvp, grad, jacfwd, jacrev and hessian (tests/data/transforms.json,
//! made by ../shared/golden/gen.py) rebuilt with this crate's transforms and compared within
//! the file's tolerances. Every case is reported by name.

mod common;

#[path = "common/golden_cases.rs"]
mod golden_cases;

use common::golden;
use golden_cases::{METHOD, run_case};
use tensor::core::transform::VmapMethod;

#[test]
fn every_golden_case_matches_jax_with_vmap_by_rewrite() {
    check_all_cases(VmapMethod::Rewrite);
}

#[test]
fn every_golden_case_matches_jax_with_vmap_by_range() {
    check_all_cases(VmapMethod::Range);
}

#[test]
fn every_golden_case_matches_jax_with_vmap_by_pad_reduce() {
    check_all_cases(VmapMethod::PadReduce);
}

fn check_all_cases(method: VmapMethod) {
    METHOD.set(method);
    golden::check_all_cases(&format!("(vmap by {method:?})"), run_case);
}

/// Every kernel of every golden case, by each vmap method, compiles for CUDA: NVRTC, then
/// ptxas for sm_80 and sm_90 (no GPU needed; skipped with a printed reason without the tools
/// of scripts/cuda-tools.sh, a failure under CI=true).
#[test]
fn every_golden_case_compiles_for_cuda() {
    if !common::cuda::tools_ready("every_golden_case_compiles_for_cuda") {
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    let (mut checked, mut failures) = (0, Vec::new());
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        METHOD.set(method);
        for (name, inputs) in golden::case_inputs("transforms.json") {
            let sources = common::cuda::kernel_sources(&run_case(&name, &inputs));
            let label = format!("{name} ({method:?})");
            let (n, failed) = common::cuda::check_sources(&label, &sources, &mut seen);
            checked += n;
            failures.extend(failed);
        }
    }
    println!(
        "CUDA: {checked} distinct golden kernels compiled for sm_80 and sm_90, {} failed",
        failures.len()
    );
    assert!(
        checked > 50,
        "only {checked} kernels: the cases did not schedule"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
