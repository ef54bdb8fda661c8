//! Elementwise ops, decomposed into tinyspec's primitives: `Neg = Mul(x, -1)`,
//! `Sub = Add(a, Neg b)`, `Div = Mul(a, Recip b)`, `CmpGt = CmpLt(b, a)`,
//! `CmpEq = CmpNe(CmpNe(a, b), true)`, `exp = Exp2(x * log2 e)`, `log = Log2(x) * ln 2`,
//! and so on (`cos` and `erf` are ops of their own, lowered with `Sin`). Operands broadcast as in
//! NumPy and meet at one dtype (see [`super::broadcast::result_dtype`]); float-only math lifts
//! ints and bools to `f32`.

use super::Tensor;
use super::broadcast::{
    Operand, broadcast_shapes, broadcast_uop, cast_uop, const_uop, elementwise_operands,
    result_dtype,
};
use crate::uop::{DType, Op, Scalar, Shape, UOp};
use std::f64::consts::{LN_2, LOG2_E};

/// A constant with `u`'s dtype and shape.
pub(crate) fn const_like(u: &UOp, value: impl Into<Scalar>) -> UOp {
    const_uop(value.into(), u.dtype(), &u.shape_vec())
}

/// `-u` as `Mul(u, -1)`.
pub(crate) fn neg_uop(u: &UOp) -> UOp {
    UOp::alu(Op::Mul, vec![u.clone(), const_like(u, -1)])
}

/// `a + b` on same-shaped, same-typed nodes.
pub(crate) fn add_uop(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Add, vec![a.clone(), b.clone()])
}

/// `a * b` on same-shaped, same-typed nodes.
pub(crate) fn mul_uop(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Mul, vec![a.clone(), b.clone()])
}

/// `a / b`, correctly rounded for floats (IEEE division, not `a * (1/b)`).
pub(crate) fn div_uop(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Div, vec![a.clone(), b.clone()])
}

/// `a < b` (bool).
pub(crate) fn lt_uop(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::CmpLt, vec![a.clone(), b.clone()])
}

/// `a != b` (bool).
pub(crate) fn ne_uop(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::CmpNe, vec![a.clone(), b.clone()])
}

/// Logical not of a bool node as `CmpNe(u, true)`.
pub(crate) fn not_uop(u: &UOp) -> UOp {
    ne_uop(u, &const_like(u, true))
}

/// `a == b` as `CmpNe(CmpNe(a, b), true)`.
pub(crate) fn eq_uop(a: &UOp, b: &UOp) -> UOp {
    not_uop(&ne_uop(a, b))
}

/// `cond ? a : b` on same-shaped nodes.
pub(crate) fn where_uop(cond: &UOp, a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Where, vec![cond.clone(), a.clone(), b.clone()])
}

/// Bitwise complement of an integer node as `Xor(u, all ones)`; it reverses the order of
/// signed and unsigned integers alike, without the overflow of negation.
pub(crate) fn complement_uop(u: &UOp) -> UOp {
    UOp::alu(Op::Xor, vec![u.clone(), const_like(u, -1)])
}

/// `e^u` as `Exp2(u * log2 e)`.
pub(crate) fn exp_uop(u: &UOp) -> UOp {
    UOp::alu(Op::Exp2, vec![mul_uop(u, &const_like(u, LOG2_E))])
}

/// `ln u` as `Log2(u) * ln 2`.
pub(crate) fn log_uop(u: &UOp) -> UOp {
    mul_uop(&UOp::alu(Op::Log2, vec![u.clone()]), &const_like(u, LN_2))
}

/// `1/u`.
pub(crate) fn recip_uop(u: &UOp) -> UOp {
    UOp::alu(Op::Recip, vec![u.clone()])
}

/// The elementwise maximum of same-shaped, same-typed nodes (`Or` for bools).
pub(crate) fn max_uop(a: &UOp, b: &UOp) -> UOp {
    let op = if a.dtype() == DType::Bool {
        Op::Or
    } else {
        Op::Max
    };
    UOp::alu(op, vec![a.clone(), b.clone()])
}

