//! Elementwise functions of `torch`/`numpy`/`scipy.special` a port reaches for, composed from
//! the primitives (so fusion and every transform rule cover them) in forms that stay accurate
//! where the textbook formula cancels or overflows:
//!
//! - `log1p` and `expm1` by Kahan's tricks (`u = 1 + x`: `log(u) · x / (u - 1)`; `u = e^x`:
//!   `(u - 1) · x / log(u)`), which cancel the rounding of `u`: about one ulp at `x = 1e-10`;
//! - the hyperbolic functions and their inverses from those two (`sinh` through `expm1`,
//!   `asinh`/`acosh`/`atanh` through `log1p`), with `e^(|x|/2)²/2` and `log(2|x|)` branches
//!   where `e^x` or `x²` would overflow before the result does;
//! - `lgamma` and `digamma`: the Stirling and asymptotic series at `x ≥ 10`, a shift by 10 below
//!   it and the reflection formula for negative `x` (with `sin πx` reduced to `|πr| ≤ π/2`),
//!   in `f64` for every float type (the shift cancels near the zeros of `lgamma`);
//! - `log10`, `frac`, `lerp` (torch's two-sided formula), `div_rounding` (torch's
//!   `div(rounding_mode=...)`) and `masked_fill` (the fill a run-time value, see `value.rs`).
//!
//! Where a composition's own derivative would be inaccurate (Kahan's quotient differentiates
//! into a cancellation), the result carries the derivatives of a plain formula instead: see
//! `with_derivatives_of`.

use super::Tensor;
use super::broadcast::{Operand, broadcast_shapes};
use super::value::{operand_uop, user_operand};
use crate::uop::{DType, Op, Scalar, UOp};
use std::f64::consts::{LN_2, LOG10_2, PI};

/// Where `|x|` is large enough that `sinh x = e^|x| / 2` to the last bit of an `f64`
/// (`e^-2|x| < 2^-53`), and `e^|x|` may overflow before `sinh` does.
const SINH_LARGE: f64 = 20.0;

/// Where `asinh`/`acosh` are `log(2|x|)` to the last bit (`1/(4x²) < 2^-53`) and `x²` may
/// overflow: `2^28`.
const INVERSE_LARGE: f64 = 268_435_456.0;

/// `lgamma` and `digamma` shift arguments below this up by it, into the range where their
/// series are good to an `f64` ulp.
const SERIES_FROM: f64 = 10.0;

/// `ln(2π) / 2`.
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// The Stirling series of `lgamma(z) - ((z - ½) ln z - z + ½ ln 2π)` in powers of `w = 1/z²`,
/// times `1/z`: `B₂ₖ / (2k (2k-1))` for `k = 1..8`.
const STIRLING: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360_360.0,
    1.0 / 156.0,
    -3617.0 / 122_400.0,
];

/// The asymptotic series of `ln z - 1/(2z) - digamma(z)` in powers of `w = 1/z²`, times `w`:
/// `B₂ₖ / (2k)` for `k = 1..8`.
const DIGAMMA_SERIES: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 120.0,
    1.0 / 252.0,
    -1.0 / 240.0,
    1.0 / 132.0,
    -691.0 / 32_760.0,
    1.0 / 12.0,
    -3617.0 / 8160.0,
];

/// How [`Tensor::div_rounding`] rounds the quotient (torch's `rounding_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// Toward zero (`rounding_mode="trunc"`, C's integer division).
    Trunc,
    /// Toward negative infinity (`rounding_mode="floor"`, Python's and NumPy's `//`).
    Floor,
}

/// `x` in its float type (`f32` for ints and bools).
fn float_of(x: &Tensor) -> Tensor {
    x.cast(x.dtype().to_float())
}

/// `f` of `x` computed as torch computes half-precision math: `f16` and `bf16` in `f32`, the
/// result cast back; ints and bools in `f32`, other floats in their own type.
fn opmath(x: &Tensor, f: impl FnOnce(Tensor) -> Tensor) -> Tensor {
    let out = x.dtype().to_float();
    let wide = match out {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    };
    f(x.cast(wide)).cast(out)
}

/// `f` of `x` computed in `f64`, the result cast back to `x`'s float type: for `lgamma` and
/// `digamma`, whose shifted series cancel (`lgamma(y) = lgamma(y + 10) - ln(y ⋯ (y + 9))`
/// near its zeros at 1 and 2), so that narrower floats get the `f64` result rounded once.
fn in_f64(x: &Tensor, f: impl FnOnce(Tensor) -> Tensor) -> Tensor {
    f(x.cast(DType::F64)).cast(x.dtype().to_float())
}

