//! Transcendentals as rewrite rules: `Exp2`, `Log2`, `Sin`, `Cos` and `Erf` of `f32` become
//! range reduction and a polynomial in `f32` arithmetic with integer bit operations (`Bitcast`,
//! `And`, `Or`, `Xor`, shifts), so every backend prints the same code and needs no libm.
//! `f16` and `bf16` are computed in `f32` and rounded once; `f64` keeps its ops (the backend's
//! double-precision math).
//!
//! - `exp2(x)`: `k = round(x)`, `r = x - k` (exact, `|r| <= 1/2`), `2^r` by its Taylor
//!   polynomial of degree 7, times `2^(k/2)` and `2^(k - k/2)` built from exponent bits (two
//!   factors, so `2^-150 .. 2^129` need no special case and denormal results round once).
//!   `x` is clamped to `[-151, 129]` (0 and `inf` come out of the scaling); NaN passes through.
//! - `log2(x)`: denormals scaled by `2^23`; `x = 2^e m` with `m` in `[sqrt(1/2), sqrt(2))`
//!   from the bits; `ln m = f - f²/2 + s (f²/2 + R(s²))` with `f = m - 1`, `s = f / (2 + f)`
//!   (the atanh series); the part `f - f²/2` is split into 12 high bits and the rest, so that
//!   its product by `1/ln 2` (also split) is exact, and `e` is added by a two-sum.
//!   `log2(0) = -inf`, negative and NaN give NaN, `log2(inf) = inf`.
//! - `sin`/`cos`: the reduction of `|x|` to `r` in `[-pi/4, pi/4]` and a quadrant `q`:
//!   Cody–Waite below [`CODY_WAITE_LIMIT`] (`pi/2` in five pieces, the first four short enough
//!   that `k * piece` is exact for `k < 2^13`), Payne–Hanek above (the 96 bits of `2/pi` that
//!   matter for the exponent of `x`, multiplied by its 24-bit mantissa in 64-bit integers).
//!   Then the sine or cosine Taylor polynomial by `q`, the sign from `q` (and from `x` for
//!   `sin`, so `sin(-0) = -0`) put in with `Xor`. `inf` and NaN give NaN.
//! - `erf`: its Taylor series below `|x| = 1/2`, above it `1 - erfc(|x|)` from the Chebyshev
//!   fit `erfc(a) = t e^(-a² + P(t))`, `t = 1 / (1 + a/2)`, the exponential through `exp2`.
//! - `erfc`: `1 - ` the series below `|x| = 1/2`; above it the same fit with `a²` split exactly
//!   into `hi + lo` (a fused multiply-add) and `e^(-hi)`, `e^(P - lo)` reduced in steps of
//!   `ln 2`, so that tiny results keep their relative accuracy.
//! - `pow`: `exp2(b * log2|a|)` with C99 Annex F's special rows (`pow.rs`).
//!
//! The rules run in `codegen::lower` before expansion, on the kernel AST; the interpreter keeps
//! the exact `f64` functions (`uop::alu`), the oracle these are tested against.
//!
//! They need IEEE arithmetic as written: contracting a product and a sum into an FMA is fine
//! (the products they rely on are exact), reassociation (`-ffast-math`) is not, since it would
//! fold away the rounding steps (`(x + 1.5·2^23) - 1.5·2^23`, the two-sums).
//!
//! Accuracy (the sweeps of the tests, 2^20 inputs per function against `f64`): `exp2` within
//! 1.1 ulp, `log2` 0.8 ulp, `sin` and `cos` 0.8 ulp below `1e4` and 2.6 ulp beyond, `erf` 2.9 ulp,
//! `erfc` 6.3 ulp (most of it the fit's own error).

use crate::rewrite::{PatternMatcher, UPat, graph_rewrite};
use crate::uop::{DType, Op, UOp};
use std::sync::OnceLock;

/// `sin`/`cos` arguments (absolute values) below this use Cody–Waite reduction, the others
/// Payne–Hanek. `k = round(x * 2/pi)` stays below `2^13` here.
pub const CODY_WAITE_LIMIT: f32 = 12000.0;

/// `ast` with every `f32`, `f16` and `bf16` `Exp2`, `Log2`, `Sin`, `Cos`, `Erf`, `Erfc` and
/// `Pow` decomposed.
pub fn decompose_transcendentals(ast: &UOp) -> UOp {
    graph_rewrite(ast, rules(), &mut ())
}

