//! Elementwise functions NumPy and PyTorch have and tinyspec has no primitive for, composed
//! from the primitives so every transform rule already covers them:
//!
//! - inverse trigonometry: `atan` by range reduction (`|x| > tan 3π/8`: `π/2 + atan(-1/x)`,
//!   `|x| > tan π/8`: `π/4 + atan((x-1)/(x+1))`) and an odd polynomial on `|z| ≤ tan π/8`
//!   (one Newton step on `sin z - x cos z` refines it in `f64`); `asin`, `acos` and `atan2`
//!   from `atan`, with C99's table of signed zeros and infinities for `atan2`;
//! - the sign bit (`signbit`, `copysign`), which sees `-0.0` and the sign of NaN (a bitcast to
//!   the integer of the same width);
//! - rounding half to even (`round`, `round_decimals`), `fmod` (tinyspec's float `Mod`),
//!   `logaddexp`, and the classifications `isnan`, `isinf`, `isfinite`, `isclose`, `allclose`;
//! - bit-level ops: `<<`, `>>` (an arithmetic shift past the width fills with the sign, as
//!   NumPy and PyTorch do) and `bitcast`.

use super::Tensor;
use super::broadcast::Operand;
use super::elementwise::{abs_uop, const_like, signbit_uop};
use crate::uop::{DType, Op, UOp};
use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, LN_2, PI};

/// `tan(3π/8)` and `tan(π/8)`: the bounds of `atan`'s range reduction.
const TAN_3PI_8: f64 = 2.414_213_562_373_095;
const TAN_PI_8: f64 = 0.414_213_562_373_095_03;

/// Coefficients of `atan(z) ≈ z + z³ (c0 + c1 z² + c2 z⁴ + c3 z⁶)` on `|z| ≤ tan π/8`, a
/// minimax fit good to about one `f32` ulp, highest power first.
const ATAN_POLY: [f64; 4] = [
    8.053_744_495_38e-2,
    -1.387_768_560_32e-1,
    1.997_771_064_78e-1,
    -3.333_294_915_39e-1,
];

impl Tensor {
    /// This tensor in its float type (`f32` for ints and bools).
    fn as_float(&self) -> Tensor {
        self.cast(self.dtype().to_float())
    }

    /// True where the sign bit is set: `-0.0`, `-inf` and negative NaNs included (NumPy's
    /// `signbit`); for integers `x < 0`, for bools false.
    pub fn signbit(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("signbit");
        let u = self.uop();
        match u.dtype() {
            d if d.is_float() => Tensor::from_uop(signbit_uop(&u)),
            DType::Bool => Tensor::zeros(&self.shape(), DType::Bool),
            _ => self.lt(0),
        }
    }

    /// The magnitude of `self` with the sign bit of `sign` (C's `copysign`; sees `-0.0`), in
    /// the float type both meet at. Its gradient flows to `self` only.
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast.
    #[track_caller]
    pub fn copysign(&self, sign: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("copysign");
        let sign = match sign.into() {
            Operand::Tensor(t) => t,
            Operand::Scalar(s) => Tensor::from_uop(UOp::constant(s, self.dtype().to_float())),
        };
        let dtype = DType::promote(self.dtype(), sign.dtype()).to_float();
        let (x, s) = (self.cast(dtype), sign.cast(dtype));
        let magnitude = x.signbit().where_(x.neg(), &x);
        s.signbit().where_(magnitude.neg(), &magnitude)
    }

    /// The arctangent, in `(-π/2, π/2)`; `atan(±0) = ±0`, `atan(±inf) = ±π/2`.
    pub fn atan(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("atan");
        let x = self.as_float();
        let a = x.copysign(1.0);
        let big = a.gt(TAN_3PI_8);
        let mid = a.gt(TAN_PI_8).logical_and(big.logical_not());
        let reduced_big = a.recip().neg();
        let reduced_mid = (&a - 1.0) / (&a + 1.0);
        let z = big.where_(&reduced_big, mid.where_(&reduced_mid, &a));
        // Constants in x's dtype: two weak scalars alone would meet at f32.
        let base = big.where_(
            x.full_like(FRAC_PI_2),
            mid.where_(x.full_like(FRAC_PI_4), 0.0),
        );
        let mut p = atan_polynomial(&z);
        if x.dtype() == DType::F64 {
            // One Newton step on f(p) = sin p - z cos p: the f32-grade fit becomes f64-grade.
            let (s, c) = (p.sin(), p.cos());
            p = &p - (&s - &z * &c) / (&c + &z * &s);
        }
        (base + p).copysign(&x)
    }

    /// The arcsine as `atan(x / sqrt((1 - x)(1 + x)))`; NaN outside `[-1, 1]`.
    pub fn asin(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("asin");
        let x = self.as_float();
        let cos = ((1.0 - &x) * (1.0 + &x)).sqrt();
        (&x / cos).atan()
    }

