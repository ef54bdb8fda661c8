//! NumPy's indexing, composed from movement ops and `take` so every transform rule covers it:
//! slices with any step (a window, padded to a multiple of the step and reshaped so every
//! `step`-th element is one column; a negative step flips first), several index tensors that
//! broadcast together (one flat index into the indexed axes, moved to the front; NumPy's
//! placement of the broadcast axes), `diagonal` (a square block read with stride `n + 1`), and
//! the data-dependent selections `argwhere`/`nonzero`/`masked_select` with a static `size`
//! and fill value, as JAX does (the k-th true element is the one whose running count is k).

use super::Tensor;
use super::broadcast::{broadcast_shapes, normalize_axis};
use crate::uop::{DType, Scalar, Shape};

/// One entry of an index expression for [`Tensor::index`].
#[derive(Clone, Debug)]
pub enum Index {
    /// `start:stop:step` (Python's rules: negative positions count from the end, missing
    /// bounds mean the whole axis in the step's direction).
    Slice(Option<isize>, Option<isize>, isize),
    /// `:` (the whole axis).
    Full,
    /// One position (negative from the end): the axis is removed.
    At(isize),
    /// Integer positions of any shape; all index tensors of an expression broadcast together.
    Array(Tensor),
    /// `None` (`np.newaxis`): a new size-1 axis here; it consumes no axis of the input.
    NewAxis,
    /// `...`: as many `:` as the other entries leave axes (at most one per expression).
    Ellipsis,
}

impl Tensor {
    /// NumPy's `x[index]`: basic slices and advanced (integer tensor) indices mixed; missing
    /// trailing entries are `:`. The broadcast shape of the index tensors (positions count as
    /// 0-d ones) replaces the indexed axes where they are adjacent, and leads the result where
    /// they are not. A negative index counts from the end; one outside its axis reads 0.
    /// [`Index::NewAxis`] (`None`) inserts a size-1 axis and [`Index::Ellipsis`] (`...`) stands
    /// for the `:` the other entries leave, as in NumPy (a `None` between two index tensors
    /// separates them, so their axes lead).
    ///
    /// ```
    /// # use tensor_core::{DType, Index, Tensor};
    /// let x = Tensor::zeros(&[2, 3, 4], DType::F32);
    /// // x[..., None, 1]
    /// assert_eq!(x.index(&[Index::Ellipsis, Index::NewAxis, Index::At(1)]).shape(), vec![2, 3, 1]);
    /// ```
    ///
    /// # Panics
    ///
    /// On more entries than axes (`None` and `...` not counted), more than one `...`, an index
    /// tensor that is not of an integer type, a slice with a zero step, or index tensors whose
    /// shapes do not broadcast. Index values are data and are not checked (one out of range reads
    /// 0).
    #[track_caller]
    pub fn index(&self, index: &[Index]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("index");
        let (mut x, index) = self.with_new_axes(index);
        let mut arrays: Vec<(usize, Tensor)> = Vec::new();
        for (axis, entry) in index.iter().enumerate() {
            match entry {
                Index::Slice(start, stop, step) => {
                    x = x.slice_step(axis as isize, *start, *stop, *step);
                }
                Index::Full | Index::NewAxis | Index::Ellipsis => {}
                Index::At(i) => arrays.push((axis, Tensor::scalar(*i as i64))),
                Index::Array(t) => {
                    if !t.dtype().is_int() {
                        panic!("index: index dtype {} is not an integer type", t.dtype());
                    }
                    arrays.push((axis, t.clone()));
                }
            }
        }
        if arrays.is_empty() {
            return x;
        }
        x.gather_axes(&arrays)
    }

    /// `self` with a size-1 axis for each `NewAxis` of `index`, and `index` with `...` spelled
    /// out as `:` and each `NewAxis` as a `:` on its new axis: one entry per axis of the
    /// result, at most.
    #[track_caller]
    fn with_new_axes(&self, index: &[Index]) -> (Tensor, Vec<Index>) {
        let shape = self.shape();
        let consuming = index
            .iter()
            .filter(|e| !matches!(e, Index::NewAxis | Index::Ellipsis))
            .count();
        let ellipses = index
            .iter()
            .filter(|e| matches!(e, Index::Ellipsis))
            .count();
        if consuming > shape.len() || ellipses > 1 {
            panic!(
                "index: {consuming} entries{} for shape {shape:?} with {} axes",
                if ellipses > 1 {
                    " and more than one `...`"
                } else {
                    ""
                },
                shape.len()
            );
        }
        let mut entries = Vec::with_capacity(shape.len() + index.len());
        for entry in index {
            match entry {
                Index::Ellipsis => {
                    entries.extend(std::iter::repeat_n(Index::Full, shape.len() - consuming));
                }
                e => entries.push(e.clone()),
            }
        }
        let mut x = self.clone();
        for (axis, entry) in entries.iter_mut().enumerate() {
            if matches!(entry, Index::NewAxis) {
                x = x.unsqueeze(axis as isize);
                *entry = Index::Full;
            }
        }
        (x, entries)
    }

