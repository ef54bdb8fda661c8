//! Linear algebra computed on the host as external functions: the singular values of a stack
//! of matrices ([`Tensor::svdvals`]), with their derivatives, and the matrix norms that need
//! them ([`Tensor::matrix_norm`]'s `"nuc"`, `2` and `-2`).
//!
//! The singular values come from a one-sided Jacobi SVD in `f64` (columns rotated pairwise
//! until orthogonal), accurate to a few ulps of the largest value. Their derivatives are the
//! classical ones, exact where the singular values are distinct: `dσ_i = u_iᵀ dA v_i` (the
//! `jvp` endpoint) and `Ā = U diag(σ̄) Vᵀ` (the `vjp` endpoint). The calls run on the host
//! between kernels, as every external function does, and batch under `vmap` by taking the
//! stacked matrices in one call.

use super::{Dims, ExtArg, External, HostArray, HostCall, InputSpec, OutputSpec};
use crate::tensor::normalize_axes;
use crate::tensor::{MatrixOrd, Tensor};
use crate::uop::{BatchStrategy, DType};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

impl Tensor {
    /// The singular values of the matrices in the last two axes, largest first: shape
    /// `[..., min(m, n)]` for `[..., m, n]`, as `torch.linalg.svdvals` and
    /// `jnp.linalg.svd(a, compute_uv=False)`. Differentiable (`jvp` and `vjp`; exact where the
    /// values are distinct) and batched by `vmap`. Integers and bools are measured in `f32`,
    /// half floats in `f32` too.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![3.0f32, 0.0, 0.0, -4.0, 0.0, 0.0], &[3, 2]);
    /// let s = evaluate(&a.svdvals().uop()).to_vec::<f32>();
    /// assert_eq!(s, vec![4.0, 3.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// On a tensor with fewer than two axes.
    #[track_caller]
    pub fn svdvals(&self) -> Tensor {
        let shape = self.shape();
        if shape.len() < 2 {
            panic!("svdvals: shape {shape:?} has fewer than the two axes of a matrix");
        }
        let dtype = match self.dtype() {
            DType::F64 => DType::F64,
            _ => DType::F32,
        };
        let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        svdvals_external(m, n, dtype)
            .call(&[ExtArg::from(self.cast(dtype))])
            .remove(0)
    }

    /// The matrix norm of the planes spanned by `axes = [row, col]`, as NumPy's
    /// `np.linalg.norm(x, ord, axis=(row, col), keepdims=keepdim)`: with `ord` `"fro"`
    /// (`sqrt` of the sum of squares), `"nuc"` (the sum of the singular values), `1` / `-1`
    /// (the largest / smallest sum of absolute values down a column, i.e. over `row`),
    /// `f64::INFINITY` / `f64::NEG_INFINITY` (the largest / smallest sum along a row, over
    /// `col`), `2` / `-2` (the largest / smallest singular value, [`Tensor::svdvals`]). The
    /// two axes are removed, or kept with size 1 when `keepdim`; other axes are batch axes.
    /// Integers and bools are measured in `f32`.
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
    /// // The singular values of [[1, -7], [3, 2]] are 7.281706 and 3.158600 (NumPy).
    /// assert!((norm(2.into(), [0, 1]) - 7.281_706).abs() < 1e-5);
    /// assert!((norm((-2).into(), [0, 1]) - 3.158_600).abs() < 1e-5);
    /// assert!((norm("nuc".into(), [0, 1]) - 10.440_307).abs() < 1e-5);
    /// ```
    ///
    /// # Panics
    ///
    /// Unless `axes` names two distinct axes in range, and for any other order, as NumPy
    /// raises "Invalid norm order for matrices".
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
        let singular = || self.plane_singular_values(plane[0], plane[1]);
        let kept = match ord {
            MatrixOrd::Fro => a.square().sum(axes, true).sqrt(),
            MatrixOrd::Order(1.0) => a.sum(row, true).max(col, true),
            MatrixOrd::Order(-1.0) => a.sum(row, true).min(col, true),
            MatrixOrd::Order(o) if o == f64::INFINITY => a.sum(col, true).max(row, true),
            MatrixOrd::Order(o) if o == f64::NEG_INFINITY => a.sum(col, true).min(row, true),
            MatrixOrd::Nuc => singular().sum(-1, false),
            MatrixOrd::Order(2.0) => singular().max(-1, false),
            MatrixOrd::Order(-2.0) => singular().min(-1, false),
            MatrixOrd::Order(o) => panic!(
                "matrix_norm: invalid norm order {o} for matrices (NumPy's are \"fro\", \"nuc\", 1, -1, 2, -2, inf and -inf)"
            ),
        };
        let rest: Vec<usize> = (0..shape.len())
            .filter(|d| !plane.contains(d))
            .map(|d| shape[d])
            .collect();
        let reduced = kept.reshape(&rest);
        if !keepdim {
            return reduced;
        }
        let mut kept_shape = shape.clone();
        kept_shape[plane[0]] = 1;
        kept_shape[plane[1]] = 1;
        reduced.reshape(&kept_shape)
    }

    /// The singular values of the planes `(row, col)` (normalized axes), batch axes first.
    fn plane_singular_values(&self, row: usize, col: usize) -> Tensor {
        let rank = self.ndim();
        let mut order: Vec<isize> = (0..rank)
            .filter(|&d| d != row && d != col)
            .map(|d| d as isize)
            .collect();
        order.extend([row as isize, col as isize]);
        self.permute(&order).svdvals()
    }
}

