//! Deep graphs on a small stack: no graph walk recurses once per op.
//!
//! Each case runs on a thread with a 2 MiB stack (Rust's default for spawned threads), where
//! a walk that recursed once per op overflowed at a few thousand ops and aborted the whole
//! process (`grad` of a 4k-op chain, `vmap` of 20k ops, the lazy shape derivation). The
//! chains here are 25 to 250 times deeper; the values are checked against the closed forms
//! (computed in f64: `a^n x + b (a^n - 1) / (a - 1)` for `x -> a x + b`, and the fixed point
//! of `x -> sin x + 1/2`), within the stated relative tolerances.

use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::core::uop::{DType, Device, Op, UOp};
use tensor::prelude::*;

/// The stack of the threads the cases run on.
const SMALL_STACK: usize = 2 << 20;

/// `1.0001` as an `f32` (a scalar operand takes the tensor's dtype).
const A: f64 = 1.000_100_016_593_933;

/// Runs `f` on a thread with a 2 MiB stack, re-raising its panic.
fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let worker = std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn a test thread");
    match worker.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `x * 1.0001 + 0.5`, `steps` times (two ops a step).
fn affine_chain(x: &Tensor, steps: usize) -> Tensor {
    let mut y = x.clone();
    for _ in 0..steps {
        y = &y * 1.0001 + 0.5;
    }
    y
}

/// `sin(x) + 0.5`, `steps` times (two ops a step).
fn sin_chain(x: &Tensor, steps: usize) -> Tensor {
    let mut y = x.clone();
    for _ in 0..steps {
        y = y.sin() + 0.5;
    }
    y
}

/// Fails unless `got` equals `want` within `rtol` relative to each expected value.
#[track_caller]
fn assert_close(got: &[f32], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        let err = (*g as f64 - w).abs();
        assert!(
            err <= rtol * w.abs(),
            "{got:?} vs {want:?}: {g} is {err} from {w}"
        );
    }
}

#[test]
fn a_million_op_chain_derives_its_shape_and_drops_on_a_small_stack() {
    on_small_stack(|| {
        // Built on nodes directly: no shape is derived while building, so asking the last
        // node derives the whole chain's shapes at once (this recursed once per link).
        let x = UOp::new_buffer(6, DType::F32, Device::cpu()).reshape(&[2, 3]);
        let (a, b) = (
            UOp::constant(1.0001, DType::F32),
            UOp::constant(0.5, DType::F32),
        );
        let mut y = x;
        for _ in 0..500_000 {
            let scaled = UOp::alu(Op::Mul, vec![y, a.clone()]);
            y = UOp::alu(Op::Add, vec![scaled, b.clone()]);
        }
        assert_eq!(y.shape(), Some(&[2, 3][..]));
        assert_eq!(y.device(), Some(Device::cpu()));
        let unbounded = UOp::new_buffer(1, DType::F32, Device::cpu()).min_max();
        assert_eq!(y.min_max(), unbounded);
        let sums = Tensor::from_uop(y.reduce(tensor::core::ReduceOp::Add, &[1]));
        assert_eq!(sums.shape(), vec![2, 1]);
        drop(sums);
        drop(y);
        // The same through the tensor API.
        let t = affine_chain(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]), 500_000);
        assert_eq!(t.shape(), vec![3]);
    });
}

#[test]
fn a_100k_op_chain_realizes_jits_and_differentiates_on_a_small_stack() {
    let steps = 50_000;
    let (values, grads) = on_small_stack(move || {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
        let values = affine_chain(&x, steps).to_vec::<f32>().unwrap();
        let grad_fn = grad(move |x: &Tensor| affine_chain(x, steps).sum_all(), 0);
        let grads = grad_fn
            .call1(std::slice::from_ref(&x))
            .to_vec::<f32>()
            .unwrap();
        let jitted = jit(move |x: &Tensor| affine_chain(x, steps));
        let again = jitted.call(&[x]).remove(0).to_vec::<f32>().unwrap();
        assert_eq!(again, values, "jit computes the same kernels");
        (values, grads)
    });
    let an = A.powi(steps as i32);
    let want: Vec<f64> = [1.0, 2.0, 3.0]
        .iter()
        .map(|x0| an * x0 + 0.5 * (an - 1.0) / (A - 1.0))
        .collect();
    assert_close(&values, &want, 1e-4);
    assert_close(&grads, &[an; 3], 1e-4);
}

