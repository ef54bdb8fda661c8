//! The elementwise ops and `torch.nn.functional` helpers a PyTorch/NumPy port expects (issue
//! 43): `log1p`, `expm1`, `log10`, the hyperbolic functions and their inverses, `frac`,
//! `lgamma`, `digamma`, `lerp`, `div_rounding`, `masked_fill`, `softmin`, `normalize`,
//! `var_mean`/`std_mean` and `quick_gelu`.
//!
//! Expected values were computed with NumPy 2 / SciPy (the call is named above each table:
//! `f32` tables apply NumPy's `float32` function, or SciPy's `float64` function to the
//! `float32`-rounded input) and written here; small-argument references are Rust's `f64`
//! `ln_1p`/`exp_m1`/`sinh`/`asinh`/`atanh` (the C library's, as NumPy's are). Gradients are
//! checked against central differences in `f64` and, where the derivative has a closed form,
//! against it. Everything runs compiled on the CPU.

mod common;

use common::{kernel_sources, panic_message};
use std::f64::consts::{LN_2, LOG10_2};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tensor::RoundingMode;
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::prelude::*;
use tensor::runtime::thread_pipeline_counts;

/// The test that counts plans holds this exclusively and every other test holds it shared, so
/// no other test builds a plan while it counts.
static PLANS: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    PLANS.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    PLANS.write().unwrap_or_else(|e| e.into_inner())
}

const METHODS: [VmapMethod; 3] = [
    VmapMethod::Rewrite,
    VmapMethod::Range,
    VmapMethod::PadReduce,
];

/// The values of `t` as `f64`s, whatever its float type.
fn vals(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::F64 => t.to_vec::<f64>().unwrap(),
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        d => panic!("unexpected dtype {d}"),
    }
}

fn f64s(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

fn f32s(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), &[v.len()])
}

/// Every `got` within `atol + rtol |want|` of `want`; infinities equal with their sign, NaN
/// matching NaN.
#[track_caller]
fn close(what: &str, got: &[f64], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_finite() {
            (g - w).abs() <= atol + rtol * w.abs()
        } else {
            g == w || (g.is_nan() && w.is_nan())
        };
        assert!(
            ok,
            "{what}: element {i}: got {g:e}, want {w:e} (relative error {:e})",
            ((g - w) / w).abs()
        );
    }
}

/// Inputs, the expected values and the relative tolerance of one dtype.
struct Table<'a>(&'a [f64], &'a [f64], f64);

/// `f` of `x` in `f64` and in `f32`, against the tables of NumPy/SciPy.
#[track_caller]
fn op_matches(name: &str, f: impl Fn(&Tensor) -> Tensor, t64: Table, t32: Table) {
    let Table(x64, want64, rtol64) = t64;
    close(
        &format!("{name} f64"),
        &vals(&f(&f64s(x64))),
        want64,
        rtol64,
        0.0,
    );
    let Table(x32, want32, rtol32) = t32;
    let y32 = f(&f32s(x32));
    assert_eq!(y32.dtype(), DType::F32, "{name} keeps f32");
    close(&format!("{name} f32"), &vals(&y32), want32, rtol32, 0.0);
}

// ---- values against NumPy ----

/// `np.sinh`, `np.cosh`, `np.arcsinh` of these (`float64`).
const HX: [f64; 12] = [
    -30.0, -5.0, -1.5, -0.3, -1e-05, 0.0, 1e-07, 0.5, 2.0, 10.0, 25.0, 700.0,
];
const SINH: [f64; 12] = [
    -5343237290762.231,
    -74.20321057778875,
    -2.1292794550948173,
    -0.3045202934471426,
    -1.0000000000166668e-05,
    0.0,
    1.0000000000000017e-07,
    0.5210953054937474,
    3.6268604078470186,
    11013.232874703393,
    36002449668.69294,
    5.0711602736750225e+303,
];
const COSH: [f64; 12] = [
    5343237290762.231,
    74.20994852478785,
    2.352409615243247,
    1.0453385141288605,
    1.00000000005,
    1.0,
    1.0000000000000049,
    1.1276259652063807,
    3.7621956910836314,
    11013.232920103323,
    36002449668.69294,
    5.0711602736750225e+303,
];
const ASINH: [f64; 12] = [
    -4.09462222433053,
    -2.3124383412727525,
    -1.1947632172871092,
    -0.29567304756342244,
    -9.999999999833334e-06,
    0.0,
    9.999999999999982e-08,
    0.48121182505960347,
    1.4436354751788103,
    2.99822295029797,
    3.9124227656412556,
    7.2442280258070415,
];
/// The same in `float32`, with 80 in place of 700.
const HX32: [f64; 12] = [
    -30.0, -5.0, -1.5, -0.3, -1e-05, 0.0, 1e-07, 0.5, 2.0, 10.0, 25.0, 80.0,
];
const SINH32: [f64; 12] = [
    -5343237111808.0,
    -74.20320892333984,
    -2.129279375076294,
    -0.30452030897140503,
    -9.999999747378752e-06,
    0.0,
    1.0000000116860974e-07,
    0.5210952758789062,
    3.6268603801727295,
    11013.2333984375,
    36002451456.0,
    2.7703112423383797e+34,
];
const COSH32: [f64; 12] = [
    5343237111808.0,
    74.20994567871094,
    2.352409601211548,
    1.0453383922576904,
    1.0,
    1.0,
    1.0,
    1.1276260614395142,
    3.762195587158203,
    11013.2333984375,
    36002447360.0,
    2.7703112423383797e+34,
];
const ASINH32: [f64; 12] = [
    -4.0946221351623535,
    -2.3124382495880127,
    -1.19476318359375,
    -0.29567307233810425,
    -9.999999747378752e-06,
    0.0,
    1.0000000116860974e-07,
    0.4812118113040924,
    1.4436354637145996,
    2.998223066329956,
    3.9124226570129395,
    5.0752129554748535,
];

