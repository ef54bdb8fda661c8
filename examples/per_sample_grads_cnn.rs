//! Per-sample gradients of the per-sample-gradients tutorial CNN, written with `tensor::nn` as a
//! user would: conv 1→32 3×3, ReLU, conv 32→64 3×3, ReLU, max-pool 2, flatten, linear 9216→128,
//! ReLU, linear 128→10, log-softmax, NLL; MNIST-shaped inputs. Prints the gradient shapes, the
//! warm time of `vmap(grad(loss))` for B = 8 and B = 64, a check against single-sample `grad`
//! calls, and a few DP-SGD steps (each sample's gradient clipped to norm C, summed, Gaussian
//! noise added) whose loss goes down.
//!
//! Run: `cargo run --release --example per_sample_grads_cnn` (`-- 8` for B = 8 only).

use std::time::{Duration, Instant};
use tensor::nn::{self, ClassLoss, Conv, Pool};
use tensor::prelude::*;
use tensor::runtime::realize::{realize, to_vec};

const PARAMS: usize = 8;

/// The summed NLL of a batch (one sample under `vmap`): `x` `[N, 1, 28, 28]`, `y` `[N]`.
fn loss(p: &[Tensor], x: &Tensor, y: &Tensor) -> Tensor {
    let h = nn::conv2d(x, &p[0], Some(&p[1]), &Conv::default()).relu();
    let h = nn::conv2d(&h, &p[2], Some(&p[3]), &Conv::default()).relu();
    let h = nn::max_pool2d(&h, &Pool::new(2)).flatten(1, -1);
    let h = nn::linear(&h, &p[4], Some(&p[5])).relu();
    let logits = nn::linear(&h, &p[6], Some(&p[7]));
    let sum = ClassLoss {
        reduction: nn::Reduction::Sum,
        ..ClassLoss::default()
    };
    nn::nll_loss(&logits.log_softmax(-1), y, &sum)
}

/// The loss of one sample (`x` `[1, 28, 28]`, `y` a 0-d label) as a function of the parameters
/// and the sample: what `vmap` maps over.
fn sample_loss() -> Func {
    Func::new(Some(PARAMS + 2), |a: &[Tensor]| {
        let x = a[PARAMS].unsqueeze(0);
        let y = a[PARAMS + 1].reshape(&[1]);
        vec![loss(&a[..PARAMS], &x, &y)]
    })
}

fn per_sample_grads() -> Func {
    let mut in_axes: Vec<Option<i32>> = vec![None; PARAMS];
    in_axes.extend([Some(0), Some(0)]);
    vmap(
        grad(sample_loss(), (0..PARAMS).collect::<Vec<_>>()),
        in_axes,
        0,
    )
}

fn init_params() -> Vec<Tensor> {
    let layer = |shape: &[usize], fan_in: usize, seed: u64| {
        Tensor::randn(shape, seed) * (1.0 / (fan_in as f64).sqrt())
    };
    vec![
        layer(&[32, 1, 3, 3], 9, 1),
        Tensor::zeros(&[32], DType::F32),
        layer(&[64, 32, 3, 3], 288, 2),
        Tensor::zeros(&[64], DType::F32),
        layer(&[128, 9216], 9216, 3),
        Tensor::zeros(&[128], DType::F32),
        layer(&[10, 128], 128, 4),
        Tensor::zeros(&[10], DType::F32),
    ]
}

fn batch(b: usize, seed: u64) -> (Tensor, Tensor) {
    let x = Tensor::rand(&[b, 1, 28, 28], seed);
    let labels: Vec<i64> = (0..b)
        .map(|i| ((i * 7 + seed as usize) % 10) as i64)
        .collect();
    (x, Tensor::from_vec(labels, &[b]))
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = match std::env::args().nth(1) {
        Some(b) => vec![b.parse()?],
        None => vec![8, 64],
    };
    let params = init_params();
    realize(&params.iter().collect::<Vec<_>>())?;
    let grads_of = per_sample_grads();
    println!("per-sample gradients of the tutorial CNN (tensor::nn), MNIST-shaped inputs");
    for &b in &sizes {
        let (x, y) = batch(b, 5);
        realize(&[&x, &y])?;
        let mut args = params.clone();
        args.extend([x.clone(), y.clone()]);
        let mut times = Vec::new();
        let mut grads = Vec::new();
        for _ in 0..if b > 8 { 3 } else { 5 } {
            let started = Instant::now();
            grads = grads_of.call(&args);
            realize(&grads.iter().collect::<Vec<_>>())?;
            times.push(started.elapsed());
        }
        let first = times.remove(0);
        let shapes: Vec<Vec<usize>> = grads.iter().map(|g| g.shape()).collect();
        println!("  B = {b:>3}: shapes {shapes:?}");
        println!(
            "           first call {first:.2?} (compiles), warm median {:.2?}",
            median(times)
        );
        check_against_single_samples(&params, &x, &y, &grads)?;
    }
    dp_sgd(params)
}

