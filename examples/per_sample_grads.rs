//! Per-sample gradients of a 784-128-10 ReLU MLP's cross-entropy loss for a batch of 256, the
//! parameters a struct: `vmap!(grad!(loss), in_axes = (None, 0, 0))` (params: None, x: 0,
//! y: 0) returns an `Mlp` of gradients, each field with a batch axis in front. Checked against
//! a loop of single-sample `grad!` calls, with the time and the number of kernels each way;
//! then the same gradients by the two loop methods of vmap (range and pad+reduce).
//!
//! Run: `cargo run --release --example per_sample_grads`

use std::time::{Duration, Instant};
use tensor::core::schedule::create_schedule;
use tensor::core::transform::VmapMethod;
use tensor::prelude::*;
use tensor::runtime::realize::{realize, to_vec};

const BATCH: usize = 256;
const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;

/// The model's parameters: two dense layers.
#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

/// Cross-entropy of one sample: `-sum(y * log_softmax(relu(x @ W1 + b1) @ W2 + b2))`.
fn loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).relu();
    let logits = hidden.matmul(&p.w2) + &p.b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

/// The per-sample gradient function, as the macros type it.
type PerSample = Box<dyn Fn(&Mlp, &Tensor, &Tensor) -> Mlp + Send + Sync>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let params = Mlp {
        w1: Tensor::randn(&[IN, HIDDEN], 1) * (1.0 / (IN as f64).sqrt()),
        b1: Tensor::zeros(&[HIDDEN], DType::F32),
        w2: Tensor::randn(&[HIDDEN, OUT], 2) * (1.0 / (HIDDEN as f64).sqrt()),
        b2: Tensor::zeros(&[OUT], DType::F32),
    };
    let x = Tensor::rand(&[BATCH, IN], 3);
    let labels: Vec<i32> = (0..BATCH).map(|i| ((i * 7 + 3) % OUT) as i32).collect();
    let y = Tensor::from_vec(labels, &[BATCH])
        .one_hot(OUT)
        .cast(DType::F32);
    for t in tree_leaves(&params).iter().chain([&x, &y]) {
        realize(&[t])?;
    }

    let (grads, vmap_time, vmap_kernels) = per_sample_grads(&params, &x, &y, VmapMethod::Rewrite)?;

    let single = grad!(loss);
    let mut started = Instant::now();
    let mut loop_kernels = 0;
    let mut looped: Vec<Vec<f32>> = vec![Vec::new(); 4];
    let (x_host, y_host) = (to_vec::<f32>(&x)?, to_vec::<f32>(&y)?);
    for i in 0..BATCH {
        // Each sample is its own input buffer, so every iteration runs the same kernels.
        let xi = Tensor::from_slice(&x_host[i * IN..(i + 1) * IN], &[IN]);
        let yi = Tensor::from_slice(&y_host[i * OUT..(i + 1) * OUT], &[OUT]);
        let g = tree_leaves(&single(&params, &xi, &yi));
        if i == 0 {
            // Every sample runs the same kernels; count them once, outside the timing.
            let counting = Instant::now();
            let uops: Vec<_> = g.iter().map(|t| t.uop()).collect();
            loop_kernels = create_schedule(&uops).items.len() * BATCH;
            started += counting.elapsed();
        }
        realize(&g.iter().collect::<Vec<_>>())?;
        for (acc, gi) in looped.iter_mut().zip(&g) {
            acc.extend(to_vec::<f32>(gi)?);
        }
    }
    let loop_time = started.elapsed();

    let mut worst = 0.0f32;
    for (g, expected) in grads.iter().zip(&looped) {
        let got = to_vec::<f32>(g)?;
        worst = got
            .iter()
            .zip(expected)
            .map(|(a, b)| (a - b).abs())
            .fold(worst, f32::max);
    }
    println!("per-sample gradients of a {IN}-{HIDDEN}-{OUT} MLP, batch {BATCH}");
    println!(
        "  shapes: {:?}",
        grads.iter().map(|g| g.shape()).collect::<Vec<_>>()
    );
    println!("  vmap!(grad!(loss)):    {vmap_time}  {vmap_kernels:>5} kernels");
    println!("  loop of grad!(loss):   {loop_time:>10.3?}  {loop_kernels:>5} kernels");
    println!("  largest difference between the two: {worst:.3e}");
    if worst > 1e-4 {
        return Err(format!("vmap and the loop disagree by {worst}").into());
    }
    println!("the other vmap methods (the batch as a loop inside the kernels):");
    for method in [VmapMethod::Range, VmapMethod::PadReduce] {
        let (other, time, kernels) = per_sample_grads(&params, &x, &y, method)?;
        let mut differs = 0.0f32;
        for (a, b) in other.iter().zip(&grads) {
            let (a, b) = (to_vec::<f32>(a)?, to_vec::<f32>(b)?);
            differs = a
                .iter()
                .zip(&b)
                .map(|(a, b)| (a - b).abs())
                .fold(differs, f32::max);
        }
        println!(
            "  {:<20} {time}  {kernels:>5} kernels, largest difference {differs:.3e}",
            format!("{method:?}:")
        );
        if differs > 1e-4 {
            return Err(format!("vmap by {method:?} disagrees by {differs}").into());
        }
    }
    Ok(())
}

/// The per-sample gradients by `method` (as a list of the `Mlp`'s fields), the time to
/// compute them (first and warm call) and their kernel count.
fn per_sample_grads(
    params: &Mlp,
    x: &Tensor,
    y: &Tensor,
    method: VmapMethod,
) -> Result<(Vec<Tensor>, Timing, usize), Box<dyn std::error::Error>> {
    let per_sample: PerSample = match method {
        VmapMethod::Rewrite => vmap!(grad!(loss), in_axes = (None, 0, 0)),
        VmapMethod::Range => vmap!(grad!(loss), in_axes = (None, 0, 0), method = range),
        VmapMethod::PadReduce => vmap!(grad!(loss), in_axes = (None, 0, 0), method = pad_reduce),
    };
    let run = || -> Result<(Vec<Tensor>, Duration), Box<dyn std::error::Error>> {
        let started = Instant::now();
        let grads = tree_leaves(&per_sample(params, x, y));
        realize(&grads.iter().collect::<Vec<_>>())?;
        Ok((grads, started.elapsed()))
    };
    let (_, first) = run()?;
    // The second call replays the plan the first built: the time a training step takes.
    let (grads, warm) = run()?;
    let kernels = {
        let fresh = tree_leaves(&per_sample(params, x, y));
        create_schedule(&fresh.iter().map(|g| g.uop()).collect::<Vec<_>>())
            .items
            .len()
    };
    Ok((grads, Timing { first, warm }, kernels))
}

/// The time of a first call (tracing, scheduling and compiling, unless the disk caches hold
/// its plan and kernels) and of a warm one.
struct Timing {
    first: Duration,
    warm: Duration,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>10.3?} warm ({:>10.3?} first call)",
            self.warm, self.first
        )
    }
}
