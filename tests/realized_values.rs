//! A realized value stays realized: graphs that hold a lazy node computed before read its
//! buffer, slices of an expensive lazy value compute it once, a tree of tensors is realized in
//! one plan, and `DEBUG=1` reports a loop whose graph keeps growing. Work is counted
//! (process-wide counters), so the tests of this binary run one at a time.

use std::sync::{Mutex, MutexGuard};
use tensor::core::schedule::create_schedule;
use tensor::prelude::*;
use tensor::runtime::pipeline_counts;
use tensor::runtime::realize::{fresh_bytes, realize_tree};
use tensor::runtime::realized::kept_values;

/// Serializes the tests: the counters they read are process-wide.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A small two-layer model.
#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

fn loss(p: &Mlp, x: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).tanh();
    hidden.matmul(&p.w2).square().sum_all()
}

fn model(seed: u64) -> Mlp {
    let p = Mlp {
        w1: Tensor::randn(&[4, 8], seed),
        b1: Tensor::rand(&[8], seed + 1),
        w2: Tensor::randn(&[8, 3], seed + 2),
    };
    realize_tree(&p).unwrap();
    p
}

fn samples(n: usize, seed: u64) -> Tensor {
    let x = Tensor::rand(&[n, 4], seed);
    x.realize().unwrap();
    x
}

/// The per-sample gradients of `loss`, lazy.
fn per_sample_grads(p: &Mlp, x: &Tensor) -> Mlp {
    vmap!(grad!(loss), in_axes = (None, 0))(p, x)
}

fn floats(bytes: Vec<u8>) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The value of a lazy graph from a schedule built afresh: no plan cache, no kept values.
fn fresh(t: &Tensor) -> Vec<f32> {
    floats(fresh_bytes(&Tensor::from_uop(t.uop())).unwrap())
}

#[test]
fn two_slices_of_a_lazy_per_sample_gradient_run_the_backward_pass_once() {
    let _serial = serial();
    let (p, x) = (model(10), samples(5, 20));
    let g = per_sample_grads(&p, &x);
    let want = fresh(&g.w1);
    let before = pipeline_counts();
    let first: Vec<f32> = g.w1.narrow(0, 1, 1).to_vec().unwrap();
    let mid = pipeline_counts();
    let second: Vec<f32> = g.w1.narrow(0, 3, 1).to_vec().unwrap();
    let after = pipeline_counts();
    assert!(
        mid.kernels_generated - before.kernels_generated > 2,
        "the first slice runs the backward pass: {before:?} → {mid:?}"
    );
    assert!(
        after.schedules - mid.schedules <= 1
            && after.kernels_generated - mid.kernels_generated <= 1,
        "the second slice only copies: {mid:?} → {after:?}"
    );
    assert_eq!(first, want[32..64]);
    assert_eq!(second, want[96..128]);
    let whole: Vec<f32> = g.w1.to_vec().unwrap();
    assert_eq!(
        pipeline_counts().schedules,
        after.schedules,
        "the base is kept"
    );
    assert_eq!(whole, want);
}

#[test]
fn a_graph_built_before_a_realize_reads_the_realized_value() {
    let _serial = serial();
    let (p, x) = (model(30), samples(6, 40));
    let hidden = (x.matmul(&p.w1) + &p.b1).tanh();
    let later = &hidden * 2.0;
    // Built apart from `hidden` from the same operands: hash-consing makes it the same node.
    let twin = (x.matmul(&p.w1) + &p.b1).tanh();
    let want = fresh(&later);
    hidden.realize().unwrap();
    let schedules = pipeline_counts().schedules;
    assert_eq!(
        twin.to_vec::<f32>().unwrap(),
        hidden.to_vec::<f32>().unwrap()
    );
    assert_eq!(
        pipeline_counts().schedules,
        schedules,
        "the twin is read, not computed"
    );
    // The plan of `buffer * 2` over a buffer of the hidden layer's shape and dtype.
    (&Tensor::from_vec(vec![0.0f32; 48], &[6, 8]) * 2.0)
        .realize()
        .unwrap();
    let before = pipeline_counts();
    let got: Vec<f32> = later.to_vec().unwrap();
    let after = pipeline_counts();
    assert_eq!(after.schedules, before.schedules, "{before:?} → {after:?}");
    assert_eq!(
        after.plan_hits,
        before.plan_hits + 1,
        "read as `buffer * 2`"
    );
    assert_eq!(got, want);
}

#[test]
fn the_same_graph_over_other_buffers_is_another_value() {
    let _serial = serial();
    let p = model(130);
    let (x1, x2) = (samples(4, 140), samples(4, 150));
    let (g1, g2) = (per_sample_grads(&p, &x1), per_sample_grads(&p, &x2));
    let (want1, want2) = (fresh(&g1.w2), fresh(&g2.w2));
    let first: Vec<f32> = g1.w2.narrow(0, 0, 1).to_vec().unwrap();
    let other: Vec<f32> = g2.w2.narrow(0, 0, 1).to_vec().unwrap();
    assert_eq!(first, want1[..24]);
    assert_eq!(other, want2[..24]);
    assert_ne!(first, other);
}