/// An operand the user passed as a tensor: a float scalar a run-time value (see
/// [`user_operand`]).
fn user_tensor(operand: Operand, like: &Tensor) -> Tensor {
    match user_operand(operand, like) {
        Operand::Tensor(t) => t,
        Operand::Scalar(_) => unreachable!("user_operand makes every scalar a tensor"),
    }
}

/// The value of `value` with the derivatives (of every order) of `surrogate`, a formula of the
/// same function whose value is less accurate but whose derivatives are right:
/// `surrogate + detach(value - surrogate)`. The sum is `value` exactly where the two are
/// within a factor of two (Sterbenz: the difference is exact). Where the difference is not
/// finite (an infinity, a pole, a NaN), the result is `surrogate` itself, which the callers
/// make agree with `value` there.
fn with_derivatives_of(value: &Tensor, surrogate: &Tensor) -> Tensor {
    let gap = value - surrogate;
    let gap = gap.isfinite().where_(&gap, 0.0).detach();
    surrogate + gap
}

/// `r` with `x`'s zero where `x` is `±0` (`f(-0.0) = -0.0` for the odd functions here, whose
/// formulas round that zero to `+0`), keeping the derivatives of `r` there:
/// `x - (detach(r) - r)` is `x` itself (`x - (+0)`) and differentiates as `r`. `copysign`
/// would not do: its derivative is `-1` where `r = +0` meets `x = -0`.
fn keep_signed_zero(r: &Tensor, x: &Tensor) -> Tensor {
    let zero_with_derivatives = x.detach() - (r.detach() - r);
    x.eq(0.0).where_(zero_with_derivatives, r)
}

/// `v` at `|x|` made odd: `-v` where `x < 0`, with `x`'s sign of zero.
fn odd(v: &Tensor, x: &Tensor) -> Tensor {
    keep_signed_zero(&x.lt(0.0).where_(v.neg(), v), x)
}

/// `c₀ + c₁ w + c₂ w² + ...` by Horner's rule, `w`'s dtype.
fn polynomial(w: &Tensor, coefficients: &[f64]) -> Tensor {
    let (last, rest) = coefficients.split_last().expect("coefficients");
    let mut acc = w.full_like(*last);
    for &c in rest.iter().rev() {
        acc = acc * w + c;
    }
    acc
}

/// `x` less a whole number, `r` with `|r| ≤ ½` (exact), so that `sin πr` and `tan πr` keep
/// their relative accuracy next to the integers where they vanish.
fn reduced_half_turn(x: &Tensor) -> Tensor {
    let f = x - x.trunc();
    let r = f.lt(-0.5).where_(&f + 1.0, &f);
    f.gt(0.5).where_(&f - 1.0, &r)
}

/// `lgamma(y)` for `y > 0` (or NaN): Stirling's series at `z = y + 10` below 10, less
/// `ln(y (y+1) ... (y+9))`.
fn lgamma_positive(y: &Tensor) -> Tensor {
    let shift = y.lt(SERIES_FROM);
    let z = shift.where_(y + SERIES_FROM, y);
    let ys = shift.where_(y, 1.0);
    let mut product = ys.clone();
    for k in 1..SERIES_FROM as usize {
        product = product * (&ys + k as f64);
    }
    let below = shift.where_(product.log(), 0.0);
    let inv = z.recip();
    let series = polynomial(&(&inv * &inv), &STIRLING) * &inv;
    let ln_z = z.log();
    (&z - 0.5) * ln_z - &z + HALF_LN_2PI + series - below
}

/// `digamma(y)` for `y > 0` (or NaN, or `±0`): the asymptotic series at `z = y + 10` below 10,
/// less `1/y + 1/(y+1) + ... + 1/(y+9)`.
fn digamma_positive(y: &Tensor) -> Tensor {
    let shift = y.lt(SERIES_FROM);
    let z = shift.where_(y + SERIES_FROM, y);
    let ys = shift.where_(y, 1.0);
    let mut reciprocals = ys.recip();
    for k in 1..SERIES_FROM as usize {
        reciprocals = reciprocals + (&ys + k as f64).recip();
    }
    let below = shift.where_(reciprocals, 0.0);
    let inv = z.recip();
    let w = &inv * &inv;
    let series = polynomial(&w, &DIGAMMA_SERIES) * &w;
    z.log() - inv * 0.5 - series - below
}

