//! The CUDA compile check of the tests: every kernel of a set of graphs rendered as CUDA C,
//! compiled by NVRTC and assembled by ptxas for `sm_80` and `sm_90`. Needs no GPU, only the
//! tools of `scripts/cuda-tools.sh`; without them a test prints why it is skipped, and fails
//! under CI (`CI=true`), where the tools must be installed.

use std::collections::BTreeSet;
use tensor::core::schedule::create_schedule;
use tensor::prelude::*;
use tensor::runtime::cuda::{cuda_kernels, nvrtc};

/// The architectures every kernel is assembled for (A100, H100), from PTX for [`VIRTUAL`].
pub const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// The virtual architecture NVRTC compiles to.
pub const VIRTUAL: &str = "compute_80";

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

/// Compiles and assembles each source not in `seen` for [`ARCHS`], on every core; returns
/// how many were checked and the failures (`label/kernel: error` and the source).
pub fn check_sources(
    label: &str,
    sources: &[(String, String)],
    seen: &mut BTreeSet<String>,
) -> (usize, Vec<String>) {
    let fresh: Vec<&(String, String)> = sources
        .iter()
        .filter(|(_, source)| seen.insert(source.clone()))
        .collect();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(fresh.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, source)) = fresh.get(i) else {
                        break;
                    };
                    if std::env::var_os("TENSOR_CUDA_TIMES").is_some() {
                        eprintln!("{label}/{name}: {} lines", source.lines().count());
                    }
                    if let Err(e) = nvrtc::check_kernel(source, VIRTUAL, &ARCHS) {
                        let failure = format!("{label}/{name}: {e}\n{source}");
                        failures.lock().unwrap().push(failure);
                    }
                }
            });
        }
    });
    (fresh.len(), failures.into_inner().unwrap())
}
