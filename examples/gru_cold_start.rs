//! The cold start of per-sample gradients of a character-level GRU (issue #37's figure): a
//! batch of 32 sequences of 16 characters (vocabulary 64, embedding 32, hidden 128), the
//! per-sample gradients `vmap!(grad!(loss))` of the next-character cross-entropy.
//!
//! It times the first call from an empty kernel cache (a fresh directory: scheduling, code
//! generation and every kernel's compile), a second call in the same process (the plan
//! replayed), then the first call of a second process that finds the cache filled (the plans
//! and kernels read from disk: no scheduling, no compile), and prints the three.
//!
//! Run: `cargo run --release --example gru_cold_start`

use std::process::Command;
use std::time::Instant;
use tensor::nn::{self, ClassLoss, RecurrentOptions, RecurrentWeights, Target};
use tensor::prelude::*;

const VOCAB: usize = 64;
const EMBED: usize = 32;
const HIDDEN: usize = 128;
const STEPS: usize = 16;
const BATCH: usize = 32;

#[derive(Clone, Tree)]
struct CharGru {
    embedding: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
    head: Tensor,
}

impl CharGru {
    fn init() -> CharGru {
        let uniform = |shape: &[usize], bound: f64, seed: u64| {
            (Tensor::rand(shape, seed) * 2.0 - 1.0) * bound
        };
        let k = 1.0 / (HIDDEN as f64).sqrt();
        CharGru {
            embedding: uniform(&[VOCAB, EMBED], 1.0, 1),
            weight_ih: uniform(&[3 * HIDDEN, EMBED], k, 2),
            weight_hh: uniform(&[3 * HIDDEN, HIDDEN], k, 3),
            bias_ih: uniform(&[3 * HIDDEN], k, 4),
            bias_hh: uniform(&[3 * HIDDEN], k, 5),
            head: uniform(&[VOCAB, HIDDEN], k, 6),
        }
    }
}

/// The next-character cross-entropy of one sequence `chars: [STEPS + 1]` (i64).
fn loss(p: &CharGru, chars: &Tensor) -> Tensor {
    let inputs = chars.narrow(0, 0, STEPS);
    let targets = chars.narrow(0, 1, STEPS);
    let x = nn::embedding(&inputs, &p.embedding).unsqueeze(1); // [T, 1, E]
    let weights = RecurrentWeights {
        weight_ih: p.weight_ih.clone(),
        weight_hh: p.weight_hh.clone(),
        bias_ih: Some(p.bias_ih.clone()),
        bias_hh: Some(p.bias_hh.clone()),
    };
    let (h, _) = nn::gru(&x, None, &[weights], RecurrentOptions::default());
    let logits = h.reshape(&[STEPS, HIDDEN]).matmul(&p.head.transpose(0, 1));
    nn::cross_entropy(&logits, Target::Indices(&targets), &ClassLoss::default())
}

fn batch() -> Tensor {
    let chars: Vec<i64> = (0..BATCH * (STEPS + 1))
        .map(|i| ((i * 7 + i / 5) % VOCAB) as i64)
        .collect();
    Tensor::from_vec(chars, &[BATCH, STEPS + 1])
}

/// Seconds for one call of the per-sample gradients, realized.
fn one_call(p: &CharGru, x: &Tensor) -> f64 {
    let per_sample = vmap!(grad!(loss), in_axes = (None, 0));
    let started = Instant::now();
    let g = per_sample(p, x);
    realize_tree(&g).expect("the gradients compute");
    started.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let p = CharGru::init();
    let x = batch();
    realize_tree(&(p.clone(), x.clone()))?;
    if std::env::args().any(|a| a == "--second-process") {
        println!("{:.3}", one_call(&p, &x));
        return Ok(());
    }
    let cache = std::env::temp_dir().join(format!("tensor-gru-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    // This process's kernels go to the fresh cache too: re-run itself with it set.
    if std::env::var_os("TENSOR_GRU_CACHE").is_none() {
        let status = Command::new(std::env::current_exe()?)
            .env("TENSOR_CACHE_DIR", &cache)
            .env("TENSOR_GRU_CACHE", &cache)
            .status()?;
        let _ = std::fs::remove_dir_all(&cache);
        return if status.success() {
            Ok(())
        } else {
            Err("the measured run failed".into())
        };
    }
    let cold = one_call(&p, &x);
    let warm = one_call(&p, &x);
    let second = Command::new(std::env::current_exe()?)
        .arg("--second-process")
        .output()?;
    let text = String::from_utf8_lossy(&second.stdout);
    let second: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("second process said {text:?}"))?;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "per-sample gradients of a char GRU ({STEPS} steps, batch {BATCH}), {cores} cores of {cpu}:"
    );
    println!("  first call, empty cache:         {cold:>7.3} s   (goal ≤ 10 s)");
    println!("  second call, same process:       {warm:>7.3} s");
    println!("  first call, new process, cached: {second:>7.3} s   (goal ≤ 0.5 s)");
    Ok(())
}
