//! Values are not code (issue 37, item 1): a scalar the user passes — an operand, the fill of
//! `Tensor::scalar` and `Tensor::full`, a clamp bound, a pad value, a random seed — is bound at
//! run time, so a training loop whose learning rate, noise seed or step counter changes every
//! step replays one compiled plan. Counted with `pipeline_counts()` (plans built) and
//! `compiler_invocations()` (runs of the C compiler), never timed; values checked against
//! the same arithmetic done in Rust.

use std::sync::{Mutex, MutexGuard};
use tensor::prelude::*;
use tensor::runtime::{compiler_invocations, pipeline_counts};

/// The counters are per process: tests that count run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `step` for each value; every step after the first must build no plan and run no
/// compiler. Returns each step's result.
fn steps_replay<V: Copy + std::fmt::Debug>(
    what: &str,
    values: &[V],
    step: impl Fn(V) -> Vec<f32>,
) -> Vec<Vec<f32>> {
    let _serial = serial();
    let mut out = vec![step(values[0])];
    let (plans, compiles) = (pipeline_counts().plans_made(), compiler_invocations());
    for &v in &values[1..] {
        out.push(step(v));
    }
    assert_eq!(
        pipeline_counts().plans_made(),
        plans,
        "{what}: a new value made a new plan"
    );
    assert_eq!(
        compiler_invocations(),
        compiles,
        "{what}: a new value compiled"
    );
    out
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn a_learning_rate_that_changes_each_step_compiles_once() {
    let p = [1.0f32, -2.0, 3.5, 0.25];
    let g = [0.5f32, 4.0, -1.0, 8.0];
    let lrs = [0.1f32, 0.05, 0.025, 0.3, 1e-3];
    let got = steps_replay("p - g * lr", &lrs, |lr| {
        let (p, g) = (
            Tensor::from_vec(p.to_vec(), &[4]),
            Tensor::from_vec(g.to_vec(), &[4]),
        );
        (&p - &(&g * lr)).to_vec().unwrap()
    });
    for (lr, got) in lrs.iter().zip(got) {
        let want: Vec<f32> = p.iter().zip(&g).map(|(p, g)| p - g * lr).collect();
        close(&got, &want);
    }
}

#[test]
fn a_scalar_on_the_left_and_a_clamp_bound_are_values() {
    let x = [-3.0f32, -0.5, 0.5, 3.0];
    let got = steps_replay(
        "(2 - x).clamp(lo, hi)",
        &[(2.0, 0.5), (3.0, 1.5), (-1.5, 0.25)],
        |(a, lo)| {
            let x = Tensor::from_vec(x.to_vec(), &[4]);
            (a - &x).clamp(-lo, lo).to_vec().unwrap()
        },
    );
    let want =
        |a: f64, lo: f32| -> Vec<f32> { x.iter().map(|v| (a as f32 - v).clamp(-lo, lo)).collect() };
    close(&got[0], &want(2.0, 0.5));
    close(&got[1], &want(3.0, 1.5));
    close(&got[2], &want(-1.5, 0.25));
}

#[test]
fn a_fill_a_pad_value_and_a_step_counter_are_values() {
    let got = steps_replay("full + scalar, pad_value", &[2.5f32, -7.0, 1e6], |v| {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
        let filled = &Tensor::full(&[2], v, DType::F32) + &Tensor::scalar(v * 2.0);
        (&filled * &x).pad_value(&[(1, 0)], v).to_vec().unwrap()
    });
    close(&got[0], &[2.5, 7.5, 15.0]);
    close(&got[1], &[-7.0, -21.0, -42.0]);
    close(&got[2], &[1e6, 3e6, 6e6]);
    let counters = steps_replay("a u32 step counter", &[3u32, 4, 9], |step| {
        let x = Tensor::from_vec(vec![10u32, 20], &[2]);
        (&x + &Tensor::scalar(step))
            .cast(DType::F32)
            .to_vec()
            .unwrap()
    });
    assert_eq!(
        counters,
        [vec![13.0, 23.0], vec![14.0, 24.0], vec![19.0, 29.0]]
    );
}

#[test]
fn fresh_noise_each_step_compiles_once_and_equals_the_keyed_draw() {
    let seeds = [1u64, 2, 77, u64::MAX];
    let got = steps_replay("randn(shape, seed)", &seeds, |seed| {
        Tensor::randn(&[64], seed).to_vec().unwrap()
    });
    for (seed, got) in seeds.iter().zip(&got) {
        let keyed: Vec<f32> = Tensor::randn_with_key(&[64], &Tensor::scalar(*seed))
            .to_vec()
            .unwrap();
        assert_eq!(got, &keyed, "seed {seed}: the same draw as the key");
    }
    assert_ne!(got[0], got[1], "another seed, other samples");
}

#[test]
fn identities_stay_code() {
    // `x * 1` is `x`: the plan of `x * 1` has nothing to bind but `x`, while `x * 3` binds a
    // value too. A graph of `x * 1` and one of `x * 3` are two structures.
    let _serial = serial();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let before = pipeline_counts().plans_made();
    assert_eq!((&x * 1.0).to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!((&x * 3.0).to_vec::<f32>().unwrap(), [3.0, 6.0]);
    assert_eq!((&x * 5.0).to_vec::<f32>().unwrap(), [5.0, 10.0]);
    assert_eq!((&x + 0.0).to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert!(
        pipeline_counts().plans_made() >= before + 2,
        "x * 1 (or x + 0) and x * v are different structures"
    );
}

#[test]
fn a_transformed_function_keeps_its_scalars_as_code() {
    // The gradient of `sum(3 x^2)` is `6 x`; its graph is traced once and kept, so its
    // constants are code, and calling it again builds no plan.
    let _serial = serial();
    let f = grad(|x: &Tensor| (&(x * x) * 3.0).sum_all(), 0);
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2]);
    assert_eq!(
        f.call1(std::slice::from_ref(&x)).to_vec::<f32>().unwrap(),
        [6.0, -12.0]
    );
    let before = pipeline_counts().schedules;
    let y = Tensor::from_vec(vec![0.5f32, 4.0], &[2]);
    assert_eq!(f.call1(&[y]).to_vec::<f32>().unwrap(), [3.0, 24.0]);
    assert_eq!(pipeline_counts().schedules, before);
}

#[test]
fn a_jitted_step_takes_a_0d_tensor_as_an_abstract_value() {
    let _serial = serial();
    let step = tensor::runtime::Jit::new(Func::new(Some(3), |a: &[Tensor]| {
        vec![&a[0] - &(&a[1] * &a[2])]
    }));
    let p = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let g = Tensor::from_vec(vec![10.0f32, -10.0], &[2]);
    let first = step
        .call(&[p.clone(), g.clone(), Tensor::scalar(0.5f32)])
        .unwrap();
    assert_eq!(first[0].to_vec::<f32>().unwrap(), [-4.0, 7.0]);
    let (plans, compiles) = (pipeline_counts().schedules, compiler_invocations());
    for (k, lr) in [0.25f32, 0.125, 2.0].into_iter().enumerate() {
        let out = step
            .call(&[p.clone(), g.clone(), Tensor::scalar(lr)])
            .unwrap();
        let want = [1.0 - 10.0 * lr, 2.0 + 10.0 * lr];
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want, "step {k}");
    }
    assert_eq!(step.trace_count(), 1, "one signature: f32[] is abstract");
    assert_eq!(pipeline_counts().schedules, plans);
    assert_eq!(compiler_invocations(), compiles);
}

