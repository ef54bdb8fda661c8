//! Data-parallel training on the UCI handwritten digits over MPI, as PyTorch's
//! `DistributedDataParallel`: every rank starts from rank 0's parameters (a broadcast), takes
//! its shard of each batch, computes the gradient of its shard, and the gradients are summed
//! over the ranks (one all-reduce of the parameter tree a step) before the same Adam step on
//! every rank. With `--dp`, each step is DP-SGD instead (`DpSgd::private_grad_distributed`:
//! Poisson batches of 64 expected images over the whole dataset, each rank clipping its shard,
//! the clipped sums all-reduced, the noise added once), and ε is printed per epoch.
//!
//! Run (Open MPI; Debian: `apt-get install libopenmpi-dev openmpi-bin libclang-dev`):
//!
//! ```text
//! mpirun -np 2 cargo run --release --features mpi --example ddp_digits
//! mpirun -np 2 cargo run --release --features mpi --example ddp_digits -- --dp
//! cargo run --release --example ddp_digits          # one process, the same program
//! ```
//!
//! (As root, Open MPI also wants `--allow-run-as-root`; on a machine with fewer cores than
//! ranks, `--oversubscribe`.) Rank 0 prints the epochs, the mean time of a step and of its
//! all-reduce, and the bytes each rank sends per step; every rank checks at the end that its
//! parameters equal rank 0's. `docs/dist.md` has the figures and the scaling worked out.

use std::time::{Duration, Instant};
use tensor::dist::{Communicator, ReduceOp};
use tensor::dp::DpSgd;
use tensor::dp::accountant::noise_multiplier_for;
use tensor::dp::sampling::steps_per_epoch;
use tensor::nn::{self, ClassLoss, Conv, Pool, Target};
use tensor::optim::{Adam, Stepper};
use tensor::prelude::*;

const TRAIN: usize = 1500;
const BATCH: usize = 48;
const LR: f64 = 0.01;

/// conv 3×3 (1 → 16 channels, same padding), ReLU, 2×2 max pool, then 256 → 64 → 10.
#[derive(Clone, Tree)]
struct Cnn {
    conv_w: Tensor,
    conv_b: Tensor,
    fc1_w: Tensor,
    fc1_b: Tensor,
    fc2_w: Tensor,
    fc2_b: Tensor,
}

impl Cnn {
    /// PyTorch's default initialization: uniform in ±1/√fan_in.
    fn init(seed: u64) -> Cnn {
        let uniform = |shape: &[usize], fan_in: usize, k: u64| {
            let bound = 1.0 / (fan_in as f32).sqrt();
            (Tensor::rand(shape, seed * 8 + k) * 2.0 - 1.0) * bound
        };
        Cnn {
            conv_w: uniform(&[16, 1, 3, 3], 9, 0),
            conv_b: uniform(&[16], 9, 1),
            fc1_w: uniform(&[64, 256], 256, 2),
            fc1_b: uniform(&[64], 256, 3),
            fc2_w: uniform(&[10, 64], 64, 4),
            fc2_b: uniform(&[10], 64, 5),
        }
    }

    /// Logits `[N, 10]` of images `[N, 1, 8, 8]`.
    fn logits(&self, x: &Tensor) -> Tensor {
        let same = Conv {
            padding: 1.into(),
            ..Conv::default()
        };
        let h = nn::conv2d(x, &self.conv_w, Some(&self.conv_b), &same).relu();
        let h = nn::max_pool2d(&h, &Pool::new(2)).flatten(1, -1);
        let h = nn::linear(&h, &self.fc1_w, Some(&self.fc1_b)).relu();
        nn::linear(&h, &self.fc2_w, Some(&self.fc2_b))
    }
}

/// The mean cross-entropy over a batch.
fn loss(p: &Cnn, x: &Tensor, y: &Tensor) -> Tensor {
    nn::cross_entropy(&p.logits(x), Target::Indices(y), &ClassLoss::default())
}

/// The loss of one example (`x` `[1, 8, 8]`, `y` a 0-d label): what DP-SGD clips.
fn example_loss(p: &Cnn, example: &(Tensor, Tensor)) -> Tensor {
    loss(p, &example.0.unsqueeze(0), &example.1.reshape(&[1]))
}

fn accuracy(p: &Cnn, images: &Tensor, labels: &Tensor) -> f64 {
    let right = p
        .logits(images)
        .argmax(-1, false)
        .eq(labels)
        .cast(DType::F32);
    right
        .mean_all()
        .to_vec::<f32>()
        .expect("the accuracy computes")[0] as f64
}

