//! Numerics of the front end that were wrong values once (issue 36, items 2, 3, 4 and 6):
//! `pow`'s derivative at 0 and for negative bases, integer powers computed in `f32`,
//! `logsumexp` of rows of infinities, and `usize` arguments read as the `-1` sentinel or NaN
//! bounds giving an empty `arange`. Expected values are NumPy's, PyTorch's and JAX's (written
//! here, computed from their definitions: C's `pow` table, Python's exact integers), checked
//! through the compiled CPU path and the reference interpreter alike.

mod common;

use common::panic_message;

use common::{interpreted, values};
use tensor::core::uop::dtype::decode_scalars;
use tensor::prelude::*;

/// True when `got` is `want` within `rtol` (relative) and 1e-30 absolute; NaN equals NaN,
/// infinities and zeros must match exactly (the sign of a zero is checked where it matters).
fn close(got: f64, want: f64, rtol: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() || want == 0.0 {
        return got == want;
    }
    (got - want).abs() <= rtol * want.abs() + 1e-30
}

/// Fails unless the compiled and the interpreted values of `t` are `want` within `rtol`.
#[track_caller]
fn assert_values(what: &str, t: &Tensor, want: &[f64], rtol: f64) {
    for (path, got) in [("compiled", values(t)), ("interpreter", interpreted(t))] {
        assert_eq!(got.len(), want.len(), "{what} ({path}): {got:?}");
        let bad = got.iter().zip(want).position(|(&g, &w)| !close(g, w, rtol));
        if let Some(i) = bad {
            let (g, w) = (got[i], want[i]);
            panic!("{what} ({path}): element {i} is {g:e}, want {w:e} (rtol {rtol:e})");
        }
    }
}

/// Fails unless the compiled and the interpreted integers of `t` are exactly `want`.
#[track_caller]
fn assert_ints(what: &str, t: &Tensor, want: &[i64]) {
    let bytes = tensor::runtime::realize::read_bytes(t).expect("the CPU computes the tensor");
    let compiled = decode_scalars(&bytes, t.dtype());
    let interpreted = tensor::core::interp::evaluate(&t.uop()).data;
    for (path, got) in [("compiled", compiled), ("interpreter", interpreted)] {
        let got: Vec<i64> = got.iter().map(|v| v.as_i64()).collect();
        assert_eq!(got, want, "{what} ({path})");
    }
}

