//! The warm path, measured: what a second call costs once its plan is recorded.
//!
//! Prints warm medians of: dispatching `x + 1` on 16 floats; `jacfwd` and `jacrev` of
//! `tanh(W x)` with `W` 256x256, with and without `jit`; 256 calls of one `grad(loss)` of a
//! 784-128-10 MLP, one sample each (the loop of the `per_sample_grads` example); and, in a
//! child process with an empty kernel cache, the first call of the per-sample gradients.
//! Compare with `../shared/bench/peers/jacobian.py --framework jax` run right after, on the
//! same machine.
//!
//! On a GPU (`DEVICE=CUDA`) each timed call ends with `synchronize()`, so the figures hold
//! the kernels' run time, not only their queueing.
//!
//! Run: `cargo run --release --example warm_path`

use std::time::{Duration, Instant};
use tensor::prelude::*;
use tensor::runtime::realize::{SelectedDevice, realize, selected_device, synchronize};

const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;

#[function]
fn loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(w1) + b1).relu();
    let logits = hidden.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

/// The median of `reps` timed runs of `f`, after `warmup` untimed ones.
fn median(warmup: usize, reps: usize, mut f: impl FnMut()) -> Duration {
    let queued = selected_device().expect("DEVICE names a device") != SelectedDevice::Cpu;
    let mut run = || {
        f();
        if queued {
            synchronize().expect("the queued work finishes");
        }
    };
    for _ in 0..warmup {
        run();
    }
    let mut times: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[reps / 2]
}

fn tanh_layer(w: &Tensor, x: &Tensor) -> Tensor {
    w.matmul(x).tanh()
}

fn jacobians() {
    let w = Tensor::randn(&[256, 256], 1) * (1.0 / 16.0);
    let x = Tensor::randn(&[256], 2);
    realize(&[&w, &x]).unwrap();
    for (name, transform) in [
        ("jacfwd", jacfwd(tanh_layer, 1)),
        ("jacrev", jacrev(tanh_layer, 1)),
    ] {
        let plain = median(3, 50, || {
            transform.call1(&[w.clone(), x.clone()]).realize().unwrap();
        });
        let jitted = jit(transform.clone());
        let with_jit = median(3, 50, || {
            jitted.call1(&[w.clone(), x.clone()]);
        });
        println!(
            "  {name}(tanh(W x), 1), W 256x256:   {:>10.3?}   with jit {:>10.3?}",
            plain, with_jit
        );
    }
}

/// The MLP's parameters, scaled like a standard initialization.
fn mlp_params() -> [Tensor; 4] {
    [
        Tensor::randn(&[IN, HIDDEN], 1) * (1.0 / (IN as f64).sqrt()),
        Tensor::zeros(&[HIDDEN], DType::F32),
        Tensor::randn(&[HIDDEN, OUT], 2) * (1.0 / (HIDDEN as f64).sqrt()),
        Tensor::zeros(&[OUT], DType::F32),
    ]
}

fn grad_loop() {
    let params = mlp_params();
    for p in &params {
        p.realize().unwrap();
    }
    let x: Vec<f32> = (0..IN).map(|i| (i % 7) as f32 / 7.0).collect();
    let y: Vec<f32> = (0..OUT).map(|i| if i == 3 { 1.0 } else { 0.0 }).collect();
    let single = grad!(loss, argnums = (0, 1, 2, 3));
    let jitted = jit!(grad!(loss, argnums = (0, 1, 2, 3)));
    let loop_of_256 = |g: &dyn Fn(&Tensor, &Tensor) -> [Tensor; 4]| {
        median(1, 5, || {
            for _ in 0..256 {
                let xi = Tensor::from_slice(&x, &[IN]);
                let yi = Tensor::from_slice(&y, &[OUT]);
                let grads = g(&xi, &yi);
                // The four gradients share one backward pass: computed together, as the
                // per_sample_grads example's loop does, then copied out.
                realize(&grads.iter().collect::<Vec<_>>()).unwrap();
                for g in &grads {
                    std::hint::black_box(g.to_vec::<f32>().unwrap());
                }
            }
        })
    };
    let plain = loop_of_256(&|xi, yi| {
        let (a, b, c, d) = single(&params[0], &params[1], &params[2], &params[3], xi, yi);
        [a, b, c, d]
    });
    let with_jit = loop_of_256(&|xi, yi| {
        let (a, b, c, d) = jitted(&params[0], &params[1], &params[2], &params[3], xi, yi);
        [a, b, c, d]
    });
    println!(
        "  256 calls of grad!(loss), one sample each: {plain:>10.3?}   with jit {with_jit:>10.3?}"
    );
}

fn dispatch() {
    let x = Tensor::from_vec(vec![1.0f32; 16], &[16]);
    x.realize().unwrap();
    let time = median(100, 2001, || {
        (&x + 1.0).realize().unwrap();
    });
    println!("  dispatch: realize of x + 1 on 16 floats: {time:>10.3?}");
}

/// The per-sample gradients example in a child process whose kernel cache starts empty.
fn cold_start() {
    let cache = std::env::temp_dir().join(format!("tensor-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new(exe)
        .arg("--cold-child")
        .env("TENSOR_CACHE_DIR", &cache)
        .output()
        .expect("the example runs itself");
    let _ = std::fs::remove_dir_all(&cache);
    print!("{}", String::from_utf8_lossy(&output.stdout));
}

fn cold_child() {
    let params = mlp_params();
    let x = Tensor::rand(&[256, IN], 3);
    let y = Tensor::from_vec((0..256).map(|i| (i % OUT) as i32).collect(), &[256])
        .one_hot(OUT)
        .cast(DType::F32);
    for t in params.iter().chain([&x, &y]) {
        t.realize().unwrap();
    }
    let started = Instant::now();
    let per_sample = vmap!(
        grad!(loss, argnums = (0, 1, 2, 3)),
        in_axes = (None, None, None, None, 0, 0)
    );
    let (a, b, c, d) = per_sample(&params[0], &params[1], &params[2], &params[3], &x, &y);
    realize(&[&a, &b, &c, &d]).unwrap();
    println!(
        "  per-sample grads (B=256), first call, empty kernel cache: {:>10.3?}",
        started.elapsed()
    );
}

fn main() {
    if std::env::args().any(|a| a == "--cold-child") {
        cold_child();
        return;
    }
    println!("warm medians on this machine:");
    dispatch();
    jacobians();
    grad_loop();
    cold_start();
}