#[test]
fn hyperbolic_functions_match_numpy() {
    let _plans = shared();
    // f32's e^x is exp2(x log2 e) with the product rounded in f32: about |x| · 6e-8 relative
    // at large |x|, hence 8e-6 at x = 80.
    op_matches(
        "sinh",
        Tensor::sinh,
        Table(&HX, &SINH, 1e-13),
        Table(&HX32, &SINH32, 8e-6),
    );
    op_matches(
        "cosh",
        Tensor::cosh,
        Table(&HX, &COSH, 1e-13),
        Table(&HX32, &COSH32, 8e-6),
    );
    op_matches(
        "asinh",
        Tensor::asinh,
        Table(&HX, &ASINH, 1e-15),
        Table(&HX32, &ASINH32, 2e-7),
    );
}

/// `np.arccosh` (`float64`, then `float32` of the second list).
const ACOSH_X: [f64; 9] = [1.0, 1.0 + 1e-9, 1.001, 1.5, 2.0, 10.0, 1e5, 1e20, 1e300];
const ACOSH: [f64; 9] = [
    0.0,
    4.4721361396399915e-05,
    0.04471763360830685,
    0.9624236501192069,
    1.3169578969248168,
    2.993222846126381,
    12.206072645505174,
    46.74484904044086,
    691.4686750787737,
];
const ACOSH_X32: [f64; 9] = [1.0, 1.0001, 1.001, 1.5, 2.0, 10.0, 1e5, 1e20, 1e30];
const ACOSH32: [f64; 9] = [
    0.0,
    0.014143191277980804,
    0.044718679040670395,
    0.9624236226081848,
    1.316957950592041,
    2.993222951889038,
    12.206072807312012,
    46.744850158691406,
    69.77069854736328,
];

/// `np.arctanh` (`float64`; `float32` of the same inputs).
const ATANH_X: [f64; 8] = [-0.999, -0.5, -1e-6, 0.0, 3e-3, 0.25, 0.9, 0.999999];
const ATANH: [f64; 8] = [
    -3.8002011672501994,
    -0.5493061443340549,
    -1.0000000000003333e-06,
    0.0,
    0.0030000090000486005,
    0.25541281188299536,
    1.4722194895832204,
    7.254328619247669,
];
const ATANH32: [f64; 8] = [
    -3.8002076148986816,
    -0.5493061542510986,
    -9.999999974752427e-07,
    0.0,
    0.003000008873641491,
    0.2554128170013428,
    1.4722193479537964,
    7.247732639312744,
];

#[test]
fn inverse_hyperbolic_functions_match_numpy() {
    let _plans = shared();
    op_matches(
        "acosh",
        Tensor::acosh,
        Table(&ACOSH_X, &ACOSH, 1e-15),
        Table(&ACOSH_X32, &ACOSH32, 2e-7),
    );
    // Near ±1 the input's own rounding dominates; f32 is checked against f32 NumPy.
    op_matches(
        "atanh",
        Tensor::atanh,
        Table(&ATANH_X, &ATANH, 1e-15),
        Table(&ATANH_X, &ATANH32, 2e-7),
    );
}

/// `np.log1p` (`float64`; `float32` of the first nine).
const LOG1P_X: [f64; 10] = [-0.999, -0.5, -1e-6, 0.0, 3e-3, 0.25, 1.0, 10.0, 1e10, 1e300];
const LOG1P: [f64; 10] = [
    -6.907755278982136,
    -LN_2,
    -1.0000005000003334e-06,
    0.0,
    0.002995508979798479,
    0.22314355131420976,
    LN_2,
    2.3978952727983707,
    23.025850930040455,
    690.7755278982137,
];
const LOG1P32: [f64; 9] = [
    -6.907768249511719,
    -0.6931471824645996,
    -1.0000004522225936e-06,
    0.0,
    0.0029955089557915926,
    0.2231435626745224,
    0.6931471824645996,
    2.397895336151123,
    23.025850296020508,
];

/// `np.expm1` (`float64`, and `float32` with 80 in place of 700).
const EXPM1_X: [f64; 9] = [-50.0, -2.0, -1e-6, 0.0, 3e-3, 0.25, 1.0, 10.0, 700.0];
const EXPM1: [f64; 9] = [
    -1.0,
    -0.8646647167633873,
    -9.999995000001667e-07,
    0.0,
    0.003004504503377026,
    0.2840254166877415,
    1.7182818284590453,
    22025.465794806718,
    1.0142320547350045e+304,
];
const EXPM1_X32: [f64; 9] = [-50.0, -2.0, -1e-6, 0.0, 3e-3, 0.25, 1.0, 10.0, 80.0];
const EXPM132: [f64; 9] = [
    -1.0,
    -0.8646647334098816,
    -9.999995427278918e-07,
    0.0,
    0.0030045046005398035,
    0.2840254306793213,
    1.718281865119934,
    22025.46484375,
    5.540622484676759e+34,
];