/// `trunc(u)` rounded down for floats: `t = Trunc(u)`, then `t - 1` where `u < t`.
fn floor_uop(u: &UOp) -> UOp {
    let t = UOp::alu(Op::Trunc, vec![u.clone()]);
    where_uop(&lt_uop(u, &t), &add_uop(&t, &const_like(&t, -1)), &t)
}

impl Tensor {
    /// `self` and `other` as nodes of one dtype and shape (NumPy broadcasting).
    #[track_caller]
    pub(super) fn binary_operands(&self, op: &str, other: impl Into<Operand>) -> (UOp, UOp) {
        let op = super::op_scope::user_op(op);
        let (uops, _) = elementwise_operands(op, &[Operand::from(self), other.into()]);
        let mut it = uops.into_iter();
        (it.next().expect("lhs"), it.next().expect("rhs"))
    }

    /// This tensor's node in its float type (`f32` for ints and bools).
    fn float_uop(&self) -> UOp {
        let u = self.uop();
        cast_uop(&u, u.dtype().to_float())
    }

    /// Panics unless the dtype is a number (not bool): for ops NumPy rejects on bools.
    #[track_caller]
    pub(super) fn require_number(&self, op: &str, dtype: DType) {
        let op = super::op_scope::user_op(op);
        if dtype == DType::Bool {
            panic!(
                "{op}: not supported for bool tensors (shape {:?}); cast to a number type first",
                self.shape()
            );
        }
    }

    /// `self + other` (logical or for two bool operands).
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn add(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("add");
        let (a, b) = self.binary_operands("add", other);
        let op = if a.dtype() == DType::Bool {
            Op::Or
        } else {
            Op::Add
        };
        Tensor::from_uop(UOp::alu(op, vec![a, b]))
    }