/// A graph-building call to try, with the start of the message it must panic with.
type Build = (&'static str, Box<dyn FnOnce() -> Tensor>);

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

// ---- item 2: pow's derivative is the op's own ----

#[test]
fn the_gradient_of_a_cube_is_zero_at_zero_and_exact_for_negative_bases() {
    // jax.grad(lambda x: (x ** 3.0).sum())([0, -2, 1.5]) = 3 x^2
    let x = f32s(&[0.0, -2.0, 1.5]);
    let want = [0.0, 12.0, 6.75];
    let constant = grad(|x: &Tensor| x.pow(3.0).sum_all(), 0).call1(std::slice::from_ref(&x));
    assert_values("grad x ** 3.0", &constant, &want, 1e-6);
    // The same exponent as a tensor (a buffer, so the general `pow` node is differentiated).
    let y = f32s(&[3.0, 3.0, 3.0]);
    let yc = y.clone();
    let general = grad(move |x: &Tensor| x.pow(&yc).sum_all(), 0).call1(std::slice::from_ref(&x));
    assert_values("grad x ** y", &general, &want, 1e-6);
    // d/dy x^y = x^y ln x: 0 at x = 0 (PyTorch), NaN for a negative base (log of it).
    let xc = x.clone();
    let by_y = grad(move |y: &Tensor| xc.pow(y).sum_all(), 0).call1(std::slice::from_ref(&y));
    assert_values(
        "grad_y x ** y",
        &by_y,
        &[0.0, f64::NAN, 1.368_444_739_865_054_8],
        1e-5,
    );
}

#[test]
fn pow_gradients_at_zero_follow_torch_for_every_kind_of_exponent() {
    // torch: d/dx x**y at x = 0 is y * 0**(y-1), and 0 where y == 0.
    let x = f32s(&[0.0, 0.0, 0.0, 0.0, 0.0, 4.0]);
    let y = f32s(&[2.5, 1.0, 0.0, -1.0, 0.5, 2.5]);
    let yc = y.clone();
    let g = grad(move |x: &Tensor| x.pow(&yc).sum_all(), 0).call1(std::slice::from_ref(&x));
    let want = [0.0, 1.0, 0.0, f64::NEG_INFINITY, f64::INFINITY, 20.0];
    assert_values("grad x ** y at 0", &g, &want, 1e-5);
    // Scalar exponents take the cheaper forms; their gradients agree.
    for (e, want) in [
        (2.5, 0.0),
        (1.0, 1.0),
        (0.0, 0.0),
        (0.5, f64::INFINITY),
        (4.0, 0.0),
    ] {
        let g = grad(move |x: &Tensor| x.pow(e).sum_all(), 0).call1(&[f32s(&[0.0])]);
        assert_values(&format!("grad x ** {e} at 0"), &g, &[want], 1e-6);
    }
}

#[test]
fn forward_mode_of_a_newton_system_started_at_zero_has_no_nan_row() {
    // f(v) = [v0^3 + v1 - 1, v0 + v1^3 - 1]: its Jacobian at 0 is [[0, 1], [1, 0]].
    let cube_exponent = f32s(&[3.0, 3.0]);
    let newton = move |v: &Tensor| v.pow(&cube_exponent) + v.flip(0) - 1.0;
    let v0 = f32s(&[0.0, 0.0]);
    let forward = jacfwd(newton.clone(), 0).call1(std::slice::from_ref(&v0));
    assert_values("jacfwd at 0", &forward, &[0.0, 1.0, 1.0, 0.0], 0.0);
    let reverse = jacrev(newton, 0).call1(std::slice::from_ref(&v0));
    assert_values("jacrev at 0", &reverse, &[0.0, 1.0, 1.0, 0.0], 0.0);
}

#[test]
fn the_hessian_of_a_cube_is_six_x_at_zero_and_for_negative_bases() {
    // d²/dx² sum(x^3) = diag(6x); with y = 3 as a tensor the pow rule is differentiated twice.
    let x = f32s(&[0.0, -2.0]);
    let want = [0.0, 0.0, 0.0, -12.0];
    let h = hessian(|x: &Tensor| x.pow(3.0).sum_all(), 0).call1(std::slice::from_ref(&x));
    assert_values("hessian x ** 3.0", &h, &want, 1e-6);
    let y = f32s(&[3.0, 3.0]);
    let h = hessian(move |x: &Tensor| x.pow(&y).sum_all(), 0).call1(std::slice::from_ref(&x));
    assert_values("hessian x ** y", &h, &want, 1e-5);
}

#[test]
fn float_pow_values_follow_c_pow() {
    // math.pow (C99 Annex F), with pow(+-0, -1) = +-inf and pow(-8, 1/3) = nan as C's pow.
    let x = [
        -2.0,
        -0.0,
        0.0,
        2.0,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NAN,
        -3.0,
        1.0,
        -1.0,
    ];
    let x = [&x[..], &[-8.0, 0.5, -0.0, 10.0, 0.0, -2.0]].concat();
    let y = [
        3.0,
        -1.0,
        -1.0,
        0.5,
        0.5,
        -2.0,
        0.0,
        2.0,
        f64::NAN,
        f64::INFINITY,
    ];
    let y = [&y[..], &[1.0 / 3.0, -3.5, 3.0, 7.3, 0.0, -3.0]].concat();
    let want = [
        -8.0,
        f64::NEG_INFINITY,
        f64::INFINITY,
        std::f64::consts::SQRT_2,
        f64::INFINITY,
    ];
    let want = [
        &want[..],
        &[
            0.0,
            1.0,
            9.0,
            1.0,
            1.0,
            f64::NAN,
            11.313_708_498_984_761,
            -0.0,
        ],
        &[19_952_623.149_688_788, 1.0, -0.125],
    ]
    .concat();
    let as_f32 = |v: &[f64]| Tensor::from_vec(v.iter().map(|&v| v as f32).collect(), &[v.len()]);
    // f32 (the kernels' exp2/log2 decomposition) within 4e-6; f64 (C's pow) within 1e-15.
    assert_values("f32 pow", &as_f32(&x).pow(as_f32(&y)), &want, 4e-6);
    let as_f64 = |v: &[f64]| Tensor::from_vec(v.to_vec(), &[v.len()]);
    assert_values("f64 pow", &as_f64(&x).pow(as_f64(&y)), &want, 1e-15);
    // The sign of each zero too: (-0) ** 3 = -0, inf ** -2 = +0, 0 ** -1 = +inf.
    for t in [as_f32(&x).pow(as_f32(&y)), as_f64(&x).pow(as_f64(&y))] {
        for got in [values(&t), interpreted(&t)] {
            let signs: Vec<bool> = got.iter().map(|v| v.is_sign_negative()).collect();
            let want_signs: Vec<bool> = want.iter().map(|v| v.is_sign_negative()).collect();
            let zeros: Vec<usize> = (0..want.len()).filter(|&i| want[i] == 0.0).collect();
            assert!(zeros.iter().all(|&i| signs[i] == want_signs[i]), "{got:?}");
        }
    }
}

#[test]
fn compiled_float_pow_agrees_with_c_pow_over_a_sweep_and_under_vmap() {
    // 4096 pairs: bases in [-4, 4), exponents integral in [-6, 6] or fractional in [-3, 3).
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let n = 4096;
    let a: Vec<f32> = (0..n).map(|_| (next() * 8.0 - 4.0) as f32).collect();
    let b: Vec<f32> = (0..n)
        .map(|i| match i % 2 {
            0 => (next() * 13.0 - 6.5).round() as f32,
            _ => (next() * 6.0 - 3.0) as f32,
        })
        .collect();
    let want: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| f64::from(a).powf(f64::from(b)) as f32 as f64)
        .collect();
    let (x, y) = (f32s(&a), f32s(&b));
    // |b log2 |a|| <= 13: the exp2/log2 decomposition is within a few ulp of f32 there.
    assert_values("f32 pow sweep", &x.pow(&y), &want, 8e-6);
    let rows = |t: &Tensor| t.reshape(&[64, 64]);
    let batched = vmap(|x: &Tensor, y: &Tensor| x.pow(y), 0, 0).call1(&[rows(&x), rows(&y)]);
    assert_values("vmap pow", &batched, &want, 8e-6);
    // f16 and bf16 compute in f32 and round once.
    let half_cases = f32s(&[-2.0, 2.0, 0.0, -0.5]);
    let half_exponents = f32s(&[3.0, 0.5, -1.0, 2.0]);
    for dtype in [DType::F16, DType::BF16] {
        let p = half_cases.cast(dtype).pow(half_exponents.cast(dtype));
        let want = [-8.0, std::f64::consts::SQRT_2, f64::INFINITY, 0.25];
        assert_values(&format!("{dtype} pow"), &p, &want, 4e-3);
    }
}

