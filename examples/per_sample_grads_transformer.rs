//! Per-sample gradients of one pre-LN transformer block for sequence classification, written
//! with `tensor::nn` as a user would, the parameters a `#[derive(Tree)]` struct: token
//! embedding 1000×64 plus learned positions (sequence 32), multi-head self-attention (4 heads of
//! 16, fused qkv projection), layer norms, an MLP 64→256→64 with exact GELU, residuals, a final
//! layer norm, mean-pool over the sequence, a linear 64→10 head and cross-entropy. The model and
//! its sizes are those of `../shared/bench/peers/per_sample_grads_transformer.py`, so the times
//! compare with JAX's and torch's (its attention has no mask; `--causal` adds a causal one).
//!
//! Prints the gradient shapes, the warm median of `vmap!(grad!(loss))` for B = 32 (or the batch
//! sizes given) and the largest difference against a loop of single-sample `grad!` calls.
//!
//! Run: `cargo run --release --example per_sample_grads_transformer [--causal] [B ...]`

use std::time::{Duration, Instant};
use tensor::nn::{self, Attention, ClassLoss, Gelu, Target};
use tensor::prelude::*;
use tensor::runtime::realize::{realize, synchronize, to_vec};

const VOCAB: usize = 1000;
const SEQ: usize = 32;
const DIM: usize = 64;
const HEADS: usize = 4;
const HIDDEN: usize = 256;
const CLASSES: usize = 10;
const EPS: f64 = 1e-5;

/// The block's parameters, linear weights in torch's `[out, in]` layout.
#[derive(Clone, Tree)]
struct Block {
    tok_emb: Tensor,
    pos_emb: Tensor,
    ln1_g: Tensor,
    ln1_b: Tensor,
    w_qkv: Tensor,
    b_qkv: Tensor,
    w_o: Tensor,
    b_o: Tensor,
    ln2_g: Tensor,
    ln2_b: Tensor,
    w_fc1: Tensor,
    b_fc1: Tensor,
    w_fc2: Tensor,
    b_fc2: Tensor,
    lnf_g: Tensor,
    lnf_b: Tensor,
    w_head: Tensor,
    b_head: Tensor,
}

/// `[S, D]` to `[H, S, D / H]`.
fn split_heads(x: &Tensor) -> Tensor {
    x.reshape(&[SEQ, HEADS, DIM / HEADS]).transpose(0, 1)
}

/// Multi-head self-attention of `u` `[S, D]`: one projection to queries, keys and values, then
/// scaled dot-product attention per head, heads concatenated and projected.
fn attention(p: &Block, u: &Tensor, causal: bool) -> Tensor {
    let qkv = nn::linear(u, &p.w_qkv, Some(&p.b_qkv));
    let [q, k, v] = [0, 1, 2].map(|i| split_heads(&qkv.narrow(1, (i * DIM) as isize, DIM)));
    let opts = Attention {
        causal,
        ..Attention::default()
    };
    let heads = nn::scaled_dot_product_attention(&q, &k, &v, &opts);
    let merged = heads.transpose(0, 1).reshape(&[SEQ, DIM]);
    nn::linear(&merged, &p.w_o, Some(&p.b_o))
}

/// The logits `[C]` of one sequence of token ids `t` `[S]`.
fn logits(p: &Block, t: &Tensor, causal: bool) -> Tensor {
    let ln = |x: &Tensor, g: &Tensor, b: &Tensor| nn::layer_norm(x, &[DIM], Some(g), Some(b), EPS);
    let x = nn::embedding(t, &p.tok_emb) + &p.pos_emb;
    let x = &x + attention(p, &ln(&x, &p.ln1_g, &p.ln1_b), causal);
    let h = nn::linear(&ln(&x, &p.ln2_g, &p.ln2_b), &p.w_fc1, Some(&p.b_fc1));
    let x = &x + nn::linear(&nn::gelu(&h, Gelu::Exact), &p.w_fc2, Some(&p.b_fc2));
    let pooled = ln(&x, &p.lnf_g, &p.lnf_b).mean(0, false);
    nn::linear(&pooled, &p.w_head, Some(&p.b_head))
}

/// The cross-entropy of one sample: tokens `t` `[S]`, label `y` (0-d).
fn loss(p: &Block, t: &Tensor, y: &Tensor, causal: bool) -> Tensor {
    let z = logits(p, t, causal).unsqueeze(0);
    nn::cross_entropy(&z, Target::Indices(&y.reshape(&[1])), &ClassLoss::default())
}

fn loss_plain(p: &Block, t: &Tensor, y: &Tensor) -> Tensor {
    loss(p, t, y, false)
}

fn loss_causal(p: &Block, t: &Tensor, y: &Tensor) -> Tensor {
    loss(p, t, y, true)
}

/// Parameters drawn as the peer script draws them (gains near 1, small biases, embeddings with
/// standard deviation 0.5, weights scaled by `1 / sqrt(fan_in)`), from this crate's generator.
fn init_params() -> Block {
    let mut seed = 0;
    let mut normal = |shape: &[usize], scale: f64| {
        seed += 1;
        Tensor::randn(shape, seed) * scale
    };
    let mut weight = |out: usize, inp: usize| normal(&[out, inp], 1.0 / (inp as f64).sqrt());
    let w_qkv = weight(3 * DIM, DIM);
    let w_o = weight(DIM, DIM);
    let w_fc1 = weight(HIDDEN, DIM);
    let w_fc2 = weight(DIM, HIDDEN);
    let w_head = weight(CLASSES, DIM);
    let mut normal = |shape: &[usize], scale: f64| {
        seed += 1;
        Tensor::randn(shape, 100 + seed) * scale
    };
    let mut gain = || normal(&[DIM], 0.1) + 1.0;
    let (ln1_g, ln2_g, lnf_g) = (gain(), gain(), gain());
    Block {
        tok_emb: normal(&[VOCAB, DIM], 0.5),
        pos_emb: normal(&[SEQ, DIM], 0.5),
        ln1_g,
        ln1_b: normal(&[DIM], 0.05),
        w_qkv,
        b_qkv: normal(&[3 * DIM], 0.05),
        w_o,
        b_o: normal(&[DIM], 0.05),
        ln2_g,
        ln2_b: normal(&[DIM], 0.05),
        w_fc1,
        b_fc1: normal(&[HIDDEN], 0.05),
        w_fc2,
        b_fc2: normal(&[DIM], 0.05),
        lnf_g,
        lnf_b: normal(&[DIM], 0.05),
        w_head,
        b_head: normal(&[CLASSES], 0.05),
    }
}

