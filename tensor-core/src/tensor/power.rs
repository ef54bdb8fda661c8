//! `pow`: one op of the user's, kept as one node so that the transforms differentiate what was
//! written (`d x^y = y x^(y-1) dx + x^y ln x dy`) rather than a decomposition of it.
//!
//! - Float powers are tinyspec's `Pow` node: the interpreter computes it with the C library's
//!   `pow` (C99 Annex F), the kernels of `f32`, `f16` and `bf16` decompose it into `exp2` and
//!   `log2` with Annex F's special rows (`codegen::transcendental`), `f64` kernels call `pow`.
//! - Integer powers are exact in the integer type, wrapping as NumPy's: repeated squaring over
//!   the bits of the exponent, never a float round trip (`7 ** 11 = 1977326743` in `i32`).
//! - A constant exponent (a scalar, or a tensor that is a broadcast constant) with an exact
//!   cheaper form becomes products, `sqrt` or `recip`: `x ** 3` is `x * x * x`, so its
//!   derivatives are exact at 0 and for negative bases too.

use super::Tensor;
use super::broadcast::{Operand, cast_uop, result_dtype};
use super::elementwise::{add_uop, const_like, eq_uop, lt_uop, mul_uop, ne_uop, where_uop};
use crate::uop::{Arg, Op, Scalar, UOp};

impl Tensor {
    /// `self ** exponent`, as NumPy's `power`: float powers by C99's `pow` table (IEEE, as
    /// libm, NumPy and PyTorch: `(-2) ** 3 = -8`, `0 ** 0 = 1`, `0 ** -1 = inf`, a negative
    /// finite base to a fractional power is NaN); integer powers exact in the integer type,
    /// wrapping on overflow (`7 ** 11 = 1977326743` in `i32`, `10 ** 18` exact in `i64`).
    ///
    /// The gradient is `y x^(y-1)` for the base (0 where `y == 0`, so `x ** 3` has gradient 0
    /// at 0, as in JAX and PyTorch) and `x^y ln x` for the exponent (0 at `x == 0`, `y >= 0`).
    ///
    /// An integer tensor raised to a tensor of integers that turns out negative when computed
    /// gives `trunc(1 / x^|y|)`: 1 for `x == 1`, ±1 for `x == -1`, and 0 otherwise (0 too for
    /// `x == 0`, as integer division by zero gives here), since a lazily computed value cannot
    /// raise NumPy's error; a negative exponent known while the graph is built panics.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![7i32, -2, 3], &[3]);
    /// let y = Tensor::from_vec(vec![11i32, 3, 0], &[3]);
    /// assert_eq!(evaluate(&x.pow(&y).uop()).to_vec::<i32>(), vec![1977326743, -8, 1]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics for a negative integer exponent known while the graph is built (a scalar or a
    /// constant tensor) on an integer tensor, as NumPy's "Integers to negative integer powers
    /// are not allowed". Panics when the shapes do not broadcast or the operands are bools.
    #[track_caller]
    pub fn pow(&self, exponent: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("pow");
        let exponent = exponent.into();
        if let Operand::Scalar(e) = exponent {
            let dtype = result_dtype(&[Operand::from(self), Operand::Scalar(e)]);
            self.require_number("pow", dtype);
            let x = Tensor::from_uop(cast_uop(&self.uop(), dtype));
            if let Some(t) = x.pow_by_constant(e) {
                return t;
            }
        }
        let (a, b) = self.binary_operands("pow", exponent);
        let dtype = a.dtype();
        self.require_number("pow", dtype);
        if let Some(e) = constant_of(&b)
            && let Some(t) = Tensor::from_uop(a.clone()).pow_by_constant(e)
        {
            return t;
        }
        if dtype.is_float() {
            return Tensor::from_uop(UOp::alu(Op::Pow, vec![a, b]));
        }
        Tensor::from_uop(int_pow_uop(&a, &b))
    }

    /// `self ** e` for a constant `e` of `self`'s dtype where an exact cheaper form exists
    /// (every integer `e` of an integer tensor; `0`, `±1`, `2`, `3`, `4` and `±0.5` of floats).
    #[track_caller]
    fn pow_by_constant(&self, e: Scalar) -> Option<Tensor> {
        let dtype = self.dtype();
        if dtype.is_float() {
            return match e.as_f64() {
                0.0 => Some(self.ones_like()),
                1.0 => Some(self.clone()),
                2.0 => Some(self.pow_by_squaring(2)),
                3.0 => Some(self.pow_by_squaring(3)),
                4.0 => Some(self.pow_by_squaring(4)),
                0.5 => Some(self.pow_half()),
                -0.5 => Some(self.pow_half().recip()),
                -1.0 => Some(self.recip()),
                _ => None,
            };
        }
        let k = match e {
            Scalar::Float(v) if v.fract() != 0.0 || !v.is_finite() => return None,
            Scalar::Float(v) => v as i64,
            other => other.cast(dtype).as_i64(),
        };
        if k < 0 && !dtype.is_unsigned_int() {
            panic!(
                "pow: integer tensors (dtype {dtype}) cannot be raised to the negative integer power {k} (shape {:?}; as NumPy, integers to negative integer powers are not allowed); cast to a float type first",
                self.shape()
            );
        }
        Some(self.pow_by_squaring(k as u64))
    }

