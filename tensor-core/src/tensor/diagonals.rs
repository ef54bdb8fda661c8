//! Matrices by their diagonals: `eye_nmk` (NumPy's `eye(n, m, k)`), `diag` (a vector placed on
//! a diagonal, or a diagonal read), `trace` (a diagonal summed) and `empty`.

use super::Tensor;
use crate::uop::DType;

impl Tensor {
    /// The `n x m` matrix with ones on diagonal `k` (above the main one when positive) and
    /// zeros elsewhere, in `dtype` (NumPy's `eye(n, m, k, dtype=)`). [`Tensor::eye`] is the
    /// square one.
    ///
    /// ```
    /// # use tensor_core::{DType, Tensor, interp::evaluate};
    /// let e = Tensor::eye_nmk(2, 3, 1, DType::I32);
    /// assert_eq!(evaluate(&e.uop()).to_vec::<i32>(), vec![0, 1, 0, 0, 0, 1]);
    /// ```
    ///
    /// # Panics
    ///
    /// When `n * m` is more than a tensor may hold.
    #[track_caller]
    pub fn eye_nmk(n: usize, m: usize, k: isize, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("eye_nmk");
        super::broadcast::require_addressable("eye_nmk", &[n, m]);
        col_minus_row(n, m).eq(k as i64).cast(dtype)
    }

    /// A tensor of `shape` and `dtype` whose values the caller will overwrite (NumPy's and
    /// PyTorch's `empty`). The values are unspecified; this one holds zeros.
    ///
    /// # Panics
    ///
    /// As [`Tensor::zeros`] does.
    #[track_caller]
    pub fn empty(shape: &[usize], dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("empty");
        Tensor::zeros(shape, dtype)
    }

    /// NumPy's `diag(x, k)`: a 1-D `self` placed on diagonal `k` of a square matrix of side
    /// `len + |k|` (zeros elsewhere); a 2-D `self`'s diagonal `k` read as a vector.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let v = Tensor::from_vec(vec![1, 2], &[2]);
    /// assert_eq!(evaluate(&v.diag(1).uop()).to_vec::<i32>(), vec![0, 1, 0, 0, 0, 2, 0, 0, 0]);
    /// assert_eq!(evaluate(&v.diag(1).diag(1).uop()).to_vec::<i32>(), vec![1, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// When `self` has neither one nor two axes.
    #[track_caller]
    pub fn diag(&self, k: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("diag");
        let shape = self.shape();
        match shape.len() {
            1 => self.on_diagonal(k),
            2 => self.diagonal(k, 0, 1),
            _ => panic!(
                "diag: needs a 1-D tensor (to place on a diagonal) or a 2-D one (to read a \
                 diagonal), got shape {shape:?}"
            ),
        }
    }

    /// The vector `self` on diagonal `k` of a square matrix.
    fn on_diagonal(&self, k: isize) -> Tensor {
        let n = self.shape()[0];
        let side = n + k.unsigned_abs();
        super::broadcast::require_addressable("diag", &[side, side]);
        // row i holds self[i] (k >= 0) or self[i - |k|] (k < 0) on the diagonal.
        let pads = if k >= 0 {
            (0, k as usize)
        } else {
            (k.unsigned_abs(), 0)
        };
        let rows = self.pad(&[pads]).unsqueeze(1);
        let zero = Tensor::zeros(&[0usize; 0], self.dtype());
        col_minus_row(side, side).eq(k as i64).where_(rows, zero)
    }

    /// The sum of the main diagonal of a matrix (NumPy's and PyTorch's `trace`);
    /// [`Tensor::trace_with`] takes an offset and the axes of a batch of matrices.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(evaluate(&x.trace().uop()).to_vec::<f32>(), vec![5.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// Unless `self` has two axes.
    #[track_caller]
    pub fn trace(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("trace");
        let shape = self.shape();
        if shape.len() != 2 {
            panic!(
                "trace: needs a matrix, got shape {shape:?} (trace_with(offset, axis1, axis2) \
                 sums the diagonals of a batch)"
            );
        }
        self.trace_with(0, 0, 1)
    }

    /// NumPy's `trace(x, offset, axis1, axis2)`: the sum of diagonal `offset` of each plane
    /// `(axis1, axis2)`; the other axes remain, in order.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::arange(8).reshape(&[2, 2, 2]);
    /// assert_eq!(evaluate(&x.trace_with(0, 1, 2).uop()).to_vec::<i32>(), vec![3, 11]);
    /// ```
    ///
    /// # Panics
    ///
    /// As [`Tensor::diagonal`] does.
    #[track_caller]
    pub fn trace_with(&self, offset: isize, axis1: isize, axis2: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("trace");
        self.diagonal(offset, axis1, axis2).sum(-1, false)
    }
}

/// `[n, m]` (`i64`): `col - row` at each element.
fn col_minus_row(n: usize, m: usize) -> Tensor {
    let rows = Tensor::arange(n).cast(DType::I64).unsqueeze(1);
    let cols = Tensor::arange(m).cast(DType::I64).unsqueeze(0);
    cols - rows
}
