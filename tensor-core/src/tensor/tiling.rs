//! Copies of a tensor laid side by side: NumPy's `tile` (the whole tensor repeated along each
//! axis) and `repeat` (each element repeated along one axis). Both are a reshape that opens a
//! size-1 axis, an expand, and a reshape that merges it, so they stay views.

use super::Tensor;
use super::broadcast::normalize_axis;
use crate::uop::Shape;

impl Tensor {
    /// The tensor repeated `reps[i]` times along axis `i`, as NumPy's `tile`: a shorter `reps` is
    /// padded with leading ones, a shorter shape with leading size-1 axes.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2], &[2]);
    /// let t = x.tile(&[2, 2]);                                   // np.tile(x, (2, 2))
    /// assert_eq!(t.shape(), vec![2, 4]);
    /// assert_eq!(evaluate(&t.uop()).to_vec::<i32>(), vec![1, 2, 1, 2, 1, 2, 1, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when the result would have more elements than a tensor may hold.
    #[track_caller]
    pub fn tile(&self, reps: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("tile");
        let shape = self.shape();
        let nd = shape.len().max(reps.len());
        let mut sizes = vec![1; nd - shape.len()];
        sizes.extend_from_slice(&shape);
        let mut counts = vec![1; nd - reps.len()];
        counts.extend_from_slice(reps);
        let opened: Shape = sizes.iter().flat_map(|&d| [1, d]).collect();
        let spread: Shape = counts
            .iter()
            .zip(&sizes)
            .flat_map(|(&r, &d)| [r, d])
            .collect();
        let merged: Shape = counts
            .iter()
            .zip(&sizes)
            .map(|(&r, &d)| {
                r.checked_mul(d).unwrap_or_else(|| {
                    panic!("tile: {reps:?} copies of shape {shape:?} has more elements than a tensor may hold")
                })
            })
            .collect();
        self.reshape(&opened).expand(&spread).reshape(&merged)
    }

    /// Each element repeated `repeats` times along `axis`, as NumPy's `repeat(x, repeats, axis)`
    /// with one count (for NumPy's `axis=None`, `ravel()` first).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2, 3, 4], &[2, 2]);
    /// let r = x.repeat(2, 0);                                    // np.repeat(x, 2, axis=0)
    /// assert_eq!(evaluate(&r.uop()).to_vec::<i32>(), vec![1, 2, 1, 2, 3, 4, 3, 4]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn repeat(&self, repeats: usize, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("repeat");
        let shape = self.shape();
        let ax = normalize_axis("repeat", axis, &shape);
        let mut opened = shape.clone();
        opened.insert(ax + 1, 1);
        let mut spread = opened.clone();
        spread[ax + 1] = repeats;
        let mut merged = shape.clone();
        merged[ax] = merged[ax].checked_mul(repeats).unwrap_or_else(|| {
            panic!("repeat: {repeats} copies of axis {axis} of shape {shape:?} has more elements than a tensor may hold")
        });
        self.reshape(&opened).expand(&spread).reshape(&merged)
    }
}