#[test]
fn log1p_expm1_and_log10_match_numpy() {
    let _plans = shared();
    op_matches(
        "log1p",
        Tensor::log1p,
        Table(&LOG1P_X, &LOG1P, 1e-15),
        Table(&LOG1P_X[..9], &LOG1P32, 2e-7),
    );
    // e^700 in f64: exp2 of a rounded 700 log2 e, about 700 · 1.1e-16 relative.
    op_matches(
        "expm1",
        Tensor::expm1,
        Table(&EXPM1_X, &EXPM1, 1e-13),
        Table(&EXPM1_X32, &EXPM132, 8e-6),
    );
    // np.log10 of these
    let x = [1e-5, 0.5, 2.0, 1000.0, 12345.678];
    let want = [-5.0, -LOG10_2, LOG10_2, 3.0, 4.091514945509202];
    op_matches(
        "log10",
        Tensor::log10,
        Table(&x, &want, 3e-16),
        Table(&x, &want, 2e-7),
    );
    // Integers are lifted to f32, as NumPy lifts them to float64.
    let i = Tensor::from_vec(vec![0i32, 7], &[2]);
    close(
        "log1p of i32",
        &vals(&i.log1p()),
        &[0.0, 2.0794415416798357],
        1e-7,
        0.0,
    );
}

#[test]
fn tiny_arguments_keep_their_relative_accuracy() {
    let _plans = shared();
    let xs = [1e-10, -1e-10, 3e-8, -7e-13, 1e-20, 2.5e-300];
    type Case = (&'static str, fn(&Tensor) -> Tensor, fn(f64) -> f64);
    let cases: [Case; 5] = [
        ("log1p", Tensor::log1p, f64::ln_1p),
        ("expm1", Tensor::expm1, f64::exp_m1),
        ("sinh", Tensor::sinh, f64::sinh),
        ("asinh", Tensor::asinh, f64::asinh),
        ("atanh", Tensor::atanh, f64::atanh),
    ];
    for (name, f, reference) in cases {
        let want: Vec<f64> = xs.iter().map(|&x| reference(x)).collect();
        close(
            &format!("{name} f64"),
            &vals(&f(&f64s(&xs))),
            &want,
            1e-14,
            0.0,
        );
        // f32 inputs are the rounded ones; the reference is taken at the rounded value.
        let xs32 = &xs[..5];
        let want32: Vec<f64> = xs32
            .iter()
            .map(|&x| reference(f64::from(x as f32)))
            .collect();
        close(
            &format!("{name} f32"),
            &vals(&f(&f32s(xs32))),
            &want32,
            1e-6,
            0.0,
        );
    }
    // The naive forms lose everything: log(1 + 1e-10) in f32 is 0.
    let naive = (f32s(&[1e-10]) + 1.0).log();
    assert_eq!(vals(&naive), vec![0.0]);
}

#[test]
fn special_values_are_torchs() {
    let _plans = shared();
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let x = f64s(&[-1.0, -2.0, inf, -inf, nan]);
    close(
        "log1p",
        &vals(&x.log1p()),
        &[-inf, nan, inf, nan, nan],
        0.0,
        0.0,
    );
    let x = f64s(&[-inf, inf, 800.0, nan]);
    close("expm1", &vals(&x.expm1()), &[-1.0, inf, inf, nan], 0.0, 0.0);
    // sinh/cosh stay finite up to ~710.47 (e^x alone overflows at 709.78), then overflow.
    let x = f64s(&[710.0, -710.0, 711.0, inf, -inf, nan]);
    let sinh710 = 1.1169973830808555e308; // np.sinh(710.0)
    close(
        "sinh",
        &vals(&x.sinh()),
        &[sinh710, -sinh710, inf, inf, -inf, nan],
        1e-13,
        0.0,
    );
    close(
        "cosh",
        &vals(&x.cosh()),
        &[sinh710, sinh710, inf, inf, inf, nan],
        1e-13,
        0.0,
    );
    // np.arcsinh / np.arccosh of 1e300 and inf: no overflow of x².
    let x = f64s(&[1e300, -1e300, inf, -inf, nan]);
    let big = 691.4686750787737;
    close(
        "asinh",
        &vals(&x.asinh()),
        &[big, -big, inf, -inf, nan],
        1e-15,
        0.0,
    );
    let x = f64s(&[0.5, -1.0, -3.0, inf, nan]);
    close(
        "acosh",
        &vals(&x.acosh()),
        &[nan, nan, nan, inf, nan],
        0.0,
        0.0,
    );
    let x = f64s(&[1.0, -1.0, 1.5, nan]);
    close("atanh", &vals(&x.atanh()), &[inf, -inf, nan, nan], 0.0, 0.0);
    // Odd functions keep the sign of zero.
    let zeros = f64s(&[-0.0, 0.0]);
    for (name, y) in [
        ("log1p", zeros.log1p()),
        ("expm1", zeros.expm1()),
        ("sinh", zeros.sinh()),
        ("asinh", zeros.asinh()),
        ("atanh", zeros.atanh()),
    ] {
        let v = vals(&y);
        assert!(
            v[0] == 0.0 && v[0].is_sign_negative() && v[1].is_sign_positive(),
            "{name}(±0) = {v:?}"
        );
    }
}

// ---- lgamma and digamma against SciPy ----

/// `scipy.special.gammaln` and `scipy.special.psi` of these (`float64`).
const GX: [f64; 25] = [
    -100.5,
    -10.5,
    -3.7,
    -2.5,
    -1.5,
    -0.5,
    -0.001,
    1e-08,
    0.001,
    0.1,
    0.5,
    1.0,
    1.4616321449683622,
    2.0,
    2.5,
    3.0,
    5.5,
    9.99,
    10.0,
    10.01,
    20.0,
    100.5,
    100000.0,
    10000000000.0,
    1e+100,
];
const GAMMALN: [f64; 25] = [
    -364.9009683094273,
    -15.147270590717842,
    -1.3797399049658245,
    -0.05624371649767401,
    0.860047015376481,
    1.2655121234846454,
    6.908333317515028,
    18.42068073818021,
    6.907178885383853,
    2.252712651734206,
    0.5723649429247,
    0.0,
    -0.1214862905358497,
    0.0,
    0.2846828704729192,
    LN_2,
    3.9578139676187165,
    12.779315214350195,
    12.801827480081469,
    12.824350262448247,
    39.339884187199495,
    361.43554046777757,
    1051287.7089736569,
    220258509288.81058,
    2.292585092994046e+102,
];
const PSI: [f64; 25] = [
    4.615124601338064,
    2.3982391295357814,
    -0.8450768588704185,
    1.1031566406452433,
    0.7031566406452434,
    0.03648997397857651,
    999.4211381978913,
    -100000000.57721564,
    -1000.5755719318103,
    -10.423754940411076,
    -1.9635100260214235,
    -0.5772156649015329,
    -9.241265521729427e-17,
    0.42278433509846713,
    0.7031566406452432,
    0.9227843350984671,
    1.611093148581751,
    2.250700372831201,
    2.251752589066721,
    2.2528037003181356,
    2.970523992242149,
    4.605174352581845,
    11.512920464961896,
    23.025850929890456,
    230.25850929940458,
];
/// The `float32` grid (SciPy's `float64` functions of the rounded inputs).
const GX32: [f64; 23] = [
    -10.5,
    -3.700000047683716,
    -2.5,
    -1.5,
    -0.5,
    -0.0010000000474974513,
    9.99999993922529e-09,
    0.0010000000474974513,
    0.10000000149011612,
    0.5,
    1.0,
    1.4616321325302124,
    2.0,
    2.5,
    3.0,
    5.5,
    9.989999771118164,
    10.0,
    10.010000228881836,
    20.0,
    100.5,
    100000.0,
    10000000000.0,
];
const GAMMALN32: [f64; 23] = [
    -15.147270590717842,
    -1.3797398646694028,
    -0.05624371649767401,
    0.860047015376481,
    1.2655121234846454,
    6.908333270045072,
    18.42068074425768,
    6.907178837859066,
    2.252712636201601,
    0.5723649429247,
    0.0,
    -0.12148629053584942,
    0.0,
    0.2846828704729192,
    LN_2,
    3.9578139676187165,
    12.779314699205763,
    12.801827480081469,
    12.824350778074097,
    39.339884187199495,
    361.43554046777757,
    1051287.7089736569,
    220258509288.81058,
];
const PSI32: [f64; 23] = [
    2.3982391295357814,
    -0.8450775666123215,
    1.1031566406452433,
    0.7031566406452434,
    0.03648997397857651,
    999.4210907003641,
    -100000001.18496275,
    -1000.5755244342832,
    -10.423754789263684,
    -1.9635100260214235,
    -0.5772156649015329,
    -1.2036052549106669e-08,
    0.42278433509846713,
    0.7031566406452432,
    0.9227843350984671,
    1.611093148581751,
    2.2507003487352195,
    2.251752589066721,
    2.252803724363535,
    2.970523992242149,
    4.605174352581845,
    11.512920464961896,
    23.025850929890456,
];

/// Within `tol · max(1, |want|)`: relative above 1, absolute below (both functions cross zero,
/// where no formula of a shifted argument keeps relative accuracy).
#[track_caller]
fn gamma_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}: element {i}: got {g:e}, SciPy {w:e}"
        );
    }
}

