//! Values are not code. A scalar the user passes — an operand (`&x * lr`, `2.0 - &x`), the
//! fill of `Tensor::scalar` and `Tensor::full`, a clamp bound, a random seed — becomes a 0-d
//! buffer holding it, not a `Const`. A plan is keyed by its graph's structure with buffers as
//! arguments (`schedule::placeholders`), so a learning rate or a seed that changes every step
//! binds another buffer to the same compiled plan: nothing is scheduled or compiled again.
//!
//! A scalar stays code (a `Const` the rewrite rules fold) where the structure depends on it:
//!
//! - the identities `0`, `1`, `-1` and `±inf` of an operand (`x * 1`, `x + 0`, `x * -1`
//!   simplify; a masked max fills with `-inf`);
//! - bools, and integer operands of arithmetic (masks, shifts, moduli, comparisons with a
//!   class index);
//! - the exponent of `pow` (an integer exponent is computed by repeated squaring);
//! - every scalar a library op writes inside its own definition (`softmax`'s shift, `gelu`'s
//!   coefficients) and every scalar of a function a transform traces: those graphs are built
//!   once per signature and kept (see [`called_by_user`]).
//!
//! A value costs one load per kernel that reads it, outside the loops.

use super::Tensor;
use super::broadcast::{Operand, broadcast_uop, const_uop, result_dtype};
use super::op_scope::called_by_user;
use crate::uop::{DType, Scalar, UOp};

/// An operand the user passed: `value` in `dtype`, broadcast to `shape`; a bound value
/// unless it is code (see the module docs).
pub(crate) fn operand_uop(value: Scalar, dtype: DType, shape: &[usize]) -> UOp {
    let value = value.cast(dtype);
    if called_by_user() && dtype.is_float() && !is_identity(value) {
        return broadcast_uop(&bound(value, dtype), shape);
    }
    const_uop(value, dtype, shape)
}

/// The fill of a tensor the user made (`Tensor::scalar`, `Tensor::full`, a random seed):
/// `value` in `dtype` broadcast to `shape`; a bound value unless it is a bool, a float
/// identity, or a library op made it. Integers are values whatever they are: a step counter
/// or a key that starts at 0 is no identity.
pub(crate) fn fill_uop(value: Scalar, dtype: DType, shape: &[usize]) -> UOp {
    let value = value.cast(dtype);
    let code = dtype == DType::Bool || (dtype.is_float() && is_identity(value));
    if called_by_user() && !code {
        return broadcast_uop(&bound(value, dtype), shape);
    }
    const_uop(value, dtype, shape)
}

/// `operand` with a float scalar the user passed made a 0-d tensor holding the value (see
/// [`operand_uop`]), for an op that hands its operands on to other ops (`clamp`), where the
/// user's call is no longer the only op running.
pub(crate) fn user_operand(operand: Operand, like: &Tensor) -> Operand {
    match operand {
        Operand::Scalar(s) => {
            let dtype = result_dtype(&[Operand::from(like), Operand::Scalar(s)]);
            Operand::Tensor(Tensor::from_uop(operand_uop(s, dtype, &[])))
        }
        tensor => tensor,
    }
}

/// The identities of the ops and reductions are structure: `x * 1`, `x + 0` and `x * -1`
/// simplify, and a `where` whose other branch is a reduction's identity (`0` for a sum, `1`
/// for a product, `-inf` for a max) lets the reduction skip the masked-out elements.
fn is_identity(value: Scalar) -> bool {
    let v = value.as_f64();
    v == 0.0 || v == 1.0 || v == -1.0 || v.is_infinite()
}

/// A 0-d buffer holding `value`.
fn bound(value: Scalar, dtype: DType) -> UOp {
    Tensor::from_scalars(&[value], dtype, &[]).uop()
}