    /// Python's `x[start:stop:step]` along `axis` (any non-zero step; a negative one walks
    /// backwards from `start`, by default the last element).
    ///
    /// # Panics
    ///
    /// On an axis out of range or a zero `step`.
    #[track_caller]
    pub fn slice_step(
        &self,
        axis: isize,
        start: Option<isize>,
        stop: Option<isize>,
        step: isize,
    ) -> Tensor {
        let _op = super::op_scope::OpScope::enter("slice_step");
        let shape = self.shape();
        let ax = normalize_axis("slice_step", axis, &shape);
        if step == 0 {
            panic!("slice_step: the step must not be zero (axis {axis} of shape {shape:?})");
        }
        let n = shape[ax] as isize;
        let norm = |p: isize, lo: isize, hi: isize| (if p < 0 { p + n } else { p }).clamp(lo, hi);
        let (first, count) = if step > 0 {
            let lo = start.map_or(0, |p| norm(p, 0, n));
            let hi = stop.map_or(n, |p| norm(p, 0, n));
            (lo, (hi - lo + step - 1).div_euclid(step).max(0))
        } else {
            let lo = start.map_or(n - 1, |p| norm(p, -1, n - 1));
            let hi = stop.map_or(-1, |p| norm(p, -1, n - 1));
            (lo, (lo - hi - step - 1).div_euclid(-step).max(0))
        };
        if step < 0 {
            let flipped = self.flip(ax as isize);
            return flipped.every_step(
                ax,
                (n - 1 - first) as usize,
                count as usize,
                (-step) as usize,
            );
        }
        self.every_step(ax, first as usize, count as usize, step as usize)
    }

    /// `count` elements from `first`, `step` apart, along `ax`.
    fn every_step(&self, ax: usize, first: usize, count: usize, step: usize) -> Tensor {
        let shape = self.shape();
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        if count == 0 {
            bounds[ax] = (0, 0);
            return self.shrink(&bounds);
        }
        let span = (count - 1) * step + 1;
        bounds[ax] = (first, first + span);
        let window = self.shrink(&bounds);
        if step == 1 {
            return window;
        }
        let mut pads = vec![(0, 0); shape.len()];
        pads[ax] = (0, count * step - span);
        let mut grid: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        grid[ax] = count as isize;
        grid.insert(ax + 1, step as isize);
        let columns = window.pad(&pads).reshape(&grid);
        columns
            .slice(ax as isize + 1, 0, 1)
            .squeeze(ax as isize + 1)
    }

    /// The diagonal of the plane `(axis1, axis2)` shifted by `offset` (above the main one when
    /// positive), as NumPy's and PyTorch's `diagonal`: both axes removed, the diagonal last.
    ///
    /// # Panics
    ///
    /// On an axis out of range, or when `axis1` and `axis2` name the same axis.
    #[track_caller]
    pub fn diagonal(&self, offset: isize, axis1: isize, axis2: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("diagonal");
        let shape = self.shape();
        let (a, b) = (
            normalize_axis("diagonal", axis1, &shape),
            normalize_axis("diagonal", axis2, &shape),
        );
        if a == b {
            panic!("diagonal: axis1 and axis2 are both axis {a} of shape {shape:?}");
        }
        let mut order: Vec<usize> = (0..shape.len()).filter(|&d| d != a && d != b).collect();
        order.extend([a, b]);
        let plane = self.permute(&order);
        let nd = shape.len() as isize;
        let (rows, cols) = (shape[a] as isize, shape[b] as isize);
        let plane = if offset >= 0 {
            plane.slice(nd - 1, offset.min(cols), cols)
        } else {
            plane.slice(
                nd - 2,
                offset.checked_neg().unwrap_or(isize::MAX).min(rows),
                rows,
            )
        };
        let s = plane.shape();
        let len = s[s.len() - 2].min(s[s.len() - 1]);
        let batch: Shape = s[..s.len() - 2].to_vec();
        let square = plane
            .slice(nd - 2, 0, len as isize)
            .slice(nd - 1, 0, len as isize);
        if len == 0 {
            return Tensor::zeros(&[batch, vec![0]].concat(), self.dtype());
        }
        let flat = square.reshape(&dims(&[batch.clone(), vec![len * len]].concat()));
        let mut pads = vec![(0, 0); batch.len() + 1];
        pads[batch.len()] = (0, len);
        let strided = flat
            .pad(&pads)
            .reshape(&dims(&[batch.clone(), vec![len, len + 1]].concat()));
        strided.slice(nd - 1, 0, 1).squeeze(nd - 1)
    }

