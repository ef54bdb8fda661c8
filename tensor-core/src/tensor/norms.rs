//! Matrix norms over two axes, as NumPy's `np.linalg.norm(x, ord, axis=(row, col))` (and
//! `np.linalg.matrix_norm`, `torch.linalg.matrix_norm`): the Frobenius norm and the norms whose
//! value is a maximum or minimum of absolute row or column sums. The spectral and nuclear norms
//! need singular values, which this crate does not compute; asking for them panics and names
//! what to use instead. Vector norms are [`Tensor::norm`].

use super::Tensor;
use super::broadcast::normalize_axes;

/// The `ord` of [`Tensor::matrix_norm`], NumPy's names: `"fro"` (or [`MatrixOrd::Fro`]), `1`,
/// `-1`, `f64::INFINITY`, `f64::NEG_INFINITY`, and the SVD-based `"nuc"`, `2` and `-2`, which
/// are named so that asking for them gives a clear message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MatrixOrd {
    /// `sqrt(sum |a_ij|^2)`, NumPy's default `ord='fro'`.
    Fro,
    /// The sum of the singular values (`ord='nuc'`): not computed here.
    Nuc,
    /// A numeric order: `1`/`-1` (largest/smallest absolute column sum), `inf`/`-inf`
    /// (largest/smallest absolute row sum), `2`/`-2` (largest/smallest singular value, not
    /// computed here).
    Order(f64),
}

impl From<f64> for MatrixOrd {
    fn from(ord: f64) -> MatrixOrd {
        MatrixOrd::Order(ord)
    }
}

impl From<i32> for MatrixOrd {
    fn from(ord: i32) -> MatrixOrd {
        MatrixOrd::Order(f64::from(ord))
    }
}

/// `"fro"` and `"nuc"` as NumPy spells them; any other string panics when the norm is built.
impl From<&str> for MatrixOrd {
    #[track_caller]
    fn from(ord: &str) -> MatrixOrd {
        match ord {
            "fro" => MatrixOrd::Fro,
            "nuc" => MatrixOrd::Nuc,
            other => {
                panic!("matrix_norm: unknown ord {other:?} (NumPy's names are \"fro\" and \"nuc\")")
            }
        }
    }
}

impl Tensor {
    /// The matrix norm of the planes spanned by `axes = [row, col]`, as NumPy's
    /// `np.linalg.norm(x, ord, axis=(row, col), keepdims=keepdim)`: with `ord` `"fro"`
    /// (`sqrt` of the sum of squares), `1` / `-1` (the largest / smallest sum of absolute values
    /// down a column, i.e. over `row`), `f64::INFINITY` / `f64::NEG_INFINITY` (the largest /
    /// smallest sum along a row, over `col`). The two axes are removed, or kept with size 1
    /// when `keepdim`; other axes are batch axes. Integers and bools are measured in `f32`.
    ///
    /// ```
    /// # use tensor_core::{MatrixOrd, Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1.0f32, -7.0, 3.0, 2.0], &[2, 2]); // [[1, -7], [3, 2]]
    /// let norm = |ord: MatrixOrd, axes: [isize; 2]| {
    ///     evaluate(&a.matrix_norm(ord, axes, false).uop()).to_vec::<f32>()[0]
    /// };
    /// assert_eq!(norm(1.into(), [0, 1]), 9.0);                   // max(|1|+|3|, |-7|+|2|)
    /// assert_eq!(norm(f64::INFINITY.into(), [0, 1]), 8.0);       // max(|1|+|-7|, |3|+|2|)
    /// assert_eq!(norm((-1).into(), [0, 1]), 4.0);
    /// assert_eq!(norm("fro".into(), [-2, -1]), 63.0f32.sqrt());
    /// assert_eq!(norm(1.into(), [1, 0]), 8.0);                   // axes swapped: the inf norm
    /// ```
    ///
    /// # Panics
    ///
    /// Unless `axes` names two distinct axes in range; for `"nuc"`, `2` and `-2`, which need
    /// singular values (not computed here: `"fro"` bounds the spectral norm from above and
    /// `1`/`inf` give `sqrt(norm(1) * norm(inf))` as another bound; exact values need an SVD on
    /// the host); and for any other order, as NumPy raises "Invalid norm order for matrices".
    #[track_caller]
    pub fn matrix_norm(
        &self,
        ord: impl Into<MatrixOrd>,
        axes: [isize; 2],
        keepdim: bool,
    ) -> Tensor {
        let ord = ord.into();
        let shape = self.shape();
        if shape.len() < 2 {
            panic!("matrix_norm: shape {shape:?} has fewer than the two axes of a matrix");
        }
        let plane = normalize_axes("matrix_norm", &axes, &shape); // panics on a bad or repeated axis
        let (row, col) = (axes[0], axes[1]);
        let a = self.cast(self.dtype().to_float()).abs();
        let kept = match ord {
            MatrixOrd::Fro => a.square().sum(axes, true).sqrt(),
            MatrixOrd::Order(1.0) => a.sum(row, true).max(col, true),
            MatrixOrd::Order(-1.0) => a.sum(row, true).min(col, true),
            MatrixOrd::Order(o) if o == f64::INFINITY => a.sum(col, true).max(row, true),
            MatrixOrd::Order(o) if o == f64::NEG_INFINITY => a.sum(col, true).min(row, true),
            MatrixOrd::Nuc => needs_svd("\"nuc\" (the sum of the singular values)"),
            MatrixOrd::Order(2.0) => needs_svd("2 (the largest singular value)"),
            MatrixOrd::Order(-2.0) => needs_svd("-2 (the smallest singular value)"),
            MatrixOrd::Order(o) => panic!(
                "matrix_norm: invalid norm order {o} for matrices (NumPy's are \"fro\", \"nuc\", 1, -1, 2, -2, inf and -inf)"
            ),
        };
        if keepdim {
            return kept;
        }
        let rest: Vec<usize> = (0..shape.len())
            .filter(|d| !plane.contains(d))
            .map(|d| shape[d])
            .collect();
        kept.reshape(&rest)
    }
}

/// The panic for a matrix norm that needs singular values.
#[track_caller]
fn needs_svd(ord: &str) -> ! {
    panic!(
        "matrix_norm: ord {ord} needs a singular value decomposition, which this crate does not compute; use \"fro\" (an upper bound of the spectral norm), 1 or inf, or compute singular values on the host (numpy.linalg.svd, ndarray-linalg)"
    )
}