#[test]
fn lgamma_and_digamma_match_scipy_on_a_grid_with_negatives_and_large_values() {
    let _plans = shared();
    gamma_close("lgamma f64", &vals(&f64s(&GX).lgamma()), &GAMMALN, 2e-14);
    gamma_close("digamma f64", &vals(&f64s(&GX).digamma()), &PSI, 2e-14);
    // f32 is computed in f64 and rounded once: within an f32 ulp (2^-23 relative).
    let ulp32 = 1.2e-7;
    let lgamma32 = f32s(&GX32).lgamma();
    assert_eq!(lgamma32.dtype(), DType::F32);
    gamma_close("lgamma f32", &vals(&lgamma32), &GAMMALN32, ulp32);
    gamma_close("digamma f32", &vals(&f32s(&GX32).digamma()), &PSI32, ulp32);
}

#[test]
fn lgamma_and_digamma_poles_are_torchs() {
    let _plans = shared();
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    // torch.lgamma (C's lgamma): inf at 0, the negative integers and ±inf (SciPy's gammaln
    // gives -inf at -inf; torch and C give inf).
    let x = f64s(&[0.0, -0.0, -1.0, -2.0, -50.0, inf, -inf, nan]);
    close(
        "lgamma",
        &vals(&x.lgamma()),
        &[inf, inf, inf, inf, inf, inf, inf, nan],
        0.0,
        0.0,
    );
    // torch.digamma: -inf at +0, inf at -0 (as SciPy's psi), NaN at the negative integers
    // and -inf, inf at inf.
    let x = f64s(&[0.0, -0.0, -1.0, -2.0, inf, -inf, nan]);
    close(
        "digamma",
        &vals(&x.digamma()),
        &[-inf, inf, nan, nan, inf, nan, nan],
        0.0,
        0.0,
    );
    let x = f32s(&[0.0, -3.0, 1e30]);
    let l = vals(&x.lgamma());
    assert_eq!(&l[..2], &[inf, inf]);
    // scipy.special.gammaln(1e30) = 6.807755278982137e+31
    close(
        "lgamma f32 large",
        &l[2..],
        &[6.807755382926351e31],
        1e-6,
        0.0,
    );
}

// ---- frac, lerp, div_rounding, masked_fill ----

