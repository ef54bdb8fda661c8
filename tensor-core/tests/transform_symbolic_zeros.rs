//! Symbolic zeros and one-hot bases: a tangent that is identically zero is never a graph node
//! (counted: no zero constants in the derivative's graph, no zeros instantiated), and the
//! one-hot basis of `jacfwd`/`jacrev` is an index, not a dense contraction, so the Jacobian of
//! `tanh(W x)` at n = 256 is O(n²) work (read from the schedule: the loop-trip product of
//! every kernel).

use std::collections::HashSet;
use tensor_core::interp::evaluate;
use tensor_core::schedule::create_schedule;
use tensor_core::transform::zero::instantiated_zeros;
use tensor_core::transform::{grad, hessian, jacfwd, jacrev, jvp};
use tensor_core::{DType, Op, Tensor, UOp};

/// The number of innermost iterations of a kernel: the product of the sizes of all its loop
/// ranges (output loops times reduce loops).
fn loop_trips(ast: &UOp) -> u64 {
    let ranges: HashSet<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Range)
        .collect();
    ranges
        .iter()
        .map(|r| r.vmax().as_i64() as u64 + 1)
        .product()
}

/// The loop-trip products of the kernels computing `outputs`, summed.
fn work(outputs: &[Tensor]) -> (u64, Vec<u64>) {
    let schedule = create_schedule(&outputs.iter().map(|t| t.uop()).collect::<Vec<_>>());
    let each: Vec<u64> = schedule.items.iter().map(|i| loop_trips(&i.ast)).collect();
    (each.iter().sum(), each)
}

fn input(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| (((i * 7 + seed) % 13) as f32 - 6.0) / 13.0)
            .collect(),
        shape,
    )
}

const N: usize = 256;

fn layer(w: &Tensor, x: &Tensor) -> Tensor {
    w.matmul(x).tanh()
}

#[test]
fn jacfwd_of_tanh_w_x_is_quadratic_work() {
    let (w, x) = (input(&[N, N], 1), input(&[N], 2));
    let jac = jacfwd(layer, 1).call(&[w, x]);
    assert_eq!(jac[0].shape(), vec![N, N]);
    let (total, each) = work(&jac);
    assert!(
        total <= 8 * (N * N) as u64,
        "jacfwd(tanh(W x)) does {total} loop trips ({each:?}), more than 8 n² = {}",
        8 * N * N
    );
}

#[test]
fn jacrev_of_tanh_w_x_is_quadratic_work() {
    let (w, x) = (input(&[N, N], 1), input(&[N], 2));
    let jac = jacrev(layer, 1).call(&[w, x]);
    assert_eq!(jac[0].shape(), vec![N, N]);
    let (total, each) = work(&jac);
    assert!(
        total <= 8 * (N * N) as u64,
        "jacrev(tanh(W x)) does {total} loop trips ({each:?}), more than 8 n² = {}",
        8 * N * N
    );
}

/// `J = diag(1 - tanh²(W x)) W`, computed on the host.
fn expected_jacobian(w: &[f64], x: &[f64], n: usize) -> Vec<f64> {
    let mut j = vec![0.0; n * n];
    for i in 0..n {
        let y: f64 = (0..n).map(|k| w[i * n + k] * x[k]).sum();
        let s = 1.0 - y.tanh() * y.tanh();
        for k in 0..n {
            j[i * n + k] = s * w[i * n + k];
        }
    }
    j
}

#[test]
fn the_collapsed_jacobians_have_the_right_values() {
    let n = 8;
    let (w, x) = (input(&[n, n], 1), input(&[n], 2));
    let host = |t: &Tensor| evaluate(&t.uop()).to_f64_vec();
    let want = expected_jacobian(&host(&w), &host(&x), n);
    for (name, jac) in [
        ("jacfwd", jacfwd(layer, 1).call(&[w.clone(), x.clone()])),
        ("jacrev", jacrev(layer, 1).call(&[w.clone(), x.clone()])),
    ] {
        for (k, (a, e)) in host(&jac[0]).iter().zip(&want).enumerate() {
            assert!(
                (a - e).abs() <= 1e-5,
                "{name}: element {k} is {a}, expected {e}"
            );
        }
    }
}

/// How many float zero constants `outputs` reach (a materialized zero tangent is one).
fn zero_constants(outputs: &[Tensor]) -> usize {
    UOp::sink(outputs.iter().map(|t| t.uop()).collect())
        .toposort()
        .iter()
        .filter(|u| {
            u.op() == Op::Const
                && u.dtype().is_float()
                && u.const_value().is_some_and(|v| v.as_f64() == 0.0)
        })
        .count()
}

/// A loss whose data `x`, `y` and whose constants (`2.0`, the mean's `1/n`) have no tangent.
fn loss(w: &Tensor, b: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let pred = (x.matmul(w) + b).tanh() * 2.0;
    let err = &pred - y;
    (&err * &err).mean_all()
}

#[test]
fn grad_with_constant_inputs_builds_no_zero_tangents() {
    let (w, b) = (input(&[4, 3], 1), input(&[3], 2));
    let (x, y) = (input(&[5, 4], 3), input(&[5, 3], 4));
    let before = instantiated_zeros();
    let grads = grad(loss, [0, 1]).call(&[w, b, x, y]);
    assert_eq!(
        instantiated_zeros(),
        before,
        "grad instantiated zero tangents"
    );
    assert_eq!(
        zero_constants(&grads),
        0,
        "the gradient graph holds zero constants"
    );
}

#[test]
fn jvp_with_constant_operands_builds_no_zero_tangents() {
    let x = input(&[6], 1);
    let c = input(&[6], 2);
    let f = move |x: &Tensor| ((x * 2.0 + &c).tanh() - 1.0) * &c;
    let before = instantiated_zeros();
    let (_, tangents) = jvp(f, std::slice::from_ref(&x), &[x.ones_like()]);
    assert_eq!(instantiated_zeros(), before);
    assert_eq!(
        zero_constants(&tangents),
        0,
        "the tangent graph holds zero constants"
    );
}

#[test]
fn hessian_builds_no_zero_tangents() {
    let x = input(&[5], 1);
    let f = |x: &Tensor| (x * x * 3.0 + 1.0).tanh().sum_all();
    let before = instantiated_zeros();
    let h = hessian(f, 0).call(&[x]);
    assert_eq!(h[0].shape(), vec![5, 5]);
    assert_eq!(instantiated_zeros(), before);
    assert_eq!(
        zero_constants(&h),
        0,
        "the Hessian graph holds zero constants"
    );
}

#[test]
fn a_zero_tangent_is_instantiated_only_where_a_result_needs_it() {
    // The result does not depend on `y`: its gradient is zeros, made once, as JAX returns.
    let (x, y) = (input(&[3], 1), input(&[3], 2));
    let before = instantiated_zeros();
    let g = grad(|x: &Tensor, _y: &Tensor| x.sum_all(), [0, 1]).call(&[x, y]);
    assert_eq!(instantiated_zeros(), before + 1);
    assert_eq!(evaluate(&g[1].uop()).to_f64_vec(), vec![0.0; 3]);
    assert_eq!(g[1].dtype(), DType::F32);
}
