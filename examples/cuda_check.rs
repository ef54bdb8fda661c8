//! Compiles the kernels of the per-sample-gradient examples for CUDA without a GPU
//! (`vmap!(grad!(loss))` of the 784-128-10 MLP for a batch of 256, by each vmap method, and of
//! the tutorial CNN of `per_sample_grads_cnn` for a batch of 8) and of `gpu_bench` (the
//! elementwise chain, the 4096² matmul and the staged 2048 x 256 contractions, `a @ b` and
//! `x @ w.T`): each kernel is rendered as
//! CUDA C, compiled by NVRTC to PTX for compute_80 and assembled by ptxas for sm_80 and
//! sm_90. Ends with one line, `N kernels compiled, M failed`, or one line saying how to
//! install the tools (`scripts/cuda-tools.sh`).
//!
//! Run: `cargo run --release --example cuda_check` (`-v` prints each kernel's result).

use std::collections::BTreeSet;
use tensor::core::schedule::create_schedule;
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::nn::{self, ClassLoss, Conv, Pool};
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

/// The CNN's summed NLL for one sample: conv 1→32 3×3, ReLU, conv 32→64 3×3, ReLU, max-pool
/// 2, linear 9216→128, ReLU, linear 128→10 (`args`: the eight weights and biases, then the
/// image `[1, 28, 28]` and its label).
fn cnn_loss(args: &[Tensor]) -> Tensor {
    let [w1, b1, w2, b2, w3, b3, w4, b4, x, y] = args else {
        panic!("cnn_loss takes 10 tensors")
    };
    let h = nn::conv2d(&x.unsqueeze(0), w1, Some(b1), &Conv::default()).relu();
    let h = nn::conv2d(&h, w2, Some(b2), &Conv::default()).relu();
    let h = nn::max_pool2d(&h, &Pool::new(2)).flatten(1, -1);
    let h = nn::linear(&h, w3, Some(b3)).relu();
    let logits = nn::linear(&h, w4, Some(b4));
    let sum = ClassLoss {
        reduction: nn::Reduction::Sum,
        ..ClassLoss::default()
    };
    nn::nll_loss(&logits.log_softmax(-1), &y.reshape(&[1]), &sum)
}

/// The per-sample gradients of the CNN's eight parameters for a batch of 8, lazy.
fn cnn_per_sample_grads() -> Vec<Tensor> {
    let layer = |shape: &[usize], seed| {
        [
            Tensor::randn(shape, seed) * 0.1,
            Tensor::zeros(&shape[..1], DType::F32),
        ]
    };
    let mut args: Vec<Tensor> = [
        layer(&[32, 1, 3, 3], 1),
        layer(&[64, 32, 3, 3], 2),
        layer(&[128, 9216], 3),
        layer(&[10, 128], 4),
    ]
    .concat();
    args.push(Tensor::rand(&[8, 1, 28, 28], 5));
    args.push(Tensor::from_vec(
        (0..8).map(|i| i % 10).collect::<Vec<i64>>(),
        &[8],
    ));
    let mut in_axes = vec![None; 8];
    in_axes.extend([Some(0), Some(0)]);
    vmap(grad(cnn_loss, (0..8).collect::<Vec<usize>>()), in_axes, 0).call(&args)
}

/// The lazy results `gpu_bench` times and checks on a GPU.
fn bench_kernels() -> Vec<Tensor> {
    let x = Tensor::rand(&[1 << 20], 1);
    let chain = ((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5;
    let square = Tensor::rand(&[4096, 4096], 2).matmul(&Tensor::rand(&[4096, 4096], 3));
    let (a, b) = (Tensor::rand(&[2048, 256], 4), Tensor::rand(&[256, 2048], 5));
    let dot_form = a.matmul(&Tensor::rand(&[2048, 256], 6).transpose(0, 1));
    let total = Tensor::rand(&[64 << 20], 7).sum_all();
    let row_sums = Tensor::rand(&[4096, 16384], 8).sum(1, false);
    let softmax = Tensor::rand(&[4096, 4096], 9).softmax(-1);
    vec![
        chain,
        square,
        a.matmul(&b),
        dot_form,
        total,
        row_sums,
        softmax,
    ]
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
    let mut schedules = Vec::new();
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let grads = vmap_with(grad(loss, [0, 1, 2, 3]), in_axes, 0, method).call(&args);
        schedules.push((format!("MLP {method:?}"), grads));
    }
    schedules.push(("CNN".to_string(), cnn_per_sample_grads()));
    schedules.push(("gpu_bench".to_string(), bench_kernels()));
    for (what, grads) in schedules {
        let roots: Vec<_> = grads.iter().map(|g| g.uop()).collect();
        for kernel in cuda_kernels(&create_schedule(&roots)) {
            if !seen.insert(kernel.source.clone()) {
                continue;
            }
            match nvrtc::check_kernel(&kernel.source, "compute_80", &["sm_80", "sm_90"]) {
                Ok(()) => compiled += 1,
                Err(e) => {
                    failed += 1;
                    eprintln!("{what} {}: {e}", kernel.name);
                }
            }
            if verbose {
                eprintln!(
                    "{what} {}: {} lines",
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