fn rules() -> &'static PatternMatcher<()> {
    static RULES: OnceLock<PatternMatcher<()>> = OnceLock::new();
    RULES.get_or_init(|| {
        let narrow = [DType::F32, DType::F16, DType::BF16];
        let rule = |op| UPat::op(op).dtypes(&narrow);
        PatternMatcher::new()
            .rule(rule(Op::Exp2), |m, _| Some(in_f32(m.root(), exp2)))
            .rule(rule(Op::Log2), |m, _| Some(in_f32(m.root(), log2)))
            .rule(rule(Op::Sin), |m, _| {
                Some(in_f32(m.root(), |x| sin_cos(x, false)))
            })
            .rule(rule(Op::Cos), |m, _| {
                Some(in_f32(m.root(), |x| sin_cos(x, true)))
            })
            .rule(rule(Op::Erf), |m, _| Some(in_f32(m.root(), erf)))
            .rule(rule(Op::Erfc), |m, _| Some(in_f32(m.root(), erfc)))
            .rule(rule(Op::Pow), |m, _| Some(pow_in_f32(m.root())))
    })
}

/// `f` of the operand of `node` computed in `f32`, rounded to `node`'s dtype.
fn in_f32(node: &UOp, f: impl Fn(&UOp) -> UOp) -> UOp {
    let x = node.s(0);
    if node.dtype() == DType::F32 {
        return f(x);
    }
    f(&x.cast(DType::F32)).cast(node.dtype())
}

/// `a ** b` of the operands of the `Pow` node `node`, computed in `f32` (see [`pow`]).
fn pow_in_f32(node: &UOp) -> UOp {
    let (a, b) = (node.s(0), node.s(1));
    if node.dtype() == DType::F32 {
        return pow::pow(a, b);
    }
    pow::pow(&a.cast(DType::F32), &b.cast(DType::F32)).cast(node.dtype())
}

// ---- node vocabulary ----

fn float(v: f64) -> UOp {
    UOp::constant(v, DType::F32)
}
fn int(v: i64) -> UOp {
    UOp::constant(v, DType::I32)
}
fn wide(v: u64) -> UOp {
    UOp::constant(v as i64, DType::U64)
}
fn bin(op: Op, a: &UOp, b: &UOp) -> UOp {
    UOp::alu(op, vec![a.clone(), b.clone()])
}
fn add(a: &UOp, b: &UOp) -> UOp {
    bin(Op::Add, a, b)
}
fn sub(a: &UOp, b: &UOp) -> UOp {
    bin(Op::Sub, a, b)
}
fn mul(a: &UOp, b: &UOp) -> UOp {
    bin(Op::Mul, a, b)
}
fn and(a: &UOp, b: &UOp) -> UOp {
    bin(Op::And, a, b)
}
fn or(a: &UOp, b: &UOp) -> UOp {
    bin(Op::Or, a, b)
}
fn shl(a: &UOp, b: &UOp) -> UOp {
    bin(Op::Shl, a, b)
}
fn shr(a: &UOp, b: &UOp) -> UOp {
    bin(Op::Shr, a, b)
}
fn lt(a: &UOp, b: &UOp) -> UOp {
    bin(Op::CmpLt, a, b)
}
fn eq(a: &UOp, b: &UOp) -> UOp {
    bin(Op::CmpEq, a, b)
}
fn select(cond: &UOp, a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Where, vec![cond.clone(), a.clone(), b.clone()])
}
fn bits(x: &UOp) -> UOp {
    x.bitcast(DType::I32)
}
fn from_bits(b: &UOp) -> UOp {
    b.bitcast(DType::F32)
}

/// `c[0] + x (c[1] + x (c[2] + ...))`.
fn horner(x: &UOp, coefficients: &[f64]) -> UOp {
    let (last, rest) = coefficients.split_last().expect("a polynomial");
    rest.iter()
        .rev()
        .fold(float(*last), |acc, &c| add(&float(c), &mul(x, &acc)))
}

/// `1.5 * 2^23`: adding it to an `f32` of magnitude below `2^22` rounds it to an integer
/// (ties to even), whose low mantissa bits are then the integer plus `2^22`.
const ROUNDER: f64 = 12582912.0;

