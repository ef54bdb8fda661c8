//! Compiles the kernels of the per-sample-gradient example (`vmap!(grad!(loss))` of the
//! 784-128-10 MLP for a batch of 256, by each vmap method) for CUDA without a GPU: each kernel
//! is rendered as CUDA C, compiled by NVRTC to PTX for compute_80 and assembled by ptxas for
//! sm_80 and sm_90. Ends with one line, `N kernels compiled, M failed`, or one line saying how
//! to install the tools (`scripts/cuda-tools.sh`).
//!
//! Run: `cargo run --release --example cuda_check` (`-v` prints each kernel's result).

use std::collections::BTreeSet;
use tensor::core::schedule::create_schedule;
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::prelude::*;
use tensor::runtime::cuda::{cuda_kernels, nvrtc};

const BATCH: usize = 256;
const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;

/// The main example's loss: cross-entropy of a two-layer ReLU MLP for one sample.
fn loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(w1) + b1).relu();
    let logits = hidden.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

fn main() {
    if let Some(why) = nvrtc::tools_missing() {
        println!("CUDA tools missing ({why})");
        std::process::exit(2);
    }
    let verbose = std::env::args().any(|a| a == "-v");
    let args = [
        Tensor::randn(&[IN, HIDDEN], 1),
        Tensor::zeros(&[HIDDEN], DType::F32),
        Tensor::randn(&[HIDDEN, OUT], 2),
        Tensor::zeros(&[OUT], DType::F32),
        Tensor::rand(&[BATCH, IN], 3),
        Tensor::rand(&[BATCH, OUT], 4).softmax(-1),
    ];
    let in_axes = [None, None, None, None, Some(0), Some(0)];
    let mut seen = BTreeSet::new();
    let (mut compiled, mut failed) = (0, 0);
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let grads = vmap_with(grad(loss, [0, 1, 2, 3]), in_axes, 0, method).call(&args);
        let roots: Vec<_> = grads.iter().map(|g| g.uop()).collect();
        for kernel in cuda_kernels(&create_schedule(&roots)) {
            if !seen.insert(kernel.source.clone()) {
                continue;
            }
            match nvrtc::check_kernel(&kernel.source, "compute_80", &["sm_80", "sm_90"]) {
                Ok(()) => compiled += 1,
                Err(e) => {
                    failed += 1;
                    eprintln!("{method:?} {}: {e}", kernel.name);
                }
            }
            if verbose {
                eprintln!(
                    "{method:?} {}: {} lines",
                    kernel.name,
                    kernel.source.lines().count()
                );
            }
        }
    }
    println!("{compiled} kernels compiled, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