impl Tensor {
    /// `ln(1 + x)`, accurate where `x` is tiny (Kahan: `u = 1 + x`, then `x` where `u == 1`,
    /// else `ln(u) · x / (u - 1)`, which cancels the rounding of `u`), as `torch.log1p` and
    /// `np.log1p`: `log1p(-1) = -inf`, NaN below `-1`, `log1p(-0.0) = -0.0`. Its derivatives are
    /// those of `ln(1 + x)`: `1/(1 + x)`, ... (the quotient's own derivative would cancel).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1e-10f64, -0.5], &[2]);
    /// let y = evaluate(&x.log1p().uop()).to_vec::<f64>();
    /// assert!((y[0] - 9.9999999995e-11).abs() < 1e-24);
    /// assert!((y[1] - (-0.5f64).ln_1p()).abs() < 1e-16);
    /// ```
    pub fn log1p(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("log1p");
        opmath(self, |x| {
            let u = &x + 1.0;
            let plain = u.log();
            let kahan = u.eq(1.0).where_(&x, &plain * (&x / (&u - 1.0)));
            keep_signed_zero(&with_derivatives_of(&kahan, &plain), &x)
        })
    }

    /// `e^x - 1`, accurate where `x` is tiny (Kahan: `u = e^x`, then `x` where `u == 1`, `-1`
    /// where `u - 1 == -1`, else `(u - 1) · x / ln(u)`), as `torch.expm1` and `np.expm1`
    /// (`expm1(-0.0) = -0.0`, `expm1(-inf) = -1`). Its derivatives are those of `e^x - 1`.
    pub fn expm1(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("expm1");
        opmath(self, |x| {
            let u = x.exp();
            let plain = &u - 1.0;
            let ratio = &plain * (&x / u.log());
            let kahan = u.eq(1.0).where_(&x, plain.eq(-1.0).where_(-1.0, ratio));
            keep_signed_zero(&with_derivatives_of(&kahan, &plain), &x)
        })
    }

    /// The base-10 logarithm, `log2(x) · log10(2)`.
    pub fn log10(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("log10");
        self.log2() * LOG10_2
    }

    /// The hyperbolic sine, odd: `(t + t/(t+1)) / 2` with `t = expm1(|x|)` (no cancellation, so
    /// accurate for tiny `x`), and `e^(|x|/2) · e^(|x|/2) / 2` beyond `|x| = 20`, finite up to
    /// `|x| ≈ 710.47` in `f64` (`89.4` in `f32`) as torch is.
    pub fn sinh(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("sinh");
        opmath(self, |x| {
            let a = x.abs();
            let large = a.gt(SINH_LARGE);
            // Each branch sees harmless operands where the other decides, so no inf or NaN reaches
            // the derivative of the chosen one.
            let t = large.where_(0.0, &a).expm1();
            let near = (&t + &t / (&t + 1.0)) * 0.5;
            let half = large.where_(&a, 0.0) * 0.5;
            let w = half.exp();
            let far = &w * 0.5 * &w;
            odd(&large.where_(far, near), &x)
        })
    }

    /// The hyperbolic cosine as `1 + 2 sinh(x/2)²`: accurate near 0 and its derivative there
    /// (`sinh x`) too, finite wherever `cosh` is.
    pub fn cosh(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("cosh");
        opmath(self, |x| {
            let s = (x * 0.5).sinh();
            &s * &s * 2.0 + 1.0
        })
    }

    /// The inverse hyperbolic sine, odd: `log1p(|x| + x²/(1 + √(1 + x²)))`, and
    /// `ln|x| + ln 2` beyond `|x| = 2^28` (where `x²` could overflow).
    pub fn asinh(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("asinh");
        opmath(self, |x| {
            let a = x.abs();
            let large = a.gt(INVERSE_LARGE);
            let s = large.where_(0.0, &a);
            let s2 = &s * &s;
            let near = (&s + &s2 / ((s2.clone() + 1.0).sqrt() + 1.0)).log1p();
            let far = large.where_(&a, 1.0).log() + LN_2;
            odd(&large.where_(far, near), &x)
        })
    }

    /// The inverse hyperbolic cosine: `log1p(t + √(t (t + 2)))` with `t = x - 1` (exact near
    /// 1), and `ln x + ln 2` beyond `2^28`; NaN below 1.
    pub fn acosh(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("acosh");
        opmath(self, |x| {
            let large = x.gt(INVERSE_LARGE);
            let t = large.where_(0.0, &x - 1.0);
            let near = (&t + (&t * (&t + 2.0)).sqrt()).log1p();
            let far = large.where_(&x, 1.0).log() + LN_2;
            large.where_(far, near)
        })
    }