/// The external function of the singular values of `m x n` matrices of `dtype`, built once.
fn svdvals_external(m: usize, n: usize, dtype: DType) -> External {
    type Built = HashMap<(usize, usize, DType), External>;
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    built
        .entry((m, n, dtype))
        .or_insert_with(|| {
            let k = m.min(n);
            External::builder(&format!("svdvals_{m}x{n}"))
                .input(InputSpec::array(dtype, Dims::Trailing(vec![m, n])))
                .output(OutputSpec::new(dtype, move |shapes| {
                    let lead = &shapes[0][..shapes[0].len() - 2];
                    [lead, &[k]].concat()
                }))
                .apply(move |c: &HostCall| vec![apply(c, m, n)])
                .jvp(move |c: &HostCall| vec![jvp(c, m, n)])
                .vjp(move |c: &HostCall| vec![vjp(c, m, n)])
                .vmap_method(BatchStrategy::Auto)
                .build()
        })
        .clone()
}

/// The singular values of every matrix of the call's input.
fn apply(call: &HostCall, m: usize, n: usize) -> HostArray {
    let a = call.array(0);
    let (lead, matrices) = matrices_of(a, m, n);
    let values: Vec<f64> = matrices
        .iter()
        .flat_map(|mat| Svd::of(mat, m, n).values)
        .collect();
    array_like(a.dtype(), values, &[lead, vec![m.min(n)]].concat())
}

/// `dσ_i = u_iᵀ dA v_i` for every matrix (primal and tangent stacks broadcast).
fn jvp(call: &HostCall, m: usize, n: usize) -> HostArray {
    let (a, t) = (call.array(0), &call.tangents()[0]);
    let (lead_a, primal) = matrices_of(a, m, n);
    let (lead_t, tangent) = matrices_of(t, m, n);
    let (lead, count) = broadcast_lead(&lead_a, primal.len(), &lead_t, tangent.len());
    let mut out = Vec::with_capacity(count * m.min(n));
    for i in 0..count {
        let svd = Svd::of(&primal[i % primal.len()], m, n);
        let da = &tangent[i % tangent.len()];
        for (u, v) in svd.left.iter().zip(&svd.right) {
            out.push(bilinear(u, da, v, n));
        }
    }
    array_like(a.dtype(), out, &[lead, vec![m.min(n)]].concat())
}

/// `Ā = U diag(σ̄) Vᵀ` for every matrix (primal and cotangent stacks broadcast).
fn vjp(call: &HostCall, m: usize, n: usize) -> HostArray {
    let (a, ct) = (call.array(0), &call.cotangents()[0]);
    let (lead_a, primal) = matrices_of(a, m, n);
    let k = m.min(n);
    let (lead_c, cotangent) = vectors_of(ct, k);
    let (lead, count) = broadcast_lead(&lead_a, primal.len(), &lead_c, cotangent.len());
    let mut out = Vec::with_capacity(count * m * n);
    for i in 0..count {
        let svd = Svd::of(&primal[i % primal.len()], m, n);
        let weights = &cotangent[i % cotangent.len()];
        let mut grad = vec![0.0; m * n];
        for ((u, v), w) in svd.left.iter().zip(&svd.right).zip(weights) {
            for r in 0..m {
                for c in 0..n {
                    grad[r * n + c] += w * u[r] * v[c];
                }
            }
        }
        out.extend(grad);
    }
    array_like(a.dtype(), out, &[lead, vec![m, n]].concat())
}

fn bilinear(u: &[f64], a: &[f64], v: &[f64], n: usize) -> f64 {
    u.iter()
        .enumerate()
        .map(|(r, ur)| ur * (0..n).map(|c| a[r * n + c] * v[c]).sum::<f64>())
        .sum()
}

/// The leading shape with more matrices (one side may have one: it is broadcast).
fn broadcast_lead(a: &[usize], na: usize, b: &[usize], nb: usize) -> (Vec<usize>, usize) {
    if nb >= na {
        (b.to_vec(), nb)
    } else {
        (a.to_vec(), na)
    }
}

fn as_f64s(a: &HostArray) -> Vec<f64> {
    match a.dtype() {
        DType::F64 => a.to_vec::<f64>(),
        _ => a.to_vec::<f32>().into_iter().map(f64::from).collect(),
    }
}