#[test]
fn frac_lerp_and_rounding_division_match_torch() {
    let _plans = shared();
    // x - np.trunc(x)
    let x = f64s(&[-3.75, -0.5, 0.0, 2.25, 1e20]);
    close(
        "frac",
        &vals(&x.frac()),
        &[-0.75, -0.5, 0.0, 0.25, 0.0],
        0.0,
        0.0,
    );
    let i = Tensor::from_vec(vec![-3i32, 4], &[2]);
    assert_eq!(i.frac().to_vec::<i32>().unwrap(), vec![0, 0]);

    // torch.lerp(a, b, w) = a + w (b - a) where |w| < 0.5, else b - (b - a)(1 - w).
    let a = f64s(&[1.0, -2.0, 3.0, 1e16]);
    let b = f64s(&[3.0, 2.0, -1.0, 1.0]);
    let w = f64s(&[0.25, 0.5, 1.0, 1.0]);
    close(
        "lerp tensor weight",
        &vals(&a.lerp(&b, &w)),
        &[1.5, 0.0, -1.0, 1.0],
        0.0,
        0.0,
    );
    close(
        "lerp scalar weight",
        &vals(&a.lerp(&b, 0.75)),
        &[2.5, 1.0, 0.0, 2500000000000001.0],
        1e-15,
        0.0,
    );
    close(
        "lerp scalar end",
        &vals(&a.lerp(0.0, 2.0)),
        &[-1.0, 2.0, -3.0, -1e16],
        0.0,
        0.0,
    );

    // np.trunc(a / b) and np.floor_divide(a, b) (Python's //): 1 // 0.1 == 9.0
    let a = f64s(&[7.0, -7.0, 7.0, -7.0, 1.0, -0.0, 1.0, -1.0, 0.5]);
    let b = f64s(&[2.0, 2.0, -2.0, -2.0, 0.1, 3.0, 0.0, 0.0, -3.0]);
    let inf = f64::INFINITY;
    close(
        "div trunc",
        &vals(&a.div_rounding(&b, RoundingMode::Trunc)),
        &[3.0, -3.0, -3.0, 3.0, 10.0, -0.0, inf, -inf, -0.0],
        0.0,
        0.0,
    );
    let floor = vals(&a.div_rounding(&b, RoundingMode::Floor));
    close(
        "div floor",
        &floor,
        &[3.0, -4.0, -4.0, 3.0, 9.0, -0.0, inf, -inf, -1.0],
        0.0,
        0.0,
    );
    assert!(floor[5].is_sign_negative(), "-0.0 // 3 is -0.0");
    // Integers: C's division and floor division, i32 in and out.
    let a = Tensor::from_vec(vec![7i32, -7, 7, -7], &[4]);
    let t = a.div_rounding(-2, RoundingMode::Trunc);
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![-3, 3, -3, 3]);
    let f = a.div_rounding(-2, RoundingMode::Floor);
    assert_eq!(f.to_vec::<i32>().unwrap(), vec![-4, 3, -4, 3]);
    // f32 with a scalar divisor.
    let y = f32s(&[5.5, -5.5]).div_rounding(2.0, RoundingMode::Floor);
    close("div floor f32", &vals(&y), &[2.0, -3.0], 0.0, 0.0);
    // The gradient is zero, as torch's.
    let g = grad(
        |x: &Tensor| x.div_rounding(3.0, RoundingMode::Floor).sum_all(),
        0,
    )
    .call1(&[f64s(&[1.0, 5.0])]);
    assert_eq!(vals(&g), vec![0.0, 0.0]);
}

#[test]
fn masked_fill_fills_where_the_mask_is_true_with_a_run_time_value() {
    let _plans = shared();
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3]);
    let mask = Tensor::from_vec(vec![true, false, true], &[3]);
    let y = x.masked_fill(&mask, 0.5);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![0.5, -2.0, 0.5, 0.5, 5.0, 0.5]
    );
    let y = x.masked_fill(&x.lt(0.0), f64::NEG_INFINITY);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![
            1.0,
            f32::NEG_INFINITY,
            3.0,
            f32::NEG_INFINITY,
            5.0,
            f32::NEG_INFINITY
        ]
    );
    // An integer tensor keeps its dtype; the value is cast to it.
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]);
    assert_eq!(
        i.masked_fill(&mask, 7.9).to_vec::<i32>().unwrap(),
        vec![7, 2, 7]
    );
    // A 0-d tensor value.
    let v = Tensor::scalar(9.0f32);
    assert_eq!(
        x.masked_fill(&mask, &v).to_vec::<f32>().unwrap(),
        vec![9.0, -2.0, 9.0, 9.0, 5.0, 9.0]
    );
    // Gradient: 1 where the mask is false.
    let g = grad(
        move |x: &Tensor| {
            x.masked_fill(&Tensor::from_vec(vec![true, false], &[2]), 3.0)
                .sum_all()
        },
        0,
    )
    .call1(&[f64s(&[1.0, 2.0])]);
    assert_eq!(vals(&g), vec![0.0, 1.0]);
}