/// SGD with momentum as a captured function whose learning rate, momentum and step counter
/// are Rust numbers: inside the body they are abstract 0-d tensors of their own dtypes (an
/// `f64` would promote the `f32` parameters, as a NumPy 0-d array does, so the model's
/// numbers are `f32`).
#[tensor::function]
fn momentum_step(p: &Tensor, v: &Tensor, g: &Tensor, lr: f32, mu: f32, step: i32) -> Tensor {
    let v = v * mu + g;
    // A bias correction read from the step counter, as Adam's: 1 / (1 - 0.5^step).
    let correction = (Tensor::scalar(0.5f32).pow(step.cast(DType::F32)) * -1.0 + 1.0).recip();
    p - &(&v * &(lr * correction))
}

#[test]
fn a_functions_number_parameters_are_traced_once_as_values() {
    let p = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let v = Tensor::from_vec(vec![0.5f32, -0.5], &[2]);
    let g = Tensor::from_vec(vec![10.0f32, -10.0], &[2]);
    let want = |lr: f32, mu: f32, step: i32| -> Vec<f32> {
        let c = 1.0 / (1.0 - 0.5f32.powi(step));
        [(1.0f32, 0.5f32, 10.0f32), (2.0, -0.5, -10.0)]
            .iter()
            .map(|&(p, v, g)| p - (v * mu + g) * (lr * c))
            .collect()
    };
    let cases = [
        (0.5f32, 0.9f32, 1i32),
        (0.25, 0.5, 2),
        (0.125, 0.0, 7),
        (1.0, 1.0, 3),
    ];
    let out = steps_replay("number parameters", &cases, |(lr, mu, step)| {
        momentum_step(&p, &v, &g, lr, mu, step)
            .to_vec::<f32>()
            .unwrap()
    });
    for (got, &(lr, mu, step)) in out.iter().zip(&cases) {
        close(got, &want(lr, mu, step));
    }
    assert_eq!(
        momentum_step::trace_count(),
        1,
        "a new number retraced the body"
    );
}

/// `jit!` of a closure whose parameters are Rust numbers: they are passed as numbers and traced
/// as abstract 0-d tensors, so new numbers replay the trace and the plan; the values are the
/// update written out.
#[test]
fn a_jitted_closures_number_parameters_are_traced_once_as_values() {
    let p = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let g = Tensor::from_vec(vec![10.0f32, -10.0], &[2]);
    let traces = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = traces.clone();
    let step = jit!(move |p: &Tensor, g: &Tensor, lr: f32, step: i32| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let decay = (step.cast(DType::F32) * -0.5).exp();
        p - &(g * &(lr * decay))
    });
    let cases = [(0.5f32, 1i32), (0.25, 2), (0.125, 0), (1.0, 1)];
    let out = steps_replay("jit! number parameters", &cases, |(lr, k)| {
        step(&p, &g, lr, k).to_vec::<f32>().unwrap()
    });
    for (got, &(lr, k)) in out.iter().zip(&cases) {
        let decay = (k as f32 * -0.5).exp();
        close(got, &[1.0 - 10.0 * lr * decay, 2.0 + 10.0 * lr * decay]);
    }
    assert_eq!(
        traces.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "a new number retraced the closure"
    );
}
