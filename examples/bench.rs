//! The workloads of issue #13, each next to references measured in the same run.
//!
//! References (a C program this example writes, builds with `cc -O3 -march=native -fopenmp`
//! and runs): the time of an OpenMP copy of 16M `f32` (64 MiB read, 64 MiB written), the same
//! two elementwise chains as plain OpenMP C loops, and the FMA peak (independent vector FMA
//! chains on every core, with 256-bit vectors and, where the CPU has AVX-512, 512-bit ones: the
//! peak is the faster). Then this crate's warm medians of: the two elementwise chains on
//! 16M `f32`, matmuls 1024² and 2048², and the per-sample gradients of a 784-128-10 MLP for a
//! batch of 256 (`vmap!(grad!(loss))`), the sum and the softmax of each row of a 4096x4096
//! `f32` matrix. When the peers' virtual environment of `../shared/bench/peers/` exists (or
//! `TENSOR_BENCH_PYTHON` names a Python with NumPy), NumPy's warm medians of the same matmuls
//! and reductions, measured in the same run, are printed next to ours.
//!
//! Run: `cargo run --release --example bench`

use std::process::Command;
use std::time::{Duration, Instant};
use tensor::prelude::*;
use tensor::runtime::realize::realize;

const LEN: usize = 16 * 1024 * 1024;
const BATCH: usize = 256;
const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;
const ROWS: usize = 4096;

/// The reference program: prints `name milliseconds` lines (warm medians of 9 runs) and
/// `fma_gflops_256 value` (and `fma_gflops_512 value` where the CPU has AVX-512).
const REFERENCE_C: &str = r#"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#define N (16L * 1024 * 1024)
#define REPS 9
typedef float v8 __attribute__((vector_size(32)));
static float *x, *y;
static void copy(void) {
  #pragma omp parallel for
  for (long i = 0; i < N; i++) y[i] = x[i];
}
static void chain_exp2(void) {
  #pragma omp parallel for
  for (long i = 0; i < N; i++) y[i] = sqrtf(exp2f(x[i] * 2.0f + 1.0f) * x[i]) * 0.5f;
}
static void chain_poly(void) {
  #pragma omp parallel for
  for (long i = 0; i < N; i++) y[i] = ((x[i] * 2.0f + 1.0f) * x[i] - 3.0f) * 0.5f + x[i];
}
typedef float v16 __attribute__((vector_size(64)));
/* Ten independent FMA chains of `lanes`-wide vectors on every core; prints GFLOP/s. */
#define FMA_CHAINS(V, lanes)                                                    \
  {                                                                            \
    volatile float one = 1.0f; /* opaque, so a * m stays a multiply */          \
    V a[10], m, c;                                                             \
    for (int l = 0; l < lanes; l++) m[l] = one;                                \
    c = m * 1e-7f;                                                             \
    for (int k = 0; k < 10; k++) a[k] = m * (float)k;                          \
    for (long i = 0; i < iters; i++)                                           \
      for (int k = 0; k < 10; k++) a[k] = a[k] * m + c;                        \
    for (int k = 0; k < 10; k++) sink += a[k][0];                              \
  }
static float fma_rate(const char* name, long iters, int lanes) {
  float sink = 0.0f;
  double start = omp_get_wtime();
  #pragma omp parallel reduction(+:sink)
  {
    if (lanes == 16) FMA_CHAINS(v16, 16) else FMA_CHAINS(v8, 8)
  }
  double seconds = omp_get_wtime() - start;
  printf("%s %.2f\n", name, 2.0 * lanes * 10 * iters * omp_get_max_threads() / seconds / 1e9);
  return sink;
}
static int cmp(const void* a, const void* b) {
  double p = *(const double*)a, q = *(const double*)b;
  return (p > q) - (p < q);
}
static void median(const char* name, void (*f)(void)) {
  double t[REPS];
  f();
  for (int r = 0; r < REPS; r++) {
    double start = omp_get_wtime();
    f();
    t[r] = omp_get_wtime() - start;
  }
  qsort(t, REPS, sizeof t[0], cmp);
  printf("%s %.4f\n", name, t[REPS / 2] * 1e3);
}
int main(void) {
  x = aligned_alloc(64, N * 4);
  y = aligned_alloc(64, N * 4);
  #pragma omp parallel for
  for (long i = 0; i < N; i++) { x[i] = (float)(i % 1000) / 1000.0f; y[i] = 0.0f; }
  median("copy", copy);
  median("chain_exp2", chain_exp2);
  median("chain_poly", chain_poly);
  long iters = 20000000;
  float sink = fma_rate("fma_gflops_256", iters, 8);
#ifdef __AVX512F__
  sink += fma_rate("fma_gflops_512", iters, 16);
#endif
  fprintf(stderr, "%g\n", sink + y[N / 2]);
  return 0;
}
"#;