// ---- item 3: integer powers are exact ----

#[test]
fn integer_tensor_powers_are_exact_and_wrap_as_numpy() {
    // Python's exact powers, wrapped to the dtype as NumPy's integer `power` does.
    let x = Tensor::from_vec(vec![7i32, 3, -3, 2, 5, 3], &[6]);
    let y = Tensor::from_vec(vec![11i32, 20, 21, 31, 0, 77], &[6]);
    let want = [
        1977326743,
        -808182895,
        -1870418611,
        -2147483648,
        1,
        -220914989,
    ];
    assert_ints("i32 ** i32", &x.pow(&y), &want);

    let x = Tensor::from_vec(vec![10i64, 3, -7, 5], &[4]);
    let y = Tensor::from_vec(vec![18i64, 40, 23, 1_000_003], &[4]);
    let want = [
        1_000_000_000_000_000_000,
        -6289078614652622815,
        -8922003266371364727,
        -744821962911171715,
    ];
    assert_ints("i64 ** i64", &x.pow(&y), &want);

    let x = Tensor::from_vec(vec![3u8, 2, 255, 3], &[4]);
    let y = Tensor::from_vec(vec![5u8, 9, 2, 200], &[4]);
    assert_ints("u8 ** u8", &x.pow(&y), &[243, 0, 1, 161]);
}

#[test]
fn integer_scalar_powers_are_exact() {
    let x = Tensor::from_vec(vec![10i64, -10], &[2]);
    assert_ints(
        "i64 ** 18",
        &x.pow(18),
        &[1_000_000_000_000_000_000, 1_000_000_000_000_000_000],
    );
    assert_ints(
        "i32 ** 11",
        &Tensor::from_vec(vec![7i32], &[1]).pow(11),
        &[1977326743],
    );
    assert_ints(
        "u8 ** 200",
        &Tensor::from_vec(vec![3u8], &[1]).pow(200),
        &[161],
    );
}