    /// The inverse hyperbolic tangent `(log1p(x) - log1p(-x)) / 2`: accurate for tiny `x`,
    /// `±inf` at `±1` (its derivative `1/(1 - x²)` there too), NaN beyond.
    pub fn atanh(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("atanh");
        opmath(self, |x| (x.log1p() - x.neg().log1p()) * 0.5)
    }

    /// The fractional part `x - trunc(x)`, with the sign of `x` (`torch.frac`); `0` for
    /// integers.
    ///
    /// # Panics
    ///
    /// For bools.
    #[track_caller]
    pub fn frac(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("frac");
        self.require_number("frac", self.dtype());
        self - self.trunc()
    }

    /// `ln|Γ(x)|` (`torch.lgamma`, `scipy.special.gammaln`): `inf` at `0`, the negative
    /// integers and `±inf`. Stirling's series for `x ≥ 10` and a shift by 10 below;
    /// `ln π - ln|sin πx| - lgamma(1 - x)` for negative `x`; computed in `f64` whatever the
    /// float type (the shift cancels near the zeros at 1 and 2). Within about `1e-14` of SciPy
    /// in `f64`, relative above 1 and absolute below, and to the last bit or so in `f32`; its
    /// derivative is the derivative of those formulas (digamma, to the same accuracy).
    pub fn lgamma(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("lgamma");
        in_f64(self, |x| {
            let negative = x.lt(0.0);
            let y = negative.where_(1.0 - &x, &x);
            let core = lgamma_positive(&y);
            let r = reduced_half_turn(&negative.where_(&x, -0.5));
            let sine = (r.abs() * PI).sin();
            let reflected = PI.ln() - sine.log() - &core;
            let out = negative.where_(reflected, core);
            x.isinf().where_(f64::INFINITY, out)
        })
    }

    /// The digamma function `ψ(x) = Γ'(x)/Γ(x)` (`torch.digamma`, `scipy.special.psi`): the
    /// asymptotic series for `x ≥ 10`, a shift by 10 below, `ψ(1 - x) - π / tan(πx)` for
    /// negative `x`, computed in `f64` whatever the float type. As torch: `ψ(±0) = ∓inf`, NaN
    /// at the negative integers and `-inf`. Within about `1e-14` of SciPy in `f64`, relative
    /// above 1 and absolute below, and to the last bit or so in `f32`.
    pub fn digamma(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("digamma");
        in_f64(self, |x| {
            let negative = x.lt(0.0);
            let y = negative.where_(1.0 - &x, &x);
            let core = digamma_positive(&y);
            let r = reduced_half_turn(&negative.where_(&x, -0.25)) * PI;
            let reflected = &core - r.cos() / r.sin() * PI;
            let pole = negative.logical_and(x.eq(x.trunc()));
            pole.where_(f64::NAN, negative.where_(reflected, core))
        })
    }

    /// `self + weight (end - self)` as torch computes it: that form where `|weight| < ½`, else
    /// `end - (end - self)(1 - weight)`, so `weight = 1` gives `end` exactly. `end` and
    /// `weight` are tensors or scalars (a scalar a run-time value); the result is in the float
    /// type all three meet at.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let b = Tensor::from_vec(vec![3.0f32, 6.0], &[2]);
    /// assert_eq!(evaluate(&a.lerp(&b, 0.25).uop()).to_vec::<f32>(), vec![1.5, 3.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast.
    #[track_caller]
    pub fn lerp(&self, end: impl Into<Operand>, weight: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("lerp");
        let x = float_of(self);
        let end = float_of(&user_tensor(end.into(), &x));
        let weight = float_of(&user_tensor(weight.into(), &x));
        let span = &end - &x;
        let low = &x + &weight * &span;
        let high = &end - &span * (1.0 - &weight);
        weight.abs().lt(0.5).where_(low, high)
    }

