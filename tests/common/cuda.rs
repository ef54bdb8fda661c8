//! The CUDA compile check of the tests: every kernel of a set of graphs rendered as CUDA C,
//! compiled by NVRTC and assembled by ptxas for `sm_80` and `sm_90`. Needs no GPU, only the
//! tools of `scripts/cuda-tools.sh`; without them a test prints why it is skipped, and fails
//! under CI (`CI=true`), where the tools must be installed.

use std::collections::BTreeSet;
use tensor::core::schedule::create_schedule;
use tensor::prelude::*;
use tensor::runtime::cuda::{cuda_kernels, nvrtc};

/// The architectures every kernel is assembled for (A100, H100).
pub const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// True when NVRTC and ptxas are here. Otherwise prints `skipped: <test>: <why>` and returns
/// false, or panics when `CI=true` (CI installs the tools, so a skip there is a failure).
pub fn tools_ready(test: &str) -> bool {
    let Some(why) = nvrtc::tools_missing() else {
        return true;
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true but the CUDA tools are missing: {why}");
    }
    println!("skipped: {test}: {why}");
    false
}

/// The CUDA sources of the kernels that compute `outputs` (one schedule), named.
pub fn kernel_sources(outputs: &[Tensor]) -> Vec<(String, String)> {
    let roots: Vec<_> = outputs.iter().map(|t| t.uop()).collect();
    cuda_kernels(&create_schedule(&roots))
        .into_iter()
        .map(|k| (k.name, k.source))
        .collect()
}

/// Compiles and assembles each distinct source for [`ARCHS`]; returns how many were checked
/// and the failures (`label/kernel: error`).
pub fn check_sources(
    label: &str,
    sources: &[(String, String)],
    seen: &mut BTreeSet<String>,
) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, source) in sources {
        if !seen.insert(source.clone()) {
            continue;
        }
        checked += 1;
        if let Err(e) = nvrtc::check_kernel(source, &ARCHS) {
            failures.push(format!("{label}/{name}: {e}\n{source}"));
        }
    }
    (checked, failures)
}