#[test]
fn negative_integer_exponents_of_integers_are_refused_or_truncate() {
    // Known while the graph is built: NumPy's "Integers to negative integer powers are not
    // allowed", as a scalar or as a constant tensor.
    let x = Tensor::from_vec(vec![2i32, 0], &[2]);
    let m = panic_message(|| x.pow(-1));
    assert!(
        m.starts_with(
            "pow: integer tensors (dtype i32) cannot be raised to the negative integer power -1"
        ),
        "{m}"
    );
    let m = panic_message(|| x.pow(x.full_like(-1)));
    assert!(
        m.starts_with(
            "pow: integer tensors (dtype i32) cannot be raised to the negative integer power -1"
        ),
        "{m}"
    );
    // Computed values: trunc(1 / x^|y|), 0 for a zero base as integer division by zero.
    let x = Tensor::from_vec(vec![2i32, 0, 1, -1, -1, -5], &[6]);
    let y = Tensor::from_vec(vec![-1i32, -1, -5, -3, -4, -2], &[6]);
    assert_ints("i32 ** negative i32", &x.pow(&y), &[0, 0, 1, -1, 1, 0]);
}

#[test]
fn bool_powers_are_refused() {
    let b = Tensor::from_vec(vec![true, false], &[2]);
    let m = panic_message(|| b.pow(&b));
    assert!(m.starts_with("pow: not supported for bool tensors"), "{m}");
}

// ---- item 4: rows of infinities ----

/// Rows `[-inf, -inf]`, `[inf, inf]`, `[-inf, 1]`, `[inf, 1]`, `[inf, -inf]`, `[nan, 1]`, `[1, -inf]`.
fn infinite_rows() -> Tensor {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let rows = [
        [-inf, -inf],
        [inf, inf],
        [-inf, 1.0],
        [inf, 1.0],
        [inf, -inf],
        [nan, 1.0],
        [1.0, -inf],
    ];
    Tensor::from_vec(rows.concat(), &[rows.len(), 2])
}

#[test]
fn logsumexp_of_rows_of_infinities_is_torchs() {
    // torch.logsumexp(rows, 1)
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let want = [-inf, inf, 1.0, inf, inf, nan, 1.0];
    assert_values(
        "logsumexp",
        &infinite_rows().logsumexp(1, false),
        &want,
        1e-6,
    );
    let kept = infinite_rows().logsumexp(-1, true);
    assert_eq!(kept.shape(), vec![7, 1]);
    assert_values("logsumexp keepdim", &kept, &want, 1e-6);
    // A fully masked attention row: logsumexp over every axis of [-inf] * 3 is -inf.
    let masked = f32s(&[f32::NEG_INFINITY; 3]).logsumexp(None, false);
    assert_values("logsumexp of a masked row", &masked, &[-inf], 0.0);
}

#[test]
fn softmax_log_softmax_and_logcumsumexp_of_rows_of_infinities_are_torchs() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    // torch.softmax(rows, 1): x - max is NaN where max is +-inf.
    let want = [
        nan, nan, nan, nan, 0.0, 1.0, nan, nan, nan, nan, nan, nan, 1.0, 0.0,
    ];
    assert_values("softmax", &infinite_rows().softmax(1), &want, 1e-6);
    // torch.log_softmax(rows, 1)
    let want = [
        nan, nan, nan, nan, -inf, 0.0, nan, nan, nan, nan, nan, nan, 0.0, -inf,
    ];
    assert_values("log_softmax", &infinite_rows().log_softmax(1), &want, 1e-6);
    // torch.logcumsumexp(rows, 1) (its log-add-exp returns x when both are the same infinity)
    let want = [
        -inf, -inf, inf, inf, -inf, 1.0, inf, inf, inf, inf, nan, nan, 1.0, 1.0,
    ];
    assert_values(
        "logcumsumexp",
        &infinite_rows().logcumsumexp(1),
        &want,
        1e-6,
    );
}

