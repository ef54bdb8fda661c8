//! The warm path: a realize of a graph whose structure was run before replays its plan —
//! no scheduling, no codegen, no compiling — and gives the values a fresh schedule gives,
//! whatever data the new buffers hold. Work is counted (process-wide counters), so the tests
//! of this binary run one at a time.

mod common;

use common::random_graph::{Rng, data, random_shape, step};
use std::sync::{Mutex, MutexGuard};
use tensor::prelude::*;
use tensor::runtime::compiler_invocations;
use tensor::runtime::pipeline_counts;
use tensor::runtime::realize::fresh_bytes;

/// Serializes the tests: the counters they read are process-wide.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn floats(values: &[f32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()])
}

/// The values of `t` from a schedule built afresh (the cold path, no plan cache).
fn fresh_values(t: &Tensor) -> Vec<f32> {
    fresh_bytes(t)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn a_second_realize_of_the_same_structure_schedules_generates_and_compiles_nothing() {
    let _serial = serial();
    let graph = |x: &Tensor, w: &Tensor| ((x * 2.0 + 1.0).exp() * w).sum(0, false);
    let first = graph(&floats(&[1.0, 2.0, 3.0]), &floats(&[0.5, 0.25, 0.125]));
    first.realize().unwrap();
    let (before, compiles) = (pipeline_counts(), compiler_invocations());
    let second = graph(&floats(&[-1.0, 0.0, 1.0]), &floats(&[1.0, 1.0, 1.0]));
    let got: Vec<f32> = second.to_vec().unwrap();
    let after = pipeline_counts();
    assert_eq!(after.schedules, before.schedules, "no rangeify");
    assert_eq!(
        after.kernels_generated, before.kernels_generated,
        "no codegen"
    );
    assert_eq!(compiler_invocations(), compiles, "no compiles");
    assert_eq!(after.plan_hits, before.plan_hits + 1);
    let want: f32 = [-1.0f32, 0.0, 1.0]
        .iter()
        .map(|x| (x * 2.0 + 1.0).exp())
        .sum();
    assert!((got[0] - want).abs() <= 1e-5 * want, "{got:?} vs {want}");
}

#[test]
fn a_new_shape_builds_a_new_plan_and_a_new_value_binds_the_old_one() {
    let _serial = serial();
    let a = floats(&[1.0, 2.0]);
    (&a + 3.0).realize().unwrap();
    let before = pipeline_counts().plans_made();
    let b: Vec<f32> = (&floats(&[1.0, 2.0]) + 4.0).to_vec().unwrap();
    assert_eq!(b, vec![5.0, 6.0], "a changed value is never a stale result");
    assert_eq!(
        pipeline_counts().plans_made(),
        before,
        "a scalar the user passes is a value bound at run time (tensor::value)"
    );
    let c: Vec<f32> = (&floats(&[1.0, 2.0, 3.0]) + 4.0).to_vec().unwrap();
    assert_eq!(c, vec![5.0, 6.0, 7.0]);
    assert_eq!(pipeline_counts().plans_made(), before + 1);
}

#[test]
fn replays_equal_fresh_schedules_bit_for_bit() {
    let _serial = serial();
    for seed in 0..12u64 {
        let build = |data_seed: u64| {
            let mut shape_rng = Rng(seed);
            let shape = random_shape(&mut shape_rng);
            let mut rng = Rng(seed * 1000 + data_seed);
            let mut ops = Rng(seed);
            let mut x = data(&shape, &mut rng);
            for _ in 0..4 {
                x = step(x, &mut ops);
            }
            x
        };
        build(1).realize().unwrap();
        let replayed = build(2);
        let want = fresh_values(&build(2));
        let got: Vec<f32> = replayed.to_vec().unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "seed {seed}");
    }
}

#[test]
fn aliased_inputs_are_their_own_structure() {
    let _serial = serial();
    let (x, y) = (floats(&[1.0, 2.0]), floats(&[10.0, 20.0]));
    let same: Vec<f32> = (&x * &x).to_vec().unwrap();
    let other: Vec<f32> = (&x * &y).to_vec().unwrap();
    let again: Vec<f32> = (&y * &y).to_vec().unwrap();
    assert_eq!(same, vec![1.0, 4.0]);
    assert_eq!(other, vec![10.0, 40.0]);
    assert_eq!(again, vec![100.0, 400.0]);
}

