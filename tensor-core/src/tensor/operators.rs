//! Rust operators on tensors: `+ - * / %` (with NumPy broadcasting and JAX-style weak
//! scalars on either side), unary `-`, `!`, `& | ^` and the shifts `<< >>`, on owned and borrowed tensors alike.
//! Scalars are weakly typed (they take the tensor's dtype, as in JAX). On the right any
//! primitive numeric type or `bool` works (`&x * 2.0f32`, `&x / 3u8`, `&x - n` with
//! `n: usize`). On the left a scalar is an `f64` or an `i32`, which is what unsuffixed literals
//! are (`2.0 - &x`, `1 - &x`, `(1.0 - &x).sqrt()`); a variable of another type goes on the
//! right or through `f64::from(v)` / `Tensor::scalar(v)` (a second float or int type on the
//! left would make every `(1.0 - &x).method()` ambiguous to Rust's inference, E0282; see
//! `Tensor`'s docs). `%` is NumPy's remainder (sign of the divisor); `!` is logical not for bools and bitwise
//! not for integers.

use super::Tensor;
use super::broadcast::{Operand, result_dtype};
use crate::uop::Scalar;

/// A weak scalar on the left of an operator, as a 0-d tensor of the dtype it meets `rhs` at.
fn scalar_lhs(value: impl Into<Scalar>, rhs: &Tensor) -> Tensor {
    let _op = super::op_scope::OpScope::enter("scalar");
    let value = value.into();
    let dtype = result_dtype(&[Operand::from(rhs), Operand::Scalar(value)]);
    Tensor::from_uop(super::value::operand_uop(value, dtype, &[]))
}

/// `tensor op rhs` for owned and borrowed tensors, with any operand on the right.
macro_rules! tensor_operator {
    ($trait:ident, $method:ident, $inherent:ident) => {
        impl<R: Into<Operand>> std::ops::$trait<R> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                Tensor::$inherent(&self, rhs)
            }
        }
        impl<R: Into<Operand>> std::ops::$trait<R> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                Tensor::$inherent(self, rhs)
            }
        }
    };
}

/// An arithmetic operator: `tensor op rhs`, and a scalar on the left.
macro_rules! binary_operator {
    ($trait:ident, $method:ident, $inherent:ident) => {
        tensor_operator!($trait, $method, $inherent);
        // One float and one int type on the left: with a second one, `(1.0 - &x).sqrt()` does
        // not compile (E0282: the output type of `{float} - &Tensor` is unknown until the
        // literal's type is picked, and a method call or another operator needs it first).
        binary_operator!(@scalar_lhs $trait, $method, $inherent, f64, i32);
    };
    (@scalar_lhs $trait:ident, $method:ident, $inherent:ident, $($t:ty),*) => {$(
        impl std::ops::$trait<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                scalar_lhs(self, &rhs).$inherent(&rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                scalar_lhs(self, rhs).$inherent(rhs)
            }
        }
    )*};
}

binary_operator!(Add, add, add);
binary_operator!(Sub, sub, sub);
binary_operator!(Mul, mul, mul);
binary_operator!(Div, div, div);
binary_operator!(Rem, rem, remainder);

tensor_operator!(BitAnd, bitand, bitwise_and);
tensor_operator!(BitOr, bitor, bitwise_or);
tensor_operator!(BitXor, bitxor, bitwise_xor);
tensor_operator!(Shl, shl, shl);
tensor_operator!(Shr, shr, shr);

impl std::ops::Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}
impl std::ops::Not for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
impl std::ops::Not for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
