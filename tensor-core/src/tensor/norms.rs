//! The orders of matrix norms, NumPy's names for them. [`Tensor::matrix_norm`] is defined with
//! the singular values it may need (`transform::external::linalg`); vector norms are
//! [`Tensor::norm`].

#[cfg(doc)]
use super::Tensor;

/// The `ord` of [`Tensor::matrix_norm`], NumPy's names: `"fro"` (or [`MatrixOrd::Fro`]), `1`,
/// `-1`, `f64::INFINITY`, `f64::NEG_INFINITY`, and the SVD-based `"nuc"`, `2` and `-2`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MatrixOrd {
    /// `sqrt(sum |a_ij|^2)`, NumPy's default `ord='fro'`.
    Fro,
    /// The sum of the singular values (`ord='nuc'`).
    Nuc,
    /// A numeric order: `1`/`-1` (largest/smallest absolute column sum), `inf`/`-inf`
    /// (largest/smallest absolute row sum), `2`/`-2` (largest/smallest singular value).
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
