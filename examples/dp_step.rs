//! The cost of privacy (issue #41): one DP-SGD step against one non-private step of the same
//! model, and against PyTorch's DP-SGD peers, in the same run on this machine.
//!
//! For the per-sample-gradients tutorial CNN at B = 64 and the one-block transformer at B = 32
//! (the models of `per_sample_grads_cnn` and `per_sample_grads_transformer`), it times, as warm
//! medians:
//!
//! - our non-private step: the gradient of the mean loss over the batch, realized;
//! - our DP step: [`tensor::dp::clipped_grad`] then [`tensor::dp::noisy_mean`] with a fresh seed
//!   each step, realized (the goal: at most 1.10× the non-private step);
//! - the peers of `benches/peers/dp_step.py`: Opacus with ghost clipping and with its default
//!   hooks, and torch.func `vmap(grad)` with clipping and noise (the goal: at most 0.5× the
//!   fastest).
//!
//! Each of our steps also says how much of its time went to building its graph (tracing and
//! transforms) before any kernel ran. It prints the largest CPU buffer the DP calls allocated
//! next to the `B × P × 4` bytes that storing the per-sample gradients would take, the CPU it
//! ran on, the load average, and the share of the CPUs other processes used while each figure
//! was timed (they slow every figure).
//!
//! Run: `cargo run --release --example dp_step [cnn|transformer] [--no-peers]`. The peers run
//! with `TENSOR_BENCH_PYTHON` (else `python3`), which needs torch and opacus.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tensor::nn::{self, Attention, ClassLoss, Conv, Gelu, Pool, Target};
use tensor::prelude::*;
use tensor::runtime::CpuDevice;
use tensor::runtime::realize::{realize, synchronize};
use tensor::typed::{self, Argnum};

/// The clipping norm C and the noise multiplier σ of every DP step (the peers use the same).
const CLIP: f64 = 1.0;
const SIGMA: f64 = 1.0;
/// Calls timed per step kind; the first compiles and is left out of the median.
const CALLS: usize = 11;

/// A layer's weight and bias.
#[derive(Clone, Tree)]
struct Layer {
    w: Tensor,
    b: Tensor,
}

/// The tutorial CNN: conv 1→32 3×3, conv 32→64 3×3, max-pool 2, linear 9216→128, 128→10.
#[derive(Clone, Tree)]
struct Cnn {
    conv1: Layer,
    conv2: Layer,
    fc1: Layer,
    fc2: Layer,
}

/// The CNN's logits `[N, 10]` of images `x` `[N, 1, 28, 28]`.
fn cnn_logits(p: &Cnn, x: &Tensor) -> Tensor {
    let h = nn::conv2d(x, &p.conv1.w, Some(&p.conv1.b), &Conv::default()).relu();
    let h = nn::conv2d(&h, &p.conv2.w, Some(&p.conv2.b), &Conv::default()).relu();
    let h = nn::max_pool2d(&h, &Pool::new(2)).flatten(1, -1);
    let h = nn::linear(&h, &p.fc1.w, Some(&p.fc1.b)).relu();
    nn::linear(&h, &p.fc2.w, Some(&p.fc2.b))
}

/// The mean cross-entropy of a batch: the non-private step's loss.
fn cnn_batch_loss(p: &Cnn, x: &Tensor, y: &Tensor) -> Tensor {
    nn::cross_entropy(&cnn_logits(p, x), Target::Indices(y), &ClassLoss::default())
}

/// The loss of one sample `(x [1, 28, 28], y 0-d)`: what the DP step clips.
fn cnn_sample_loss(p: &Cnn, s: &(Tensor, Tensor)) -> Tensor {
    cnn_batch_loss(p, &s.0.unsqueeze(0), &s.1.reshape(&[1]))
}

