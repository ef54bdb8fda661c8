//! Cumulative sums, built as tinyspec's prefix sum: pad, tile by reshape+expand, cut sliding
//! windows out of the flattened tile, and reduce each window.

use super::Tensor;
use super::broadcast::{cast_uop, normalize_axis};
use super::reduce::{accumulate_dtype, accumulated_reduce};
use crate::uop::{ReduceOp, UOp};

impl Tensor {
    /// Running sums along `axis` (`out[i] = x[0] + ... + x[i]`); bools and narrow ints
    /// accumulate in `i32` as `sum` does.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Tensor {
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
