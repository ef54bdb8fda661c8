//! The decomposed `f32` transcendentals (`codegen::transcendental`) as the C backend compiles
//! them: 2^20 inputs per function, compared with the `f64` functions in units in the last place
//! (the same bounds as the rule-level sweeps in `tensor-core`: 2 ulp for `exp2` and `log2`,
//! 2 ulp for `sin` and `cos` up to `1e4`, 3 ulp beyond, 3 for `erf`, 8 for `erfc`), and the
//! special values.

use tensor::prelude::*;
use tensor::runtime::realize::to_vec;

const N: usize = 1 << 20;

/// `|got - exact|` in units of the spacing of `f32` at `exact`; 0 for matching NaN or infinity.
fn ulp_error(got: f32, exact: f64) -> f64 {
    let rounded = exact as f32;
    if rounded.is_nan() || got.is_nan() || rounded.is_infinite() || got.is_infinite() {
        let same = (rounded.is_nan() && got.is_nan()) || got == rounded;
        return if same { 0.0 } else { f64::INFINITY };
    }
    let magnitude = exact.abs().max(f32::MIN_POSITIVE as f64);
    (got as f64 - exact).abs() / 2f64.powi(magnitude.log2().floor() as i32 - 23)
}

/// `N` inputs spread over `[lo, hi]` (a fixed permutation-like walk, so neighbours differ).
fn inputs(lo: f64, hi: f64) -> Vec<f32> {
    (0..N)
        .map(|i| {
            let t = ((i as u64 * 2_654_435_761) % N as u64) as f64 / N as f64;
            (lo + (hi - lo) * t) as f32
        })
        .collect()
}

#[track_caller]
fn check(name: &str, xs: Vec<f32>, f: fn(&Tensor) -> Tensor, exact: fn(f64) -> f64, ulps: f64) {
    let got: Vec<f32> = to_vec(&f(&Tensor::from_vec(xs.clone(), &[xs.len()]))).unwrap();
    let (worst, at) = xs
        .iter()
        .zip(&got)
        .map(|(&x, &g)| (ulp_error(g, exact(x as f64)), x))
        .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
    println!(
        "compiled {name}: {} inputs, max {worst:.3} ulp at x = {at:e}",
        xs.len()
    );
    assert!(worst <= ulps, "compiled {name}: {worst} ulp at x = {at:e}");
}

#[test]
fn compiled_exp2_log2_within_2_ulp() {
    check("exp2", inputs(-150.0, 128.0), |t| t.exp2(), f64::exp2, 2.0);
    let positive: Vec<f32> = (0..N as u32)
        .map(|i| f32::from_bits(i * 2039 % 0x7f80_0000))
        .collect();
    check(
        "log2 all positive floats",
        positive,
        |t| t.log2(),
        f64::log2,
        2.0,
    );
    check(
        "log2 [0.5, 2]",
        inputs(0.5, 2.0),
        |t| t.log2(),
        f64::log2,
        2.0,
    );
}

#[test]
fn compiled_sin_cos_within_2_ulp_up_to_1e4() {
    check("sin", inputs(-1e4, 1e4), |t| t.sin(), f64::sin, 2.0);
    check("cos", inputs(-1e4, 1e4), |t| t.cos(), f64::cos, 2.0);
    let large: Vec<f32> = (0..N as u32 / 4)
        .map(|i| f32::from_bits(0x4700_0000 + i * 2011 % 0x3880_0000))
        .collect();
    check("sin |x| > 32768", large.clone(), |t| t.sin(), f64::sin, 3.0);
    check("cos |x| > 32768", large, |t| t.cos(), f64::cos, 3.0);
}

#[test]
fn compiled_erf_within_3_ulp_and_erfc_within_8_ulp() {
    check(
        "erf",
        inputs(-5.0, 5.0),
        |t| t.erf(),
        tensor::core::uop::alu::erf,
        3.0,
    );
    check(
        "erfc",
        inputs(-4.0, 10.05),
        |t| t.erfc(),
        tensor::core::uop::alu::erfc,
        8.0,
    );
}

#[test]
fn compiled_special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let tiny = f32::from_bits(1);
    let xs = vec![
        nan, inf, -inf, 0.0, -0.0, tiny, 1.0, -1.0, 128.0, -150.0, -149.0, 3e38,
    ];
    let x = Tensor::from_vec(xs.clone(), &[xs.len()]);
    let bits = |t: Tensor| -> Vec<u32> {
        to_vec::<f32>(&t)
            .unwrap()
            .iter()
            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
            .collect()
    };
    let want = |f: fn(f32) -> f32| -> Vec<u32> {
        xs.iter()
            .map(|&v| f(v))
            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
            .collect()
    };
    assert_eq!(bits(x.exp2()), want(f32::exp2), "exp2");
    assert_eq!(bits(x.log2()), want(f32::log2), "log2");
    let sin = bits(x.sin());
    assert_eq!(
        sin[..6],
        want(f32::sin)[..6],
        "sin of nan, ±inf, ±0, a denormal"
    );
    let cos = bits(x.cos());
    assert_eq!(
        cos[..6],
        want(f32::cos)[..6],
        "cos of nan, ±inf, ±0, a denormal"
    );
}

#[test]
fn compiled_half_precision_goes_through_f32() {
    let xs: Vec<f32> = (0..4096).map(|i| (i as f32 - 2048.0) / 64.0).collect();
    let x = Tensor::from_vec(xs.clone(), &[xs.len()]);
    for dtype in [DType::F16, DType::BF16] {
        let got: Vec<f32> = to_vec(&x.cast(dtype).sin().cast(DType::F32)).unwrap();
        let narrow: Vec<f32> = to_vec(&x.cast(dtype).cast(DType::F32)).unwrap();
        // Half an ulp of the narrow type from the one rounding, plus the f32 error.
        let step = if dtype == DType::F16 {
            2f64.powi(-11)
        } else {
            2f64.powi(-8)
        } * 1.01;
        for ((&v, &g), &n) in xs.iter().zip(&got).zip(&narrow) {
            let exact = (n as f64).sin();
            assert!(
                (g as f64 - exact).abs() <= step * exact.abs().max(2f64.powi(-14)),
                "{dtype} sin({v}) = {g}, exact {exact}"
            );
        }
    }
}