#[test]
fn an_input_realized_in_between_is_read_as_it_is_now() {
    let _serial = serial();
    let x = floats(&[1.0, 2.0]);
    let lazy = &x + 1.0;
    let first: Vec<f32> = (&lazy * 2.0).to_vec().unwrap();
    lazy.realize().unwrap();
    let second: Vec<f32> = (&lazy * 2.0).to_vec().unwrap();
    assert_eq!(first, vec![4.0, 6.0]);
    assert_eq!(second, first);
    let other = floats(&[5.0, 6.0]) + 1.0;
    other.realize().unwrap();
    let third: Vec<f32> = (&other * 2.0).to_vec().unwrap();
    assert_eq!(
        third,
        vec![12.0, 14.0],
        "the replayed plan reads the new buffer"
    );
}

#[test]
fn replayed_outputs_are_fresh_buffers() {
    let _serial = serial();
    let x = floats(&[1.0, 2.0, 3.0]);
    let a = &x * 3.0;
    let b = &x * 3.0;
    a.realize().unwrap();
    b.realize().unwrap();
    assert_ne!(
        a.uop(),
        b.uop(),
        "two realizes never share an output buffer"
    );
    assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
}

fn tanh_layer(w: &Tensor, x: &Tensor) -> Tensor {
    w.matmul(x).tanh()
}

#[test]
fn a_jitted_function_traces_once_per_signature_and_replays() {
    let _serial = serial();
    let jitted = tensor::runtime::Jit::new(jacfwd(tanh_layer, 1));
    let w = Tensor::randn(&[8, 8], 3);
    let x1 = Tensor::randn(&[8], 4);
    let x2 = Tensor::randn(&[8], 5);
    for t in [&w, &x1, &x2] {
        t.realize().unwrap();
    }
    let first = jitted.call(&[w.clone(), x1.clone()]).unwrap();
    let before = pipeline_counts();
    let compiles = compiler_invocations();
    let second = jitted.call(&[w.clone(), x2.clone()]).unwrap();
    let after = pipeline_counts();
    assert_eq!(jitted.trace_count(), 1, "one signature, one trace");
    assert_eq!(after.schedules, before.schedules);
    assert_eq!(after.kernels_generated, before.kernels_generated);
    assert_eq!(compiler_invocations(), compiles);
    for (jitted_out, x) in [(&first, &x1), (&second, &x2)] {
        let want = fresh_values(&jacfwd(tanh_layer, 1).call1(&[w.clone(), x.clone()]));
        let got: Vec<f32> = jitted_out[0].to_vec().unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got),
            bits(&want),
            "replays equal fresh runs bit for bit"
        );
    }
    jitted
        .call(&[w.clone(), Tensor::randn(&[8, 1], 6).reshape(&[8isize])])
        .unwrap();
    assert_eq!(
        jitted.trace_count(),
        1,
        "a lazy argument of the same signature"
    );
    jitted
        .call(&[Tensor::randn(&[4, 8], 7), x1.clone()])
        .unwrap();
    assert_eq!(jitted.trace_count(), 2, "a new shape traces again");
}

#[test]
fn a_jitted_function_sees_aliasing_and_captured_constants() {
    let _serial = serial();
    let scale = Tensor::from_vec(vec![10.0f32, 100.0], &[2]);
    let f = {
        let scale = scale.clone();
        tensor::runtime::Jit::new(Func::new(Some(2), move |a: &[Tensor]| {
            vec![&(&a[0] * &a[1]) * &scale]
        }))
    };
    let (x, y) = (floats(&[1.0, 2.0]), floats(&[3.0, 4.0]));
    let apart = f.call(&[x.clone(), y.clone()]).unwrap();
    let same = f.call(&[x.clone(), x.clone()]).unwrap();
    let apart_again = f.call(&[y.clone(), x.clone()]).unwrap();
    assert_eq!(apart[0].to_vec::<f32>().unwrap(), vec![30.0, 800.0]);
    assert_eq!(same[0].to_vec::<f32>().unwrap(), vec![10.0, 400.0]);
    assert_eq!(apart_again[0].to_vec::<f32>().unwrap(), vec![30.0, 800.0]);
    assert_eq!(
        f.trace_count(),
        1,
        "f(x, x) replays the plan of f(x, y): the trace read stand-ins, not x twice"
    );
}

