//! Padding by mode, composed from movement ops so every transform rule covers it: a
//! `constant` fill (zero pad plus a `Where` over a padded mask), `reflect` (a flipped slice
//! without the edge, as NumPy's and PyTorch's `reflect`), `replicate` (the edge expanded) and
//! `circular` (the opposite end, wrapped around), each axis joined by `cat`. Negative pads crop
//! first; `pad_interior` inserts fill values between elements, as JAX's `lax.pad`.
//!
//! [`Tensor::pad_mode`] is the one entry point for NumPy's `np.pad(x, pads, mode=)` and torch's
//! `F.pad(x, pad, mode=, value=)`; `pad` (zeros) and `pad_value` (a constant) are its constant
//! case for non-negative pads, the primitives it is built on. Unlike torch's `F.pad`, `pads`
//! lists one `(before, after)` pair per axis from the first axis on, as NumPy does (torch's
//! flat list starts at the last axis).

use super::Tensor;
use crate::uop::Scalar;

/// How [`Tensor::pad_mode`] fills the new positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// Every new position holds this value.
    Constant(Scalar),
    /// The elements mirrored about the edge, the edge itself not repeated (`[2, 1 | 1, 2, 3 |
    /// 2, 1]`); a pad must be shorter than the axis.
    Reflect,
    /// The edge element repeated.
    Replicate,
    /// The elements from the other end (`[2, 3 | 1, 2, 3 | 1, 2]`); a pad must not be longer
    /// than the axis.
    Circular,
}

impl Tensor {
    /// `pads[a] = (before, after)` elements added along each axis `a` by `mode`; a negative
    /// pad removes that many elements from that end instead (first, before any padding).
    ///
    /// ```
    /// # use tensor_core::{PadMode, Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2, 3], &[3]);
    /// let reflect = x.pad_mode(&[(2, 1)], PadMode::Reflect);      // np.pad(x, (2, 1), "reflect")
    /// assert_eq!(evaluate(&reflect.uop()).to_vec::<i32>(), vec![3, 2, 1, 2, 3, 2]);
    /// let seven = x.pad_mode(&[(1, 0)], PadMode::Constant(7.into()));
    /// assert_eq!(evaluate(&seven.uop()).to_vec::<i32>(), vec![7, 1, 2, 3]);
    /// ```
    ///
    /// # Panics
    ///
    /// Unless there is one pair per axis, when cropping removes more elements than an axis has, or
    /// when a reflecting mode is asked for more elements than the axis can mirror.
    #[track_caller]
    pub fn pad_mode(&self, pads: &[(isize, isize)], mode: PadMode) -> Tensor {
        let _op = super::op_scope::OpScope::enter("pad_mode");
        let shape = self.shape();
        if pads.len() != shape.len() {
            panic!(
                "pad_mode: {} (before, after) pairs given for shape {shape:?} with {} axes",
                pads.len(),
                shape.len()
            );
        }
        let mut out = self.clone();
        for (axis, &(before, after)) in pads.iter().enumerate() {
            out = out.crop_axis(
                axis,
                before.min(0).unsigned_abs(),
                after.min(0).unsigned_abs(),
            );
            out = out.pad_axis(axis, before.max(0) as usize, after.max(0) as usize, mode);
        }
        out
    }

    /// JAX's `lax.pad`: per axis `(low, high, interior)`, `interior` copies of `value` between
    /// neighbouring elements, then `low`/`high` copies at the ends (negative: cropped).
    ///
    /// # Panics
    ///
    /// Unless there is one triple per axis, or when cropping removes more elements than an axis
    /// has.
    #[track_caller]
    pub fn pad_interior(
        &self,
        config: &[(isize, isize, usize)],
        value: impl Into<Scalar>,
    ) -> Tensor {
        let _op = super::op_scope::OpScope::enter("pad_interior");
        let shape = self.shape();
        if config.len() != shape.len() {
            panic!(
                "pad_interior: {} (low, high, interior) triples given for shape {shape:?} with {} axes",
                config.len(),
                shape.len()
            );
        }
        let value = value.into();
        let mut out = self.clone();
        for (axis, &(_, _, interior)) in config.iter().enumerate() {
            out = out.spread_axis(axis, interior, value);
        }
        let ends: Vec<(isize, isize)> = config.iter().map(|&(lo, hi, _)| (lo, hi)).collect();
        out.pad_mode(&ends, PadMode::Constant(value))
    }

    #[track_caller]
    fn crop_axis(&self, axis: usize, before: usize, after: usize) -> Tensor {
        let shape = self.shape();
        let n = shape[axis];
        if before + after > n {
            panic!(
                "pad_mode: cropping {before} + {after} elements from axis {axis} of shape {shape:?}"
            );
        }
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        bounds[axis] = (before, n - after);
        self.shrink(&bounds)
    }

    #[track_caller]
    fn pad_axis(&self, axis: usize, before: usize, after: usize, mode: PadMode) -> Tensor {
        if before == 0 && after == 0 {
            return self.clone();
        }
        let shape = self.shape();
        let n = shape[axis];
        let ax = axis as isize;
        let limit = match mode {
            PadMode::Constant(value) => {
                let mut pads = vec![(0, 0); shape.len()];
                pads[axis] = (before, after);
                return self.pad_value(&pads, value);
            }
            PadMode::Reflect => n.saturating_sub(1),
            PadMode::Replicate => usize::MAX,
            PadMode::Circular => n,
        };
        if before > limit || after > limit || n == 0 {
            panic!(
                "pad_mode: {mode:?} pads ({before}, {after}) do not fit axis {axis} of shape {shape:?} (at most {limit} each)"
            );
        }
        let (head, tail) = match mode {
            PadMode::Reflect => (
                self.part(axis, 1, before + 1).flip(ax),
                self.part(axis, n - 1 - after, n - 1).flip(ax),
            ),
            PadMode::Replicate => (
                self.part(axis, 0, 1).repeat_axis(axis, before),
                self.part(axis, n - 1, n).repeat_axis(axis, after),
            ),
            _ => (self.part(axis, n - before, n), self.part(axis, 0, after)),
        };
        let parts: Vec<Tensor> = [head, self.clone(), tail]
            .into_iter()
            .filter(|t| t.shape()[axis] > 0)
            .collect();
        Tensor::cat(&parts, ax)
    }

    fn part(&self, axis: usize, begin: usize, end: usize) -> Tensor {
        self.slice(axis as isize, begin as isize, end as isize)
    }

    /// A size-1 `axis` expanded to `count`.
    fn repeat_axis(&self, axis: usize, count: usize) -> Tensor {
        let mut shape = self.shape();
        shape[axis] = count;
        self.expand(&shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
    }

    /// `interior` copies of `value` between neighbours along `axis`: each element gains a
    /// padded tail, the axes merge, and the last tail is cut.
    fn spread_axis(&self, axis: usize, interior: usize, value: Scalar) -> Tensor {
        let shape = self.shape();
        let n = shape[axis];
        if interior == 0 || n == 0 {
            return self.clone();
        }
        let with_tails = self.unsqueeze(axis as isize + 1);
        let mut pads = vec![(0, 0); shape.len() + 1];
        pads[axis + 1] = (0, interior);
        let mut merged = shape.clone();
        merged[axis] = n * (interior + 1);
        let spread = with_tails.pad_value(&pads, value).reshape(&merged);
        spread.part(axis, 0, n + (n - 1) * interior)
    }
}