fn cnn_params() -> Cnn {
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

const VOCAB: usize = 1000;
const SEQ: usize = 32;
const DIM: usize = 64;
const HEADS: usize = 4;
const HIDDEN: usize = 256;
const CLASSES: usize = 10;

/// The pre-LN transformer block of `per_sample_grads_transformer`, weights `[out, in]`.
#[derive(Clone, Tree)]
struct Block {
    tok_emb: Tensor,
    pos_emb: Tensor,
    ln1: Layer,
    qkv: Layer,
    o: Layer,
    ln2: Layer,
    fc1: Layer,
    fc2: Layer,
    lnf: Layer,
    head: Layer,
}

/// The logits `[C]` of one sequence of token ids `t` `[S]`.
fn block_logits(p: &Block, t: &Tensor) -> Tensor {
    let ln = |x: &Tensor, l: &Layer| nn::layer_norm(x, &[DIM], Some(&l.w), Some(&l.b), 1e-5);
    let dense = |x: &Tensor, l: &Layer| nn::linear(x, &l.w, Some(&l.b));
    let heads = |x: &Tensor| x.reshape(&[SEQ, HEADS, DIM / HEADS]).transpose(0, 1);
    let x = nn::embedding(t, &p.tok_emb) + &p.pos_emb;
    let qkv = dense(&ln(&x, &p.ln1), &p.qkv);
    let [q, k, v] = [0, 1, 2].map(|i| heads(&qkv.narrow(1, (i * DIM) as isize, DIM)));
    let a = nn::scaled_dot_product_attention(&q, &k, &v, &Attention::default());
    let x = &x + dense(&a.transpose(0, 1).reshape(&[SEQ, DIM]), &p.o);
    let h = nn::gelu(&dense(&ln(&x, &p.ln2), &p.fc1), Gelu::Exact);
    let x = &x + dense(&h, &p.fc2);
    dense(&ln(&x, &p.lnf).mean(0, false), &p.head)
}

/// The mean cross-entropy of a batch `t` `[B, S]`, `y` `[B]`: the non-private step's loss.
fn block_batch_loss(p: &Block, t: &Tensor, y: &Tensor) -> Tensor {
    let z = typed::vmap(block_logits, (None, 0), 0)(p, t);
    nn::cross_entropy(&z, Target::Indices(y), &ClassLoss::default())
}

/// The loss of one sample `(t [S], y 0-d)`: what the DP step clips.
fn block_sample_loss(p: &Block, s: &(Tensor, Tensor)) -> Tensor {
    let z = block_logits(p, &s.0).unsqueeze(0);
    nn::cross_entropy(
        &z,
        Target::Indices(&s.1.reshape(&[1])),
        &ClassLoss::default(),
    )
}

fn block_params() -> Block {
    let mut seed = 0;
    let mut normal = |shape: &[usize], scale: f64| {
        seed += 1;
        Tensor::randn(shape, seed) * scale
    };
    let mut dense = |out: usize, inp: usize| Layer {
        w: normal(&[out, inp], 1.0 / (inp as f64).sqrt()),
        b: normal(&[out], 0.05),
    };
    let (qkv, o) = (dense(3 * DIM, DIM), dense(DIM, DIM));
    let (fc1, fc2, head) = (dense(HIDDEN, DIM), dense(DIM, HIDDEN), dense(CLASSES, DIM));
    let mut norm = || Layer {
        w: normal(&[DIM], 0.1) + 1.0,
        b: normal(&[DIM], 0.05),
    };
    let (ln1, ln2, lnf) = (norm(), norm(), norm());
    Block {
        tok_emb: normal(&[VOCAB, DIM], 0.5),
        pos_emb: normal(&[SEQ, DIM], 0.5),
        ln1,
        qkv,
        o,
        ln2,
        fc1,
        fc2,
        lnf,
        head,
    }
}

/// A pseudo-random batch of `b` integer rows of `width` ids below `below` (none: one id per row).
fn ids(b: usize, width: Option<usize>, below: usize, mut state: u64) -> Tensor {
    let n = b * width.unwrap_or(1);
    let v: Vec<i64> = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % below as u64) as i64
        })
        .collect();
    match width {
        Some(w) => Tensor::from_vec(v, &[b, w]),
        None => Tensor::from_vec(v, &[b]),
    }
}

type Err = Box<dyn std::error::Error>;

/// Computes every leaf of `t` in one schedule and waits for it.
fn realize_tree(t: &impl Tree) -> Result<(), Err> {
    let leaves = tree_leaves(t);
    realize(&leaves.iter().collect::<Vec<_>>())?;
    synchronize()?;
    Ok(())
}

/// Warm medians in milliseconds of `CALLS - 1` calls (after one that compiles) of `step`
/// built by `build` and realized: the whole step, and building its graph alone (tracing and
/// transforms, before any kernel runs).
fn warm_medians<P: Tree>(build: impl Fn(u64) -> P) -> Result<(f64, f64), Err> {
    let (mut total, mut graph) = (Vec::new(), Vec::new());
    for call in 0..CALLS as u64 {
        let started = Instant::now();
        let out = build(call);
        graph.push(started.elapsed());
        realize_tree(&out)?;
        total.push(started.elapsed());
    }
    Ok((median_ms(total), median_ms(graph)))
}

