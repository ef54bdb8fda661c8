//! Seeded random tensors from the `Threefry` counter-based generator: element `i` of a tensor
//! is a pure function of `(i, seed)`, so the same seed gives the same tensor on every device
//! and in every kernel split.

use super::Tensor;
use super::broadcast::{Dims, const_uop};
use super::create::{arange_uop, sizes};
use crate::uop::{DType, Op, Scalar, UOp};

/// The number of random bits kept per float: exactly representable in an `f32` mantissa.
const FLOAT_BITS: u32 = 24;

impl Tensor {
    /// Uniform `f32` samples in `[0, 1)`: the top 24 bits of `Threefry(i, seed)` scaled by
    /// `2^-24`.
    ///
    /// # Panics
    ///
    /// On a negative size.
    #[track_caller]
    pub fn rand<D: Dims + ?Sized>(shape: &D, seed: u64) -> Tensor {
        let _op = super::op_scope::OpScope::enter("rand");
        let shape = sizes("rand", shape);
        let n: usize = shape.iter().product();
        Tensor::from_uop(uniform_uop(n, seed).reshape(&shape))
    }

    /// Standard normal `f32` samples by Box-Muller: with `u1, u2` uniform in `[0, 1)`,
    /// `sqrt(-2 ln(1 - u1)) * cos(2 pi u2)` (`1 - u1` keeps the logarithm finite).
    ///
    /// # Panics
    ///
    /// On a negative size.
    #[track_caller]
    pub fn randn<D: Dims + ?Sized>(shape: &D, seed: u64) -> Tensor {
        let _op = super::op_scope::OpScope::enter("randn");
        let shape = sizes("randn", shape);
        let n: usize = shape.iter().product();
        box_muller(&Tensor::from_uop(uniform_uop(2 * n, seed)), &shape)
    }
}

impl Tensor {
    /// Uniform `f32` samples in `[0, 1)` drawn with a key that is a tensor (a 0-d `u64`), as
    /// JAX's `random.uniform(key, shape)`: the same key gives the same samples, and under
    /// `vmap` a batch of keys gives each sample its own draw while an unbatched key gives
    /// every sample the same one.
    ///
    /// # Panics
    ///
    /// On a negative size or a key that is not a 0-d `u64` tensor.
    #[track_caller]
    pub fn rand_with_key<D: Dims + ?Sized>(shape: &D, key: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("rand_with_key");
        let shape = sizes("rand_with_key", shape);
        check_key("rand_with_key", key);
        let n: usize = shape.iter().product();
        Tensor::from_uop(keyed_uniform_uop(n, key).reshape(&shape))
    }

    /// Standard normal `f32` samples drawn with a key that is a tensor (a 0-d `u64`), as JAX's
    /// `random.normal(key, shape)`: Box-Muller over [`Tensor::rand_with_key`]'s uniform draws.
    /// A key that changes between calls changes no graph structure, so a training loop that
    /// draws fresh noise with a new key each step replays one compiled plan.
    ///
    /// # Panics
    ///
    /// On a negative size or a key that is not a 0-d `u64` tensor.
    #[track_caller]
    pub fn randn_with_key<D: Dims + ?Sized>(shape: &D, key: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("randn_with_key");
        let shape = sizes("randn_with_key", shape);
        check_key("randn_with_key", key);
        let n: usize = shape.iter().product();
        box_muller(&Tensor::from_uop(keyed_uniform_uop(2 * n, key)), &shape)
    }
}

/// Panics (naming `op`) unless `key` is a 0-d `u64` tensor.
#[track_caller]
fn check_key(op: &str, key: &Tensor) {
    if !key.shape().is_empty() || key.dtype() != DType::U64 {
        panic!(
            "{op}: the key must be a 0-d u64 tensor, got {}{:?}",
            key.dtype(),
            key.shape()
        );
    }
}

/// `n` uniform `f32` samples in `[0, 1)` for the 0-d `u64` tensor `key` (shape `[n]`).
fn keyed_uniform_uop(n: usize, key: &Tensor) -> UOp {
    uniform_bits_uop(n, key.reshape(&[1]).expand(&[n]).uop())
}

/// Standard normal samples of `shape` from `2 * prod(shape)` uniform ones in `[0, 1)`:
/// `sqrt(-2 ln(1 - u1)) * cos(2 pi u2)` (`1 - u1` keeps the logarithm finite).
fn box_muller(uniform: &Tensor, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let u = uniform.reshape(&[2, n]);
    let u1 = u.narrow(0, 0, 1).reshape(&[n]);
    let u2 = u.narrow(0, 1, 1).reshape(&[n]);
    let radius = u1.neg().add(1.0).log().mul(-2.0).sqrt();
    let angle = u2.mul(2.0 * std::f64::consts::PI).cos();
    radius.mul(angle).reshape(shape)
}

/// `n` uniform `f32` samples in `[0, 1)` for `seed` (shape `[n]`). A seed the user passed is
/// a value bound at run time, so fresh noise each step compiles nothing (`tensor::value`).
fn uniform_uop(n: usize, seed: u64) -> UOp {
    let key = super::value::fill_uop(Scalar::Int(seed as i64), DType::U64, &[n]);
    uniform_bits_uop(n, key)
}

/// `n` uniform `f32` samples in `[0, 1)` for the `[n]`-shaped `u64` key `key`.
fn uniform_bits_uop(n: usize, key: UOp) -> UOp {
    let counters = arange_uop(n).cast(DType::U64);
    let bits = UOp::alu(Op::Threefry, vec![counters, key]);
    let shift = const_uop(Scalar::Int(64 - FLOAT_BITS as i64), DType::U64, &[n]);
    let top = UOp::alu(Op::Shr, vec![bits, shift]).cast(DType::F32);
    let scale = const_uop(
        Scalar::Float(1.0 / (1u64 << FLOAT_BITS) as f64),
        DType::F32,
        &[n],
    );
    UOp::alu(Op::Mul, vec![top, scale])
}
