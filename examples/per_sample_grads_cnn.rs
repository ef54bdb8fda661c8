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
use tensor::runtime::realize::{realize, synchronize, to_vec};
use tensor::typed::{self, Argnum};

/// A layer's weight and bias.
#[derive(Clone, Tree)]
struct Layer {
    w: Tensor,
    b: Tensor,
}

/// The tutorial CNN's parameters: gradients come back as this struct too.
#[derive(Clone, Tree)]
struct Cnn {
    conv1: Layer,
    conv2: Layer,
    fc1: Layer,
    fc2: Layer,
}

/// The summed NLL of a batch (one sample under `vmap`): `x` `[N, 1, 28, 28]`, `y` `[N]`.
fn loss(p: &Cnn, x: &Tensor, y: &Tensor) -> Tensor {
    let h = nn::conv2d(x, &p.conv1.w, Some(&p.conv1.b), &Conv::default()).relu();
    let h = nn::conv2d(&h, &p.conv2.w, Some(&p.conv2.b), &Conv::default()).relu();
    let h = nn::max_pool2d(&h, &Pool::new(2)).flatten(1, -1);
    let h = nn::linear(&h, &p.fc1.w, Some(&p.fc1.b)).relu();
    let logits = nn::linear(&h, &p.fc2.w, Some(&p.fc2.b));
    let sum = ClassLoss {
        reduction: nn::Reduction::Sum,
        ..ClassLoss::default()
    };
    nn::nll_loss(&logits.log_softmax(-1), y, &sum)
}

/// The loss of one sample (`x` `[1, 28, 28]`, `y` a 0-d label): what `vmap` maps over.
fn sample_loss(p: &Cnn, x: &Tensor, y: &Tensor) -> Tensor {
    loss(p, &x.unsqueeze(0), &y.reshape(&[1]))
}

/// `vmap(grad(sample_loss), in_axes=(None, 0, 0))`: one gradient struct with a batch axis.
fn per_sample_grads() -> impl Fn(&Cnn, &Tensor, &Tensor) -> Cnn {
    typed::vmap(typed::grad(sample_loss, Argnum::<0>), (None, 0, 0), 0)
}

fn init_params() -> Cnn {
    let layer = |w: &[usize], fan_in: usize, seed: u64| Layer {
        w: Tensor::randn(w, seed) * (1.0 / (fan_in as f64).sqrt()),
        b: Tensor::zeros(&w[..1], DType::F32),
    };
    Cnn {
        conv1: layer(&[32, 1, 3, 3], 9, 1),
        conv2: layer(&[64, 32, 3, 3], 288, 2),
        fc1: layer(&[128, 9216], 9216, 3),
        fc2: layer(&[10, 128], 128, 4),
    }
}

/// Computes every leaf of `t` in one schedule.
fn realize_tree(t: &impl Tree) -> Result<(), Box<dyn std::error::Error>> {
    let leaves = tree_leaves(t);
    realize(&leaves.iter().collect::<Vec<_>>())?;
    Ok(())
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
    realize_tree(&params)?;
    let grads_of = per_sample_grads();
    println!("per-sample gradients of the tutorial CNN (tensor::nn), MNIST-shaped inputs");
    for &b in &sizes {
        let (x, y) = batch(b, 5);
        realize(&[&x, &y])?;
        let mut times = Vec::new();
        let mut grads = params.clone();
        for _ in 0..if b > 8 { 3 } else { 5 } {
            let started = Instant::now();
            grads = grads_of(&params, &x, &y);
            realize_tree(&grads)?;
            synchronize()?; // a GPU's realize returns once its kernels are queued
            times.push(started.elapsed());
        }
        let first = times.remove(0);
        let shapes: Vec<Vec<usize>> = tree_leaves(&grads).iter().map(|g| g.shape()).collect();
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
    params: &Cnn,
    x: &Tensor,
    y: &Tensor,
    grads: &Cnn,
) -> Result<(), Box<dyn std::error::Error>> {
    let single = typed::grad(sample_loss, Argnum::<0>);
    let mut worst = 0.0f32;
    for i in 0..2 {
        let sample = (x.narrow(0, i, 1).squeeze(0), y.narrow(0, i, 1).squeeze(0));
        let one = single(params, &sample.0, &sample.1);
        realize_tree(&one)?; // one schedule for all the gradients
        for (g, one) in tree_leaves(grads).iter().zip(tree_leaves(&one)) {
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
fn dp_sgd(mut params: Cnn) -> Result<(), Box<dyn std::error::Error>> {
    const B: usize = 8;
    const CLIP: f64 = 1.0;
    const NOISE: f64 = 0.1;
    const LR: f64 = 0.5;
    const STEPS: u64 = 5;
    let grads_of = per_sample_grads();
    let (x, y) = batch(B, 11);
    realize(&[&x, &y])?;
    let batch_loss = |p: &Cnn| -> Result<f32, Box<dyn std::error::Error>> {
        Ok(to_vec::<f32>(&loss(p, &x, &y))?[0] / B as f32)
    };
    let before = batch_loss(&params)?;
    for step in 0..STEPS {
        let grads = grads_of(&params, &x, &y);
        // Each sample's norm over all parameters: [B].
        let norms = tree_leaves(&grads)
            .iter()
            .map(|g| g.square().flatten(1, -1).sum(1, false))
            .reduce(|a, b| a + b)
            .unwrap()
            .sqrt();
        let scale = (norms / CLIP).maximum(1.0).recip();
        let mut seed = 100 * step;
        params = tree_zip_map(&params, &grads, |p, g| {
            let mut shape = vec![B];
            shape.extend(std::iter::repeat_n(1, g.ndim() - 1));
            let clipped = (g * scale.reshape(&shape)).sum(0, false);
            seed += 1;
            // The key is a buffer, not a constant: every step has the same graph structure
            // and replays one compiled plan.
            let key = Tensor::from_vec(vec![seed], &[]);
            let noise = Tensor::randn_with_key(&p.shape(), &key) * (NOISE * CLIP);
            p - (clipped + noise) * (LR / B as f64)
        });
        realize_tree(&params)?;
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