    /// `self - other` as `Add(a, Mul(b, -1))`.
    ///
    /// # Panics
    ///
    /// Panics for bools, as NumPy does. Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn sub(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("sub");
        let (a, b) = self.binary_operands("sub", other);
        self.require_number("sub", a.dtype());
        Tensor::from_uop(add_uop(&a, &neg_uop(&b)))
    }

    /// `self * other` (logical and for two bool operands).
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn mul(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("mul");
        let (a, b) = self.binary_operands("mul", other);
        let op = if a.dtype() == DType::Bool {
            Op::And
        } else {
            Op::Mul
        };
        Tensor::from_uop(UOp::alu(op, vec![a, b]))
    }

    /// True division `self / other`, correctly rounded (IEEE `a / b`: tinyspec's `Div` with its
    /// stated semantics, kept as one op rather than `Mul(a, Recip(b))`, which is up to 1 ulp off
    /// and overflows for tiny divisors); ints and bools divide in `f32`.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn div(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("div");
        let (a, b) = self.binary_operands("div", other);
        let float = a.dtype().to_float();
        let (a, b) = (cast_uop(&a, float), cast_uop(&b, float));
        Tensor::from_uop(div_uop(&a, &b))
    }

    /// Division rounded toward negative infinity, as NumPy's `//`: integers use `Idiv` (which
    /// truncates) corrected by one where the remainder and divisor differ in sign; floats
    /// floor `a / b`.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast or the operands are bools.
    #[track_caller]
    pub fn floor_div(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("floor_div");
        let (a, b) = self.binary_operands("floor_div", other);
        self.require_number("floor_div", a.dtype());
        if a.dtype().is_float() {
            // fmod-based, as Python and NumPy: `1.0 // 0.1` is 9, where `floor(1.0 / 0.1)` is
            // 10 (the quotient rounds up to 10). A step function: no gradient.
            let (a, b) = (Tensor::from_uop(a), Tensor::from_uop(b));
            return super::special_math::float_floor_div(&a, &b).detach();
        }
        let q = UOp::alu(Op::Idiv, vec![a.clone(), b.clone()]);
        if a.dtype().is_unsigned_int() {
            return Tensor::from_uop(q);
        }
        let r = UOp::alu(Op::Mod, vec![a, b.clone()]);
        let fix = remainder_needs_fix(&r, &b);
        Tensor::from_uop(where_uop(&fix, &add_uop(&q, &const_like(&q, -1)), &q))
    }

    /// The remainder with the sign of the divisor, as NumPy's `%`: `a - floor_div(a, b) * b`.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast or the operands are bools.
    #[track_caller]
    pub fn remainder(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("remainder");
        let (a, b) = self.binary_operands("remainder", other);
        self.require_number("remainder", a.dtype());
        if a.dtype().is_float() {
            return float_remainder(&Tensor::from_uop(a), &Tensor::from_uop(b));
        }
        let r = UOp::alu(Op::Mod, vec![a, b.clone()]);
        if r.dtype().is_unsigned_int() {
            return Tensor::from_uop(r);
        }
        let fix = remainder_needs_fix(&r, &b);
        Tensor::from_uop(where_uop(&fix, &add_uop(&r, &b), &r))
    }

    /// The elementwise maximum (`Max`; logical or for bools).
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn maximum(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("maximum");
        let (a, b) = self.binary_operands("maximum", other);
        Tensor::from_uop(max_uop(&a, &b))
    }

    /// The elementwise minimum: `-max(-a, -b)` for floats, `~max(~a, ~b)` for integers (complement
    /// reverses the order without overflow), logical and for bools.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn minimum(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("minimum");
        let (a, b) = self.binary_operands("minimum", other);
        Tensor::from_uop(min_uop(&a, &b))
    }

    /// `self` limited to `[lo, hi]`: `minimum(maximum(self, lo), hi)`.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn clamp(&self, lo: impl Into<Operand>, hi: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("clamp");
        let lo = super::value::user_operand(lo.into(), self);
        let hi = super::value::user_operand(hi.into(), self);
        self.maximum(lo).minimum(hi)
    }

    /// `self < other` (bool).
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn lt(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("lt");
        let (a, b) = self.binary_operands("lt", other);
        Tensor::from_uop(lt_uop(&a, &b))
    }

    /// `self > other` as `CmpLt(b, a)`.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn gt(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("gt");
        let (a, b) = self.binary_operands("gt", other);
        Tensor::from_uop(lt_uop(&b, &a))
    }

    /// `self >= other`: `CmpNe(CmpLt(a, b), true)` for integers; for floats
    /// `Or(CmpLt(b, a), a == b)`, which is false when either side is NaN, as IEEE and NumPy say.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn ge(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("ge");
        let (a, b) = self.binary_operands("ge", other);
        Tensor::from_uop(at_least_uop(&a, &b))
    }

    /// `self <= other`: `CmpNe(CmpLt(b, a), true)` for integers, NaN-aware for floats (see
    /// [`Tensor::ge`]).
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn le(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("le");
        let (a, b) = self.binary_operands("le", other);
        Tensor::from_uop(at_least_uop(&b, &a))
    }

    /// `self == other` as `CmpNe(CmpNe(a, b), true)`.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn eq(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("eq");
        let (a, b) = self.binary_operands("eq", other);
        Tensor::from_uop(eq_uop(&a, &b))
    }

    /// `self != other` (bool).
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn ne(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("ne");
        let (a, b) = self.binary_operands("ne", other);
        Tensor::from_uop(ne_uop(&a, &b))
    }

    /// `a` where `self` is true, else `b`, all three broadcast together. A non-bool condition means
    /// "non-zero", as in NumPy; `a` and `b` meet at one dtype.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::from_vec(vec![-1, 2, -3], &[3]);
    /// let relu = x.gt(0).where_(&x, 0);                      // np.where(x > 0, x, 0)
    /// assert_eq!(evaluate(&relu.uop()).to_vec::<i32>(), vec![0, 2, 0]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn where_(&self, a: impl Into<Operand>, b: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("where");
        let branches = [a.into(), b.into()];
        let dtype = result_dtype(&branches);
        let mut shapes: Vec<Shape> = vec![self.shape()];
        shapes.extend(branches.iter().map(operand_shape));
        let shape = broadcast_shapes("where", &shapes);
        let cond = broadcast_uop(&cast_uop(&self.uop(), DType::Bool), &shape);
        let a = materialize(&branches[0], dtype, &shape);
        let b = materialize(&branches[1], dtype, &shape);
        Tensor::from_uop(where_uop(&cond, &a, &b))
    }

    /// Bitwise and of integers (logical and of bools).
    ///
    /// # Panics
    ///
    /// Panics for floats and when the shapes do not broadcast.
    #[track_caller]
    pub fn bitwise_and(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("bitwise_and");
        self.bitwise("bitwise_and", Op::And, other)
    }

    /// Bitwise or of integers (logical or of bools).
    ///
    /// # Panics
    ///
    /// Panics for floats and when the shapes do not broadcast.
    #[track_caller]
    pub fn bitwise_or(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("bitwise_or");
        self.bitwise("bitwise_or", Op::Or, other)
    }

    /// Bitwise exclusive or of integers (logical xor of bools).
    ///
    /// # Panics
    ///
    /// Panics for floats and when the shapes do not broadcast.
    #[track_caller]
    pub fn bitwise_xor(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("bitwise_xor");
        self.bitwise("bitwise_xor", Op::Xor, other)
    }

    #[track_caller]
    fn bitwise(&self, name: &str, op: Op, other: impl Into<Operand>) -> Tensor {
        let other = other.into();
        let (a, b) = self.binary_operands(name, other.clone());
        if a.dtype().is_float() {
            let other_desc = match &other {
                Operand::Tensor(t) => format!("{} {:?}", t.dtype(), t.shape()),
                Operand::Scalar(s) => format!("scalar {s}"),
            };
            panic!(
                "{name}: operands {} {:?} and {other_desc} meet at {}, which is not an integer or bool type",
                self.dtype(),
                self.shape(),
                a.dtype()
            );
        }
        Tensor::from_uop(UOp::alu(op, vec![a, b]))
    }

    /// Bitwise complement of integers (`Xor` with all ones), logical not of bools.
    ///
    /// # Panics
    ///
    /// Panics for floats.
    #[track_caller]
    pub fn bitwise_not(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("bitwise_not");
        let u = self.uop();
        match u.dtype() {
            DType::Bool => Tensor::from_uop(not_uop(&u)),
            d if d.is_int() => Tensor::from_uop(complement_uop(&u)),
            d => panic!(
                "bitwise_not: dtype {d} is not an integer or bool type (shape {:?})",
                self.shape()
            ),
        }
    }

    /// `!self` for truth values: non-zero is true; the result is bool.
    pub fn logical_not(&self) -> Tensor {
        Tensor::from_uop(not_uop(&cast_uop(&self.uop(), DType::Bool)))
    }

    /// `self && other` for truth values (non-zero is true); bool.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn logical_and(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("logical_and");
        let (a, b) = self.binary_operands("logical_and", other);
        let (a, b) = (cast_uop(&a, DType::Bool), cast_uop(&b, DType::Bool));
        Tensor::from_uop(UOp::alu(Op::And, vec![a, b]))
    }

    /// `self || other` for truth values (non-zero is true); bool.
    ///
    /// # Panics
    ///
    /// Panics when the shapes do not broadcast.
    #[track_caller]
    pub fn logical_or(&self, other: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("logical_or");
        let (a, b) = self.binary_operands("logical_or", other);
        let (a, b) = (cast_uop(&a, DType::Bool), cast_uop(&b, DType::Bool));
        Tensor::from_uop(UOp::alu(Op::Or, vec![a, b]))
    }

    /// `-self` as `Mul(x, -1)` (wrapping for unsigned ints).
    ///
    /// # Panics
    ///
    /// Panics for bools.
    #[track_caller]
    pub fn neg(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("neg");
        self.require_number("neg", self.dtype());
        Tensor::from_uop(neg_uop(&self.uop()))
    }

    /// `e^x` as `Exp2(x * log2 e)`.
    pub fn exp(&self) -> Tensor {
        Tensor::from_uop(exp_uop(&self.float_uop()))
    }

    /// `2^x`.
    pub fn exp2(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Exp2, vec![self.float_uop()]))
    }

    /// The natural logarithm as `Log2(x) * ln 2`.
    pub fn log(&self) -> Tensor {
        Tensor::from_uop(log_uop(&self.float_uop()))
    }

    /// The base-2 logarithm.
    pub fn log2(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Log2, vec![self.float_uop()]))
    }

    /// `sin x`.
    pub fn sin(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Sin, vec![self.float_uop()]))
    }

    /// `cos x` (its own op `Cos`: `Sin(x + pi/2)` would round `x + pi/2` first and lose the
    /// accuracy of `cos` for large `x`).
    pub fn cos(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Cos, vec![self.float_uop()]))
    }

    /// The error function `erf x = 2/√π ∫₀ˣ e^(-t²) dt`, its own op `Erf`: its derivative is
    /// `2/√π e^(-x²)`, not the derivative of the polynomials it is computed with.
    pub fn erf(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Erf, vec![self.float_uop()]))
    }

    /// The complementary error function `erfc x = 1 - erf x`, its own op `Erfc`: accurate in
    /// relative terms where it is tiny, as `1 - erf x` is not.
    pub fn erfc(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Erfc, vec![self.float_uop()]))
    }

    /// `tan x` as `sin x / cos x`.
    pub fn tan(&self) -> Tensor {
        let x = Tensor::from_uop(self.float_uop());
        x.sin().div(x.cos())
    }

    /// `tanh x` as `2 sigmoid(2x) - 1`.
    pub fn tanh(&self) -> Tensor {
        let x = Tensor::from_uop(self.float_uop());
        x.mul(2.0).sigmoid().mul(2.0).sub(1.0)
    }

    /// The logistic function `1 / (1 + e^-x)`.
    pub fn sigmoid(&self) -> Tensor {
        let x = self.float_uop();
        let denom = add_uop(&exp_uop(&neg_uop(&x)), &const_like(&x, 1));
        Tensor::from_uop(recip_uop(&denom))
    }

    /// `max(x, 0)`.
    pub fn relu(&self) -> Tensor {
        let u = self.uop();
        Tensor::from_uop(max_uop(&u, &const_like(&u, 0)))
    }

    /// `sqrt x`.
    pub fn sqrt(&self) -> Tensor {
        Tensor::from_uop(UOp::alu(Op::Sqrt, vec![self.float_uop()]))
    }

    /// `1 / sqrt x`.
    pub fn rsqrt(&self) -> Tensor {
        Tensor::from_uop(recip_uop(&UOp::alu(Op::Sqrt, vec![self.float_uop()])))
    }

    /// `1 / x` (in `f32` for ints and bools).
    pub fn recip(&self) -> Tensor {
        Tensor::from_uop(recip_uop(&self.float_uop()))
    }

    /// `x * x`.
    pub fn square(&self) -> Tensor {
        self.mul(self)
    }

    /// `|x|` as `x < 0 ? -x : x` (unsigned ints and bools are returned as they are).
    pub fn abs(&self) -> Tensor {
        let u = self.uop();
        if u.dtype().is_unsigned_int() || u.dtype() == DType::Bool {
            return self.clone();
        }
        let negative = lt_uop(&u, &const_like(&u, 0));
        Tensor::from_uop(where_uop(&negative, &neg_uop(&u), &u))
    }

    /// `-1`, `0` or `1` by the sign of `x` (NaN stays NaN through the arithmetic).
    pub fn sign(&self) -> Tensor {
        let u = self.uop();
        let zero = const_like(&u, 0);
        let positive = lt_uop(&zero, &u).cast(u.dtype());
        let negative = lt_uop(&u, &zero).cast(u.dtype());
        Tensor::from_uop(add_uop(&positive, &neg_uop(&negative)))
    }

    /// Rounds toward zero (`Trunc`); integers are returned as they are.
    pub fn trunc(&self) -> Tensor {
        let u = self.uop();
        if !u.dtype().is_float() {
            return self.clone();
        }
        Tensor::from_uop(UOp::alu(Op::Trunc, vec![u]))
    }

    /// Rounds toward negative infinity; integers are returned as they are.
    pub fn floor(&self) -> Tensor {
        let u = self.uop();
        if !u.dtype().is_float() {
            return self.clone();
        }
        Tensor::from_uop(floor_uop(&u))
    }

    /// Rounds toward positive infinity; integers are returned as they are.
    pub fn ceil(&self) -> Tensor {
        let u = self.uop();
        if !u.dtype().is_float() {
            return self.clone();
        }
        let t = UOp::alu(Op::Trunc, vec![u.clone()]);
        Tensor::from_uop(where_uop(
            &lt_uop(&t, &u),
            &add_uop(&t, &const_like(&t, 1)),
            &t,
        ))
    }

    /// The values converted to `dtype` (C conversion: floats truncate toward zero, ints wrap).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1.7f32, -1.7], &[2]).cast(DType::I32);
    /// assert_eq!(evaluate(&x.uop()).to_vec::<i32>(), vec![1, -1]);
    /// ```
    pub fn cast(&self, dtype: DType) -> Tensor {
        Tensor::from_uop(cast_uop(&self.uop(), dtype))
    }
}