#[test]
fn a_jitted_function_inside_a_transform_is_inlined() {
    let _serial = serial();
    let square_sum = jit(|x: &Tensor| (x * x).sum_all());
    let x = floats(&[1.0, 2.0, 3.0]);
    let g = grad(square_sum.clone(), 0).call1(std::slice::from_ref(&x));
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    let batched =
        vmap(square_sum, 0, 0).call1(&[Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])]);
    assert_eq!(batched.to_vec::<f32>().unwrap(), vec![5.0, 25.0]);
}

#[test]
fn transform_results_trace_once_per_signature_without_jit() {
    let _serial = serial();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = {
        let calls = calls.clone();
        move |x: &Tensor| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (x * x).sum_all()
        }
    };
    let per_sample = vmap(grad(counted, 0), 0, 0);
    for k in 0..3 {
        let xs = Tensor::from_vec(vec![k as f32; 6], &[3, 2]);
        let g: Vec<f32> = per_sample.call1(&[xs]).to_vec().unwrap();
        assert_eq!(g, vec![2.0 * k as f32; 6]);
    }
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "traced once"
    );
}

#[function]
fn mse(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let err = x.matmul(w) - y;
    (&err * &err).sum_all()
}

#[test]
fn jit_macro_types_a_jitted_transform_like_the_function() {
    let _serial = serial();
    let step = jit!(grad!(mse, argnums = 0));
    let w = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let y = Tensor::from_vec(vec![0.0f32, 1.0], &[2]);
    let dw: Tensor = step(&w, &x, &y);
    // err = x w - y = [-1, -2]; d/dw sum(err^2) = 2 xᵀ err = [-14, -20]
    assert_eq!(dw.to_vec::<f32>().unwrap(), vec![-14.0, -20.0]);
    // y = 0: err = [-1, -1], gradient 2 xᵀ err = [-8, -12]
    let again: Tensor = step(&w, &x, &Tensor::from_vec(vec![0.0f32, 0.0], &[2]));
    assert_eq!(again.to_vec::<f32>().unwrap(), vec![-8.0, -12.0]);
}

#[test]
fn reading_one_gradient_computes_its_siblings_in_the_same_pass() {
    let _serial = serial();
    let loss = |w: &Tensor, b: &Tensor, x: &Tensor| ((x.matmul(w) + b).tanh() * 1.5).sum_all();
    let (w, b) = (
        floats(&[0.5, -1.0, 2.0, 0.25]).reshape(&[2, 2]),
        floats(&[0.1, 0.2]),
    );
    let x = floats(&[1.0, -2.0, 0.5, 3.0]).reshape(&[2, 2]);
    let grads = grad(loss, vec![0usize, 1]).call(&[w, b, x]);
    let before = pipeline_counts();
    let dw = grads[0].to_vec::<f32>().unwrap();
    let is_buffer =
        |t: &Tensor| tensor::core::schedule::realize::as_contiguous_buffer(&t.uop()).is_some();
    assert!(
        is_buffer(&grads[1]),
        "the sibling gradient was computed with the first"
    );
    let db = grads[1].to_vec::<f32>().unwrap();
    assert_eq!(
        pipeline_counts().plans_made() - before.plans_made(),
        1,
        "one pass for both"
    );
    let expected = |t: &Tensor| common::interpreted(t);
    assert_eq!(dw.len(), 4);
    for (got, want) in [(dw, &grads[0]), (db, &grads[1])] {
        let want = expected(want);
        for (g, e) in got.iter().zip(&want) {
            assert!((f64::from(*g) - e).abs() < 1e-5, "{g} vs {e}");
        }
    }
}

#[test]
fn realizing_what_is_already_buffers_looks_nothing_up() {
    let _serial = serial();
    let x = floats(&[1.0, 2.0, 3.0, 4.0]);
    let y = &x * 3.0;
    y.realize().unwrap();
    let before = pipeline_counts();
    let view = y.reshape(&[2, 2]);
    for _ in 0..3 {
        tensor::runtime::realize::realize(&[&x, &y, &view]).unwrap();
    }
    let after = pipeline_counts();
    assert_eq!(after.plan_hits, before.plan_hits, "no plan looked up");
    assert_eq!(after.schedules, before.schedules, "nothing scheduled");
    assert_eq!(view.to_vec::<f32>().unwrap(), vec![3.0, 6.0, 9.0, 12.0]);
    assert_eq!(pipeline_counts().plan_hits, before.plan_hits);
}