/// CPU time in clock ticks: every CPU's busy time (/proc/stat) and this process's own
/// (/proc/self/stat), so that `others_busy` can tell how much other processes took.
fn cpu_ticks() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let all: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = all.iter().take(8).sum();
    let idle = all.get(3)? + all.get(4)?;
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = own.rsplit_once(')')?.1.split_whitespace().collect();
    let ours = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((total, total - idle, ours))
}

/// The share of all CPUs that other processes used since `before` (a [`cpu_ticks`] reading).
fn others_busy(before: Option<(u64, u64, u64)>) -> String {
    match (before, cpu_ticks()) {
        (Some((t0, b0, o0)), Some((t1, b1, o1))) if t1 > t0 => {
            let others = (b1 - b0).saturating_sub(o1 - o0) as f64 / (t1 - t0) as f64;
            format!("{:.0}%", 100.0 * others)
        }
        _ => "unknown".into(),
    }
}

/// The median of `times` without the first (compiling) call.
fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.remove(0);
    times.sort();
    ms(times[times.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One model's measurements: our two steps, the DP step's buffers, the peers.
struct Report {
    name: String,
    batch: usize,
    params: usize,
    nonprivate_ms: f64,
    nonprivate_graph_ms: f64,
    dp_ms: f64,
    dp_graph_ms: f64,
    largest_buffer: usize,
    /// Bytes live before the DP calls, and the most live during them.
    live_before: usize,
    peak_bytes: usize,
    /// The share of the CPUs other processes used while our steps were timed.
    others_busy: String,
}

/// Times both of our steps of a model and measures the DP step's buffers.
fn measure<P: Tree + Clone + Send + Sync + 'static>(
    name: &str,
    params: &P,
    data: (Tensor, Tensor),
    batch_loss: impl Fn(&P, &Tensor, &Tensor) -> Tensor + Send + Sync + 'static,
    sample_loss: impl Fn(&P, &(Tensor, Tensor)) -> Tensor + Copy + Send + Sync + 'static,
) -> Result<Report, Err> {
    realize_tree(params)?;
    realize_tree(&data)?;
    let batch = data.0.shape()[0];
    let grad_of = typed::grad(batch_loss, Argnum::<0>);
    let ticks = cpu_ticks();
    let (nonprivate_ms, nonprivate_graph_ms) = warm_medians(|_| grad_of(params, &data.0, &data.1))?;
    let dp_step = |seed: u64| -> P {
        let sums = tensor::dp::clipped_grad(sample_loss, params, &data, CLIP);
        tensor::dp::noisy_mean(&sums, SIGMA, CLIP, batch, seed)
    };
    // The high-water marks over every DP call, the first (which builds the plan) included.
    let device = CpuDevice::shared()?;
    let live = device.live_buffers();
    live.reset_peaks();
    let live_before = live.bytes();
    let (dp_ms, dp_graph_ms) = warm_medians(|seed| dp_step(1000 + seed))?;
    Ok(Report {
        name: name.to_string(),
        batch,
        params: tree_leaves(params).iter().map(|t| t.numel()).sum(),
        nonprivate_ms,
        nonprivate_graph_ms,
        dp_ms,
        dp_graph_ms,
        largest_buffer: live.largest_buffer(),
        live_before,
        peak_bytes: live.peak_bytes(),
        others_busy: others_busy(ticks),
    })
}

/// One peer's result: its warm median in ms and how it was measured, or why it has none.
type Peer = (String, Result<(f64, String), String>);

/// Runs `benches/peers/dp_step.py` for a model; `Err` when there is no Python with torch.
fn peers(model: &str, batch: usize) -> Result<Vec<Peer>, String> {
    let python = std::env::var("TENSOR_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/dp_step.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(["--model", model, "--batch", &batch.to_string()])
        // glibc's huge pages for torch's large allocations: the peers at their fastest.
        .env("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
        .output()
        .map_err(|e| format!("could not run {python}: {e} (set TENSOR_BENCH_PYTHON)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let found: Vec<Peer> = text
        .lines()
        .filter_map(|l| l.strip_prefix("PEER "))
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            let result = match rest.strip_prefix("ERROR ") {
                Some(why) => Err(why.to_string()),
                None => {
                    let (ms, about) = rest.split_once(' ')?;
                    let about = about.split_once(':').map_or(about, |(a, _)| a);
                    ms.parse()
                        .map(|ms| (ms, about.to_string()))
                        .map_err(|_| format!("unreadable: {rest}"))
                }
            };
            Some((name.to_string(), result))
        })
        .collect();
    if found.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("no output");
        return Err(format!("{python} {}: {last}", script.display()));
    }
    if let Some(info) = text.lines().find_map(|l| l.strip_prefix("INFO ")) {
        println!("  peers: {info}, GLIBC_TUNABLES=glibc.malloc.hugetlb=1");
    }
    Ok(found)
}

fn print_report(r: &Report, peers: &Result<Vec<Peer>, String>) {
    let per_sample = r.batch * r.params * 4;
    println!(
        "  ours non-private (grad of the mean loss)     {:>9.2} ms   of which building the graph \
         {:.2} ms",
        r.nonprivate_ms, r.nonprivate_graph_ms
    );
    println!(
        "  ours DP (clipped_grad + noisy_mean)          {:>9.2} ms   of which building the graph \
         {:.2} ms",
        r.dp_ms, r.dp_graph_ms
    );
    println!(
        "  DP / non-private = {:.2}x (goal <= 1.10x); other processes used {} of the CPUs meanwhile",
        r.dp_ms / r.nonprivate_ms,
        r.others_busy
    );
    println!(
        "  DP step memory (all DP calls): largest buffer {:.2} MB; live {:.2} MB before, {:.2} MB \
         at most; B x P x 4 = {} x {} x 4 = {:.2} MB",
        r.largest_buffer as f64 / 1e6,
        r.live_before as f64 / 1e6,
        r.peak_bytes as f64 / 1e6,
        r.batch,
        r.params,
        per_sample as f64 / 1e6
    );
    let peers = match peers {
        Ok(p) => p,
        Err(why) => return println!("  peers: not run: {why}"),
    };
    let mut fastest: Option<(&str, f64)> = None;
    for (name, result) in peers {
        match result {
            Ok((t, about)) => {
                println!(
                    "  peer {name:<17} {t:>9.2} ms   ours DP / this {:.2}x   ({about})",
                    r.dp_ms / t
                );
                if name != "torch_nonprivate" && fastest.is_none_or(|(_, f)| *t < f) {
                    fastest = Some((name, *t));
                }
            }
            Err(why) => println!("  peer {name:<17} could not run: {why}"),
        }
    }
    if let Some((name, t)) = fastest {
        println!(
            "  ours DP / fastest DP peer ({name}) = {:.2}x (goal <= 0.5x)",
            r.dp_ms / t
        );
    }
}

/// The CPU's model name from /proc/cpuinfo.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn main() -> Result<(), Err> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let with_peers = !args.iter().any(|a| a == "--no-peers");
    let wanted =
        |m: &str| !args.iter().any(|a| !a.starts_with("--")) || args.iter().any(|a| a == m);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("DP-SGD step vs non-private step and peers (float32, C = {CLIP}, sigma = {SIGMA})");
    println!("CPU: {} ({cores} cores available)", cpu_model());
    println!("load average before: {}", load_average());
    if wanted("cnn") {
        let data = (
            Tensor::rand(&[64, 1, 28, 28], 5),
            ids(64, None, CLASSES, 11),
        );
        let r = measure(
            "tutorial CNN",
            &cnn_params(),
            data,
            cnn_batch_loss,
            cnn_sample_loss,
        )?;
        println!("{} (B = {}, P = {})", r.name, r.batch, r.params);
        let p = if with_peers {
            peers("cnn", r.batch)
        } else {
            Err("--no-peers".into())
        };
        print_report(&r, &p);
    }
    if wanted("transformer") {
        let data = (ids(32, Some(SEQ), VOCAB, 3), ids(32, None, CLASSES, 7));
        let r = measure(
            "transformer block",
            &block_params(),
            data,
            block_batch_loss,
            block_sample_loss,
        )?;
        println!("{} (B = {}, P = {})", r.name, r.batch, r.params);
        let p = if with_peers {
            peers("transformer", r.batch)
        } else {
            Err("--no-peers".into())
        };
        print_report(&r, &p);
    }
    println!("load average after: {}", load_average());
    Ok(())
}

/// /proc/loadavg's 1, 5 and 15 minute figures: other processes slow every time above.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |s| s.split(' ').take(3).collect::<Vec<_>>().join(" "),
    )
}
