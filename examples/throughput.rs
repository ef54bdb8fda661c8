//! Prints how fast compiled kernels run next to the machine's memory bandwidth: a fused
//! 6-op elementwise chain and `((x*2+1).exp2() * x).sqrt() * 0.5` over 16M floats (GB/s and
//! ms), the sum of those 16M floats (GB/s read and ms), and a 1024x1024 f32 matmul (GFLOP/s).
//!
//! Run: `cargo run --release --example throughput`

use std::time::{Duration, Instant};
use tensor::prelude::*;

const CHAIN_LEN: usize = 16 * 1024 * 1024;
const MATMUL_N: usize = 1024;
const REPEATS: usize = 5;

/// The fastest of `REPEATS` runs of `f` (after one warm-up run that compiles).
fn best_of(mut f: impl FnMut()) -> Duration {
    f();
    (0..REPEATS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .expect("at least one run")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = vec![1.0f32; CHAIN_LEN];
    let mut target = vec![0.0f32; CHAIN_LEN];
    let copy = best_of(|| {
        target.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut target);
    });
    let moved = (CHAIN_LEN * 4 * 2) as f64;

    let x = Tensor::rand(&[CHAIN_LEN], 1);
    x.realize()?;
    let chain = best_of(|| {
        let y = ((&x * 2.0 + 1.0).sqrt() - &x).maximum(0.0) * 0.5 + 3.0;
        y.realize().expect("the chain runs");
    });

    let transcendental = best_of(|| {
        let y = ((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5;
        y.realize().expect("the exp2 chain runs");
    });

    let sum = best_of(|| {
        x.sum_all().realize().expect("the sum runs");
    });

    let a = Tensor::rand(&[MATMUL_N, MATMUL_N], 2);
    let w = Tensor::rand(&[MATMUL_N, MATMUL_N], 3);
    a.realize()?;
    w.realize()?;
    let matmul = best_of(|| {
        a.matmul(&w).realize().expect("the matmul runs");
    });
    let flops = 2.0 * (MATMUL_N as f64).powi(3);

    println!(
        "memcpy 64 MiB (read + write):       {:>7.2} GB/s",
        moved / copy.as_secs_f64() / 1e9
    );
    println!(
        "6-op elementwise chain, 16M f32:    {:>7.2} GB/s",
        moved / chain.as_secs_f64() / 1e9
    );
    println!(
        "((x*2+1).exp2() * x).sqrt() * 0.5:  {:>7.2} GB/s  {:>6.2} ms",
        moved / transcendental.as_secs_f64() / 1e9,
        transcendental.as_secs_f64() * 1e3
    );
    println!(
        "sum of 16M f32:                     {:>7.2} GB/s  {:>6.2} ms",
        (CHAIN_LEN * 4) as f64 / sum.as_secs_f64() / 1e9,
        sum.as_secs_f64() * 1e3
    );
    println!(
        "matmul 1024x1024 f32:               {:>7.2} GFLOP/s",
        flops / matmul.as_secs_f64() / 1e9
    );
    Ok(())
}
