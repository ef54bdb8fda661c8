//! Trains a small CNN on real data: the UCI handwritten digits (`tensor::datasets::digits`,
//! 1,797 images of 8×8 pixels) with Adam, a cosine learning-rate schedule and one `jit!`-ed
//! step, then saves the parameters as a safetensors checkpoint, loads it in a new process and
//! checks that the reloaded model gets the same test accuracy.
//!
//! Run: `cargo run --release --example digits` (`-- --epochs N` for another length).

use std::process::Command;
use std::time::Instant;
use tensor::nn::{self, ClassLoss, Conv, Pool, Target};
use tensor::optim::schedule::CosineAnnealingLr;
use tensor::optim::{Adam, AdamState, Optimizer, Schedule};
use tensor::prelude::*;

const TRAIN: usize = 1500;
const BATCH: usize = 50;
const LR: f64 = 0.01;

/// conv 3×3 (1 → 16 channels, same padding), ReLU, 2×2 max pool, then 256 → 64 → 10.
#[derive(Clone, Tree)]
pub struct Cnn {
    conv_w: Tensor,
    conv_b: Tensor,
    fc1_w: Tensor,
    fc1_b: Tensor,
    fc2_w: Tensor,
    fc2_b: Tensor,
}

impl Cnn {
    /// PyTorch's default initialization: uniform in ±1/√fan_in.
    pub fn init(seed: u64) -> Cnn {
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

fn loss(p: &Cnn, x: &Tensor, y: &Tensor) -> Tensor {
    nn::cross_entropy(&p.logits(x), Target::Indices(y), &ClassLoss::default())
}

/// The share of `images` whose predicted class is the label.
pub fn accuracy(p: &Cnn, images: &Tensor, labels: &Tensor) -> f64 {
    let predicted = p.logits(images).argmax(-1, false);
    let right = predicted.eq(labels).cast(DType::F32).mean_all();
    right.to_vec::<f32>().expect("the accuracy computes")[0] as f64
}

/// The images and labels of the training set as host vectors, to cut shuffled batches from
/// (a batch made from host data is an input of the plan, not a graph of its own).
struct HostData {
    pixels: Vec<f32>,
    labels: Vec<i64>,
}

impl HostData {
    fn batch(&self, order: &[usize]) -> (Tensor, Tensor) {
        let mut pixels = Vec::with_capacity(order.len() * 64);
        for &i in order {
            pixels.extend_from_slice(&self.pixels[i * 64..(i + 1) * 64]);
        }
        let labels = order.iter().map(|&i| self.labels[i]).collect();
        (
            Tensor::from_vec(pixels, &[order.len(), 1, 8, 8]),
            Tensor::from_vec(labels, &[order.len()]),
        )
    }
}

/// A model trained for `epochs` on the training part of the random split (printing the loss
/// and test accuracy of each epoch when `report`).
pub fn train(epochs: usize, report: bool) -> Result<Cnn, Box<dyn std::error::Error>> {
    let digits = tensor::datasets::digits();
    let ((train_x, train_y), (test_x, test_y)) = digits.shuffled_split(TRAIN, 0);
    let host = HostData {
        pixels: train_x.to_vec::<f32>()?,
        labels: train_y.to_vec::<i64>()?,
    };
    let steps_per_epoch = TRAIN / BATCH;
    let schedule = CosineAnnealingLr {
        base: LR,
        t_max: epochs * steps_per_epoch,
        eta_min: LR / 20.0,
    };
    let adam = Adam::new();
    let mut p = Cnn::init(0);
    let mut state = adam.init(&p);
    let step = jit!(
        move |p: &Cnn, s: &AdamState<Cnn>, x: &Tensor, y: &Tensor, lr: &Tensor| {
            let (value, g) = value_and_grad!(loss)(p, x, y);
            let (p, s) = adam.update(&g, s, p, lr);
            (p, s, value)
        }
    );
    if report {
        println!(
            "digits: {TRAIN} training and {} test images (a random split), batch {BATCH}, Adam, \
             cosine rate from {LR}",
            tensor::datasets::DIGITS_LEN - TRAIN
        );
    }
    let started = Instant::now();
    let mut k = 0;
    for epoch in 0..epochs {
        let order = tensor::datasets::permutation(TRAIN, epoch as u64);
        let mut total = 0.0;
        for batch in order.chunks(BATCH) {
            let (x, y) = host.batch(batch);
            let (next_p, next_s, value) = step(&p, &state, &x, &y, &schedule.value(k));
            (p, state) = (next_p, next_s);
            total += value.to_vec::<f32>()?[0] as f64;
            k += 1;
        }
        if report {
            println!(
                "epoch {:>2}: loss {:.4}, test accuracy {:.4}  ({:.1} s)",
                epoch + 1,
                total / steps_per_epoch as f64,
                accuracy(&p, &test_x, &test_y),
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(p)
}

/// The test images and labels of the random split.
pub fn test_set() -> (Tensor, Tensor) {
    tensor::datasets::digits().shuffled_split(TRAIN, 0).1
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    // A random split with a fixed seed, as scikit-learn's train_test_split(random_state=0).
    let (test_x, test_y) = test_set();
    if let Some(i) = args.iter().position(|a| a == "--evaluate") {
        // The second process: a fresh model, its parameters read from the checkpoint.
        let mut p = Cnn::init(99);
        tensor::checkpoint::load(&args[i + 1], &mut p)?;
        println!("reloaded accuracy {:.4}", accuracy(&p, &test_x, &test_y));
        return Ok(());
    }
    let epochs: usize = match args.iter().position(|a| a == "--epochs") {
        Some(i) => args[i + 1].parse()?,
        None => 12,
    };
    let p = train(epochs, true)?;
    let trained = accuracy(&p, &test_x, &test_y);
    let path = std::env::temp_dir().join(format!("digits-cnn-{}.safetensors", std::process::id()));
    tensor::checkpoint::save(&path, &p)?;
    println!("saved {}", path.display());
    let output = Command::new(std::env::current_exe()?)
        .arg("--evaluate")
        .arg(&path)
        .output()?;
    let reloaded = String::from_utf8_lossy(&output.stdout);
    print!("new process: {reloaded}");
    let _ = std::fs::remove_file(&path);
    let same = reloaded.contains(&format!("reloaded accuracy {trained:.4}"));
    println!(
        "test accuracy {trained:.4}; the reloaded model {}",
        if same { "agrees" } else { "DIFFERS" }
    );
    if !same || !output.status.success() {
        return Err("the reloaded model does not reproduce the accuracy".into());
    }
    Ok(())
}