/// `b` sequences of token ids `[b, S]` (each repeating its first token, so the embedding
/// gradient must add two rows' cotangents) and labels `[b]`.
fn batch(b: usize) -> (Tensor, Tensor) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as i64
    };
    let mut tokens = Vec::with_capacity(b * SEQ);
    for _ in 0..b {
        let first = next(VOCAB);
        tokens.extend([first, first]);
        tokens.extend((2..SEQ).map(|_| next(VOCAB)));
    }
    let labels = (0..b).map(|_| next(CLASSES)).collect();
    (
        Tensor::from_vec(tokens, &[b, SEQ]),
        Tensor::from_vec(labels, &[b]),
    )
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

type PerSample = Box<dyn Fn(&Block, &Tensor, &Tensor) -> Block + Send + Sync>;
type Single = Box<dyn Fn(&Block, &Tensor, &Tensor) -> Block + Send + Sync>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut causal = false;
    let mut sizes = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--causal" => causal = true,
            b => sizes.push(b.parse::<usize>()?),
        }
    }
    if sizes.is_empty() {
        sizes.push(32);
    }
    let params = init_params();
    realize(&tree_leaves(&params).iter().collect::<Vec<_>>())?;
    let (per_sample, single): (PerSample, Single) = if causal {
        (
            vmap!(grad!(loss_causal), in_axes = (None, 0, 0)),
            grad!(loss_causal),
        )
    } else {
        (
            vmap!(grad!(loss_plain), in_axes = (None, 0, 0)),
            grad!(loss_plain),
        )
    };
    let mask = if causal { "causal" } else { "no" };
    println!(
        "per-sample gradients of a pre-LN transformer block (tensor::nn): vocab {VOCAB}, seq {SEQ}, \
         dim {DIM}, {HEADS} heads ({mask} mask), MLP {HIDDEN} (exact GELU), {CLASSES} classes, \
         {} parameters",
        tree_leaves(&params)
            .iter()
            .map(|t| t.numel())
            .sum::<usize>()
    );
    // A debug build runs the kernels unoptimized: fewer calls and fewer samples to check.
    let (calls, checked) = if cfg!(debug_assertions) {
        (3, 2)
    } else {
        (21, 8)
    };
    for &b in &sizes {
        let (t, y) = batch(b);
        realize(&[&t, &y])?;
        let mut times = Vec::new();
        let mut grads = Vec::new();
        for _ in 0..calls {
            let started = Instant::now();
            grads = tree_leaves(&per_sample(&params, &t, &y));
            realize(&grads.iter().collect::<Vec<_>>())?;
            synchronize()?; // a GPU's realize returns once its kernels are queued
            times.push(started.elapsed());
        }
        let first = times.remove(0);
        println!(
            "  B = {b:>3}: shapes {:?}",
            grads.iter().map(|g| g.shape()).collect::<Vec<_>>()
        );
        println!(
            "           first call {first:.2?} (compiles), warm median of {} calls {:.2?}",
            times.len(),
            median(times)
        );
        let worst = against_single_samples(&single, &params, &t, &y, &grads, checked.min(b))?;
        println!(
            "           against single-sample grad! (samples 0..{}): largest difference {worst:.3e}",
            checked.min(b)
        );
        if worst > 1e-4 {
            return Err(
                format!("per-sample gradients differ from single-sample ones by {worst}").into(),
            );
        }
    }
    Ok(())
}

/// The largest difference (relative to the value where it exceeds 1) between the first `n`
/// samples' batched gradients and `grad` of each sample's loss alone. Each sample is copied into
/// a buffer of its own, so every iteration has the same graph and replays one plan.
fn against_single_samples(
    single: &Single,
    params: &Block,
    t: &Tensor,
    y: &Tensor,
    grads: &[Tensor],
    n: usize,
) -> Result<f32, Box<dyn std::error::Error>> {
    let (tokens, labels) = (to_vec::<i64>(t)?, to_vec::<i64>(y)?);
    let batched: Vec<Vec<f32>> = grads.iter().map(to_vec::<f32>).collect::<Result<_, _>>()?;
    let mut worst = 0.0f32;
    for i in 0..n {
        let ti = Tensor::from_slice(&tokens[i * SEQ..(i + 1) * SEQ], &[SEQ]);
        let yi = Tensor::from_vec(vec![labels[i]], &[]);
        let leaves = tree_leaves(&single(params, &ti, &yi));
        realize(&leaves.iter().collect::<Vec<_>>())?; // one schedule for all the gradients
        for (all, one) in batched.iter().zip(leaves) {
            let size = all.len() / t.shape()[0];
            let ours = &all[i * size..(i + 1) * size];
            for (a, b) in ours.iter().zip(to_vec::<f32>(&one)?) {
                worst = worst.max((a - b).abs() / b.abs().max(1.0));
            }
        }
    }
    Ok(worst)
}