/// `(round(x) as f32, low mantissa bits of the rounder sum)` for `|x| < 2^22`; the bits are
/// `round(x) + 2^22` modulo `2^23`.
fn round_with_bits(x: &UOp) -> (UOp, UOp) {
    let shifted = add(x, &float(ROUNDER));
    (sub(&shifted, &float(ROUNDER)), bits(&shifted))
}

fn factorial(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

// ---- exp2 ----

/// `2^x`.
fn exp2(x: &UOp) -> UOp {
    let low = float(-151.0);
    let high = float(129.0);
    let clamped = select(&lt(x, &low), &low, &select(&lt(&high, x), &high, x));
    let (k, k_bits) = round_with_bits(&clamped);
    let r = sub(&clamped, &k);
    let ln2 = std::f64::consts::LN_2;
    let taylor: Vec<f64> = (0..8).map(|n| ln2.powi(n as i32) / factorial(n)).collect();
    let p = horner(&r, &taylor);
    let k = sub(&and(&k_bits, &int(0x7f_ffff)), &int(1 << 22));
    let half = shr(&k, &int(1));
    let scaled = mul(
        &mul(&p, &power_of_two(&half)),
        &power_of_two(&sub(&k, &half)),
    );
    select(&eq(x, x), &scaled, x)
}

/// `2^k` for an `i32` `k` in `[-126, 127]`, from its exponent bits.
fn power_of_two(k: &UOp) -> UOp {
    from_bits(&shl(&add(k, &int(127)), &int(23)))
}

// ---- log2 ----

/// `log2 x`.
fn log2(x: &UOp) -> UOp {
    let tiny = lt(x, &float(f32::MIN_POSITIVE as f64));
    let scaled = select(&tiny, &mul(x, &float(8388608.0)), x);
    let b = bits(&scaled);
    let mantissa = from_bits(&or(&and(&b, &int(0x7f_ffff)), &int(0x3f80_0000)));
    let above = lt(&float(std::f64::consts::SQRT_2), &mantissa);
    let m = select(&above, &mul(&mantissa, &float(0.5)), &mantissa);
    let exponent = sub(&shr(&b, &int(23)), &int(127));
    let adjust = add(
        &select(&above, &int(1), &int(0)),
        &select(&tiny, &int(-23), &int(0)),
    );
    let e = add(&exponent, &adjust).cast(DType::F32);
    let f = sub(&m, &float(1.0));
    let core = log2_of_mantissa(&f, &e);
    let inf = float(f64::INFINITY);
    let zero = float(0.0);
    let non_positive = select(&eq(x, &zero), &float(f64::NEG_INFINITY), &float(f64::NAN));
    let finite = select(&lt(&zero, x), &core, &non_positive);
    select(&eq(x, &inf), &inf, &finite)
}

/// `e + log2(1 + f)` for `f` in `[sqrt(1/2) - 1, sqrt(2) - 1]` and a small integral `e`.
fn log2_of_mantissa(f: &UOp, e: &UOp) -> UOp {
    const INV_LN2_HI: f64 = 1.4423828125; // 1/ln 2 to 12 bits
    let inv_ln2_lo = std::f64::consts::LOG2_E - INV_LN2_HI;
    let s = bin(Op::Div, f, &add(f, &float(2.0)));
    let z = mul(&s, &s);
    // R(z) = 2z/3 + 2z²/5 + ... : the atanh series of ln(1 + f) = 2s + s R.
    let series: Vec<f64> = (1..=6).map(|n| 2.0 / (2 * n + 1) as f64).collect();
    let r = mul(&z, &horner(&z, &series));
    let half_square = mul(&float(0.5), &mul(f, f));
    let hi = from_bits(&and(&bits(&sub(f, &half_square)), &int(-4096)));
    let lo = add(
        &sub(&sub(f, &hi), &half_square),
        &mul(&s, &add(&half_square, &r)),
    );
    let value_hi = mul(&hi, &float(INV_LN2_HI));
    let value_lo = add(
        &mul(&add(&lo, &hi), &float(inv_ln2_lo)),
        &mul(&lo, &float(INV_LN2_HI)),
    );
    // Two-sum of e and value_hi (|e| >= 1 > |value_hi| or e = 0).
    let sum = add(e, &value_hi);
    let error = add(&sub(e, &sum), &value_hi);
    add(&add(&value_lo, &error), &sum)
}

// ---- sin and cos ----

/// `pi/2` as five `f32` pieces: the first four have at most 11 significant bits, so their
/// products with an integer below `2^13` are exact; their sum is `pi/2` within `2^-77`.
const PI_2_PIECES: [f64; 5] = [
    1.5703125,
    4.837512969970703e-4,
    7.549533620476723e-8,
    2.5632829192545614e-12,
    6.123234262925839e-17,
];

/// The bits of `2/pi` after the binary point, 32 per word, after one zero word (so that a
/// window may start before the point).
const TWO_OVER_PI: [u64; 8] = [
    0,
    0xa2f9_836e,
    0x4e44_1529,
    0xfc27_57d1,
    0xf534_ddc0,
    0xdb62_9599,
    0x3c43_9041,
    0xfe51_63ab,
];

/// `sin x`, or `cos x` when `cosine`.
fn sin_cos(x: &UOp, cosine: bool) -> UOp {
    let sign = and(&bits(x), &int(i32::MIN as i64));
    let a = from_bits(&and(&bits(x), &int(i32::MAX as i64)));
    let (small_r, small_lo, small_q) = cody_waite(&a);
    let (large_r, large_q) = payne_hanek(&a);
    let small = lt(&a, &float(CODY_WAITE_LIMIT as f64));
    let r = select(&small, &small_r, &large_r);
    let lo = select(&small, &small_lo, &float(0.0));
    let q = add(&select(&small, &small_q, &large_q), &int(i64::from(cosine)));
    let odd = eq(&and(&q, &int(1)), &int(1));
    let value = select(&odd, &cos_poly(&r, &lo), &sin_poly(&r, &lo));
    let mut flip = shl(&and(&q, &int(2)), &int(30));
    if !cosine {
        flip = bin(Op::Xor, &flip, &sign);
    }
    let signed = from_bits(&bin(Op::Xor, &bits(&value), &flip));
    select(&lt(&a, &float(f64::INFINITY)), &signed, &float(f64::NAN))
}

/// `sin(r + lo)` for `|r| <= pi/4` and `|lo|` below half an ulp of `r`: the Taylor polynomial
/// to `r^9`, with `lo cos r` added to the small terms.
fn sin_poly(r: &UOp, lo: &UOp) -> UOp {
    let z = mul(r, r);
    let terms: Vec<f64> = (1..=4)
        .map(|n| (-1f64).powi(n) / factorial(2 * n as u32 + 1))
        .collect();
    let small = add(
        &mul(&mul(r, &z), &horner(&z, &terms)),
        &mul(lo, &sub(&float(1.0), &mul(&float(0.5), &z))),
    );
    add(r, &small)
}

/// `cos(r + lo)`: `1 - r²/2` with its rounding error recovered, plus the Taylor terms to
/// `r^12` and `-lo r`.
fn cos_poly(r: &UOp, lo: &UOp) -> UOp {
    let z = mul(r, r);
    let half = mul(&float(0.5), &z);
    let w = sub(&float(1.0), &half);
    let w_error = sub(&sub(&float(1.0), &w), &half);
    let terms: Vec<f64> = (2..=6)
        .map(|n| (-1f64).powi(n) / factorial(2 * n as u32))
        .collect();
    let small = sub(&mul(&mul(&z, &z), &horner(&z, &terms)), &mul(r, lo));
    add(&w, &add(&w_error, &small))
}

/// `(s, e)` with `s = fl(a + b)` and `s + e = a + b` exactly (Knuth's two-sum).
fn two_sum(a: &UOp, b: &UOp) -> (UOp, UOp) {
    let s = add(a, b);
    let b_part = sub(&s, a);
    let a_part = sub(&s, &b_part);
    let error = add(&sub(a, &a_part), &sub(b, &b_part));
    (s, error)
}

/// `(r, lo, q)` with `a = q pi/2 + r + lo` (q modulo 4 as `i32`, `lo` the part of the reduced
/// argument below the rounding of `r`) for `0 <= a <` [`CODY_WAITE_LIMIT`]. Every product
/// `k * piece` but the last is exact and every subtraction is a two-sum, so the only rounding
/// is that of the last, tiny piece.
fn cody_waite(a: &UOp) -> (UOp, UOp, UOp) {
    let (k, k_bits) = round_with_bits(&mul(a, &float(std::f64::consts::FRAC_2_PI)));
    let piece = |i: usize| mul(&k, &float(PI_2_PIECES[i]));
    // a - k P1 is exact (Sterbenz: k P1 is within a factor 2 of a).
    let mut hi = sub(a, &piece(0));
    let mut lo = float(0.0);
    for i in 1..4 {
        let (s, e) = two_sum(&hi, &mul(&piece(i), &float(-1.0)));
        hi = s;
        lo = add(&lo, &e);
    }
    lo = sub(&lo, &piece(4));
    let r = add(&hi, &lo);
    let r_lo = add(&sub(&hi, &r), &lo);
    (r, r_lo, and(&k_bits, &int(3)))
}

/// `(r, q)` with `a = q pi/2 + r` (q modulo 4 as `i32`) for a finite `a >= 2^13`.
///
/// `a = M 2^E` with a 24-bit integer `M`; of `a 2/pi`, the bits of `2/pi` at and before
/// position `E - 2` give multiples of 4 and are dropped, the next 96 give the quadrant and 62
/// bits of fraction.
fn payne_hanek(a: &UOp) -> (UOp, UOp) {
    let b = bits(a);
    let mantissa = or(&and(&b, &int(0x7f_ffff)), &int(0x80_0000)).cast(DType::U64);
    // The window starts at bit E - 1 of 2/pi: position E + 30 of TWO_OVER_PI.
    let position = sub(&shr(&b, &int(23)), &int(120));
    let word = shr(&position, &int(5));
    let shift = sub(&int(32), &and(&position, &int(31))).cast(DType::U64);
    let window: Vec<UOp> = (0..3)
        .map(|j| {
            let pair = |w: usize| (TWO_OVER_PI[w + j] << 32) | TWO_OVER_PI[w + j + 1];
            let chosen = (0..4).rev().fold(wide(pair(4)), |rest, w| {
                select(&lt(&word, &int(w as i64 + 1)), &wide(pair(w)), &rest)
            });
            and(&shr(&chosen, &shift), &wide(0xffff_ffff))
        })
        .collect();
    let low32 = wide(0xffff_ffff);
    let p2 = mul(&mantissa, &window[2]);
    let p1 = mul(&mantissa, &window[1]);
    let p0 = mul(&mantissa, &window[0]);
    let mid = add(&p1, &shr(&p2, &wide(32)));
    let high = add(&p0, &shr(&mid, &wide(32)));
    let fixed = or(&shl(&and(&high, &low32), &wide(32)), &and(&mid, &low32));
    // The fraction, rounded to the nearest quadrant: a signed 64-bit fixed-point number.
    let fraction = shl(&fixed, &wide(2)).bitcast(DType::I64);
    let round_up = shr(&fixed, &wide(61));
    let q = add(&shr(&fixed, &wide(62)), &and(&round_up, &wide(1))).cast(DType::I32);
    let scale = std::f64::consts::FRAC_PI_2 * 2f64.powi(-64);
    (mul(&fraction.cast(DType::F32), &float(scale)), q)
}

// ---- erf ----

/// The Taylor coefficients of `(√π/2) erf(x) / x` in powers of `x²`, to `x^12`.
const ERF_SERIES: [f64; 7] = [
    1.0,
    -1.0 / 3.0,
    1.0 / 10.0,
    -1.0 / 42.0,
    1.0 / 216.0,
    -1.0 / 1320.0,
    1.0 / 9360.0,
];

/// `erf x` by its Taylor series, for `|x| < 1/2`.
fn erf_series(x: &UOp) -> UOp {
    let series: Vec<f64> = ERF_SERIES
        .iter()
        .map(|c| c * std::f64::consts::FRAC_2_SQRT_PI)
        .collect();
    mul(x, &horner(&mul(x, x), &series))
}

/// The Chebyshev fit `P(t)` of `erfc(a) = t e^(-a² + P(t))`, `t = 1 / (1 + a/2)` (Numerical
/// Recipes' `erfcc`, relative error below `1.2e-7` for every `a >= 0`).
const ERFC_FIT: [f64; 10] = [
    -1.265_512_23,
    1.000_023_68,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_203_98,
    1.488_515_87,
    -0.822_152_23,
    0.170_872_77,
];

/// `erf x`: the Taylor series below `|x| = 1/2` (where `1 - erfc` would lose the relative
/// accuracy of small results), `1 - erfc(|x|)` with the sign of `x` above it. Both are
/// computed and one is selected, so the code has no branch. Infinities give `±1`, NaN NaN.
fn erf(x: &UOp) -> UOp {
    let sign = and(&bits(x), &int(i32::MIN as i64));
    let a = from_bits(&and(&bits(x), &int(i32::MAX as i64)));
    let near = erf_series(x);
    let t = bin(
        Op::Div,
        &float(1.0),
        &add(&float(1.0), &mul(&a, &float(0.5))),
    );
    let exponent = sub(&horner(&t, &ERFC_FIT), &mul(&a, &a));
    let erfc = mul(&t, &exp2(&mul(&exponent, &float(std::f64::consts::LOG2_E))));
    let far = from_bits(&or(&bits(&sub(&float(1.0), &erfc)), &sign));
    select(&lt(&a, &float(0.5)), &near, &far)
}

/// `erfc x`: `1 - erf x` from the Taylor series below `|x| = 1/2`; above it the Chebyshev fit
/// with every rounding that the tiny results would magnify removed ([`erfc_of_magnitude`]),
/// and `2 - erfc(|x|)` for negative `x`.
fn erfc(x: &UOp) -> UOp {
    let a = from_bits(&and(&bits(x), &int(i32::MAX as i64)));
    let near = sub(&float(1.0), &erf_series(x));
    let positive = erfc_of_magnitude(&a);
    let far = select(&lt(x, &float(0.0)), &sub(&float(2.0), &positive), &positive);
    let value = select(&lt(&a, &float(0.5)), &near, &far);
    select(&eq(x, x), &value, x)
}

/// `erfc(a) = t e^(-a²) e^(P(t))` for `a >= 1/2`. `a² = hi + lo` exactly (`lo` by a fused
/// multiply-add), and `e^(-hi)` and `e^(P(t) - lo)` are computed apart by [`exp_reduced`], so
/// no large argument is rounded (in `e^(-a² + P)` the rounding of `a²`, up to `2^-24 a²` in
/// the exponent, would cost `a²` ulps of the result).
fn erfc_of_magnitude(a: &UOp) -> UOp {
    // erfc rounds to 0 from 10.06 on; the clamp keeps `a²` and its error finite.
    let a = &select(&lt(a, &float(11.0)), a, &float(11.0));
    let t = bin(
        Op::Div,
        &float(1.0),
        &add(&float(1.0), &mul(a, &float(0.5))),
    );
    let hi = mul(a, a);
    let lo = UOp::alu(Op::Mulacc, vec![a.clone(), a.clone(), neg(&hi)]);
    let small = exp_reduced(&sub(&horner(&t, &ERFC_FIT), &lo));
    mul(&mul(&t, &small), &exp_reduced(&neg(&hi)))
}

/// `ln 2` to 15 significant bits (so `k · LN2_HI` is exact for `|k| < 2^9`), and the rest.
const LN2_HI: f64 = 0.693_145_751_953_125;

/// `e^y` with the argument reduced in `ln 2` steps (`y = k ln 2 + r`, `k · ln 2` in two
/// pieces, `|r| <= ln 2 / 2`) rather than multiplied by `log2 e` (which rounds a large `y`):
/// the Taylor polynomial of `e^r` to degree 7, scaled by `2^k`. `y` is clamped to
/// `[-104, 89]`, beyond which the result is 0 or `inf`.
fn exp_reduced(y: &UOp) -> UOp {
    let ln2_lo = std::f64::consts::LN_2 - LN2_HI;
    let low = float(-104.0);
    let high = float(89.0);
    let clamped = select(&lt(y, &low), &low, &select(&lt(&high, y), &high, y));
    let (k, k_bits) = round_with_bits(&mul(&clamped, &float(std::f64::consts::LOG2_E)));
    let r = sub(
        &sub(&clamped, &mul(&k, &float(LN2_HI))),
        &mul(&k, &float(ln2_lo)),
    );
    let taylor: Vec<f64> = (0..8).map(|n| 1.0 / factorial(n)).collect();
    let p = horner(&r, &taylor);
    let k = sub(&and(&k_bits, &int(0x7f_ffff)), &int(1 << 22));
    let half = shr(&k, &int(1));
    mul(
        &mul(&p, &power_of_two(&half)),
        &power_of_two(&sub(&k, &half)),
    )
}

fn neg(x: &UOp) -> UOp {
    mul(x, &float(-1.0))
}

mod pow;
#[cfg(test)]
mod tests;