#[test]
fn new_fill_values_weights_and_divisors_replay_the_compiled_plan() {
    let _plans = exclusive();
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]);
    let e = Tensor::from_vec(vec![5.0f32, 2.0, -1.0], &[3]);
    let mask = x.lt(0.0);
    let fill = |v: f64| x.masked_fill(&mask, v).to_vec::<f32>().unwrap();
    let lerp = |w: f64| vals(&x.lerp(&e, w));
    let floor = |d: f64| vals(&x.div_rounding(d, RoundingMode::Floor));
    // The first of each compiles; new values after it must not.
    assert_eq!(fill(0.25), vec![1.0, 0.25, 3.0]);
    close("lerp 0.25", &lerp(0.25), &[2.0, -1.0, 2.0], 1e-7, 0.0);
    close("floor 2", &floor(2.0), &[0.0, -1.0, 1.0], 0.0, 0.0);
    let before = thread_pipeline_counts();
    assert_eq!(fill(-7.5), vec![1.0, -7.5, 3.0]);
    assert_eq!(fill(2.75), vec![1.0, 2.75, 3.0]);
    close("lerp 0.75", &lerp(0.75), &[4.0, 1.0, 0.0], 1e-7, 0.0);
    close("floor 0.5", &floor(0.5), &[2.0, -4.0, 6.0], 0.0, 0.0);
    let after = thread_pipeline_counts();
    assert_eq!(
        after.plans_made(),
        before.plans_made(),
        "a new value made a plan"
    );
    assert_eq!(
        after.kernels_generated, before.kernels_generated,
        "a new value generated (and so compiled) a kernel"
    );
}

#[test]
fn masked_fill_refuses_a_mask_that_is_not_bool_or_does_not_fit() {
    let _plans = shared();
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let m = panic_message(|| x.masked_fill(&Tensor::ones(&[2, 2], DType::F32), 0.5));
    assert!(m.starts_with("masked_fill: the mask is f32"), "{m}");
    let m = panic_message(|| x.masked_fill(&Tensor::ones(&[3, 2, 2], DType::Bool), 0.5));
    assert!(m.contains("masked_fill") && m.contains("[3, 2, 2]"), "{m}");
    let m = panic_message(|| x.masked_fill(&Tensor::ones(&[2], DType::Bool), &x));
    assert!(m.contains("masked_fill") && m.contains("0-d"), "{m}");
}

// ---- nn.functional helpers ----

#[test]
fn softmin_normalize_var_mean_std_mean_and_quick_gelu_match_torch() {
    let _plans = shared();
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5, 4.0, -1.0], &[2, 3]);
    // scipy.special.softmax(-x, axis=1)
    close(
        "softmin",
        &vals(&x.softmin(1)),
        &[
            0.047123416524664154,
            0.9464991225528937,
            0.006377460922442298,
            0.18142608857948594,
            0.005478593159646257,
            0.8130953182608678,
        ],
        1e-6,
        1e-7,
    );
    // x / np.maximum(np.linalg.norm(x, ord=p, axis=0, keepdims=True), eps)
    close(
        "normalize p=2 axis 0",
        &vals(&x.normalize(2.0, 0, 1e-12)),
        &[
            0.89442719,
            -0.4472136,
            0.9486833,
            0.4472136,
            0.89442719,
            -0.31622777,
        ],
        1e-6,
        1e-7,
    );
    close(
        "normalize p=1 axis 1",
        &vals(&x.normalize(1.0, 1, 1e-12)),
        &[
            0.16666667,
            -0.33333333,
            0.5,
            0.09090909,
            0.72727273,
            -0.18181818,
        ],
        1e-6,
        1e-7,
    );
    close(
        "normalize p=3 axis -1",
        &vals(&x.normalize(3.0, -1, 1e-12)),
        &[
            0.30285343213869,
            -0.60570686427738,
            0.90856029641607,
            0.12427604554036396,
            0.9942083643229117,
            -0.24855209108072793,
        ],
        1e-6,
        1e-7,
    );
    let zeros = Tensor::zeros(&[2, 2], DType::F32);
    assert_eq!(vals(&zeros.normalize(2.0, 1, 1e-12)), vec![0.0; 4]);

    // np.var(x, axis=1, ddof=1), np.mean(x, axis=1)
    let (var, mean) = x.var_mean(1, 1.0, false);
    close(
        "var_mean var",
        &vals(&var),
        &[6.33333333, 6.58333333],
        1e-6,
        0.0,
    );
    close(
        "var_mean mean",
        &vals(&mean),
        &[0.66666667, 1.16666667],
        1e-6,
        0.0,
    );
    let (std, mean) = x.std_mean([0, 1], 0.0, true);
    assert_eq!(std.shape(), vec![1, 1]);
    // np.std(x), np.mean(x)
    close("std_mean std", &vals(&std), &[2.089989367330742], 1e-6, 0.0);
    close("std_mean mean", &vals(&mean), &[0.91666667], 1e-6, 0.0);

    // x * scipy.special.expit(1.702 * x)
    close(
        "quick_gelu",
        &vals(&tensor::nn::quick_gelu(&x)),
        &[
            0.8457957659328212,
            -0.06434137685579186,
            2.981928690292214,
            0.35038843660638014,
            3.9955852758604187,
            -0.1542042340671787,
        ],
        1e-6,
        1e-7,
    );
}

// ---- gradients ----

/// Central differences of `sum(f(x))` at each element of `x`, in f64: the two results are
/// subtracted element by element before they are summed, so a large term elsewhere does not
/// swamp the difference.
fn finite_differences(f: &dyn Fn(&Tensor) -> Tensor, x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let h = 1e-6 * x[i].abs().max(1.0);
            let at = |d: f64| {
                let mut v = x.to_vec();
                v[i] += d;
                vals(&f(&f64s(&v)))
            };
            let (up, down) = (at(h), at(-h));
            up.iter().zip(&down).map(|(u, d)| u - d).sum::<f64>() / (2.0 * h)
        })
        .collect()
}