/// `a >= b` on same-shaped, same-typed nodes (see [`Tensor::ge`]).
fn at_least_uop(a: &UOp, b: &UOp) -> UOp {
    if a.dtype().is_float() {
        UOp::alu(Op::Or, vec![lt_uop(b, a), eq_uop(a, b)])
    } else {
        not_uop(&lt_uop(a, b))
    }
}

/// The elementwise minimum of same-shaped, same-typed nodes (see [`Tensor::minimum`]).
pub(crate) fn min_uop(a: &UOp, b: &UOp) -> UOp {
    match a.dtype() {
        DType::Bool => UOp::alu(Op::And, vec![a.clone(), b.clone()]),
        d if d.is_float() => neg_uop(&max_uop(&neg_uop(a), &neg_uop(b))),
        _ => complement_uop(&max_uop(&complement_uop(a), &complement_uop(b))),
    }
}

/// NumPy's float remainder: the exact `fmod`, moved by `b` when its sign differs from `b`'s,
/// and a zero with `b`'s sign (`1.0 % 0.1` is `0.09999999999999995`, not `1 - 10 · 0.1`).
/// Its gradient is torch's, `(1, -floor_div(a, b))`: `v - (detach(s) - s)` is the value `v`
/// (a signed zero included) with the derivatives of `s = a - detach(floor_div(a, b)) · b`.
fn float_remainder(a: &Tensor, b: &Tensor) -> Tensor {
    let r = a.fmod(b);
    let moved = Tensor::from_uop(remainder_needs_fix(&r.uop(), &b.uop())).where_(&r + b, &r);
    let zero = moved.full_like(0.0).copysign(b);
    let value = moved.eq(0.0).where_(zero, &moved).detach();
    let quotient = super::special_math::float_floor_div(a, b).detach();
    let surrogate = a - quotient * b;
    value - (surrogate.detach() - surrogate)
}

