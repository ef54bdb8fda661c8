//! Scans. Cumulative sums are tinyspec's prefix sum: pad, tile by reshape+expand, cut sliding
//! windows out of the flattened tile, and reduce each window. The other scans (`cumprod`,
//! `cummax`/`cummin` with their indices, `logcumsumexp`) reduce the rows of a prefix table
//! `T[.., i, j] = x[.., j]` for `j <= i` and the op's identity after, so their gradients are
//! those of the reductions (a product's gradient is exact at zeros, see
//! `transform::jvp::product_share`).

use super::Tensor;
use super::broadcast::{cast_uop, normalize_axis};
use super::reduce::{accumulate_dtype, accumulated_reduce};
use crate::uop::{DType, ReduceOp, Scalar, UOp};

impl Tensor {
    /// Running sums along `axis` (`out[i] = x[0] + ... + x[i]`); bools and narrow ints accumulate
    /// in `i32` as `sum` does.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2, 3], &[3]);
    /// assert_eq!(evaluate(&x.cumsum(0).uop()).to_vec::<i32>(), vec![1, 3, 6]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("cumsum");
        let shape = self.shape();
        let axis = normalize_axis("cumsum", axis, &shape);
        let u = cast_uop(&self.uop(), accumulate_dtype(self.dtype()));
        let last = shape.len() - 1;
        if axis == last {
            return Tensor::from_uop(prefix_sum_last_axis(&u));
        }
        let mut to_last: Vec<usize> = (0..shape.len()).filter(|&a| a != axis).collect();
        to_last.push(axis);
        let mut back = vec![0; shape.len()];
        for (pos, &a) in to_last.iter().enumerate() {
            back[a] = pos;
        }
        Tensor::from_uop(prefix_sum_last_axis(&u.permute(&to_last)).permute(&back))
    }
}

impl Tensor {
    /// Running products along `axis`; bools and narrow ints accumulate in `i32`. The gradient is
    /// exact where the input has zeros.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn cumprod(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("cumprod");
        let x = self.cast(accumulate_dtype(self.dtype()));
        x.along_last("cumprod", axis, |x| {
            let one = Scalar::Int(1);
            x.prefix_table(one).prod(-1, false)
        })
    }

    /// Running maxima along `axis` and the index (`i64`) where each was found: the last position of
    /// the maximum so far, a NaN being larger than everything (as PyTorch's `cummax`).
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn cummax(&self, axis: isize) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("cummax");
        let shape = self.shape();
        if shape[normalize_axis("cummax", axis, &shape)] == 0 {
            return (self.clone(), Tensor::zeros(&shape, DType::I64));
        }
        let values = self.along_last("cummax", axis, |x| {
            x.prefix_table(lowest(x.dtype())).max(-1, false)
        });
        let indices = self.along_last("cummax", axis, |x| {
            let running = x.prefix_table(lowest(x.dtype())).max(-1, true);
            last_position_of(x, &running)
        });
        (values, indices)
    }

    /// Running minima along `axis` and the (last) index of each, as [`Tensor::cummax`] of the
    /// order-reversed values.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn cummin(&self, axis: isize) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("cummin");
        normalize_axis("cummin", axis, &self.shape());
        let reversed = reverse_order(self);
        let (values, indices) = reversed.cummax(axis);
        (reverse_order(&values), indices)
    }

    /// `log(cumsum(exp(x)))` along `axis` without overflow: each prefix is shifted by its (finite)
    /// maximum first. In the float type.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn logcumsumexp(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("logcumsumexp");
        let x = self.cast(self.dtype().to_float());
        x.along_last("logcumsumexp", axis, |x| {
            if x.shape()[x.ndim() - 1] == 0 {
                return x.clone();
            }
            let table = x.prefix_table(Scalar::Float(f64::NEG_INFINITY));
            let peak = table.max(-1, true).detach();
            let shift = peak.isfinite().where_(&peak, 0.0);
            let total = (&table - &shift).exp().sum(-1, true).log() + shift;
            total.squeeze(-1)
        })
    }

    /// `f` applied with `axis` moved last, the result moved back.
    #[track_caller]
    fn along_last(&self, op: &str, axis: isize, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
        let shape = self.shape();
        let axis = normalize_axis(op, axis, &shape) as isize;
        let last = shape.len() as isize - 1;
        if axis == last {
            return f(self);
        }
        f(&self.transpose(axis, last)).transpose(axis, last)
    }

    /// `[.., n]` as the table `[.., n, n]` with row `i` holding `x[.., j]` for `j <= i` and
    /// `fill` for `j > i`.
    fn prefix_table(&self, fill: Scalar) -> Tensor {
        let shape = self.shape();
        let n = shape[shape.len() - 1];
        let mut table = shape.clone();
        table.push(n);
        let rows = Tensor::arange(n).reshape(&[n, 1]);
        let cols = Tensor::arange(n).reshape(&[1, n]);
        let values = self.unsqueeze(-2).expand(&table);
        let fill = Tensor::full(&table, fill, self.dtype());
        cols.le(&rows).where_(&values, &fill)
    }
}