#[test]
fn gradients_match_finite_differences_in_f64() {
    let _plans = shared();
    type Case = (&'static str, fn(&Tensor) -> Tensor, Vec<f64>);
    let cases: Vec<Case> = vec![
        (
            "log1p",
            Tensor::log1p,
            vec![-0.7, -1e-3, 0.0, 2e-4, 3.0, 1e3],
        ),
        (
            "expm1",
            Tensor::expm1,
            vec![-20.0, -0.4, 0.0, 1e-4, 2.0, 30.0],
        ),
        ("log10", Tensor::log10, vec![0.01, 1.0, 7.5]),
        (
            "sinh",
            Tensor::sinh,
            vec![-25.0, -1.5, 0.0, 1e-3, 3.0, 21.0],
        ),
        (
            "cosh",
            Tensor::cosh,
            vec![-25.0, -1.5, 0.0, 1e-3, 3.0, 21.0],
        ),
        ("asinh", Tensor::asinh, vec![-40.0, -0.7, 0.0, 1e-3, 5.0]),
        ("acosh", Tensor::acosh, vec![1.01, 1.5, 4.0, 1e3]),
        ("atanh", Tensor::atanh, vec![-0.99, -0.3, 0.0, 1e-3, 0.8]),
        ("frac", Tensor::frac, vec![-2.3, 0.4, 5.7]),
        (
            "lgamma",
            Tensor::lgamma,
            vec![-3.7, -0.5, 0.01, 0.7, 1.5, 4.2, 9.9, 10.1, 55.0],
        ),
        (
            "digamma",
            Tensor::digamma,
            vec![-3.7, -0.5, 0.01, 0.7, 1.5, 4.2, 9.9, 10.1, 55.0],
        ),
        (
            "softmin",
            |x| x.softmin(0).mul(f64s(&[1.0, -2.0, 0.5])),
            vec![0.3, -1.0, 2.0],
        ),
        (
            "normalize",
            |x| x.normalize(2.0, 0, 1e-12).mul(f64s(&[1.0, -2.0, 0.5])),
            vec![0.3, -1.0, 2.0],
        ),
        (
            "normalize p=3",
            |x| x.normalize(3.0, 0, 1e-12).mul(f64s(&[1.0, -2.0, 0.5])),
            vec![0.3, -1.0, 2.0],
        ),
        (
            "var_mean",
            |x| {
                let (v, m) = x.var_mean(0, 1.0, false);
                v + m * 3.0
            },
            vec![0.3, -1.0, 2.0, 0.7],
        ),
        (
            "std_mean",
            |x| {
                let (s, m) = x.std_mean(0, 0.0, false);
                s * m
            },
            vec![0.3, -1.0, 2.0, 0.7],
        ),
        (
            "quick_gelu",
            |x| tensor::nn::quick_gelu(x),
            vec![-3.0, -0.2, 0.0, 1.4],
        ),
        (
            "lerp self",
            |x| x.lerp(f64s(&[2.0, -1.0, 4.0]), f64s(&[0.2, 0.5, 0.9])),
            vec![0.3, -1.0, 2.0],
        ),
        (
            "lerp end",
            |x| f64s(&[2.0, -1.0, 4.0]).lerp(x, f64s(&[0.2, 0.5, 0.9])),
            vec![0.3, -1.0, 2.0],
        ),
        (
            "lerp weight",
            |x| f64s(&[2.0, -1.0, 4.0]).lerp(f64s(&[0.5, 3.0, -2.0]), x),
            vec![0.2, 0.5, 0.9],
        ),
    ];
    for (name, f, x) in cases {
        let g = grad(move |x: &Tensor| f(x).sum_all(), 0).call1(&[f64s(&x)]);
        let want = finite_differences(&f, &x);
        close(&format!("d {name}"), &vals(&g), &want, 1e-6, 1e-8);
    }
}

#[test]
fn log1p_and_expm1_gradients_are_the_exact_derivatives_near_zero() {
    let _plans = shared();
    let xs = [1e-10, -1e-10, 1e-5, -0.5, 3.0];
    let d = grad(|x: &Tensor| x.log1p().sum_all(), 0).call1(&[f64s(&xs)]);
    let want: Vec<f64> = xs.iter().map(|x| 1.0 / (1.0 + x)).collect();
    close("d log1p f64", &vals(&d), &want, 2e-16, 0.0);
    let d = grad(|x: &Tensor| x.expm1().sum_all(), 0).call1(&[f64s(&xs)]);
    let want: Vec<f64> = xs.iter().map(|x| x.exp()).collect();
    close("d expm1 f64", &vals(&d), &want, 1e-15, 0.0);
    // In f32 Kahan's quotient differentiates into a cancellation of about 1e-3 at x = 1e-4;
    // the derivative carried is 1/(1+x) to the last bit.
    let xs32 = [1e-4, -3e-5, 1e-7];
    let d = grad(|x: &Tensor| x.log1p().sum_all(), 0).call1(&[f32s(&xs32)]);
    let want: Vec<f64> = xs32
        .iter()
        .map(|&x| 1.0 / (1.0 + f64::from(x as f32)))
        .collect();
    close("d log1p f32", &vals(&d), &want, 1.2e-7, 0.0);
    let d = grad(|x: &Tensor| x.expm1().sum_all(), 0).call1(&[f32s(&xs32)]);
    let want: Vec<f64> = xs32.iter().map(|&x| f64::from(x as f32).exp()).collect();
    close("d expm1 f32", &vals(&d), &want, 1.2e-7, 0.0);
    // Second derivatives: -1/(1+x)² and e^x.
    let x = f64s(&[1e-3, -0.25]);
    let d2 = grad(
        |x: &Tensor| {
            grad(|x: &Tensor| x.log1p().sum_all(), 0)
                .call1(std::slice::from_ref(x))
                .sum_all()
        },
        0,
    )
    .call1(std::slice::from_ref(&x));
    close(
        "d² log1p",
        &vals(&d2),
        &[-1.0 / (1.001f64 * 1.001), -1.0 / (0.75f64 * 0.75)],
        1e-14,
        0.0,
    );
    let d2 = grad(
        |x: &Tensor| {
            grad(|x: &Tensor| x.expm1().sum_all(), 0)
                .call1(std::slice::from_ref(x))
                .sum_all()
        },
        0,
    )
    .call1(&[x]);
    close(
        "d² expm1",
        &vals(&d2),
        &[1e-3f64.exp(), (-0.25f64).exp()],
        1e-14,
        0.0,
    );
    // Edges as torch: d log1p(-1) = inf, d log1p(inf) = 0, d expm1(-inf) = 0.
    let inf = f64::INFINITY;
    let d = grad(|x: &Tensor| x.log1p().sum_all(), 0).call1(&[f64s(&[-1.0, inf])]);
    assert_eq!(vals(&d), vec![inf, 0.0]);
    let d = grad(|x: &Tensor| x.expm1().sum_all(), 0).call1(&[f64s(&[-inf])]);
    assert_eq!(vals(&d), vec![0.0]);
    // At ±0 every one of these has derivative 1 (the sign of a zero result is kept without
    // changing the derivative's sign).
    type Unary = fn(&Tensor) -> Tensor;
    let odd: [(&str, Unary); 5] = [
        ("log1p", Tensor::log1p),
        ("expm1", Tensor::expm1),
        ("sinh", Tensor::sinh),
        ("asinh", Tensor::asinh),
        ("atanh", Tensor::atanh),
    ];
    for (name, f) in odd {
        let d = grad(move |x: &Tensor| f(x).sum_all(), 0).call1(&[f64s(&[-0.0, 0.0])]);
        assert_eq!(vals(&d), vec![1.0, 1.0], "d {name} at ±0");
    }
    // A zero row of normalize: the gradient is 1/eps, not NaN.
    let d = grad(|x: &Tensor| x.normalize(2.0, 0, 0.5).sum_all(), 0).call1(&[f64s(&[0.0, 0.0])]);
    assert_eq!(vals(&d), vec![2.0, 2.0]);
}

// ---- vmap and fusion ----

#[test]
fn vmap_by_every_method_matches_a_loop_over_samples() {
    let _plans = shared();
    let xs = Tensor::from_vec(
        vec![
            0.3f32, -1.2, 2.5, 1e-4, 0.9, -0.6, 4.0, 7.5, -2.2, 0.05, 1.5, 3.3,
        ],
        &[4, 3],
    );
    let ends = Tensor::from_vec(
        vec![
            1.0f32, 2.0, -3.0, 0.5, 0.0, 1.0, -1.0, 4.0, 2.0, 0.25, -0.5, 0.0,
        ],
        &[4, 3],
    );
    let per_sample = |x: &Tensor, e: &Tensor| {
        let special = x.lgamma() + x.digamma().sinh() * 0.1 + x.expm1().asinh() - x.log1p().cosh();
        let nn = x.normalize(2.0, 0, 1e-12) + x.softmin(0) + x.masked_fill(&x.lt(0.0), 0.5);
        let (v, m) = x.var_mean(0, 1.0, false);
        special.where_(special.isfinite(), 0.0) + nn + x.lerp(e, 0.3) + v * m
    };
    let want: Vec<f64> = (0..4)
        .flat_map(|i| {
            let x = xs.narrow(0, i, 1).reshape(&[3]);
            let e = ends.narrow(0, i, 1).reshape(&[3]);
            vals(&per_sample(&x, &e))
        })
        .collect();
    for method in METHODS {
        let got = vmap_with(per_sample, 0, 0, method).call1(&[xs.clone(), ends.clone()]);
        assert_eq!(got.shape(), vec![4, 3], "{method:?}");
        close(&format!("{method:?}"), &vals(&got), &want, 1e-5, 1e-5);
    }
}

#[test]
fn an_elementwise_special_op_is_one_fused_kernel() {
    let _plans = shared();
    let x = Tensor::from_vec(vec![0.5f32, 1e-6, -0.25, 3.0], &[4]);
    for (name, y) in [
        ("log1p", x.log1p()),
        ("expm1", x.expm1()),
        ("sinh", x.sinh()),
        ("atanh", x.atanh()),
        ("lgamma", x.lgamma()),
        ("digamma", x.digamma()),
    ] {
        assert_eq!(kernel_sources(&y).len(), 1, "{name}");
    }
    // And so is a chain of them with their gradient.
    let g = grad(|x: &Tensor| x.sinh().log1p().sum_all(), 0).call1(&[x.abs()]);
    assert_eq!(kernel_sources(&g).len(), 1, "d log1p(sinh)");
}

#[test]
fn half_precision_computes_in_f32_and_keeps_its_dtype() {
    let _plans = shared();
    // torch computes f16/bf16 math in f32: 300² and 2^28 would overflow f16 on the way.
    let x = f32s(&[1e-3, 0.5, 3.0, 300.0]);
    type Unary = fn(&Tensor) -> Tensor;
    let ops: [(&str, Unary); 6] = [
        ("log1p", Tensor::log1p),
        ("expm1", Tensor::expm1),
        ("asinh", Tensor::asinh),
        ("acosh", Tensor::acosh),
        ("lgamma", Tensor::lgamma),
        ("digamma", Tensor::digamma),
    ];
    for dtype in [DType::F16, DType::BF16] {
        for (name, f) in ops {
            let half = f(&x.cast(dtype));
            assert_eq!(half.dtype(), dtype, "{name}");
            let want: Vec<f64> = vals(&f(&x).cast(dtype).cast(DType::F32));
            let got = vals(&half.cast(DType::F32));
            close(&format!("{name} {dtype}"), &got, &want, 1e-2, 0.0);
        }
    }
}