/// Where a C-style (truncating) remainder `r` of a division by `b` is off from the floored
/// one: `r != 0` and `r` and `b` have different signs.
fn remainder_needs_fix(r: &UOp, b: &UOp) -> UOp {
    let zero = const_like(r, 0);
    let nonzero = ne_uop(r, &zero);
    let signs_differ = ne_uop(&lt_uop(r, &zero), &lt_uop(b, &zero));
    UOp::alu(Op::And, vec![nonzero, signs_differ])
}

/// `|u|` of a signed node as `u < 0 ? -u : u` (`-0.0` stays `-0.0`; see [`Tensor::abs`]).
pub(crate) fn abs_uop(u: &UOp) -> UOp {
    where_uop(&lt_uop(u, &const_like(u, 0)), &neg_uop(u), u)
}

/// True where the sign bit of a float node is set (`-0.0`, `-inf` and negative NaNs
/// included): the bits as the signed integer of the same width, compared with zero.
pub(crate) fn signbit_uop(u: &UOp) -> UOp {
    let bits = u.bitcast(signed_int_of_width(u.dtype()));
    lt_uop(&bits, &const_like(&bits, 0))
}

/// The signed integer dtype as wide as `dtype`.
pub(crate) fn signed_int_of_width(dtype: DType) -> DType {
    match dtype.size_bytes() {
        1 => DType::I8,
        2 => DType::I16,
        4 => DType::I32,
        _ => DType::I64,
    }
}

fn operand_shape(o: &Operand) -> Shape {
    match o {
        Operand::Tensor(t) => t.shape(),
        Operand::Scalar(_) => vec![],
    }
}

/// An operand as a node of `dtype` broadcast to `shape`.
fn materialize(o: &Operand, dtype: DType, shape: &[usize]) -> UOp {
    match o {
        Operand::Tensor(t) => broadcast_uop(&cast_uop(&t.uop(), dtype), shape),
        Operand::Scalar(s) => super::value::operand_uop(*s, dtype, shape),
    }
}