    /// `self / other` rounded as `mode` says: torch's `div(rounding_mode="trunc")` and
    /// `div(rounding_mode="floor")`. Integers stay integers (`Trunc` is C's division,
    /// `Floor` is [`Tensor::floor_div`]); floats round the quotient as torch and Python do
    /// (`Floor` from `fmod`, so `1.0 // 0.1 = 9`, and a zero quotient keeps its sign). The
    /// gradient is zero, as torch's. A float scalar divisor is a run-time value.
    ///
    /// ```
    /// # use tensor_core::{Tensor, tensor::RoundingMode, interp::evaluate};
    /// let x = Tensor::from_vec(vec![-7.0f32, 7.0], &[2]);
    /// let t = x.div_rounding(2.0, RoundingMode::Trunc);
    /// let f = x.div_rounding(2.0, RoundingMode::Floor);
    /// assert_eq!(evaluate(&t.uop()).to_vec::<f32>(), vec![-3.0, 3.0]);
    /// assert_eq!(evaluate(&f.uop()).to_vec::<f32>(), vec![-4.0, 3.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast or the operands are bools.
    #[track_caller]
    pub fn div_rounding(&self, other: impl Into<Operand>, mode: RoundingMode) -> Tensor {
        let _op = super::op_scope::OpScope::enter("div_rounding");
        let other = user_operand(other.into(), self);
        let (a, b) = self.binary_operands("div_rounding", other);
        self.require_number("div_rounding", a.dtype());
        let (a, b) = (Tensor::from_uop(a), Tensor::from_uop(b));
        let q = match (mode, a.dtype().is_float()) {
            (RoundingMode::Trunc, true) => a.div(&b).trunc(),
            (RoundingMode::Trunc, false) => {
                Tensor::from_uop(UOp::alu(Op::Idiv, vec![a.uop(), b.uop()]))
            }
            (RoundingMode::Floor, true) => float_floor_div(&a, &b),
            (RoundingMode::Floor, false) => a.floor_div(&b),
        };
        q.detach()
    }

    /// `self` with `value` where `mask` is true (`torch.Tensor.masked_fill`): the mask is bool
    /// and broadcasts to `self`'s shape; `value` is a scalar (a run-time value, so a new fill
    /// does not compile anything again) or a 0-d tensor, cast to `self`'s dtype. The gradient
    /// flows to `self` where the mask is false (and to a tensor `value` where it is true).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    /// let y = x.masked_fill(&x.gt(1.5), -1.0);
    /// assert_eq!(evaluate(&y.uop()).to_vec::<f32>(), vec![1.0, -1.0, -1.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// When `mask` is not bool, does not broadcast to `self`'s shape, or `value` is a tensor
    /// with axes.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("masked_fill");
        let shape = self.shape();
        if mask.dtype() != DType::Bool {
            panic!(
                "masked_fill: the mask is {} {:?}; it must be bool (compare, or cast with .cast(DType::Bool))",
                mask.dtype(),
                mask.shape()
            );
        }
        let joint = broadcast_shapes("masked_fill", &[shape.clone(), mask.shape()]);
        if joint != shape {
            panic!(
                "masked_fill: the mask {:?} does not broadcast to the tensor's shape {shape:?} (it would make {joint:?})",
                mask.shape()
            );
        }
        let value = match value.into() {
            Operand::Scalar(s) => fill_value(s, self.dtype()),
            Operand::Tensor(t) if t.ndim() == 0 => t.cast(self.dtype()),
            Operand::Tensor(t) => panic!(
                "masked_fill: the value is a tensor of shape {:?}; it must be a scalar or 0-d",
                t.shape()
            ),
        };
        mask.where_(&value, self)
    }
}

/// A scalar fill in `dtype`: a run-time value when the user passed it (see `value.rs`).
fn fill_value(value: Scalar, dtype: DType) -> Tensor {
    Tensor::from_uop(operand_uop(value, dtype, &[]))
}

/// Python's float `a // b` (torch's `div_floor_floating`): `(a - fmod(a, b)) / b`, less one
/// where the remainder and divisor differ in sign, rounded to the nearest whole number (the
/// division is exact up to rounding); a zero quotient has the sign of `a / b`, and `b = 0`
/// gives `a / b`.
pub(super) fn float_floor_div(a: &Tensor, b: &Tensor) -> Tensor {
    let rem = a.fmod(b);
    let div = (a - &rem) / b;
    let fix = rem.ne(0.0).logical_and(b.lt(0.0).ne(rem.lt(0.0)));
    let div = fix.where_(&div - 1.0, &div);
    let floor = div.floor();
    let floor = (&div - &floor).gt(0.5).where_(&floor + 1.0, &floor);
    let quotient = a / b;
    let zero = div.full_like(0.0).copysign(&quotient);
    let q = div.eq(0.0).where_(zero, floor);
    b.eq(0.0).where_(quotient, q)
}
