//! Symbolic zeros (JAX's `ad_util.Zero`): a tangent or cotangent that is identically zero is
//! not a graph node.
//!
//! The rules of `jvp` and `vjp` compute with [`Tangent`]s, whose arithmetic skips the zero:
//!
//! ```text
//! 0 + dy = dy      dx - 0 = dx      -0 = 0
//! 0 * y = 0        0 / y = 0        f(0) = 0   for every linear map f (cast, movement, sum)
//! ```
//!
//! A zero becomes a tensor of zeros ([`Tangent::instantiate`]) only where a real value is
//! required: a result of `jvp`, the gradient of an argument the result does not depend on,
//! one branch of a `where` whose other branch has a tangent, one part of a stack. Every such
//! tensor is counted ([`instantiated_zeros`]), so a test can prove that a transform built
//! none.

use crate::tensor::Tensor;
use crate::uop::{Op, UOp};
use std::cell::Cell;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A tangent (or cotangent) that is either a tensor or the symbolic zero.
#[derive(Clone, Debug)]
pub enum Tangent {
    /// Identically zero: no graph node.
    Zero,
    /// A tangent that may be non-zero.
    Value(Tensor),
}

thread_local! {
    static INSTANTIATED: Cell<usize> = const { Cell::new(0) };
}

/// How many zero tangents this thread has made into tensors of zeros so far.
pub fn instantiated_zeros() -> usize {
    INSTANTIATED.with(Cell::get)
}

impl Tangent {
    /// `t`, or the symbolic zero when `t` is a constant zero (`zeros`, `zeros_like`, or any
    /// broadcast of a zero constant): a caller's zero tangent is recognised as one.
    pub fn of(t: &Tensor) -> Tangent {
        if is_zero_constant(&t.uop()) {
            Tangent::Zero
        } else {
            Tangent::Value(t.clone())
        }
    }

    /// True for the symbolic zero.
    pub fn is_zero(&self) -> bool {
        matches!(self, Tangent::Zero)
    }

    /// The tensor, or zeros of `like`'s shape and dtype where a real value is required.
    pub fn instantiate(self, like: &UOp) -> Tensor {
        match self {
            Tangent::Value(t) => t,
            Tangent::Zero => {
                INSTANTIATED.with(|n| n.set(n.get() + 1));
                Tensor::zeros(&like.shape_vec(), like.dtype())
            }
        }
    }

    /// The tensor, if this is not the zero.
    pub fn value(self) -> Option<Tensor> {
        match self {
            Tangent::Value(t) => Some(t),
            Tangent::Zero => None,
        }
    }

    /// A linear map applied to the tangent: `f(0) = 0`.
    pub fn map(self, f: impl FnOnce(Tensor) -> Tensor) -> Tangent {
        match self {
            Tangent::Value(t) => Tangent::Value(f(t)),
            Tangent::Zero => Tangent::Zero,
        }
    }
}

/// True when `u` is a zero constant, possibly reshaped or broadcast.
pub fn is_zero_constant(u: &UOp) -> bool {
    match u.op() {
        Op::Const => u.const_value().is_some_and(|v| v.as_f64() == 0.0),
        Op::Reshape | Op::Expand => is_zero_constant(u.s(0)),
        _ => false,
    }
}

impl From<Tensor> for Tangent {
    fn from(t: Tensor) -> Tangent {
        Tangent::Value(t)
    }
}

impl Add for Tangent {
    type Output = Tangent;
    /// `0 + dy = dy`, `dx + 0 = dx`.
    fn add(self, rhs: Tangent) -> Tangent {
        match (self, rhs) {
            (Tangent::Zero, d) | (d, Tangent::Zero) => d,
            (Tangent::Value(a), Tangent::Value(b)) => Tangent::Value(a + b),
        }
    }
}

impl Sub for Tangent {
    type Output = Tangent;
    /// `dx - 0 = dx`, `0 - dy = -dy`.
    fn sub(self, rhs: Tangent) -> Tangent {
        match (self, rhs) {
            (d, Tangent::Zero) => d,
            (Tangent::Zero, d) => -d,
            (Tangent::Value(a), Tangent::Value(b)) => Tangent::Value(a - b),
        }
    }
}

impl Neg for Tangent {
    type Output = Tangent;
    fn neg(self) -> Tangent {
        self.map(|t| -t)
    }
}

impl<R> Mul<R> for Tangent
where
    Tensor: Mul<R, Output = Tensor>,
{
    type Output = Tangent;
    /// `0 * y = 0`: the factor is not built either.
    fn mul(self, rhs: R) -> Tangent {
        self.map(|t| t * rhs)
    }
}

impl<R> Div<R> for Tangent
where
    Tensor: Div<R, Output = Tensor>,
{
    type Output = Tangent;
    /// `0 / y = 0`.
    fn div(self, rhs: R) -> Tangent {
        self.map(|t| t / rhs)
    }
}

impl Mul<Tangent> for &Tensor {
    type Output = Tangent;
    /// `x * 0 = 0`.
    fn mul(self, rhs: Tangent) -> Tangent {
        rhs.map(|t| self * t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::DType;

    fn x() -> Tensor {
        Tensor::from_vec(vec![1.0f32, 2.0], &[2])
    }

    #[test]
    fn zero_is_the_identity_of_addition_and_absorbs_products() {
        assert!(matches!(
            Tangent::Zero + Tangent::Value(x()),
            Tangent::Value(_)
        ));
        assert!((Tangent::Zero * &x()).is_zero());
        assert!((&x() * Tangent::Zero).is_zero());
        assert!((Tangent::Zero / &x()).is_zero());
        assert!((-Tangent::Zero).is_zero());
        assert!((Tangent::Zero - Tangent::Zero).is_zero());
    }

    #[test]
    fn constant_zeros_of_any_shape_are_recognised() {
        assert!(Tangent::of(&Tensor::zeros(&[3, 4], DType::F32)).is_zero());
        assert!(Tangent::of(&x().zeros_like()).is_zero());
        assert!(!Tangent::of(&Tensor::ones(&[3], DType::F32)).is_zero());
        assert!(!Tangent::of(&x()).is_zero());
    }

    #[test]
    fn instantiating_a_zero_is_counted() {
        let before = instantiated_zeros();
        let _ = Tangent::Value(x()).instantiate(&x().uop());
        assert_eq!(instantiated_zeros(), before);
        let z = Tangent::Zero.instantiate(&x().uop());
        assert_eq!(z.shape(), vec![2]);
        assert_eq!(instantiated_zeros(), before + 1);
    }
}
