//! A DP-SGD training loop on a 784-128-10 MLP (batch 64): per-sample gradients by
//! `vmap!(grad!(loss))`, each sample's gradient clipped to norm 1, Gaussian noise drawn with a
//! fresh seed every step, and a learning rate that decays every step. Because the seed and the
//! learning rate are values bound at run time, not code (README, *Values and code in a
//! training loop*), every step after the first replays one compiled plan. The example prints
//! the median step time of that loop next to the same loop with the seed and the learning rate
//! held fixed, the plans built after the first step of each, and the time of step 2 against
//! step 10 (a loop that realizes its parameters does not grow).
//!
//! Run: `cargo run --release --example training_loop`

use std::time::{Duration, Instant};
use tensor::prelude::*;
use tensor::runtime::pipeline_counts;

const BATCH: usize = 64;
const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;
const STEPS: usize = 10;
/// The clipping norm and the noise multiplier of DP-SGD.
const CLIP: f32 = 1.0;
const SIGMA: f32 = 1.1;

/// The model's parameters: two dense layers.
#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

/// Cross-entropy of one sample.
fn loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).relu();
    let logits = hidden.matmul(&p.w2) + &p.b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

type PerSample = Box<dyn Fn(&Mlp, &Tensor, &Tensor) -> Mlp + Send + Sync>;

/// One DP-SGD step: clip each sample's gradient to norm `CLIP`, sum, add `N(0, (SIGMA CLIP)²)`
/// noise drawn with `seed`, average, and step by `lr`.
fn step(per_sample: &PerSample, p: &Mlp, x: &Tensor, y: &Tensor, seed: u64, lr: f32) -> Mlp {
    let g = tree_leaves(&per_sample(p, x, y));
    let squares: Vec<Tensor> = g
        .iter()
        .map(|l| {
            let axes: Vec<isize> = (1..l.shape().len() as isize).collect();
            (l * l).sum(&axes[..], false)
        })
        .collect();
    let norm = squares[1..]
        .iter()
        .fold(squares[0].clone(), |a, b| &a + b)
        .sqrt();
    let scale = (&(&norm + 1e-6).recip() * CLIP).minimum(1.0);
    let params = tree_leaves(p);
    let stepped: Vec<Tensor> = g
        .iter()
        .zip(&params)
        .enumerate()
        .map(|(k, (l, w))| {
            let mut shape = vec![BATCH];
            shape.extend(std::iter::repeat_n(1, l.shape().len() - 1));
            let clipped = (l * &scale.reshape(&shape[..])).sum(0, false);
            let noise = Tensor::randn(&w.shape()[..], seed * 4 + k as u64) * (SIGMA * CLIP);
            let update = &(&clipped + &noise) * (lr / BATCH as f32);
            w - &update
        })
        .collect();
    Mlp {
        w1: stepped[0].clone(),
        b1: stepped[1].clone(),
        w2: stepped[2].clone(),
        b2: stepped[3].clone(),
    }
}

/// Runs `STEPS` steps from `p0`; `changing` draws a new seed and decays the learning rate
/// every step. Returns each step's time and the plans built after the first step.
fn train(
    per_sample: &PerSample,
    p0: &Mlp,
    x: &Tensor,
    y: &Tensor,
    changing: bool,
) -> Result<(Vec<Duration>, u64), Box<dyn std::error::Error>> {
    let mut p = p0.clone();
    let mut times = Vec::new();
    let mut plans_after_first = 0;
    for k in 0..STEPS {
        let (seed, lr) = match changing {
            true => (100 + k as u64, 0.1 / (1.0 + 0.1 * k as f32)),
            false => (100, 0.1),
        };
        let before = pipeline_counts().schedules;
        let started = Instant::now();
        p = step(per_sample, &p, x, y, seed, lr);
        realize_tree(&p)?;
        times.push(started.elapsed());
        if k > 0 {
            plans_after_first += pipeline_counts().schedules - before;
        }
    }
    Ok((times, plans_after_first))
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times[1..].to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let p0 = Mlp {
        w1: Tensor::randn(&[IN, HIDDEN], 1) * (1.0 / (IN as f64).sqrt()),
        b1: Tensor::zeros(&[HIDDEN], DType::F32),
        w2: Tensor::randn(&[HIDDEN, OUT], 2) * (1.0 / (HIDDEN as f64).sqrt()),
        b2: Tensor::zeros(&[OUT], DType::F32),
    };
    realize_tree(&p0)?;
    let x = Tensor::rand(&[BATCH, IN], 3);
    let labels: Vec<i32> = (0..BATCH).map(|i| ((i * 7 + 3) % OUT) as i32).collect();
    let y = Tensor::from_vec(labels, &[BATCH])
        .one_hot(OUT)
        .cast(DType::F32);
    realize_tree(&(x.clone(), y.clone()))?;
    let per_sample: PerSample = Box::new(vmap!(grad!(loss), in_axes = (None, 0, 0)));

    let (fixed, fixed_plans) = train(&per_sample, &p0, &x, &y, false)?;
    let (changing, changing_plans) = train(&per_sample, &p0, &x, &y, true)?;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    println!("DP-SGD on a 784-128-10 MLP, batch {BATCH}, {STEPS} steps each ({cpu})");
    println!(
        "  seed and learning rate fixed:    median step {:>9.2?}, first step {:>9.2?}, plans built after step 1: {fixed_plans}",
        median(&fixed),
        fixed[0]
    );
    println!(
        "  fresh seed, decaying rate:       median step {:>9.2?}, first step {:>9.2?}, plans built after step 1: {changing_plans}",
        median(&changing),
        changing[0]
    );
    let ratio = median(&changing).as_secs_f64() / median(&fixed).as_secs_f64();
    println!("  changing / fixed: {ratio:.2}x (goal <= 1.3x)");
    println!(
        "  step 10 / step 2 of the changing loop: {:.2}x (goal <= 1.5x: the loop does not grow)",
        changing[STEPS - 1].as_secs_f64() / changing[1].as_secs_f64()
    );
    if changing_plans > 0 {
        return Err("a new seed or learning rate built a new plan".into());
    }
    Ok(())
}