#[test]
fn gradients_through_masked_entries_stay_finite_where_torchs_do() {
    let x = f32s(&[f32::NEG_INFINITY, 1.0, 0.0]);
    let w = f32s(&[1.0, 2.0, 3.0]);
    // torch: logsumexp's gradient is softmax: [0, e/(e+1), 1/(e+1)]
    let g = grad(|x: &Tensor| x.logsumexp(0, false), 0).call1(std::slice::from_ref(&x));
    assert_values(
        "grad logsumexp",
        &g,
        &[0.0, 0.731_058_578_630_004_9, 0.268_941_421_369_995],
        1e-6,
    );
    let wc = w.clone();
    let g =
        grad(move |x: &Tensor| (x.softmax(0) * &wc).sum_all(), 0).call1(std::slice::from_ref(&x));
    let want = [0.0, -0.196_611_933_241_481_93, 0.196_611_933_241_481_82];
    assert_values("grad softmax", &g, &want, 1e-5);
    let wc = w.clone();
    let g = grad(move |x: &Tensor| (x.log_softmax(0) * &wc).sum_all(), 0)
        .call1(std::slice::from_ref(&x));
    assert_values(
        "grad log_softmax",
        &g,
        &[1.0, -2.386_351_471_780_03, 1.386_351_471_780_03],
        1e-5,
    );
    // torch.logcumsumexp([0, -inf, 1]).sum() backward: [2 + 1/(1+e), 0, e/(1+e)]
    let y = f32s(&[0.0, f32::NEG_INFINITY, 1.0]);
    let g = grad(|y: &Tensor| y.logcumsumexp(0).sum_all(), 0).call1(std::slice::from_ref(&y));
    assert_values(
        "grad logcumsumexp",
        &g,
        &[2.268_941_421_369_995, 0.0, 0.731_058_578_630_004_9],
        1e-5,
    );
}

#[test]
fn normalizations_over_an_empty_axis_are_torchs_and_bad_axes_name_the_op() {
    // torch: softmax/log_softmax/logcumsumexp/cummax of a [2, 0] tensor along 1 are [2, 0];
    // logsumexp over the empty axis is log(0) = -inf.
    let empty = Tensor::zeros(&[2, 0], DType::F32);
    for (op, t) in [
        ("softmax", empty.softmax(1)),
        ("log_softmax", empty.log_softmax(-1)),
        ("logcumsumexp", empty.logcumsumexp(1)),
        ("cummax", empty.cummax(1).0),
        ("cummax indices", empty.cummax(1).1),
        ("cummin", empty.cummin(1).0),
    ] {
        assert_eq!(t.shape(), vec![2, 0], "{op}");
        assert_values(op, &t, &[], 0.0);
    }
    let inf = f64::NEG_INFINITY;
    assert_values("logsumexp", &empty.logsumexp(1, false), &[inf, inf], 0.0);
    assert_eq!(empty.logsumexp(1, true).shape(), vec![2, 1]);
    // softmax over an axis of a [0, 3] tensor is empty, along the other too.
    assert_eq!(
        Tensor::zeros(&[0, 3], DType::F32).softmax(1).shape(),
        vec![0, 3]
    );
    let x = f32s(&[1.0, 2.0]);
    for (op, call) in [
        (
            "softmax",
            Box::new(|| x.softmax(-3)) as Box<dyn FnOnce() -> Tensor>,
        ),
        ("log_softmax", Box::new(|| x.log_softmax(1))),
        ("logsumexp", Box::new(|| x.logsumexp(2, false))),
        ("logcumsumexp", Box::new(|| x.logcumsumexp(4))),
        ("cummin", Box::new(|| x.cummin(-2).0)),
    ] {
        let m = panic_message(call);
        assert!(m.starts_with(&format!("{op}: axis")), "{op}: {m}");
    }
}

// ---- item 6: a usize is never a sentinel; arange's bounds are finite ----