    /// The arccosine as `2 atan(sqrt((1 - x) / (1 + x)))`, accurate near both ends; NaN
    /// outside `[-1, 1]`.
    pub fn acos(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("acos");
        let x = self.as_float();
        (((1.0 - &x) / (1.0 + &x)).sqrt().atan()) * 2.0
    }

    /// The angle of the point `(other, self)`: C's `atan2(y = self, x = other)`, in
    /// `[-π, π]`, with its table of signed zeros and infinities (`atan2(±0, -0) = ±π`,
    /// `atan2(±inf, -inf) = ±3π/4`, ...).
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast.
    #[track_caller]
    pub fn atan2(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("atan2");
        let other = match other.into() {
            Operand::Tensor(t) => t,
            Operand::Scalar(s) => Tensor::from_uop(UOp::constant(s, self.dtype().to_float())),
        };
        let dtype = DType::promote(self.dtype(), other.dtype()).to_float();
        let (y, x) = (self.cast(dtype), other.cast(dtype));
        let (ay, ax) = (y.copysign(1.0), x.copysign(1.0));
        let both_inf = ay.isinf().logical_and(ax.isinf());
        let both_zero = ay.eq(0.0).logical_and(ax.eq(0.0));
        // The ratio's operands are made harmless where a special row decides the value, so no
        // NaN reaches the gradient of the chosen lanes.
        let special = both_inf.logical_or(&both_zero);
        let num = special.where_(1.0, &ay);
        let den = special.where_(1.0, &ax);
        let first_quadrant = (num / den).atan();
        let angle = both_inf.where_(FRAC_PI_4, both_zero.where_(0.0, &first_quadrant));
        let angle = angle.cast(dtype);
        let angle = x.signbit().where_(PI - &angle, &angle);
        y.signbit().where_(angle.neg(), &angle)
    }

    /// Rounds to the nearest integer, ties to even (NumPy's `round`/`rint`, PyTorch's
    /// `round`); `-0.3` rounds to `-0.0`, infinities and NaN stay. Integers are returned as
    /// they are.
    pub fn round(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("round");
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        // x - trunc(x) is exact; |x| >= 2^(mantissa bits) has no fraction.
        let frac = self - &t;
        let half = frac.abs();
        let t_is_odd = (&t - (&t * 0.5).trunc() * 2.0).ne(0.0);
        let away = half.gt(0.5).logical_or(half.eq(0.5).logical_and(t_is_odd));
        let step = frac.signbit().where_(-1.0, 1.0).cast(self.dtype());
        away.where_(&t + step, &t)
    }

    /// Rounds to `decimals` decimal places, ties to even, as NumPy's `round(x, decimals)`:
    /// `round(x * 10^d) / 10^d`, or `round(x / 10^-d) * 10^-d` for negative `decimals`.
    /// Integers with `decimals >= 0` are returned as they are; with negative `decimals` they
    /// round through their float type and come back.
    pub fn round_decimals(&self, decimals: i32) -> Tensor {
        let _op = super::op_scope::OpScope::enter("round_decimals");
        if decimals == 0 || (decimals > 0 && !self.dtype().is_float()) {
            return self.round();
        }
        let x = self.as_float();
        let scale = 10f64.powi(decimals.abs());
        let rounded = if decimals > 0 {
            (&x * scale).round() / scale
        } else {
            (&x / scale).round() * scale
        };
        rounded.cast(self.dtype())
    }

    /// C's `fmod`: the remainder of `self / other` with the sign of `self` (NumPy's `fmod`,
    /// PyTorch's `fmod`), exact for floats (tinyspec's float `Mod`); integers truncate, and an
    /// integer remainder by zero is 0.
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast or the operands are bools.
    #[track_caller]
    pub fn fmod(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("fmod");
        let (a, b) = self.binary_operands("fmod", other);
        self.require_number("fmod", a.dtype());
        Tensor::from_uop(UOp::alu(Op::Mod, vec![a, b]))
    }

    /// `log(e^a + e^b)` without overflow: `max(a, b) + log(1 + e^-|a-b|)`, and `a + ln 2`
    /// where `a == b` (so `logaddexp(-inf, -inf) = -inf`, and the gradient splits evenly).
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast.
    #[track_caller]
    pub fn logaddexp(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("logaddexp");
        let (a, b) = self.binary_operands("logaddexp", other);
        let float = a.dtype().to_float();
        let (a, b) = (
            Tensor::from_uop(a).cast(float),
            Tensor::from_uop(b).cast(float),
        );
        let tie = a.eq(&b);
        let d = tie.where_(0.0, &a - &b);
        let tail = (d.abs().neg().exp() + 1.0).log();
        let at_tie = &a * 0.5 + &b * 0.5 + LN_2;
        tie.where_(at_tie, a.maximum(&b) + tail)
    }

    /// True where the value is NaN (never for integers and bools).
    pub fn isnan(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("isnan");
        if !self.dtype().is_float() {
            return Tensor::zeros(&self.shape(), DType::Bool);
        }
        self.ne(self)
    }