/// Wall time of the steps and of their all-reduces, after the first epoch (compiles).
#[derive(Default)]
struct Clock {
    steps: usize,
    step: Duration,
    reduce: Duration,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let private = args.iter().any(|a| a == "--dp");
    let epochs: usize = match args.iter().position(|a| a == "--epochs") {
        Some(i) => args[i + 1].parse()?,
        None => 8,
    };
    let comm = Communicator::from_env()?;
    let lead = comm.rank() == 0;
    let ((train_x, train_y), (test_x, test_y)) =
        tensor::datasets::digits().shuffled_split(TRAIN, 0);
    realize_tree(&(train_x.clone(), train_y.clone()))?;

    // Every rank draws its own parameters; rank 0's win, so all replicas start equal.
    let mut p = comm.broadcast(&Cnn::init(comm.rank() as u64), 0)?;
    let params: usize = tree_leaves(&p)
        .iter()
        .map(|t| t.shape().iter().product::<usize>())
        .sum();
    let mut opt = Stepper::new(Adam::new(), &p, LR)?;
    let rate = BATCH as f64 / TRAIN as f64;
    let sigma = noise_multiplier_for(3.0, 1e-5, rate, epochs as u64 * steps_per_epoch(rate));
    let mut dp = DpSgd::new(1.0, sigma, TRAIN, rate, 7);
    if lead {
        println!(
            "{} ranks ({} backend), {} parameters, {}; each rank sends {} bytes a step",
            comm.world_size(),
            comm.backend(),
            params,
            if private {
                format!("DP-SGD: Poisson batches of {BATCH} expected images, σ = {sigma:.3}")
            } else {
                format!(
                    "batches of {BATCH} images, {} per rank",
                    BATCH / comm.world_size()
                )
            },
            params * 4
        );
    }
    let mut clock = Clock::default();
    let started = Instant::now();
    for epoch in 0..epochs {
        let batches: Vec<Vec<usize>> = if private {
            dp.batches(epoch as u64).collect()
        } else {
            let order = tensor::datasets::permutation(TRAIN, epoch as u64);
            order.chunks(BATCH).map(<[usize]>::to_vec).collect()
        };
        for batch in &batches {
            let step_started = Instant::now();
            let (g, reduce) = if private {
                let g = dp.private_grad_distributed(
                    &comm,
                    example_loss,
                    &p,
                    &(train_x.clone(), train_y.clone()),
                    batch,
                )?;
                (g, Duration::ZERO)
            } else {
                // The gradient of this rank's shard, weighted by its share of the batch, so
                // that the sum over ranks is the batch's mean gradient.
                let mine = &batch[comm.shard(batch.len())];
                let index =
                    Tensor::from_vec(mine.iter().map(|&i| i as i64).collect(), &[mine.len()]);
                let (x, y) = (train_x.take(&index, 0), train_y.take(&index, 0));
                let local = tree_scale(
                    &grad!(loss)(&p, &x, &y),
                    mine.len() as f64 / batch.len() as f64,
                );
                realize_tree(&local)?;
                let reduce_started = Instant::now();
                let g = comm.all_reduce(&local, ReduceOp::Sum)?;
                (g, reduce_started.elapsed())
            };
            opt.step(&mut p, &g)?;
            if epoch > 0 {
                clock.steps += 1;
                clock.step += step_started.elapsed();
                clock.reduce += reduce;
            }
        }
        if lead {
            let privacy = if private {
                format!(", ε = {:.3}", dp.epsilon(1e-5))
            } else {
                String::new()
            };
            println!(
                "epoch {:>2}: test accuracy {:.4}{privacy}  ({:.1} s)",
                epoch + 1,
                accuracy(&p, &test_x, &test_y),
                started.elapsed().as_secs_f64()
            );
        }
    }
    // The replicas never drifted apart: every rank's parameters equal rank 0's.
    let spread = tree_sub(
        &comm.all_reduce(&p, ReduceOp::Max)?,
        &comm.all_reduce(&p, ReduceOp::Min)?,
    );
    let drift = tree_leaves(&spread)
        .iter()
        .map(|t| t.abs().max_all().to_vec::<f32>().map(|v| v[0]))
        .collect::<Result<Vec<f32>, _>>()?
        .into_iter()
        .fold(0.0, f32::max);
    if lead {
        let per_step = |d: Duration| d.as_secs_f64() * 1e3 / clock.steps.max(1) as f64;
        let reduce = if private {
            "the all-reduce inside".to_string()
        } else {
            format!("{:.2} ms of it the all-reduce", per_step(clock.reduce))
        };
        println!(
            "after epoch 1: {:.2} ms a step ({reduce}; {} steps); replicas differ by {drift}",
            per_step(clock.step),
            clock.steps
        );
    }
    if drift != 0.0 {
        return Err(format!("the replicas drifted apart by {drift}").into());
    }
    Ok(())
}