/// The model's parameters: two dense layers.
#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

fn loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).relu();
    let logits = hidden.matmul(&p.w2) + &p.b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

/// The median of `reps` timed runs of `f`, after one untimed run (which compiles).
fn median(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[reps / 2]
}

/// Builds and runs the reference program; its `(name, value)` lines.
fn references() -> Result<Vec<(String, f64)>, Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tensor-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (source, program) = (dir.join("reference.c"), dir.join("reference"));
    std::fs::write(&source, REFERENCE_C)?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = Command::new(&cc)
        .args(["-O3", "-march=native", "-fopenmp", "-o"])
        .arg(&program)
        .arg(&source)
        .arg("-lm")
        .output()?;
    if !built.status.success() {
        return Err(format!(
            "building the C reference with `{cc} -fopenmp` failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        )
        .into());
    }
    let ran = Command::new(&program).output()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(String::from_utf8_lossy(&ran.stdout)
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect())
}

fn per_sample_grads() -> Duration {
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
        realize(&[t]).expect("the inputs realize");
    }
    let per_sample = vmap!(grad!(loss), in_axes = (None, 0, 0));
    median(9, || {
        let grads = tree_leaves(&per_sample(&params, &x, &y));
        realize(&grads.iter().collect::<Vec<_>>()).expect("the gradients realize");
    })
}

/// NumPy's side of the comparison: prints `name milliseconds` lines (warm medians), then
/// `numpy version` and `blas name` lines.
const NUMPY_PEER: &str = r#"
import time
import numpy as np
def med(f, reps):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3
rng = np.random.default_rng(0)
for n, reps in ((1024, 9), (2048, 3)):
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    out = np.empty((n, n), np.float32)
    print(f"matmul_{n}", med(lambda: np.matmul(a, b, out=out), reps))
x = rng.random((4096, 4096), dtype=np.float32)
print("sum_rows", med(lambda: x.sum(-1), 9))
def softmax():
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
print("softmax_rows", med(softmax, 9))
print("numpy", np.__version__)
try:
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    print("blas", blas.get("name", "?"), blas.get("version", "?"))
except Exception:
    print("blas unknown")
"#;

/// The Python that runs [`NUMPY_PEER`]: `TENSOR_BENCH_PYTHON`, else the peers' virtual
/// environment next to the repository; `Err` with the reason when there is none.
fn peer_python() -> Result<std::path::PathBuf, String> {
    if let Ok(python) = std::env::var("TENSOR_BENCH_PYTHON") {
        return Ok(python.into());
    }
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/bench/peers/.venv/bin/python");
    match venv.exists() {
        true => Ok(venv),
        false => Err(format!(
            "{} does not exist (set it up as ../shared/bench/peers/README.md says, or set \
             TENSOR_BENCH_PYTHON)",
            venv.display()
        )),
    }
}