#[test]
fn usize_sizes_too_large_for_isize_are_refused_not_read_as_minus_one() {
    let x = Tensor::from_vec(vec![1.0f32; 6], &[6]);
    let m = panic_message(|| x.reshape(&[usize::MAX]));
    assert!(m.starts_with("reshape: size 18446744073709551615"), "{m}");
    let err = x.try_reshape(&[usize::MAX]).unwrap_err();
    assert_eq!(err.op, "reshape");
    let row = Tensor::from_vec(vec![1.0f32; 6], &[1, 6]);
    let m = panic_message(|| row.expand(&[usize::MAX, 6]));
    assert!(m.starts_with("expand: size 18446744073709551615"), "{m}");
    assert!(row.try_expand(&[usize::MAX, 6]).is_err());
    let m = panic_message(|| Tensor::zeros(&[usize::MAX], DType::F32));
    // `zeros` is built by `full`; the message names one of them and the size.
    let named = m.starts_with("zeros: ") || m.starts_with("full: ");
    assert!(named && m.contains(": size 18446744073709551615"), "{m}");
    let m = panic_message(|| x.sum(usize::MAX, false));
    assert!(m.starts_with("sum: axis 18446744073709551615"), "{m}");
    let m = panic_message(|| row.permute(&[usize::MAX, 0]));
    assert!(m.starts_with("permute: axis 18446744073709551615"), "{m}");
    let m = panic_message(|| x.narrow(0, 1, usize::MAX));
    assert!(m.starts_with("narrow:"), "{m}");
    // Signed -1 keeps its meanings.
    assert_eq!(x.reshape(&[2isize, -1]).shape(), vec![2, 3]);
    assert_eq!(row.expand(&[4isize, -1]).shape(), vec![4, 6]);
    assert_eq!(values(&x.sum(-1isize, false)), vec![6.0]);
}

#[test]
fn arange_refuses_nan_and_infinite_bounds_and_huge_unsigned_stops() {
    let cases: Vec<Build> = vec![
        (
            "arange: start and stop must be finite",
            Box::new(|| Tensor::arange((0.0, f64::NAN, 1.0))),
        ),
        (
            "arange: start and stop must be finite",
            Box::new(|| Tensor::arange((f64::NAN, 1.0))),
        ),
        (
            "arange: start and stop must be finite",
            Box::new(|| Tensor::arange((0.0, f64::INFINITY))),
        ),
        (
            "arange: start and stop must be finite",
            Box::new(|| Tensor::arange(f32::NEG_INFINITY)),
        ),
        (
            "arange: step must be finite and non-zero",
            Box::new(|| Tensor::arange((0.0, 1.0, f64::NAN))),
        ),
        (
            "arange: 1.8446744073709552e19 values",
            Box::new(|| Tensor::arange(usize::MAX)),
        ),
        (
            "arange: 1.8446744073709552e19 values",
            Box::new(|| Tensor::arange((0u64, u64::MAX))),
        ),
    ];
    for (want, build) in cases {
        let m = panic_message(build);
        assert!(m.starts_with(want), "want {want:?}, got {m:?}");
    }
    // A count of 1e300 is printed as such, not as 301 digits.
    let m = panic_message(|| Tensor::arange((0.0, 1e300)));
    assert_eq!(
        m,
        "arange: 1e300 values from 0 to 1e300 by 1 are more than the 281474976710656 (2^48) a tensor may hold"
    );
    // Integer counts are exact: NumPy's arange(-7, 8, 3) and arange(i64::MAX - 2, i64::MAX).
    assert_ints(
        "arange(-7, 8, 3)",
        &Tensor::arange((-7, 8, 3)),
        &[-7, -4, -1, 2, 5],
    );
    let top = Tensor::arange((i64::MAX - 2, i64::MAX));
    assert_ints("arange near i64::MAX", &top, &[i64::MAX - 2, i64::MAX - 1]);
}

/// Float sums round at every step as written, compiled or interpreted: `(x + 1) - 1` of a
/// tiny `x` is 0 in `f32` (as NumPy's `np.float32(1e-10) + 1 - 1`), and a compensated sum
/// keeps the low part that reassociation would fold away.
#[test]
fn float_sums_are_never_reassociated() {
    let x = f32s(&[1e-10, -3e-9, 0.25]);
    let round_trip = (&x + 1.0) - 1.0;
    assert_eq!(values(&round_trip), vec![0.0, 0.0, 0.25]);
    assert_eq!(values(&round_trip), interpreted(&round_trip));
    // Two-sum of a + b: the rounding error e = b - ((a + b) - a) is what the sum lost.
    let a = f32s(&[1.0, 1e8]);
    let b = f32s(&[1e-9, 3.0]);
    let s = &a + &b;
    let e = &b - &(&s - &a);
    assert_eq!(values(&e), vec![1e-9f32 as f64, 3.0]);
    // Scalings by a power of two still merge (exactly): the value is the unmerged one.
    let scaled = (&x * 0.5) * 4.0;
    assert_eq!(values(&scaled), interpreted(&scaled));
}
