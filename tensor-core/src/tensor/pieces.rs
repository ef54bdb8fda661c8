//! A tensor cut into pieces along one axis: NumPy's `split` (equal sections, or at given
//! indices) and `array_split` (here `chunk`: sections whose sizes differ by at most one). Every
//! piece is a view (a shrink) of the original.

use super::Tensor;
use super::broadcast::normalize_axis;

impl Tensor {
    /// `sections` equal pieces along `axis`, as NumPy's `split(x, sections, axis)`.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::arange(6);
    /// let parts = x.split(3, 0);                                  // np.split(x, 3)
    /// assert_eq!(evaluate(&parts[1].uop()).to_vec::<i32>(), vec![2, 3]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when the axis does not divide evenly (use [`Tensor::chunk`] for that) or `sections`
    /// is 0 or more than [`MAX_PIECES`].
    #[track_caller]
    pub fn split(&self, sections: usize, axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("split");
        let shape = self.shape();
        let ax = normalize_axis("split", axis, &shape);
        check_piece_count("split", sections);
        if sections == 0 || !shape[ax].is_multiple_of(sections) {
            panic!(
                "split: axis {axis} of shape {shape:?} does not split into {sections} equal sections"
            );
        }
        self.chunk(sections, axis)
    }

    /// The pieces between the `indices` along `axis`, as NumPy's `split(x, [i, j], axis)`: `x[:i]`,
    /// `x[i:j]`, `x[j:]` (indices past the end give empty pieces; negative ones count from the
    /// end).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let parts = Tensor::arange(5).split_at(&[1, 3], 0);        // np.split(x, [1, 3])
    /// let sizes: Vec<_> = parts.iter().map(|p| p.shape()[0]).collect();
    /// assert_eq!(sizes, vec![1, 2, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn split_at(&self, indices: &[isize], axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("split_at");
        let shape = self.shape();
        let ax = normalize_axis("split_at", axis, &shape);
        let n = shape[ax] as isize;
        let mut bounds = vec![0];
        bounds.extend(
            indices
                .iter()
                .map(|&i| if i < 0 { i + n } else { i }.clamp(0, n)),
        );
        bounds.push(n);
        bounds
            .windows(2)
            .map(|w| self.slice(ax as isize, w[0], w[1].max(w[0])))
            .collect()
    }

    /// `sections` pieces along `axis` whose sizes differ by at most one, the larger ones first, as
    /// NumPy's `array_split(x, sections, axis)`.
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let parts = Tensor::arange(7).chunk(3, 0);                  // np.array_split(x, 3)
    /// let sizes: Vec<_> = parts.iter().map(|p| p.shape()[0]).collect();
    /// assert_eq!(sizes, vec![3, 2, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when `sections` is 0 or more than [`MAX_PIECES`], or on an axis out of range.
    #[track_caller]
    pub fn chunk(&self, sections: usize, axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("chunk");
        let shape = self.shape();
        let ax = normalize_axis("chunk", axis, &shape);
        if sections == 0 {
            panic!("chunk: cannot cut axis {axis} of shape {shape:?} into 0 sections");
        }
        check_piece_count("chunk", sections);
        let (n, ax) = (shape[ax], ax as isize);
        let (base, extra) = (n / sections, n % sections);
        let mut start = 0;
        (0..sections)
            .map(|i| {
                let len = base + usize::from(i < extra);
                let piece = self.slice(ax, start as isize, (start + len) as isize);
                start += len;
                piece
            })
            .collect()
    }
}

/// The most pieces one `split` or `chunk` makes: each piece is a tensor of its own, so a count
/// sized by hostile data (a million sections of an empty axis) is refused instead of building
/// that many graphs.
pub const MAX_PIECES: usize = 1 << 20;

#[track_caller]
fn check_piece_count(op: &str, sections: usize) {
    let op = super::op_scope::user_op(op);
    if sections > MAX_PIECES {
        panic!("{op}: {sections} sections are more than the {MAX_PIECES} pieces one call makes");
    }
}