#[test]
fn vmap_of_a_100k_op_chain_gives_every_row_its_value_by_every_method() {
    let steps = 50_000;
    let an = A.powi(steps as i32);
    let want: Vec<f64> = (1..=6)
        .map(|x0| an * x0 as f64 + 0.5 * (an - 1.0) / (A - 1.0))
        .collect();
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let rows = on_small_stack(move || {
            let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
            let f = vmap_with(move |x: &Tensor| affine_chain(x, steps), 0, 0, method);
            f.call1(&[x]).to_vec::<f32>().unwrap()
        });
        assert_close(&rows, &want, 1e-4);
    }
}

#[test]
fn a_100k_op_chain_of_sines_differentiates_and_vmaps_on_a_small_stack() {
    on_small_stack(|| {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
        let deep = 50_000;
        let g =
            grad(move |x: &Tensor| sin_chain(x, deep).sum_all(), 0).call1(std::slice::from_ref(&x));
        assert_eq!(g.shape(), vec![3]);
        let (_, tangents) = jvp(
            move |x: &Tensor| sin_chain(x, deep),
            std::slice::from_ref(&x),
            &[Tensor::ones(&[3], DType::F32)],
        );
        assert_eq!(tangents[0].shape(), vec![3]);
        let rows = vmap(move |x: &Tensor| sin_chain(x, deep), 0, 0).call1(std::slice::from_ref(&x));
        assert_eq!(rows.shape(), vec![3]);
        // Values of a shorter chain (one kernel every dozen sines): every start reaches the
        // fixed point y = sin(y) + 0.5 = 1.4973004, where the derivative, a product of
        // cos(y) = 0.0734 per step, is far below the smallest f32.
        let steps = 600;
        let values = sin_chain(&x, steps).to_vec::<f32>().unwrap();
        assert_close(&values, &[1.497_300_389_095_892_5; 3], 1e-6);
        let g = grad(move |x: &Tensor| sin_chain(x, steps).sum_all(), 0).call1(&[x]);
        assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.0; 3]);
    });
}

/// The full size: a 1M-op chain traced, differentiated, vmapped and realized on a
/// 2 MiB stack. About 5 minutes and 3 GB at the test profile's opt-level 1, so not in every
/// run: `cargo test --release --test deep_graphs -- --ignored`.
#[test]
#[ignore = "minutes: run with --ignored"]
fn a_million_op_chain_realizes_differentiates_and_vmaps_on_a_small_stack() {
    let steps = 500_000;
    let (values, grads, rows) = on_small_stack(move || {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
        let chain = move |x: &Tensor| affine_chain(x, steps).sum_all();
        let values = affine_chain(&x, steps).to_vec::<f32>().unwrap();
        let grads = grad(chain, 0)
            .call1(std::slice::from_ref(&x))
            .to_vec::<f32>()
            .unwrap();
        let x2 = x.reshape(&[1, 3]);
        let rows = vmap(chain, 0, 0).call1(&[x2]).to_vec::<f32>().unwrap();
        (values, grads, rows)
    });
    let an = A.powi(steps as i32);
    let want: Vec<f64> = [1.0, 2.0, 3.0]
        .iter()
        .map(|x0| an * x0 + 0.5 * (an - 1.0) / (A - 1.0))
        .collect();
    assert_close(&values, &want, 1e-3);
    assert_close(&grads, &[an; 3], 1e-3);
    assert_close(&rows, &[want.iter().sum()], 1e-3);
}