#[test]
fn a_slice_of_a_temporary_stays_fused_and_keeps_nothing() {
    let _serial = serial();
    let (p, x) = (model(50), samples(7, 60));
    let kept = kept_values();
    let slice = x.matmul(&p.w1).tanh().narrow(0, 2, 1);
    let fused = create_schedule(&[slice.uop()]).items.len();
    let before = pipeline_counts();
    let row: Vec<f32> = slice.to_vec().unwrap();
    let after = pipeline_counts();
    assert_eq!(
        after.kernels_generated - before.kernels_generated,
        fused as u64,
        "the kernels of the slice alone"
    );
    assert_eq!(kept_values(), kept);
    let want = fresh(&x.matmul(&p.w1).tanh());
    assert_eq!(row, want[16..24]);
}

#[test]
fn kept_values_die_with_the_graphs_that_hold_them() {
    let _serial = serial();
    let (p, x) = (model(70), samples(3, 80));
    let kept = kept_values();
    let g = per_sample_grads(&p, &x);
    let slice = g.w2.narrow(0, 0, 1);
    slice.to_vec::<f32>().unwrap();
    assert!(kept_values() > kept, "the slice's base is kept");
    drop((g, slice));
    assert_eq!(kept_values(), kept, "and dropped with its graph");
}

#[test]
fn realize_tree_computes_every_leaf_in_one_schedule() {
    let _serial = serial();
    let (p, x) = (model(90), samples(4, 100));
    let g = grad!(|p: &Mlp, x: &Tensor| loss(p, x))(&p, &x);
    let stepped = tree_sub(&p, &tree_scale(&g, 0.125));
    let want: Vec<Vec<f32>> = tree_leaves(&stepped).iter().map(fresh).collect();
    let before = pipeline_counts().plans_made();
    realize_tree(&stepped).unwrap();
    assert_eq!(pipeline_counts().plans_made(), before + 1);
    let got: Vec<Vec<f32>> = tree_leaves(&stepped)
        .iter()
        .map(|t| t.to_vec().unwrap())
        .collect();
    assert_eq!(
        pipeline_counts().plans_made(),
        before + 1,
        "every leaf was computed"
    );
    // One schedule for all leaves fuses otherwise than one per leaf: the last bit may differ.
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

/// Set in the child processes of the growing-loop tests: the loop to run.
const LOOP_CHILD: &str = "REALIZED_VALUES_LOOP_CHILD";

/// Eight SGD steps on a linear model, reading the loss and the gradient's norm each step (both
/// recompute part of the step's graph); the parameters are realized each step when
/// `realize_each_step`.
fn sgd_loop(realize_each_step: bool) {
    let x = samples(8, 110);
    let y = Tensor::rand(&[8], 120);
    let sq = |w: &Tensor, x: &Tensor, y: &Tensor| (x.matmul(w) - y).square().mean(None, false);
    let mut w = Tensor::zeros(&[4], DType::F32);
    for _ in 0..8 {
        let g = grad!(sq)(&w, &x, &y);
        w = &w - &(&g * 0.1);
        if realize_each_step {
            w.realize().unwrap();
        }
        sq(&w, &x, &y).to_vec::<f32>().unwrap();
        g.square().sum_all().to_vec::<f32>().unwrap();
    }
}

/// Runs the test `name` of this binary in a child with `DEBUG=1`, and gives its stderr.
fn child_stderr(name: &str) -> String {
    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", name, "--nocapture"])
        .env(LOOP_CHILD, "1")
        .env("DEBUG", "1")
        .output()
        .expect("runs the test binary");
    let stderr = String::from_utf8_lossy(&child.stderr).into_owned();
    assert!(child.status.success(), "child failed:\n{stderr}");
    assert!(stderr.contains("realize: "), "DEBUG=1 is on:\n{stderr}");
    stderr
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("warning: this realize recomputes"))
        .collect()
}

#[test]
fn a_loop_that_never_realizes_its_parameters_warns_once_under_debug() {
    if std::env::var_os(LOOP_CHILD).is_some() {
        return sgd_loop(false);
    }
    let stderr = child_stderr("a_loop_that_never_realizes_its_parameters_warns_once_under_debug");
    let found = warnings(&stderr);
    assert_eq!(found.len(), 1, "{stderr}");
    assert!(
        found[0].contains("realize_tree(&params)") && found[0].contains("jit!"),
        "{}",
        found[0]
    );
}

#[test]
fn a_loop_that_realizes_its_parameters_does_not_warn() {
    if std::env::var_os(LOOP_CHILD).is_some() {
        return sgd_loop(true);
    }
    let stderr = child_stderr("a_loop_that_realizes_its_parameters_does_not_warn");
    assert_eq!(warnings(&stderr), Vec::<&str>::new(), "{stderr}");
}