/// The smallest value of `dtype`: the identity of `max`.
fn lowest(dtype: DType) -> Scalar {
    match dtype {
        DType::Bool => Scalar::Bool(false),
        d if d.is_float() => Scalar::Float(f64::NEG_INFINITY),
        d if d.is_signed_int() => Scalar::Int(i64::MIN >> (64 - d.bits())),
        _ => Scalar::Int(0),
    }
}

/// `-x` for floats, `~x` for integers, `!x` for bools: reverses the order (NaN stays NaN).
fn reverse_order(x: &Tensor) -> Tensor {
    match x.dtype() {
        DType::Bool => x.logical_not(),
        d if d.is_float() => x.neg(),
        _ => x.bitwise_not(),
    }
}

/// For `x` `[.., n]` and the running maxima `running` `[.., n, 1]`: the last `j <= i` where
/// `x[j]` is the running maximum of row `i` (or, for a NaN maximum, is NaN), as `i64`.
fn last_position_of(x: &Tensor, running: &Tensor) -> Tensor {
    let n = x.shape()[x.ndim() - 1];
    let xj = x.unsqueeze(-2);
    let mut hit = xj.eq(running);
    if x.dtype().is_float() {
        hit = hit.logical_or(xj.isnan().logical_and(running.isnan()));
    }
    let rows = Tensor::arange(n).reshape(&[n, 1]);
    let cols = Tensor::arange(n).reshape(&[1, n]);
    let seen = cols.le(&rows).logical_and(&hit);
    let position = cols.cast(DType::I64);
    seen.where_(&position, -1i64).max(-1, false)
}

/// Inclusive prefix sums along the last axis of `u` (shape `[..., n]`), in `u`'s dtype.
pub(crate) fn prefix_sum_last_axis(u: &UOp) -> UOp {
    let shape = u.shape_vec();
    let (batch, n) = match shape.split_last() {
        Some((&n, batch)) if n > 0 => (batch.to_vec(), n),
        _ => return u.clone(),
    };
    let with = |tail: &[usize]| [batch.as_slice(), tail].concat();
    let zeros = vec![0; batch.len()];
    let at_zero = |tail: &[usize]| [zeros.as_slice(), tail].concat();
    let padded = u.pad(&at_zero(&[n - 1]), &at_zero(&[0])); // [..., 2n-1]
    let tiled = padded
        .reshape(&with(&[1, 2 * n - 1]))
        .expand(&with(&[n + 1, 2 * n - 1]))
        .reshape(&with(&[(n + 1) * (2 * n - 1)]));
    let trimmed = tiled.shrink(&at_zero(&[0]), &with(&[2 * n * n]));
    // Row i of the [n, 2n] view starts i elements further into the tile than row i of the
    // [n+1, 2n-1] tile did, so its first n entries are the n-window ending at x[i].
    let windows = trimmed
        .reshape(&with(&[n, 2 * n]))
        .shrink(&at_zero(&[0, 0]), &with(&[n, n]));
    accumulated_reduce(&windows, ReduceOp::Add, &[batch.len() + 1]).reshape(&with(&[n]))
}