    /// True where the value is `+inf` or `-inf`.
    pub fn isinf(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("isinf");
        let u = self.uop();
        if !u.dtype().is_float() {
            return self.isnan();
        }
        let inf = const_like(&u, f64::INFINITY);
        Tensor::from_uop(abs_uop(&u)).eq(Tensor::from_uop(inf))
    }

    /// True where the value is neither infinite nor NaN (`|x| < inf`).
    pub fn isfinite(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("isfinite");
        let u = self.uop();
        if !u.dtype().is_float() {
            return self.isnan().logical_not();
        }
        let inf = const_like(&u, f64::INFINITY);
        Tensor::from_uop(abs_uop(&u)).lt(Tensor::from_uop(inf))
    }

    /// NumPy's `isclose`: `|a - b| <= atol + rtol |b|` where both are finite, `a == b`
    /// otherwise (equal infinities), and NaN matching NaN when `equal_nan`. Compared in the
    /// float type both meet at.
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast.
    #[track_caller]
    pub fn isclose(
        &self,
        other: impl Into<Operand>,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Tensor {
        let _op = super::op_scope::OpScope::enter("isclose");
        let (a, b) = self.binary_operands("isclose", other);
        let float = a.dtype().to_float();
        let (a, b) = (
            Tensor::from_uop(a).cast(float),
            Tensor::from_uop(b).cast(float),
        );
        let finite = a.isfinite().logical_and(b.isfinite());
        let near = (&a - &b).abs().le(b.abs() * rtol + atol);
        let close = a.eq(&b).logical_or(finite.logical_and(near));
        if equal_nan {
            return close.logical_or(a.isnan().logical_and(b.isnan()));
        }
        close
    }

    /// True (a 0-d bool) when every element is [`Tensor::isclose`] to `other`.
    ///
    /// # Panics
    ///
    /// When the shapes do not broadcast.
    #[track_caller]
    pub fn allclose(
        &self,
        other: impl Into<Operand>,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Tensor {
        let _op = super::op_scope::OpScope::enter("allclose");
        let close = self.isclose(other, rtol, atol, equal_nan);
        let axes: Vec<isize> = (0..close.ndim() as isize).collect();
        close.all(&axes, false)
    }

    /// `self << amount` on integers (NumPy's `left_shift`); a shift by a negative amount or by the
    /// width or more gives 0.
    ///
    /// # Panics
    ///
    /// Panics for floats and when the shapes do not broadcast.
    #[track_caller]
    pub fn shl(&self, amount: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("shl");
        self.shift("shl", Op::Shl, amount)
    }

    /// `self >> amount` on integers (NumPy's `right_shift`): arithmetic for signed types, logical
    /// for unsigned; past the width (or by a negative amount) a signed value becomes its sign fill
    /// (`-1` or `0`) and an unsigned one 0, as in NumPy and PyTorch.
    ///
    /// # Panics
    ///
    /// Panics for floats and when the shapes do not broadcast.
    #[track_caller]
    pub fn shr(&self, amount: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("shr");
        self.shift("shr", Op::Shr, amount)
    }

    #[track_caller]
    fn shift(&self, name: &str, op: Op, amount: impl Into<Operand>) -> Tensor {
        let (a, b) = self.binary_operands(name, amount);
        let dtype = a.dtype();
        if !dtype.is_int() {
            panic!(
                "{name}: operands meet at {dtype} (shape {:?}), which is not an integer type",
                self.shape()
            );
        }
        let b = if op == Op::Shr && dtype.is_signed_int() {
            let amount = Tensor::from_uop(b.clone());
            let last = dtype.bits() as i64 - 1;
            let outside = amount.lt(0).logical_or(amount.gt(last));
            outside.where_(last, &amount).cast(dtype).uop()
        } else {
            b
        };
        Tensor::from_uop(UOp::alu(op, vec![a, b]))
    }

    /// The same bits read as `dtype`, which must have the element size of this tensor's dtype
    /// (`f32` <-> `i32`/`u32`, `f16` <-> `i16`, ...). Bools cannot be bitcast.
    ///
    /// # Panics
    ///
    /// When either dtype is `bool` or the two element sizes differ.
    #[track_caller]
    pub fn bitcast(&self, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("bitcast");
        let from = self.dtype();
        if from == DType::Bool || dtype == DType::Bool || from.size_bytes() != dtype.size_bytes() {
            panic!(
                "bitcast: cannot reinterpret {from} as {dtype} (shape {:?}): both must be numbers of one size",
                self.shape()
            );
        }
        if from == dtype {
            return self.clone();
        }
        Tensor::from_uop(self.uop().bitcast(dtype))
    }
}

/// `atan(z)` for `|z| <= tan π/8` by the odd polynomial [`ATAN_POLY`].
fn atan_polynomial(z: &Tensor) -> Tensor {
    let zz = z * z;
    let mut acc = Tensor::from_uop(const_like(&zz.uop(), ATAN_POLY[0]));
    for &c in &ATAN_POLY[1..] {
        acc = acc * &zz + c;
    }
    acc * zz * z + z
}