/// The first two samples' gradients against `grad` of the loss of that sample alone.
fn check_against_single_samples(
    params: &[Tensor],
    x: &Tensor,
    y: &Tensor,
    grads: &[Tensor],
) -> Result<(), Box<dyn std::error::Error>> {
    let single = grad(sample_loss(), (0..PARAMS).collect::<Vec<_>>());
    let mut worst = 0.0f32;
    for i in 0..2 {
        let mut args = params.to_vec();
        args.extend([x.narrow(0, i, 1).squeeze(0), y.narrow(0, i, 1).squeeze(0)]);
        let leaves = single.call(&args);
        realize(&leaves.iter().collect::<Vec<_>>())?; // one schedule for all the gradients
        for (g, one) in grads.iter().zip(leaves) {
            let batched = to_vec::<f32>(&g.narrow(0, i, 1))?;
            for (a, b) in batched.iter().zip(to_vec::<f32>(&one)?) {
                worst = worst.max((a - b).abs() / b.abs().max(1.0));
            }
        }
    }
    println!(
        "           against single-sample grad (samples 0, 1): largest difference {worst:.3e}"
    );
    if worst > 1e-4 {
        return Err(
            format!("per-sample gradients differ from single-sample ones by {worst}").into(),
        );
    }
    Ok(())
}

/// A few DP-SGD steps at B = 8: clip each sample's gradient to norm `CLIP`, sum, add
/// `N(0, (NOISE·CLIP)²)` noise, average, step.
fn dp_sgd(mut params: Vec<Tensor>) -> Result<(), Box<dyn std::error::Error>> {
    const B: usize = 8;
    const CLIP: f64 = 1.0;
    const NOISE: f64 = 0.1;
    const LR: f64 = 0.5;
    const STEPS: u64 = 5;
    let grads_of = per_sample_grads();
    let (x, y) = batch(B, 11);
    realize(&[&x, &y])?;
    let batch_loss = |p: &[Tensor]| -> Result<f32, Box<dyn std::error::Error>> {
        Ok(to_vec::<f32>(&loss(p, &x, &y))?[0] / B as f32)
    };
    let before = batch_loss(&params)?;
    for step in 0..STEPS {
        let mut args = params.clone();
        args.extend([x.clone(), y.clone()]);
        let grads = grads_of.call(&args);
        // Each sample's norm over all parameters: [B].
        let norms = grads
            .iter()
            .map(|g| g.square().flatten(1, -1).sum(1, false))
            .reduce(|a, b| a + b)
            .unwrap()
            .sqrt();
        let scale = (norms / CLIP).maximum(1.0).recip();
        params = params
            .iter()
            .zip(&grads)
            .enumerate()
            .map(|(k, (p, g))| {
                let mut shape = vec![B];
                shape.extend(std::iter::repeat_n(1, g.ndim() - 1));
                let clipped = (g * scale.reshape(&shape)).sum(0, false);
                let noise = Tensor::randn(&p.shape(), 100 * step + k as u64) * (NOISE * CLIP);
                p - (clipped + noise) * (LR / B as f64)
            })
            .collect();
        realize(&params.iter().collect::<Vec<_>>())?;
    }
    let after = batch_loss(&params)?;
    println!(
        "DP-SGD, B = {B}, clip {CLIP}, noise {NOISE}: loss {before:.4} -> {after:.4} after {STEPS} steps"
    );
    if after >= before {
        return Err("DP-SGD did not lower the loss".into());
    }
    Ok(())
}