    /// `self ** 0.5` of a float tensor by `pow`'s table, not `sqrt`'s: `(-inf) ** 0.5 = inf`
    /// and `(-0) ** 0.5 = +0` (`sqrt` gives NaN and `-0`). `-inf` is replaced before the root,
    /// so no NaN reaches the gradient, and `+ 0.0` turns `-0` into `+0`.
    fn pow_half(&self) -> Tensor {
        let u = self.uop();
        let inf = const_like(&u, f64::INFINITY);
        let minus_inf = const_like(&u, f64::NEG_INFINITY);
        let finite_or_plus = where_uop(&eq_uop(&u, &minus_inf), &inf, &u);
        let root = UOp::alu(Op::Sqrt, vec![finite_or_plus]);
        Tensor::from_uop(add_uop(&root, &const_like(&u, 0.0)))
    }

    /// `self ** k` by repeated squaring (`k` read as unsigned: the bits of an unsigned dtype's
    /// exponent).
    fn pow_by_squaring(&self, mut k: u64) -> Tensor {
        let mut result: Option<Tensor> = None;
        let mut base = self.clone();
        while k > 0 {
            if k & 1 == 1 {
                result = Some(match result {
                    Some(r) => r.mul(&base),
                    None => base.clone(),
                });
            }
            k >>= 1;
            if k > 0 {
                base = base.mul(&base);
            }
        }
        result.unwrap_or_else(|| self.ones_like())
    }
}

/// The value of a node that is a constant seen through reshapes and expands.
fn constant_of(u: &UOp) -> Option<Scalar> {
    let mut node = u.clone();
    loop {
        match (node.op(), node.arg()) {
            (Op::Const, Arg::Const(s)) => return Some(*s),
            (Op::Reshape | Op::Expand, _) => node = node.s(0).clone(),
            _ => return None,
        }
    }
}

/// `a ** b` for same-shaped integer nodes, exact and wrapping: the product of `a^(2^k)` over
/// the set bits `k` of `b`. A negative `b` (signed dtypes) gives `trunc(1 / a^|b|)`: 1 for
/// `a == 1`, ±1 by parity for `a == -1`, else 0.
fn int_pow_uop(a: &UOp, b: &UOp) -> UOp {
    let dtype = a.dtype();
    let signed = dtype.is_signed_int();
    let zero = const_like(b, 0);
    let one = const_like(a, 1);
    let magnitude_bits = dtype.bits() - u32::from(signed);
    let mut result = one.clone();
    let mut base = a.clone();
    for k in 0..magnitude_bits {
        let shifted = UOp::alu(Op::Shr, vec![b.clone(), const_like(b, k as i64)]);
        let bit = UOp::alu(Op::And, vec![shifted, const_like(b, 1)]);
        result = where_uop(&ne_uop(&bit, &zero), &mul_uop(&result, &base), &result);
        if k + 1 < magnitude_bits {
            base = mul_uop(&base, &base);
        }
    }
    if !signed {
        return result;
    }
    let minus_one = const_like(a, -1);
    let odd = ne_uop(&UOp::alu(Op::And, vec![b.clone(), const_like(b, 1)]), &zero);
    let of_minus_one = where_uop(&odd, &minus_one, &one);
    let reciprocal = where_uop(
        &eq_uop(a, &one),
        &one,
        &where_uop(&eq_uop(a, &minus_one), &of_minus_one, &const_like(a, 0)),
    );
    where_uop(&lt_uop(b, &zero), &reciprocal, &result)
}

/// `∂(x^y)/∂x = y x^(y-1)`, and 0 where `y == 0` (PyTorch's; `x^0` is constant). A constant
/// exponent keeps the cheaper forms of [`Tensor::pow`] (`3 x^2` is `3 x x`).
pub(crate) fn pow_base_partial(x: &Tensor, y: &Tensor) -> Tensor {
    if let Some(c) = constant_of(&y.uop()) {
        let c = c.as_f64();
        if c == 0.0 {
            return x.zeros_like();
        }
        return x.pow(c - 1.0) * c;
    }
    let y_is_zero = y.eq(0.0);
    // The exponent is moved off 0 in the branch `where` drops, so that branch's own
    // derivatives stay finite and no NaN cotangent flows into it.
    let y_safe = y_is_zero.where_(1.0, y);
    y_is_zero.where_(0.0, &y_safe * x.pow(&y_safe - 1.0))
}

/// `∂(x^y)/∂y = x^y ln x` for `p = x^y`, and 0 where `x == 0` and `y >= 0` (PyTorch's: the
/// limit of `x^y ln x`, not `0 * -inf`).
pub(crate) fn pow_exponent_partial(x: &Tensor, y: &Tensor, p: &Tensor) -> Tensor {
    let zero_base = x.eq(0.0).logical_and(y.ge(0.0));
    let x_safe = zero_base.where_(1.0, x);
    zero_base.where_(0.0, p * x_safe.log())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate;

    #[test]
    fn integer_powers_are_exact_and_wrap() {
        let x = Tensor::from_vec(vec![7i32, 3, -3, 2, 5], &[5]);
        let y = Tensor::from_vec(vec![11i32, 20, 21, 31, 0], &[5]);
        // 3^20 = 3486784401 wraps to -808182895 in i32; -3^21 = -10460353203 to 6719515981 - 2^32.
        assert_eq!(
            evaluate(&x.pow(&y).uop()).to_vec::<i32>(),
            vec![1977326743, -808182895, -1870418611, i32::MIN, 1]
        );
    }

    #[test]
    fn a_constant_exponent_tensor_takes_the_constant_form() {
        let x = Tensor::from_vec(vec![-2.0f32, 0.0, 3.0], &[3]);
        let y = x.full_like(3.0);
        assert!(x.pow(&y).uop().toposort().iter().all(|u| u.op() != Op::Pow));
        assert_eq!(
            evaluate(&x.pow(&y).uop()).to_vec::<f32>(),
            vec![-8.0, 0.0, 27.0]
        );
    }
}
