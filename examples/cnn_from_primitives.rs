//! Per-sample gradients of the PyTorch per-sample-gradients tutorial CNN, written from the
//! library's primitives the way a user would compose them (no `nn` module): a 3×3 convolution
//! is nine shifted `shrink`s stacked into a window axis and one matmul, max-pooling is a
//! `reshape` and a `max`, the loss is `log_softmax` times a one-hot label. It measures the
//! scheduler on what users compose.
//!
//! Model (MNIST-shaped `[1, 28, 28]` samples): conv 1→32 3×3, ReLU, conv 32→64 3×3, ReLU,
//! max-pool 2, flatten, linear 9216→128, ReLU, linear 128→10, log-softmax, NLL. The eight
//! per-sample gradients come from `vmap(grad(loss))`.
//!
//! Run: `cargo run --release --example cnn_from_primitives [B ...]` (default: 8 and 64).
//! `DEBUG=2` also prints each kernel's time. When `../shared/bench/peers/.venv` has torch,
//! the same workload is timed there (`per_sample_grads_cnn.py --framework torch`) in the
//! same run, with glibc's huge-page malloc (THP) as in the peer's table.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tensor::core::schedule::create_schedule;
use tensor::prelude::*;
use tensor::runtime::realize::realize;

/// Parameter shapes in PyTorch's layout.
const SHAPES: [&[usize]; 8] = [
    &[32, 1, 3, 3],
    &[32],
    &[64, 32, 3, 3],
    &[64],
    &[128, 9216],
    &[128],
    &[10, 128],
    &[10],
];

/// A valid (no padding, stride 1) 3×3 convolution of `x` `[C, H, W]` by `w` `[O, C, 3, 3]`
/// plus bias `b` `[O]`: the nine shifted windows stacked into a `[C, 9, H-2, W-2]` column
/// tensor, then one matmul.
fn conv3x3(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let (s, w_shape) = (x.shape(), w.shape());
    let (c, h, wd, o) = (s[0], s[1], s[2], w_shape[0]);
    let (oh, ow) = (h - 2, wd - 2);
    let shifts: Vec<Tensor> = (0..9)
        .map(|k| x.shrink(&[(0, c), (k / 3, k / 3 + oh), (k % 3, k % 3 + ow)]))
        .collect();
    let cols = Tensor::stack(&shifts, 1).reshape(&[c * 9, oh * ow]);
    let out = w.reshape(&[o, c * 9]).matmul(&cols).reshape(&[o, oh, ow]);
    out + b.reshape(&[o, 1, 1])
}

/// 2×2 max-pooling of `[C, H, W]`.
fn max_pool2(x: &Tensor) -> Tensor {
    let s = x.shape();
    let (c, h, w) = (s[0], s[1], s[2]);
    x.reshape(&[c, h / 2, 2, w / 2, 2]).max([2, 4], false)
}

/// NLL of `log_softmax(cnn(x))` for one sample `x` `[1, 28, 28]` and its one-hot label `y`.
fn loss(args: &[Tensor]) -> Tensor {
    let [w1, b1, w2, b2, w3, b3, w4, b4, x, y] = args else {
        panic!("loss: ten arguments")
    };
    let h = conv3x3(x, w1, b1).relu();
    let h = conv3x3(&h, w2, b2).relu();
    let flat = max_pool2(&h).reshape(&[9216]);
    let h = (w3.matmul(&flat) + b3).relu();
    let logits = w4.matmul(&h) + b4;
    -(y * logits.log_softmax(-1)).sum_all()
}

/// `vmap(grad(loss))`: the per-sample gradients of the eight parameters.
fn per_sample_grads_fn() -> Func {
    let mut in_axes: Vec<Option<isize>> = vec![None; 8];
    in_axes.extend([Some(0), Some(0)]);
    vmap(grad(loss, [0, 1, 2, 3, 4, 5, 6, 7]), in_axes, 0)
}

/// The per-sample gradients by `f` for a batch of `x`, `y`.
fn per_sample_grads(f: &Func, params: &[Tensor], x: &Tensor, y: &Tensor) -> Vec<Tensor> {
    let mut args = params.to_vec();
    args.extend([x.clone(), y.clone()]);
    f.call(&args)
}

/// Uniform parameters in `±1/sqrt(fan_in)` (PyTorch's default scale).
fn init_params() -> Vec<Tensor> {
    let fans = [9.0, 9.0, 288.0, 288.0, 9216.0, 9216.0, 128.0, 128.0];
    SHAPES
        .iter()
        .zip(fans)
        .enumerate()
        .map(|(k, (shape, fan))| {
            let bound = 1.0 / f64::sqrt(fan);
            (Tensor::rand(*shape, 10 + k as u64) * (2.0 * bound)) - bound
        })
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Times `per_sample_grads` on a batch of `batch`: the first call and the warm median.
fn bench(params: &[Tensor], batch: usize) -> Result<(), Box<dyn std::error::Error>> {
    let x = Tensor::randn(&[batch, 1, 28, 28], 3);
    let labels: Vec<i32> = (0..batch).map(|i| ((i * 7 + 3) % 10) as i32).collect();
    let y = Tensor::from_vec(labels, &[batch]).one_hot(10);
    realize(&[&x, &y])?;
    let mut times = Vec::new();
    let mut kernels = 0;
    let f = per_sample_grads_fn();
    for rep in 0..6 {
        let started = Instant::now();
        let grads = per_sample_grads(&f, params, &x, &y);
        if rep == 0 {
            let uops: Vec<_> = grads.iter().map(|g| g.uop()).collect();
            kernels = create_schedule(&uops).items.len();
        }
        realize(&grads.iter().collect::<Vec<_>>())?;
        times.push(started.elapsed());
        if rep == 0 {
            eprintln!("(first call done; later calls are warm)");
        }
    }
    let first = times.remove(0);
    println!(
        "CNN per-sample grads B={batch:<3} ours: warm median {:>10.3?}  first {:>10.3?}  {kernels} kernels",
        median(times),
        first
    );
    peer(batch);
    Ok(())
}

/// Runs the torch peer for `batch` when its virtual environment has torch.
fn peer(batch: usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/peers");
    let python = std::env::var_os("TENSOR_BENCH_PYTHON")
        .map_or_else(|| dir.join(".venv/bin/python"), Into::into);
    let has_torch = python.exists()
        && Command::new(&python)
            .args(["-c", "import torch"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !has_torch {
        println!("CNN per-sample grads B={batch:<3} torch: skipped (no torch in {python:?})");
        return;
    }
    let out = Command::new(&python)
        .arg(dir.join("per_sample_grads_cnn.py"))
        .args(["--framework", "torch", "--batch", &batch.to_string()])
        .env("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
        .output();
    match out {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let median = text
                .split("\"median_s\": ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|v| v.trim().parse::<f64>().ok());
            match median {
                Some(s) => println!(
                    "CNN per-sample grads B={batch:<3} torch+THP: warm median {:>9.3}ms",
                    s * 1e3
                ),
                None => println!("CNN per-sample grads B={batch:<3} torch: no result ({text})"),
            }
        }
        Err(e) => println!("CNN per-sample grads B={batch:<3} torch: could not run ({e})"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let batches: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let batches = if batches.is_empty() {
        vec![8, 64]
    } else {
        batches
    };
    let params = init_params();
    realize(&params.iter().collect::<Vec<_>>())?;
    for batch in batches {
        bench(&params, batch)?;
    }
    Ok(())
}
