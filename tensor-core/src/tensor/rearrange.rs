//! Rearrangements a NumPy or PyTorch port reaches for, composed from movement ops so every
//! transform rule covers them: squeezing several axes, `roll` (two slices swapped),
//! PyTorch's `unfold` (sliding windows along one axis), `unflatten` and `meshgrid`.

use super::Tensor;
use super::broadcast::{normalize_axes, normalize_axis};
use crate::uop::{DType, Shape};

/// The order of the axes of [`Tensor::meshgrid`]'s grids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Matrix indexing: grid axis `i` runs along input `i` (`indexing="ij"`, PyTorch's default).
    Ij,
    /// Cartesian indexing: the first two grid axes swapped (`indexing="xy"`, NumPy's default).
    Xy,
}

impl Tensor {
    /// Every size-1 axis removed (PyTorch's `squeeze()`, NumPy's `squeeze(x)`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let x = Tensor::zeros(&[1, 3, 1, 2], DType::F32);
    /// assert_eq!(x.squeeze_all().shape(), vec![3, 2]);
    /// ```
    pub fn squeeze_all(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("squeeze_all");
        let shape = self.shape();
        let kept: Shape = shape.iter().copied().filter(|&d| d != 1).collect();
        if kept.len() == shape.len() {
            return self.clone();
        }
        Tensor::from_uop(self.uop().reshape(&kept))
    }

