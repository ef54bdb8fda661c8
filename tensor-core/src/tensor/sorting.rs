//! Sorting without data-dependent control flow, so it fuses and every transform rule covers
//! it: each element's rank is counted from a comparison table (`rank[i]` = the elements that
//! come before `x[i]` plus the equal ones at earlier positions, so the sort is stable), the
//! permutation is read off by comparing ranks with positions, and the values are gathered by
//! it, so the gradient follows the permutation. NaN sorts after every number ascending and
//! before every number descending, as NumPy and PyTorch do. The work is quadratic in the
//! length of the sorted axis.

use super::Tensor;
use super::broadcast::normalize_axis;
use crate::uop::DType;

impl Tensor {
    /// The values sorted along `axis` (stably; `descending` for largest first) and the indices
    /// (`i64`) they came from, as PyTorch's `sort(stable=True)`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn sort(&self, axis: isize, descending: bool) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("sort");
        let indices = self.argsort(axis, descending);
        (self.take_along_axis(&indices, axis), indices)
    }

    /// The indices (`i64`) that sort `self` stably along `axis`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn argsort(&self, axis: isize, descending: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("argsort");
        let last = self.ndim() as isize - 1;
        let axis = normalize_axis("argsort", axis, &self.shape()) as isize;
        if axis != last {
            return self
                .transpose(axis, last)
                .argsort(last, descending)
                .transpose(axis, last);
        }
        let n = self.shape()[self.ndim() - 1];
        let rank = stable_rank(self, descending).unsqueeze(-2); // [.., 1, n(i)]
        let position = Tensor::arange(n).cast(DType::I64);
        let slot = position.reshape(&[n, 1]); // r
        let source = position.reshape(&[1, n]); // i
        rank.eq(&slot).where_(&source, 0i64).sum(-1, false)
    }

    /// The `k` largest (or, with `largest = false`, smallest) values along `axis`, sorted, and
    /// their indices (`i64`), as PyTorch's `topk`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or a `k` larger than the axis.
    #[track_caller]
    pub fn topk(&self, k: usize, axis: isize, largest: bool) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("topk");
        let n = self.shape()[normalize_axis("topk", axis, &self.shape())];
        if k > n {
            panic!(
                "topk: k = {k} is larger than axis {axis} of shape {:?}",
                self.shape()
            );
        }
        let (values, indices) = self.sort(axis, largest);
        (
            values.slice(axis, 0, k as isize),
            indices.slice(axis, 0, k as isize),
        )
    }

    /// The `k`-th smallest value along `axis` (`k` from 1) and its index, the axis removed, as
    /// PyTorch's `kthvalue`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or a `k` outside `1..=n`.
    #[track_caller]
    pub fn kthvalue(&self, k: usize, axis: isize) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("kthvalue");
        let n = self.shape()[normalize_axis("kthvalue", axis, &self.shape())];
        if k == 0 || k > n {
            panic!(
                "kthvalue: k = {k} is not in 1..={n} for axis {axis} of shape {:?}",
                self.shape()
            );
        }
        let (values, indices) = self.sort(axis, false);
        let pick = |t: &Tensor| t.narrow(axis, k as isize - 1, 1).squeeze(axis);
        (pick(&values), pick(&indices))
    }

    /// The values sorted along the first axis (PyTorch's `msort`).
    ///
    /// # Panics
    ///
    /// Panics for a 0-d tensor.
    #[track_caller]
    pub fn msort(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("msort");
        self.sort(0, false).0
    }
}

/// The stable rank (`i64`) of each element of `x` along its last axis.
fn stable_rank(x: &Tensor, descending: bool) -> Tensor {
    let n = x.shape()[x.ndim() - 1];
    let xi = x.unsqueeze(-1); // [.., n(i), 1]
    let xj = x.unsqueeze(-2); // [.., 1, n(j)]
    let (first, second) = if descending { (&xi, &xj) } else { (&xj, &xi) };
    // j comes before i: x_j < x_i ascending, x_j > x_i descending, NaN last / first.
    let mut before = first.lt(second);
    let mut equal = xj.eq(&xi);
    if x.dtype().is_float() {
        let nan_order = second.isnan().logical_and(first.isnan().logical_not());
        before = before.logical_or(nan_order);
        equal = equal.logical_or(xj.isnan().logical_and(xi.isnan()));
    }
    let earlier = Tensor::arange(n)
        .reshape(&[1, n])
        .lt(Tensor::arange(n).reshape(&[n, 1]));
    let ahead = before.logical_or(equal.logical_and(&earlier));
    ahead.cast(DType::I64).sum(-1, false)
}