/// The leading axes of a `[..., m, n]` array and its matrices, row-major.
fn matrices_of(a: &HostArray, m: usize, n: usize) -> (Vec<usize>, Vec<Vec<f64>>) {
    let (lead, rows) = vectors_of(a, m * n);
    (lead[..lead.len().saturating_sub(1)].to_vec(), rows)
}

/// The leading axes of an array whose elements come in runs of `len`, and those runs.
fn vectors_of(a: &HostArray, len: usize) -> (Vec<usize>, Vec<Vec<f64>>) {
    let shape = a.shape();
    let lead = shape[..shape.len().saturating_sub(1)].to_vec();
    let values = as_f64s(a);
    let runs = values.chunks(len.max(1)).map(<[f64]>::to_vec).collect();
    (lead, runs)
}

fn array_like(dtype: DType, values: Vec<f64>, shape: &[usize]) -> HostArray {
    match dtype {
        DType::F64 => HostArray::new(values, shape),
        _ => HostArray::new(values.into_iter().map(|v| v as f32).collect(), shape),
    }
}

/// A thin SVD: the singular values, largest first, with their left and right vectors.
struct Svd {
    values: Vec<f64>,
    left: Vec<Vec<f64>>,
    right: Vec<Vec<f64>>,
}

impl Svd {
    /// The SVD of the row-major `m x n` matrix `a`, by one-sided Jacobi rotations of the
    /// columns of `a` (or of `aᵀ` when it is wider than tall).
    fn of(a: &[f64], m: usize, n: usize) -> Svd {
        if m < n {
            let transposed: Vec<f64> = (0..n * m).map(|i| a[(i % m) * n + i / m]).collect();
            let svd = Svd::of(&transposed, n, m);
            return Svd {
                values: svd.values,
                left: svd.right,
                right: svd.left,
            };
        }
        let mut cols: Vec<Vec<f64>> = (0..n)
            .map(|c| (0..m).map(|r| a[r * n + c]).collect())
            .collect();
        let mut v: Vec<Vec<f64>> = (0..n)
            .map(|c| (0..n).map(|r| f64::from(u8::from(r == c))).collect())
            .collect();
        for _sweep in 0..60 {
            let mut rotated = false;
            for p in 0..n {
                for q in p + 1..n {
                    rotated |= rotate(&mut cols, &mut v, p, q);
                }
            }
            if !rotated {
                break;
            }
        }
        let norms: Vec<f64> = cols.iter().map(|c| dot(c, c).sqrt()).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| norms[j].total_cmp(&norms[i]));
        Svd {
            values: order.iter().map(|&i| norms[i]).collect(),
            left: order
                .iter()
                .map(|&i| {
                    let s = norms[i];
                    cols[i]
                        .iter()
                        .map(|x| if s > 0.0 { x / s } else { 0.0 })
                        .collect()
                })
                .collect(),
            right: order.iter().map(|&i| v[i].clone()).collect(),
        }
    }
}

/// One Jacobi rotation making columns `p` and `q` orthogonal; false when they already are.
fn rotate(cols: &mut [Vec<f64>], v: &mut [Vec<f64>], p: usize, q: usize) -> bool {
    let (alpha, beta, gamma) = (
        dot(&cols[p], &cols[p]),
        dot(&cols[q], &cols[q]),
        dot(&cols[p], &cols[q]),
    );
    if gamma == 0.0 || gamma.abs() <= 1e-15 * (alpha * beta).sqrt() {
        return false;
    }
    let zeta = (beta - alpha) / (2.0 * gamma);
    let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
    let c = 1.0 / (1.0 + t * t).sqrt();
    let s = c * t;
    for vectors in [cols, v] {
        let (lo, hi) = vectors.split_at_mut(q);
        for (x, y) in lo[p].iter_mut().zip(hi[0].iter_mut()) {
            let (xp, yq) = (*x, *y);
            *x = c * xp - s * yq;
            *y = s * xp + c * yq;
        }
    }
    true
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jacobi_svd_reconstructs_its_matrix() {
        let (m, n) = (4, 3);
        let a: Vec<f64> = (0..m * n).map(|i| ((i * 7 % 11) as f64) - 5.0).collect();
        for (rows, cols, matrix) in [
            (m, n, a.clone()),
            (n, m, {
                (0..n * m)
                    .map(|i| a[(i % m) * n + i / m])
                    .collect::<Vec<f64>>()
            }),
        ] {
            let svd = Svd::of(&matrix, rows, cols);
            assert!(
                svd.values.windows(2).all(|w| w[0] >= w[1]),
                "{:?}",
                svd.values
            );
            for r in 0..rows {
                for c in 0..cols {
                    let rebuilt: f64 = (0..svd.values.len())
                        .map(|i| svd.values[i] * svd.left[i][r] * svd.right[i][c])
                        .sum();
                    assert!((rebuilt - matrix[r * cols + c]).abs() < 1e-10);
                }
            }
        }
    }
}
