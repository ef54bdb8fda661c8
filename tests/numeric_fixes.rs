//! Numeric defects fixed by class (issue 43), each against NumPy or torch values written here:
//! float floor division and remainder by `fmod` (as Python, NumPy and torch), ELU-family
//! activations by `expm1`, the 2-norm's subgradient 0 at the zero vector, and the composite
//! float functions entering their op's scope (their constants are code, and a refusal names
//! the op the user called).

mod common;

use std::sync::{Mutex, MutexGuard};
use tensor::core::uop::Op;
use tensor::nn;
use tensor::prelude::*;
use tensor::runtime::thread_pipeline_counts;

const A: [f64; 10] = [1.0, -1.0, 1.0, -1.0, 7.5, -7.5, 0.3, 5.0, -0.0, 0.0];
const B: [f64; 10] = [0.1, 0.1, -0.1, -0.1, 2.0, 2.0, 0.1, -5.0, 1.0, -1.0];

fn f64s(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

/// Equal values, and equal signs of zeros.
#[track_caller]
fn same_bits(what: &str, got: &[f64], want: &[f64]) {
    let ok = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g == w && g.is_sign_negative() == w.is_sign_negative());
    assert!(ok, "{what}: {got:?} vs {want:?}");
}

#[test]
fn float_floor_div_and_remainder_are_fmod_based_as_numpy() {
    let (a, b) = (f64s(&A), f64s(&B));
    // np.array(A) // np.array(B), np.remainder(A, B)
    same_bits(
        "f64 floor_div",
        &common::values(&a.floor_div(&b)),
        &[9.0, -10.0, -10.0, 9.0, 3.0, -4.0, 2.0, -1.0, -0.0, -0.0],
    );
    same_bits(
        "f64 remainder",
        &common::values(&a.remainder(&b)),
        &[
            0.09999999999999995,
            5.551115123125783e-17,
            -5.551115123125783e-17,
            -0.09999999999999995,
            1.5,
            0.5,
            0.09999999999999998,
            -0.0,
            0.0,
            -0.0,
        ],
    );
    let (a32, b32) = (a.cast(DType::F32), b.cast(DType::F32));
    same_bits(
        "f32 floor_div",
        &common::values(&a32.floor_div(&b32)),
        &[9.0, -10.0, -10.0, 9.0, 3.0, -4.0, 3.0, -1.0, -0.0, -0.0],
    );
    same_bits(
        "f32 remainder",
        &common::values(&(&a32 % &b32)),
        &[
            0.09999998658895493,
            1.4901161193847656e-08,
            -1.4901161193847656e-08,
            -0.09999998658895493,
            1.5,
            0.5,
            7.450580596923828e-09,
            -0.0,
            0.0,
            -0.0,
        ],
    );
}

#[test]
fn the_remainders_gradient_is_torchs() {
    // torch.remainder(a, b).sum().backward() on the first 8 pairs.
    let f = grad(
        |a: &Tensor, b: &Tensor| a.remainder(b).sum_all(),
        vec![0usize, 1],
    );
    let g = f.call(&[f64s(&A[..8]), f64s(&B[..8])]);
    assert_eq!(common::values(&g[0]), [1.0; 8]);
    assert_eq!(
        common::values(&g[1]),
        [-9.0, 10.0, 10.0, -9.0, -3.0, 4.0, -2.0, 1.0]
    );
    let d = grad(|a: &Tensor, b: &Tensor| a.floor_div(b).sum_all(), 0);
    assert_eq!(common::values(&d.call1(&[f64s(&A), f64s(&B)])), [0.0; 10]);
}

const X: [f64; 6] = [-1e-10, -1e-7, -0.5, -3.0, 2.0, -100.0];

/// The values and the gradient of `Σ f(x)` against torch's (float64).
#[track_caller]
fn check_activation(
    what: &str,
    f: impl Fn(&Tensor) -> Tensor + Copy + Send + Sync + 'static,
    want: &[f64],
    want_grad: &[f64],
) {
    let got = common::values(&f(&f64s(&X)));
    assert!(
        common::allclose(&got, want, 1e-13, 0.0),
        "{what}: {got:?} vs torch {want:?}"
    );
    let g = common::values(&grad(move |x: &Tensor| f(x).sum_all(), 0).call1(&[f64s(&X)]));
    assert!(
        common::allclose(&g, want_grad, 1e-12, 1e-300),
        "{what} grad: {g:?} vs torch {want_grad:?}"
    );
}

#[test]
fn elu_selu_and_celu_are_accurate_for_tiny_negative_inputs() {
    // torch.nn.functional.elu(x, 1.5), selu(x), celu(x, 0.5) in float64, and x.grad.
    check_activation(
        "elu",
        |x| nn::elu(x, 1.5),
        &[
            -1.499999999925e-10,
            -1.4999999250000023e-07,
            -0.5902040104310499,
            -1.4253193974482041,
            2.0,
            -1.5,
        ],
        &[
            1.49999999985,
            1.4999998500000076,
            0.9097959895689501,
            0.07468060255179591,
            1.0,
            5.580113964031254e-44,
        ],
    );
    check_activation(
        "selu",
        nn::selu,
        &[
            -1.7580993407594719e-10,
            -1.7580992529424125e-07,
            -0.6917581878028713,
            -1.6705687287671118,
            2.101401974710961,
            -1.7580993408473766,
        ],
        &[
            1.7580993406715666,
            1.7580991650374513,
            1.0663411530445053,
            0.08753061208026487,
            1.0507009873554805,
            6.540263121344393e-44,
        ],
    );
    check_activation(
        "celu",
        |x| nn::celu(x, 0.5),
        &[
            -9.999999999e-11,
            -9.999999000000066e-08,
            -0.31606027941427883,
            -0.4987606239116668,
            2.0,
            -0.5,
        ],
        &[
            0.9999999998,
            0.99999980000002,
            0.36787944117144233,
            0.0024787521766663585,
            1.0,
            1.3838965267367376e-87,
        ],
    );
}