    /// The size-1 `axes` removed (NumPy's `squeeze(x, axis=axes)`). As NumPy (and unlike
    /// PyTorch's `squeeze(dims)`, which skips them) an axis of another size is an error.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let x = Tensor::zeros(&[1, 3, 1, 1], DType::F32);
    /// assert_eq!(x.squeeze_axes(&[0, -1]).shape(), vec![3, 1]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range, named twice, or of a size other than 1.
    #[track_caller]
    pub fn squeeze_axes(&self, axes: &[isize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("squeeze_axes");
        let shape = self.shape();
        let axes = normalize_axes("squeeze_axes", axes, &shape);
        if let Some(&bad) = axes.iter().find(|&&a| shape[a] != 1) {
            panic!(
                "squeeze_axes: axis {bad} of shape {shape:?} has size {}, not 1 (squeeze_all \
                 removes only the size-1 axes)",
                shape[bad]
            );
        }
        let kept: Shape = (0..shape.len())
            .filter(|a| !axes.contains(a))
            .map(|a| shape[a])
            .collect();
        Tensor::from_uop(self.uop().reshape(&kept))
    }

    /// The elements shifted by `shifts[i]` positions along `axes[i]`, those pushed off one end
    /// coming back at the other (NumPy's `roll(x, shifts, axis=axes)`, PyTorch's `roll`).
    /// Shifts may be negative or larger than the axis; as NumPy, one shift applies to every
    /// axis and one axis takes every shift. [`Tensor::roll_flat`] rolls without axes.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::arange(5);
    /// assert_eq!(evaluate(&x.roll(&[2], &[0]).uop()).to_vec::<i32>(), vec![3, 4, 0, 1, 2]);
    /// assert_eq!(evaluate(&x.roll(&[-6], &[0]).uop()).to_vec::<i32>(), vec![1, 2, 3, 4, 0]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range, or when `shifts` and `axes` have different lengths, neither 1.
    #[track_caller]
    pub fn roll(&self, shifts: &[isize], axes: &[isize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("roll");
        let shape = self.shape();
        let pairs = match (shifts.len(), axes.len()) {
            (s, a) if s == a => shifts.iter().copied().zip(axes.iter().copied()).collect(),
            (1, _) => axes.iter().map(|&a| (shifts[0], a)).collect(),
            (_, 1) => shifts.iter().map(|&s| (s, axes[0])).collect(),
            _ => Vec::new(),
        };
        if pairs.is_empty() && !(shifts.is_empty() && axes.is_empty()) {
            panic!(
                "roll: {} shifts {shifts:?} for {} axes {axes:?} of shape {shape:?} (give one \
                 shift per axis, or one of either)",
                shifts.len(),
                axes.len()
            );
        }
        let mut x = self.clone();
        for (shift, axis) in pairs {
            let ax = normalize_axis("roll", axis, &shape);
            x = x.roll_axis(shift, ax);
        }
        x
    }

    /// The elements rolled by `shift` in row-major order, the shape kept (NumPy's `roll(x,
    /// shift)` with no axis, PyTorch's `roll(shift)` without `dims`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// assert_eq!(evaluate(&x.roll_flat(1).uop()).to_vec::<i32>(), vec![5, 0, 1, 2, 3, 4]);
    /// ```
    pub fn roll_flat(&self, shift: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("roll_flat");
        let shape = self.shape();
        let flat = self.reshape(&[self.numel()]).roll_axis(shift, 0);
        flat.reshape(&shape)
    }

    /// `roll` along the one (normalized) axis `ax`: the last `shift` elements moved first.
    fn roll_axis(&self, shift: isize, ax: usize) -> Tensor {
        let n = self.shape()[ax];
        if n == 0 {
            return self.clone();
        }
        let s = shift.rem_euclid(n as isize);
        if s == 0 {
            return self.clone();
        }
        let (n, ax) = (n as isize, ax as isize);
        let tail = self.slice(ax, n - s, n);
        let head = self.slice(ax, 0, n - s);
        Tensor::cat(&[tail, head], ax)
    }

    /// PyTorch's `Tensor.unfold(dim, size, step)`: the windows of `size` elements, `step`
    /// apart, along `axis`. That axis becomes the `(n - size) / step + 1` window positions and
    /// a new last axis of `size` holds each window.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::arange(5);
    /// let w = x.unfold(0, 2, 2); // torch.arange(5).unfold(0, 2, 2)
    /// assert_eq!(w.shape(), vec![2, 2]);
    /// assert_eq!(evaluate(&w.uop()).to_vec::<i32>(), vec![0, 1, 2, 3]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range, a zero `step`, or a `size` larger than the axis.
    #[track_caller]
    pub fn unfold(&self, axis: isize, size: usize, step: usize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("unfold");
        let shape = self.shape();
        let ax = if shape.is_empty() {
            normalize_axis("unfold", axis, &[1])
        } else {
            normalize_axis("unfold", axis, &shape)
        };
        if step == 0 {
            panic!("unfold: the step must be positive (axis {axis} of shape {shape:?})");
        }
        if shape.is_empty() {
            // PyTorch treats a 0-d tensor as one element.
            return self.reshape(&[1]).unfold(0, size, step).reshape(&[size]);
        }
        if size > shape[ax] {
            panic!(
                "unfold: windows of size {size} do not fit axis {axis} of shape {shape:?} (size \
                 {})",
                shape[ax]
            );
        }
        let count = (shape[ax] - size) / step + 1;
        let starts = Tensor::arange(count).cast(DType::I64) * step as i64;
        let offsets = Tensor::arange(size).cast(DType::I64);
        let index = starts.unsqueeze(1) + offsets.unsqueeze(0); // [count, size]
        let windows = self.take(&index, ax as isize); // [.., count, size, ..]
        let mut order: Vec<usize> = (0..=shape.len()).filter(|&d| d != ax + 1).collect();
        order.push(ax + 1);
        windows.permute(&order)
    }

    /// `axis` split into axes of `sizes` (PyTorch's `unflatten(dim, sizes)`); one size may be
    /// `-1`, inferred.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let x = Tensor::zeros(&[2, 12], DType::F32);
    /// assert_eq!(x.unflatten(1, &[3, -1]).shape(), vec![2, 3, 4]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range, no sizes, more than one `-1`, a negative size, or sizes whose
    /// product is not the axis's size.
    #[track_caller]
    pub fn unflatten(&self, axis: isize, sizes: &[isize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("unflatten");
        let shape = self.shape();
        let ax = normalize_axis("unflatten", axis, &shape);
        let n = shape[ax];
        let known: usize = sizes
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .product();
        if let Some(why) = unflatten_refusal(n, sizes, known) {
            panic!(
                "unflatten: cannot split axis {axis} of shape {shape:?} (size {n}) into sizes \
                 {sizes:?}: {why}"
            );
        }
        let mut to: Vec<isize> = shape[..ax].iter().map(|&d| d as isize).collect();
        to.extend(
            sizes
                .iter()
                .map(|&d| if d == -1 { (n / known) as isize } else { d }),
        );
        to.extend(shape[ax + 1..].iter().map(|&d| d as isize));
        self.reshape(&to)
    }

    /// Coordinate grids from 1-D tensors (NumPy's and PyTorch's `meshgrid`): one grid per
    /// input, all of the shape `[n0, n1, ...]` under [`Indexing::Ij`] or `[n1, n0, ...]` under
    /// [`Indexing::Xy`], grid `i` holding input `i` along its axis. A 0-d input counts as one
    /// element, as in PyTorch.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// # use tensor_core::tensor::Indexing;
    /// let (x, y) = (Tensor::arange(3), Tensor::arange(2));
    /// let g = Tensor::meshgrid(&[&x, &y], Indexing::Xy); // np.meshgrid(x, y)
    /// assert_eq!(g[0].shape(), vec![2, 3]);
    /// assert_eq!(evaluate(&g[0].uop()).to_vec::<i32>(), vec![0, 1, 2, 0, 1, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an input with more than one axis.
    #[track_caller]
    pub fn meshgrid(tensors: &[&Tensor], indexing: Indexing) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("meshgrid");
        let shapes: Vec<Shape> = tensors.iter().map(|t| t.shape()).collect();
        if let Some((i, s)) = shapes.iter().enumerate().find(|(_, s)| s.len() > 1) {
            panic!(
                "meshgrid: input {i} has shape {s:?}; every input must have at most one axis \
                 (ravel it first)"
            );
        }
        let mut axis_of: Vec<usize> = (0..tensors.len()).collect();
        if indexing == Indexing::Xy && tensors.len() >= 2 {
            axis_of.swap(0, 1);
        }
        let lens: Vec<usize> = shapes.iter().map(|s| s.iter().product()).collect();
        let mut grid: Shape = vec![0; tensors.len()];
        for (i, &a) in axis_of.iter().enumerate() {
            grid[a] = lens[i];
        }
        tensors
            .iter()
            .zip(&axis_of)
            .map(|(t, &a)| {
                let mut along = vec![1isize; grid.len()];
                along[a] = -1;
                t.reshape(&along).broadcast_to(&grid)
            })
            .collect()
    }
}

/// Why `sizes` (with `known` the product of those not `-1`) cannot split an axis of size `n`.
fn unflatten_refusal(n: usize, sizes: &[isize], known: usize) -> Option<&'static str> {
    if sizes.is_empty() {
        return Some("no sizes given");
    }
    if sizes.iter().filter(|&&d| d == -1).count() > 1 {
        return Some("more than one -1");
    }
    if sizes.iter().any(|&d| d < -1) {
        return Some("a size is negative");
    }
    let fits = if sizes.contains(&-1) {
        known != 0 && n.is_multiple_of(known)
    } else {
        known == n
    };
    (!fits).then_some("their product differs")
}
