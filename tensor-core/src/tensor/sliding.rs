//! Windows that slide with a loop `Range`, and reductions over ranges: the tensor-level
//! vocabulary of vmap by pad+reduce (seeds/vmap-vmapin-vmapout.md, section 7). Slice sample
//! `r` out with `shrink_at(axis, r, 1)`, compute, put the result back at offset `r` of the
//! batch axis with `pad_at`, and `sum_over_ranges(r)`: only the slice of each sample is non-zero.

use super::Tensor;
use crate::uop::{DType, Op, ReduceOp, UOp};

impl Tensor {
    /// Keeps `[start, start + len)` of `axis`, where `start` is an index scalar that may vary
    /// with a `Range`; the window must stay inside the axis for every value of the range.
    ///
    /// # Panics
    ///
    /// On an axis out of range, a `start` that is not an index scalar, or a window that leaves the
    /// axis for some value of the range.
    #[track_caller]
    pub fn shrink_at(&self, axis: usize, start: &UOp, len: usize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("shrink_at");
        let shape = self.shape();
        check_start("shrink_at", &shape, axis, start);
        let (lo, hi) = (start.vmin().as_i64(), start.vmax().as_i64());
        if lo < 0 || hi + len as i64 > shape[axis] as i64 {
            panic!(
                "shrink_at: the window [start, start + {len}) with start in [{lo}, {hi}] leaves \
                 axis {axis} of shape {shape:?}"
            );
        }
        let start = &pinned(start);
        let begins = per_axis(&shape, axis, start.clone(), |_| 0);
        let end = UOp::alu(Op::Add, vec![start.clone(), UOp::index(len as i64)]);
        let ends = per_axis(&shape, axis, end, |d| d);
        Tensor::from_uop(self.uop().window(Op::Shrink, begins, ends))
    }

    /// Places `self` at offset `start` of an axis of size `size` (zeros around it), where
    /// `start` is an index scalar that may vary with a `Range`.
    ///
    /// # Panics
    ///
    /// On an axis out of range, a `start` that is not an index scalar, or a placement that leaves
    /// the axis for some value of the range.
    #[track_caller]
    pub fn pad_at(&self, axis: usize, start: &UOp, size: usize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("pad_at");
        let shape = self.shape();
        check_start("pad_at", &shape, axis, start);
        let (lo, hi) = (start.vmin().as_i64(), start.vmax().as_i64());
        let room = size as i64 - shape[axis] as i64;
        if lo < 0 || hi > room {
            panic!(
                "pad_at: axis {axis} of shape {shape:?} placed at offset [{lo}, {hi}] does not fit \
                 in size {size}"
            );
        }
        let start = &pinned(start);
        let after = UOp::alu(
            Op::Add,
            vec![
                UOp::index(room),
                UOp::alu(Op::Mul, vec![start.clone(), UOp::index(-1)]),
            ],
        );
        let begins = per_axis(&shape, axis, start.clone(), |_| 0);
        let ends = per_axis(&shape, axis, after, |_| 0);
        Tensor::from_uop(self.uop().window(Op::Pad, begins, ends))
    }

    /// The sum of `self` over every value of `ranges` (the ranges it varies with); the shape
    /// is unchanged.
    ///
    /// # Panics
    ///
    /// When an entry of `ranges` is not a `Range`.
    #[track_caller]
    pub fn sum_over_ranges(&self, ranges: &[UOp]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("sum_over_ranges");
        self.reduce_over_ranges(ReduceOp::Add, ranges)
    }

    /// `self` reduced with `op` over every value of `ranges`; the shape is unchanged.
    ///
    /// # Panics
    ///
    /// When an entry of `ranges` is not a `Range`.
    #[track_caller]
    pub fn reduce_over_ranges(&self, op: ReduceOp, ranges: &[UOp]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("reduce_over_ranges");
        if let Some(r) = ranges.iter().find(|r| r.op() != Op::Range) {
            panic!(
                "reduce_over_ranges: every operand must be a Range, got {}",
                r.op()
            );
        }
        Tensor::from_uop(self.uop().reduce_over(op, ranges))
    }
}

/// `start` as a constant when it has one value (a range of one iteration): the window's
/// size then folds to a constant (`r + (0 - r)` would simplify to `r`, which is always 0 but
/// not a constant, and the window would have no shape).
fn pinned(start: &UOp) -> UOp {
    let (lo, hi) = (start.vmin().as_i64(), start.vmax().as_i64());
    if lo == hi {
        UOp::index(lo)
    } else {
        start.clone()
    }
}

#[track_caller]
fn check_start(op: &str, shape: &[usize], axis: usize, start: &UOp) {
    let op = super::op_scope::user_op(op);
    if axis >= shape.len() {
        panic!("{op}: axis {axis} is out of range for shape {shape:?}");
    }
    if start.dtype() != DType::Index || start.shape() != Some(&[]) {
        panic!(
            "{op}: start must be an index scalar, got {}<{}>",
            start.op(),
            start.dtype()
        );
    }
}

/// One window entry per axis: `at` on `axis`, `other(size)` on the others.
fn per_axis(shape: &[usize], axis: usize, at: UOp, other: impl Fn(usize) -> usize) -> Vec<UOp> {
    shape
        .iter()
        .enumerate()
        .map(|(k, &d)| {
            if k == axis {
                at.clone()
            } else {
                UOp::index(other(d) as i64)
            }
        })
        .collect()
}