#[test]
fn a_norms_gradient_at_the_zero_vector_is_zero_as_torch() {
    // torch.linalg.vector_norm(t, ord).backward()
    let cases: [(f64, [f64; 3], [f64; 3]); 4] = [
        (2.0, [0.0; 3], [0.0; 3]),
        (3.0, [0.0; 3], [0.0; 3]),
        (2.0, [3.0, -4.0, 0.0], [0.6, -0.8, 0.0]),
        (
            3.0,
            [3.0, -4.0, 0.0],
            [0.4448513517305356, -0.7908468475209521, 0.0],
        ),
    ];
    for (ord, x, want) in cases {
        let f = grad(move |x: &Tensor| x.norm(ord, None, false), 0);
        let g = common::values(&f.call1(&[f64s(&x)]));
        assert!(
            common::allclose(&g, &want, 1e-12, 1e-15),
            "ord {ord} at {x:?}: {g:?} vs {want:?}"
        );
        let n = common::values(&f64s(&x).norm(ord, None, false))[0];
        let want_norm = x
            .iter()
            .map(|v: &f64| v.abs().powf(ord))
            .sum::<f64>()
            .powf(1.0 / ord);
        assert!(
            (n - want_norm).abs() <= 1e-12 * want_norm,
            "ord {ord} norm {n} vs {want_norm}"
        );
    }
}

/// The counters are per process: tests that count run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The buffers a graph reads: the inputs only, when the op's constants are code.
fn buffers(t: &Tensor) -> usize {
    t.uop()
        .toposort()
        .iter()
        .filter(|u| u.op() == Op::Buffer)
        .count()
}

#[test]
fn composite_float_functions_keep_their_constants_as_code() {
    type Unary = fn(&Tensor) -> Tensor;
    let ops: [(&str, Unary); 9] = [
        ("atan", Tensor::atan),
        ("asin", Tensor::asin),
        ("acos", Tensor::acos),
        ("round", Tensor::round),
        ("round_decimals", |x| x.round_decimals(2)),
        ("isnan", Tensor::isnan),
        ("isinf", Tensor::isinf),
        ("isfinite", Tensor::isfinite),
        ("signbit", Tensor::signbit),
    ];
    let x = Tensor::from_vec(vec![0.25f32, -0.5], &[2]);
    for (name, op) in ops {
        assert_eq!(
            buffers(&op(&x)),
            1,
            "{name}: the graph binds values besides x"
        );
    }
    let y = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    assert_eq!(
        buffers(&y.atan2(&x)),
        2,
        "atan2 binds values besides x and y"
    );
    assert_eq!(buffers(&nn::elu(&x, 0.7)), 1, "elu binds alpha");
    // Every activation is a library op: its coefficients are code too.
    let activations: [(&str, Unary); 15] = [
        ("relu6", nn::relu6),
        ("leaky_relu", |x| nn::leaky_relu(x, 0.2)),
        ("selu", nn::selu),
        ("celu", |x| nn::celu(x, 0.7)),
        ("gelu", |x| nn::gelu(x, nn::Gelu::Tanh)),
        ("silu", nn::silu),
        ("quick_gelu", nn::quick_gelu),
        ("mish", nn::mish),
        ("softplus", |x| nn::softplus(x, 2.0, 10.0)),
        ("softsign", nn::softsign),
        ("hardtanh", |x| nn::hardtanh(x, -0.5, 0.5)),
        ("hardsigmoid", nn::hardsigmoid),
        ("hardswish", nn::hardswish),
        ("logsigmoid", nn::logsigmoid),
        ("erfc", nn::erfc),
    ];
    for (name, op) in activations {
        assert_eq!(
            buffers(&op(&x)),
            1,
            "{name}: the graph binds values besides x"
        );
    }
}

#[test]
fn atan_twice_on_new_inputs_makes_one_plan_and_compiles_once() {
    let _serial = serial();
    let atan = |v: [f32; 3]| {
        Tensor::from_vec(v.to_vec(), &[3])
            .atan()
            .to_vec::<f32>()
            .unwrap()
    };
    let first = atan([0.5, -2.0, 10.0]);
    let before = thread_pipeline_counts();
    let second = atan([0.1, 3.0, -0.25]);
    let after = thread_pipeline_counts();
    assert_eq!(
        after.plans_made(),
        before.plans_made(),
        "a new input made a new plan"
    );
    assert_eq!(
        after.kernels_generated, before.kernels_generated,
        "a new input generated (and so compiled) a kernel"
    );
    // np.arctan in float32
    let want = [
        [0.4636476, -1.1071488, 1.4711276],
        [0.09966865, 1.2490457, -0.24497867],
    ];
    for (got, want) in [first, second].iter().zip(want) {
        assert!(
            got.iter()
                .zip(want)
                .all(|(g, w)| (g - w).abs() <= 2e-7 * w.abs().max(1.0)),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn an_inner_shape_error_names_the_op_called() {
    let (y, x) = (
        Tensor::zeros(&[2, 3], DType::F32),
        Tensor::zeros(&[4], DType::F32),
    );
    let message = common::panic_message(|| y.atan2(&x));
    assert!(message.starts_with("atan2: "), "{message}");
    let message = common::panic_message(|| y.copysign(&x));
    assert!(message.starts_with("copysign: "), "{message}");
    let message = common::panic_message(|| y.remainder(&x));
    assert!(message.starts_with("remainder: "), "{message}");
}