    /// JAX's `argwhere(x, size, fill_value)`: the coordinates (`i64`, shape `[size, ndim]`)
    /// of the first `size` non-zero elements in row-major order, rows of `fill` after them.
    ///
    /// # Panics
    ///
    /// When `size` times the element count is more elements than a tensor may hold.
    #[track_caller]
    pub fn argwhere(&self, size: usize, fill: i64) -> Tensor {
        let _op = super::op_scope::OpScope::enter("argwhere");
        let shape = self.shape();
        let hit = self.first_true(size); // [size, N]
        let n = self.numel();
        let flat = Tensor::arange(n).cast(DType::I64);
        let mut coords = Vec::with_capacity(shape.len());
        let mut stride = 1i64;
        for &d in shape.iter().rev() {
            coords.push(flat.floor_div(stride).remainder(d.max(1) as i64));
            stride *= d.max(1) as i64;
        }
        coords.reverse();
        let table = Tensor::stack(&coords, 1); // [N, ndim]
        let picked = hit
            .unsqueeze(-1)
            .where_(table.unsqueeze(0), 0i64)
            .sum(1, false);
        let found = hit.any(1, true);
        found.where_(picked, fill)
    }

    /// JAX's `nonzero(x, size, fill_value)`: the coordinates of [`Tensor::argwhere`] as one
    /// tensor per axis.
    ///
    /// # Panics
    ///
    /// As [`Tensor::argwhere`] does.
    #[track_caller]
    pub fn nonzero(&self, size: usize, fill: i64) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("nonzero");
        let found = self.argwhere(size, fill);
        (0..self.ndim())
            .map(|d| found.slice(1, d as isize, d as isize + 1).squeeze(1))
            .collect()
    }

    /// The elements of `self` where `mask` (broadcast together) is true, in row-major order,
    /// the first `size` of them, then `fill` (JAX's `extract(mask, x, size, fill_value)`).
    ///
    /// # Panics
    ///
    /// When the shapes of `self` and `mask` do not broadcast.
    #[track_caller]
    pub fn masked_select(&self, mask: &Tensor, size: usize, fill: impl Into<Scalar>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("masked_select");
        let shape = broadcast_shapes("masked_select", &[self.shape(), mask.shape()]);
        let dims_of = dims(&shape);
        let values = self.expand(&dims_of).reshape(&[-1isize]);
        let hit = mask.expand(&dims_of).first_true(size);
        let zero = Tensor::zeros(&[0usize; 0], self.dtype());
        let picked = hit
            .where_(values.unsqueeze(0), &zero)
            .sum(1, false)
            .cast(self.dtype());
        let fill = Tensor::full(&[0usize; 0], fill.into(), self.dtype());
        hit.any(1, false).where_(picked, fill)
    }

    /// `[size, N]`: entry `(k, e)` is true when flat element `e` is the `k`-th non-zero one.
    fn first_true(&self, size: usize) -> Tensor {
        let truth = self.cast(DType::Bool).reshape(&[-1isize]);
        let before = truth.cast(DType::I64).cumsum(0) - 1i64;
        let k = Tensor::arange(size).cast(DType::I64).unsqueeze(1);
        truth.unsqueeze(0).logical_and(before.unsqueeze(0).eq(k))
    }

    /// The advanced part of [`Tensor::index`]: `arrays` are `(axis, index)` pairs.
    #[track_caller]
    fn gather_axes(&self, arrays: &[(usize, Tensor)]) -> Tensor {
        let shape = self.shape();
        let shapes: Vec<Shape> = arrays.iter().map(|(_, t)| t.shape()).collect();
        let common = broadcast_shapes("index", &shapes);
        let axes: Vec<usize> = arrays.iter().map(|&(a, _)| a).collect();
        let total: usize = axes.iter().map(|&a| shape[a]).product();
        let mut flat = Tensor::zeros(&common, DType::I64);
        let mut valid = Tensor::full(&common, true, DType::Bool);
        for (axis, idx) in arrays {
            let n = shape[*axis] as i64;
            let idx = idx.cast(DType::I64).expand(&dims(&common));
            let idx = idx.lt(0).where_(&idx + n, &idx);
            valid = valid.logical_and(idx.ge(0).logical_and(idx.lt(n)));
            flat = flat * n + idx;
        }
        let flat = valid.where_(flat, total as i64);
        let rest: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
        let order: Vec<usize> = axes.iter().chain(&rest).copied().collect();
        let moved = self.permute(&order);
        let rest_shape: Shape = rest.iter().map(|&d| shape[d]).collect();
        let joined = moved.reshape(&dims(&[vec![total], rest_shape].concat()));
        let picked = joined.take(&flat, 0); // [common.., rest..]
        let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
        if !adjacent || axes[0] == 0 {
            return picked;
        }
        let s = common.len();
        let before = axes[0];
        let perm: Vec<usize> = (s..s + before)
            .chain(0..s)
            .chain(s + before..picked.ndim())
            .collect();
        picked.permute(&perm)
    }
}

fn dims(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}