/// NumPy's figures (`name -> milliseconds`) and its description, or why there are none.
fn numpy_peer() -> Result<(Vec<(String, f64)>, String), String> {
    let python = peer_python()?;
    let ran = Command::new(&python)
        .arg("-c")
        .arg(NUMPY_PEER)
        .output()
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    if !ran.status.success() {
        return Err(format!(
            "{} failed: {}",
            python.display(),
            String::from_utf8_lossy(&ran.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&ran.stdout).to_string();
    let mut figures = Vec::new();
    let mut about = Vec::new();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(' ') else {
            continue;
        };
        match value.parse() {
            Ok(v) => figures.push((name.to_string(), v)),
            Err(_) => about.push(line.to_string()),
        }
    }
    Ok((figures, about.join(", ")))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let refs = references()?;
    let reference = |name: &str| {
        refs.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or(f64::NAN)
    };
    let copy = reference("copy");
    let gbps = |millis: f64| (LEN * 4 * 2) as f64 / (millis * 1e-3) / 1e9;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("same-run references ({cores} cores, C built with -O3 -march=native -fopenmp):");
    println!(
        "  OpenMP copy, 16M f32:               {copy:>8.2} ms  {:>6.1} GB/s",
        gbps(copy)
    );
    let (fma256, fma512) = (reference("fma_gflops_256"), reference("fma_gflops_512"));
    let peak = if fma512.is_nan() {
        fma256
    } else {
        fma256.max(fma512)
    };
    println!(
        "  FMA peak (all cores, widest vectors): {peak:>6.1} GFLOP/s  (256-bit {fma256:.1}{})",
        if fma512.is_nan() {
            ", no AVX-512".to_string()
        } else {
            format!(", 512-bit {fma512:.1}")
        }
    );

    let numpy = numpy_peer();
    match &numpy {
        Ok((_, about)) => println!("  NumPy (same run, before ours): {about}"),
        Err(why) => println!("  NumPy: skipped: {why}"),
    }
    let peer = |name: &str| {
        numpy
            .as_ref()
            .ok()
            .and_then(|(f, _)| f.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
    };
    let versus = |name: &str, ours: f64| match peer(name) {
        Some(theirs) => format!(
            "  NumPy {theirs:.2} ms (ours / NumPy = {:.2}x)",
            ours / theirs
        ),
        None => String::new(),
    };

    let x = Tensor::rand(&[LEN], 1);
    x.realize()?;
    let exp2_chain = ms(median(9, || {
        let y = ((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5;
        y.realize().expect("the chain runs");
    }));
    let poly_chain = ms(median(9, || {
        let y = ((&x * 2.0 + 1.0) * &x - 3.0) * 0.5 + &x;
        y.realize().expect("the chain runs");
    }));
    println!("elementwise, 16M f32 (warm medians; x copy = time / OpenMP copy's time):");
    for (name, ours, c_loop) in [
        (
            "((x*2+1).exp2()*x).sqrt()*0.5",
            exp2_chain,
            reference("chain_exp2"),
        ),
        ("((x*2+1)*x-3)*0.5+x", poly_chain, reference("chain_poly")),
    ] {
        println!(
            "  {name:<31} {ours:>8.2} ms  {:>5.2}x copy  {:>6.1} GB/s   C loop {c_loop:.2} ms ({:.2}x copy)",
            ours / copy,
            gbps(ours),
            c_loop / copy,
        );
    }

    println!("matmul f32 (warm medians):");
    for (n, reps) in [(1024usize, 9), (2048, 3)] {
        let a = Tensor::rand(&[n, n], 2);
        let w = Tensor::rand(&[n, n], 3);
        realize(&[&a, &w])?;
        let t = ms(median(reps, || {
            a.matmul(&w).realize().expect("the matmul runs");
        }));
        let gflops = 2.0 * (n as f64).powi(3) / (t * 1e-3) / 1e9;
        println!(
            "  {n}x{n}:                          {t:>8.2} ms  {gflops:>6.1} GFLOP/s ({:.0}% of the FMA peak){}",
            100.0 * gflops / peak,
            versus(&format!("matmul_{n}"), t)
        );
    }

    println!("reductions over the rows of a {ROWS}x{ROWS} f32 matrix (warm medians):");
    let m = Tensor::rand(&[ROWS, ROWS], 4);
    m.realize()?;
    let sum = ms(median(9, || {
        m.sum(-1, false).realize().expect("the sum runs");
    }));
    let softmax = ms(median(9, || {
        m.softmax(-1).realize().expect("the softmax runs");
    }));
    let read = |millis: f64| (ROWS * ROWS * 4) as f64 / (millis * 1e-3) / 1e9;
    println!(
        "  x.sum(-1):                          {sum:>8.2} ms  {:>6.1} GB/s read{}",
        read(sum),
        versus("sum_rows", sum)
    );
    println!(
        "  x.softmax(-1):                      {softmax:>8.2} ms{}",
        versus("softmax_rows", softmax)
    );

    let grads = ms(per_sample_grads());
    println!(
        "per-sample grads, MLP {IN}-{HIDDEN}-{OUT}, B={BATCH}, vmap!(grad!(loss)): {grads:.2} ms (warm median)"
    );
    Ok(())
}
