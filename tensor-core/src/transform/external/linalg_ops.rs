//! Dense linear algebra as external host functions: [`Tensor::solve`], [`Tensor::inv`],
//! [`Tensor::det`], [`Tensor::slogdet`], [`Tensor::cholesky`], [`Tensor::qr`],
//! [`Tensor::eigh`] and [`Tensor::lstsq`], over the last two axes with any leading batch axes.
//!
//! Each op is one [`External`] (built once per shape and dtype) whose `apply`, `jvp` and `vjp`
//! endpoints run the `f64` algorithms of [`super::linalg_decomp`] on every matrix of the call,
//! as [`Tensor::svdvals`] does: pivoting and iteration depend on the values, so they run on the
//! host between kernels. The derivative endpoints use the classical closed forms (listed on
//! each op and in `docs/linalg.md`); they are first-order only (an endpoint is not
//! differentiated again). Under `vmap` a call is batched by `BatchStrategy::Auto`, i.e. one
//! call on the stacked matrices.
//!
//! Failures follow NumPy: a singular matrix in `solve` / `inv` (an exactly zero pivot) and a
//! matrix that is not positive definite in `cholesky` are errors of the realize naming the op
//! (`RuntimeError::External`, NumPy's `LinAlgError`), since the values are known only on the
//! host; `det` of a singular matrix is 0 and `slogdet` gives `(0, -inf)`.

use super::linalg_decomp::{Lu, Mat, cholesky, eigh, qr, solve_lower, solve_upper};
use super::{Dims, ExtArg, External, HostArray, HostCall, InputSpec, OutputSpec};
use crate::tensor::OpScope;
use crate::tensor::Tensor;
use crate::uop::{BatchStrategy, DType};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// A matrix-wise map: `primals` (one matrix per input) to one matrix per output.
type Apply = fn(&[Mat]) -> Vec<Mat>;
/// Primals and tangents (or cotangents) to tangents of the outputs (or of the inputs).
type Derivative = fn(&[Mat], &[Mat]) -> Vec<Mat>;

/// One linear-algebra op: its per-matrix math and the trailing shapes of its operands
/// (rank 0 is a scalar, rank 1 a vector, rank 2 a matrix).
#[derive(Clone)]
struct LinalgOp {
    name: &'static str,
    inputs: Vec<Vec<usize>>,
    outputs: Vec<Vec<usize>>,
    apply: Apply,
    jvp: Derivative,
    vjp: Derivative,
}

impl Tensor {
    /// `X` with `A X = B` for `A = self` (`[..., n, n]`) and `B = b` (`[..., n, k]`, batch
    /// axes broadcast, or a vector `[n]`), as `np.linalg.solve` (NumPy 2's rule for vectors).
    /// By LU with partial pivoting in `f64`; `jvp` `dX = A⁻¹(dB − dA X)`, `vjp`
    /// `B̄ = A⁻ᵀX̄`, `Ā = −B̄Xᵀ`. An exactly singular `A` is an error of the realize (NumPy's
    /// `LinAlgError`). Integers are solved in `f32`; `f64` when either operand is `f64`.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![2.0f64, 1.0, 1.0, 3.0], &[2, 2]);
    /// let x = a.solve(&Tensor::from_vec(vec![3.0f64, 5.0], &[2]));
    /// let x = evaluate(&x.uop()).to_vec::<f64>();
    /// assert!((x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12);
    /// ```
    ///
    /// # Panics
    ///
    /// Unless `self` is a stack of square matrices and `b` has `n` rows.
    #[track_caller]
    pub fn solve(&self, b: &Tensor) -> Tensor {
        let _op = OpScope::enter("solve");
        let n = square("solve", self);
        self.rhs_op("solve", b, n, n, solve_op(n, rhs_cols(b)))
    }

    /// The inverse of every square matrix of the last two axes, as `np.linalg.inv` (LU with
    /// partial pivoting in `f64`); `d(A⁻¹) = −A⁻¹ dA A⁻¹`. An exactly singular matrix is an
    /// error of the realize.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![4.0f64, 7.0, 2.0, 6.0], &[2, 2]);
    /// let inv = evaluate(&a.inv().uop()).to_vec::<f64>();
    /// for (x, want) in inv.iter().zip([0.6, -0.7, -0.2, 0.4]) {
    ///     assert!((x - want).abs() < 1e-12);
    /// }
    /// ```
    #[track_caller]
    pub fn inv(&self) -> Tensor {
        let _op = OpScope::enter("inv");
        let n = square("inv", self);
        let op = LinalgOp {
            name: "inv",
            inputs: vec![vec![n, n]],
            outputs: vec![vec![n, n]],
            apply: inv_apply,
            jvp: inv_jvp,
            vjp: inv_vjp,
        };
        self.unary_op(op).remove(0)
    }

    /// The determinant of every square matrix (shape `[...]`), as `np.linalg.det`: the
    /// product of the LU pivots, 0 for a singular matrix; `d det = det · tr(A⁻¹ dA)` (not
    /// finite at an exactly singular matrix).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert!((evaluate(&a.det().uop()).to_vec::<f64>()[0] + 2.0).abs() < 1e-12);
    /// ```
    #[track_caller]
    pub fn det(&self) -> Tensor {
        let _op = OpScope::enter("det");
        let n = square("det", self);
        let op = LinalgOp {
            name: "det",
            inputs: vec![vec![n, n]],
            outputs: vec![vec![]],
            apply: det_apply,
            jvp: det_jvp,
            vjp: det_vjp,
        };
        self.unary_op(op).remove(0)
    }

    /// `(sign, logabsdet)` of every square matrix, as `np.linalg.slogdet`: `(0, -inf)` for a
    /// singular matrix; `d logabsdet = tr(A⁻¹ dA)`, the sign has no derivative.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![0.0f64, 2.0, 3.0, 0.0], &[2, 2]);
    /// let (sign, logabs) = a.slogdet();
    /// assert_eq!(evaluate(&sign.uop()).to_vec::<f64>(), vec![-1.0]);
    /// assert!((evaluate(&logabs.uop()).to_vec::<f64>()[0] - 6f64.ln()).abs() < 1e-12);
    /// ```
    #[track_caller]
    pub fn slogdet(&self) -> (Tensor, Tensor) {
        let _op = OpScope::enter("slogdet");
        let n = square("slogdet", self);
        let op = LinalgOp {
            name: "slogdet",
            inputs: vec![vec![n, n]],
            outputs: vec![vec![], vec![]],
            apply: slogdet_apply,
            jvp: slogdet_jvp,
            vjp: slogdet_vjp,
        };
        let mut out = self.unary_op(op);
        let logabs = out.remove(1);
        (out.remove(0), logabs)
    }

    /// The lower Cholesky factor `L` (`A = L Lᵀ`) of every symmetric positive-definite
    /// matrix, as `np.linalg.cholesky`. It factors `(A + Aᵀ)/2`, so the derivatives are
    /// those of a symmetric input (JAX's and PyTorch's convention): `dL = L Φ(L⁻¹ dA L⁻ᵀ)`
    /// with `Φ` the lower triangle with its diagonal halved, and
    /// `Ā = sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹)`. A matrix that is not positive definite is an error of the
    /// realize (NumPy's `LinAlgError`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![4.0f64, 2.0, 2.0, 5.0], &[2, 2]);
    /// assert_eq!(evaluate(&a.cholesky().uop()).to_vec::<f64>(), vec![2.0, 0.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn cholesky(&self) -> Tensor {
        let _op = OpScope::enter("cholesky");
        let n = square("cholesky", self);
        let op = LinalgOp {
            name: "cholesky",
            inputs: vec![vec![n, n]],
            outputs: vec![vec![n, n]],
            apply: cholesky_apply,
            jvp: cholesky_jvp,
            vjp: cholesky_vjp,
        };
        self.unary_op(op).remove(0)
    }

    /// The reduced QR factorization of every `m x n` matrix: `Q` `[..., m, k]` with
    /// orthonormal columns and upper triangular `R` `[..., k, n]`, `k = min(m, n)`, as
    /// `np.linalg.qr` / `torch.linalg.qr(mode='reduced')`, by Householder reflections with
    /// LAPACK's signs (`R[j][j]` has the opposite sign of the column's pivot). Derivatives
    /// (JAX's `qr_jvp_rule` and its transpose) need `m >= n` and a full-rank matrix; a wide
    /// matrix's derivative is an error of the realize.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![3.0f64, 1.0, 4.0, 2.0], &[2, 2]);
    /// let (q, r) = a.qr();
    /// let r = evaluate(&r.uop()).to_vec::<f64>();
    /// assert!((r[0] + 5.0).abs() < 1e-12 && r[2] == 0.0);
    /// assert!((evaluate(&q.uop()).to_vec::<f64>()[0] + 0.6).abs() < 1e-12);
    /// ```
    ///
    /// # Panics
    ///
    /// On fewer than two axes.
    #[track_caller]
    pub fn qr(&self) -> (Tensor, Tensor) {
        let _op = OpScope::enter("qr");
        let (m, n) = matrix("qr", self);
        let k = m.min(n);
        let op = LinalgOp {
            name: "qr",
            inputs: vec![vec![m, n]],
            outputs: vec![vec![m, k], vec![k, n]],
            apply: qr_apply,
            jvp: qr_jvp,
            vjp: qr_vjp,
        };
        let mut out = self.unary_op(op);
        let r = out.remove(1);
        (out.remove(0), r)
    }

    /// The eigenvalues (ascending, `[..., n]`) and eigenvectors (the columns of
    /// `[..., n, n]`) of every symmetric matrix, as `np.linalg.eigh`, by the cyclic Jacobi
    /// algorithm on `(A + Aᵀ)/2` (JAX's `symmetrize_input`). Each eigenvector is signed so
    /// that its element of largest magnitude is positive (NumPy's signs are LAPACK's and may
    /// differ). `dw = diag(Vᵀ dA V)`, `dV = V (F ∘ Vᵀ dA V)` with `F_ij = 1/(w_j − w_i)`
    /// (JAX's `eigh_jvp_rule`): not finite where eigenvalues repeat.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![2.0f64, 1.0, 1.0, 2.0], &[2, 2]);
    /// let (w, v) = a.eigh();
    /// let w = evaluate(&w.uop()).to_vec::<f64>();
    /// assert!((w[0] - 1.0).abs() < 1e-12 && (w[1] - 3.0).abs() < 1e-12);
    /// assert!((evaluate(&v.uop()).to_vec::<f64>()[1] - 0.5f64.sqrt()).abs() < 1e-12);
    /// ```
    #[track_caller]
    pub fn eigh(&self) -> (Tensor, Tensor) {
        let _op = OpScope::enter("eigh");
        let n = square("eigh", self);
        let op = LinalgOp {
            name: "eigh",
            inputs: vec![vec![n, n]],
            outputs: vec![vec![n], vec![n, n]],
            apply: eigh_apply,
            jvp: eigh_jvp,
            vjp: eigh_vjp,
        };
        let mut out = self.unary_op(op);
        let v = out.remove(1);
        (out.remove(0), v)
    }

    /// The least-squares solution `X` minimizing `‖A X − B‖` for tall full-rank `A = self`
    /// (`[..., m, n]`, `m >= n`) and `b` (`[..., m, k]` or a vector `[m]`), as
    /// `np.linalg.lstsq(a, b)[0]`: `X = R⁻¹ Qᵀ B` from the Householder QR. Derivatives from
    /// the normal equations `AᵀA X = AᵀB`. A rank-deficient `A` has a zero in `R`'s diagonal
    /// and gives infinities or NaNs (NumPy returns the minimum-norm solution instead).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// // The line through (0, 1), (1, 3), (2, 4): intercept 7/6, slope 3/2.
    /// let a = Tensor::from_vec(vec![1.0f64, 0.0, 1.0, 1.0, 1.0, 2.0], &[3, 2]);
    /// let x = a.lstsq(&Tensor::from_vec(vec![1.0f64, 3.0, 4.0], &[3]));
    /// let x = evaluate(&x.uop()).to_vec::<f64>();
    /// assert!((x[0] - 7.0 / 6.0).abs() < 1e-12 && (x[1] - 1.5).abs() < 1e-12);
    /// ```
    ///
    /// # Panics
    ///
    /// For a wide `A` (`m < n`), and unless `b` has `m` rows.
    #[track_caller]
    pub fn lstsq(&self, b: &Tensor) -> Tensor {
        let _op = OpScope::enter("lstsq");
        let (m, n) = matrix("lstsq", self);
        if m < n {
            panic!(
                "lstsq: the matrix is {m}x{n}, wider than tall; only m >= n (full rank) is supported"
            );
        }
        let k = rhs_cols(b);
        let op = LinalgOp {
            name: "lstsq",
            inputs: vec![vec![m, n], vec![m, k]],
            outputs: vec![vec![n, k]],
            apply: lstsq_apply,
            jvp: lstsq_jvp,
            vjp: lstsq_vjp,
        };
        self.rhs_op("lstsq", b, m, n, op)
    }

    /// `op` on `self` alone, cast to `f32` or `f64`.
    fn unary_op(&self, op: LinalgOp) -> Vec<Tensor> {
        let dtype = float_of(self.dtype());
        external(op, dtype).call(&[ExtArg::from(self.cast(dtype))])
    }

    /// `op` on `self` (`[..., m, n]`) and the right-hand side `b` (a vector `[m]` or
    /// `[..., m, k]`), batch axes broadcast; a vector gives `[..., n]`.
    #[track_caller]
    fn rhs_op(&self, what: &str, b: &Tensor, m: usize, n: usize, op: LinalgOp) -> Tensor {
        let dtype = float_of(DType::promote(self.dtype(), b.dtype()));
        let (a_shape, b_shape) = (self.shape(), b.shape());
        let vector = b_shape.len() == 1;
        let rows = if vector {
            b_shape[0]
        } else if b_shape.len() >= 2 {
            b_shape[b_shape.len() - 2]
        } else {
            panic!(
                "{what}: the right-hand side has shape {b_shape:?}; give a vector [{m}] or a matrix [..., {m}, k]"
            )
        };
        if rows != m {
            panic!(
                "{what}: the matrix is {a_shape:?} but the right-hand side {b_shape:?} has {rows} rows, not {m}"
            );
        }
        let b_mat = if vector {
            b.reshape(&[m, 1])
        } else {
            b.clone()
        };
        let k = b_mat.shape()[b_mat.ndim() - 1];
        let (a_lead, b_lead) = (
            &a_shape[..a_shape.len() - 2],
            &b_mat.shape()[..b_mat.ndim() - 2],
        );
        let lead = Tensor::broadcast_shapes(&[a_lead, b_lead]).unwrap_or_else(|_| {
            panic!("{what}: the batch axes of {a_shape:?} and {b_shape:?} do not broadcast")
        });
        let a = self
            .cast(dtype)
            .expand(&[lead.clone(), vec![m, n]].concat());
        let b_mat = b_mat
            .cast(dtype)
            .expand(&[lead.clone(), vec![m, k]].concat());
        let x = external(op, dtype)
            .call(&[ExtArg::from(a), ExtArg::from(b_mat)])
            .remove(0);
        if vector {
            x.reshape(&[lead, vec![n]].concat())
        } else {
            x
        }
    }
}

fn float_of(dtype: DType) -> DType {
    match dtype {
        DType::F64 => DType::F64,
        _ => DType::F32,
    }
}

/// The columns of a right-hand side (1 for a vector).
fn rhs_cols(b: &Tensor) -> usize {
    let shape = b.shape();
    if shape.len() <= 1 {
        1
    } else {
        shape[shape.len() - 1]
    }
}

#[track_caller]
fn matrix(what: &str, a: &Tensor) -> (usize, usize) {
    let shape = a.shape();
    if shape.len() < 2 {
        panic!("{what}: shape {shape:?} has fewer than the two axes of a matrix");
    }
    (shape[shape.len() - 2], shape[shape.len() - 1])
}

#[track_caller]
fn square(what: &str, a: &Tensor) -> usize {
    let (m, n) = matrix(what, a);
    if m != n {
        panic!(
            "{what}: the matrices of shape {:?} are {m}x{n}, not square",
            a.shape()
        );
    }
    n
}

/// The external of `op` for `dtype`, built once per op, shapes and dtype.
fn external(op: LinalgOp, dtype: DType) -> External {
    type Key = (&'static str, Vec<Vec<usize>>, DType);
    static BUILT: OnceLock<Mutex<HashMap<Key, External>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let key = (op.name, op.inputs.clone(), dtype);
    built.entry(key).or_insert_with(|| build(op, dtype)).clone()
}

fn build(op: LinalgOp, dtype: DType) -> External {
    let dims: Vec<String> = op
        .inputs
        .iter()
        .map(|s| format!("{}x{}", s[0], s[1]))
        .collect();
    let mut builder = External::builder(&format!("{}_{}", op.name, dims.join("_")));
    for shape in &op.inputs {
        builder = builder.input(InputSpec::array(dtype, Dims::Trailing(shape.clone())));
    }
    for out in &op.outputs {
        let out = out.clone();
        builder = builder.output(OutputSpec::new(dtype, move |shapes| {
            let lead = &shapes[0][..shapes[0].len() - 2];
            [lead, &out[..]].concat()
        }));
    }
    let (a, j, v) = (op.clone(), op.clone(), op);
    builder
        .apply(move |c: &HostCall| {
            let operands = primals(c, &a);
            run(&operands, &a.outputs, |m| (a.apply)(m))
        })
        .jvp(move |c: &HostCall| {
            let mut operands = primals(c, &j);
            operands.extend(
                c.tangents()
                    .iter()
                    .zip(&j.inputs)
                    .map(|(t, s)| (t, s.len())),
            );
            let k = j.inputs.len();
            run(&operands, &j.outputs, |m| (j.jvp)(&m[..k], &m[k..]))
        })
        .vjp(move |c: &HostCall| {
            let mut operands = primals(c, &v);
            operands.extend(
                c.cotangents()
                    .iter()
                    .zip(&v.outputs)
                    .map(|(t, s)| (t, s.len())),
            );
            let k = v.inputs.len();
            run(&operands, &v.inputs, |m| (v.vjp)(&m[..k], &m[k..]))
        })
        .vmap_method(BatchStrategy::Auto)
        .build()
}

/// The array inputs of a call with the rank of their trailing (per-matrix) shape.
fn primals<'a>(call: &'a HostCall, op: &LinalgOp) -> Vec<(&'a HostArray, usize)> {
    (0..op.inputs.len()).map(|i| (call.array(i), 2)).collect()
}

/// `f` on every matrix of the stacks `operands` (each with the rank of its trailing shape;
/// leading axes broadcast), its results stacked into arrays of trailing shapes `results`.
fn run(
    operands: &[(&HostArray, usize)],
    results: &[Vec<usize>],
    f: impl Fn(&[Mat]) -> Vec<Mat>,
) -> Vec<HostArray> {
    let dtype = operands[0].0.dtype();
    let stacks: Vec<Stack> = operands
        .iter()
        .map(|(a, rank)| Stack::of(a, *rank))
        .collect();
    let lead = broadcast(stacks.iter().map(|s| s.lead.as_slice()));
    let count: usize = lead.iter().product();
    let mut data: Vec<Vec<f64>> = vec![Vec::new(); results.len()];
    for flat in 0..count {
        let mats: Vec<Mat> = stacks.iter().map(|s| s.matrix(&lead, flat)).collect();
        for (out, mat) in data.iter_mut().zip(f(&mats)) {
            out.extend(mat.data);
        }
    }
    data.into_iter()
        .zip(results)
        .map(|(values, shape)| array_like(dtype, values, &[lead.clone(), shape.clone()].concat()))
        .collect()
}

/// A stack of matrices (or vectors, or scalars, as `1 x k` and `1 x 1` matrices).
struct Stack {
    lead: Vec<usize>,
    rows: usize,
    cols: usize,
    values: Vec<f64>,
}

impl Stack {
    fn of(a: &HostArray, rank: usize) -> Stack {
        let shape = a.shape();
        let (lead, tail) = shape.split_at(shape.len() - rank);
        let (rows, cols) = match tail {
            [] => (1, 1),
            [k] => (1, *k),
            [r, c] => (*r, *c),
            _ => unreachable!("trailing ranks are at most 2"),
        };
        let values = match a.dtype() {
            DType::F64 => a.to_vec::<f64>(),
            _ => a.to_vec::<f32>().into_iter().map(f64::from).collect(),
        };
        Stack {
            lead: lead.to_vec(),
            rows,
            cols,
            values,
        }
    }

    /// The matrix at the flat index `flat` of the broadcast leading shape `lead`.
    fn matrix(&self, lead: &[usize], flat: usize) -> Mat {
        let offset = lead.len() - self.lead.len();
        let (mut rest, mut index, mut stride) = (flat, 0, 1);
        for d in (0..lead.len()).rev() {
            let i = rest % lead[d];
            rest /= lead[d];
            if d >= offset {
                let own = self.lead[d - offset];
                index += if own == 1 { 0 } else { i } * stride;
                stride *= own;
            }
        }
        let size = self.rows * self.cols;
        Mat::new(
            self.rows,
            self.cols,
            self.values[index * size..(index + 1) * size].to_vec(),
        )
    }
}

/// The broadcast of leading shapes (right-aligned, size 1 stretches).
fn broadcast<'a>(leads: impl Iterator<Item = &'a [usize]>) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for lead in leads {
        if lead.len() > out.len() {
            let mut grown = vec![1; lead.len() - out.len()];
            grown.extend(&out);
            out = grown;
        }
        let offset = out.len() - lead.len();
        for (o, &s) in out[offset..].iter_mut().zip(lead) {
            if s != 1 {
                *o = s;
            }
        }
    }
    out
}

fn array_like(dtype: DType, values: Vec<f64>, shape: &[usize]) -> HostArray {
    match dtype {
        DType::F64 => HostArray::new(values, shape),
        _ => HostArray::new(values.into_iter().map(|v| v as f32).collect(), shape),
    }
}

/// The LU factors of a matrix that must be invertible (a singular one is an error of the
/// realize, as NumPy's `LinAlgError: Singular matrix`).
fn invertible(what: &str, a: &Mat) -> Lu {
    let lu = Lu::of(a);
    if lu.singular {
        panic!(
            "{what}: the {n}x{n} matrix is singular (an exactly zero pivot in its LU factorization)",
            n = a.rows
        );
    }
    lu
}

fn solve_op(n: usize, k: usize) -> LinalgOp {
    LinalgOp {
        name: "solve",
        inputs: vec![vec![n, n], vec![n, k]],
        outputs: vec![vec![n, k]],
        apply: |p| vec![invertible("solve", &p[0]).solve(&p[1])],
        jvp: solve_jvp,
        vjp: solve_vjp,
    }
}

fn solve_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let lu = invertible("solve", &p[0]);
    let x = lu.solve(&p[1]);
    vec![lu.solve(&t[1].sub(&t[0].matmul(&x)))]
}

fn solve_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let lu = invertible("solve", &p[0]);
    let x = lu.solve(&p[1]);
    let b_bar = lu.solve_t(&ct[0]);
    vec![b_bar.matmul(&x.t()).scale(-1.0), b_bar]
}

fn inv_apply(p: &[Mat]) -> Vec<Mat> {
    vec![invertible("inv", &p[0]).solve(&Mat::eye(p[0].rows))]
}

fn inv_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let y = inv_apply(p).remove(0);
    vec![y.matmul(&t[0]).matmul(&y).scale(-1.0)]
}

fn inv_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let yt = inv_apply(p).remove(0).t();
    vec![yt.matmul(&ct[0]).matmul(&yt).scale(-1.0)]
}

fn det_apply(p: &[Mat]) -> Vec<Mat> {
    vec![Mat::scalar(Lu::of(&p[0]).det())]
}

fn det_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let lu = Lu::of(&p[0]);
    vec![Mat::scalar(lu.det() * lu.solve(&t[0]).trace())]
}

fn det_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let lu = Lu::of(&p[0]);
    let n = p[0].rows;
    vec![lu.solve_t(&Mat::eye(n)).scale(ct[0].data[0] * lu.det())]
}

fn slogdet_apply(p: &[Mat]) -> Vec<Mat> {
    let (sign, logabs) = Lu::of(&p[0]).slogdet();
    vec![Mat::scalar(sign), Mat::scalar(logabs)]
}

fn slogdet_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let lu = Lu::of(&p[0]);
    vec![Mat::scalar(0.0), Mat::scalar(lu.solve(&t[0]).trace())]
}

fn slogdet_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let n = p[0].rows;
    vec![Lu::of(&p[0]).solve_t(&Mat::eye(n)).scale(ct[1].data[0])]
}

/// The Cholesky factor of `(A + Aᵀ)/2`; not positive definite is an error of the realize.
fn cholesky_factor(a: &Mat) -> Mat {
    cholesky(&a.sym()).unwrap_or_else(|order| {
        panic!(
            "cholesky: the {n}x{n} matrix is not positive definite (its leading minor of order {order} is not)",
            n = a.rows
        )
    })
}

fn cholesky_apply(p: &[Mat]) -> Vec<Mat> {
    vec![cholesky_factor(&p[0])]
}

/// `Φ(X)`: the lower triangle of `X` with its diagonal halved.
fn phi(x: &Mat) -> Mat {
    let mut out = x.tril(0);
    for i in 0..x.rows {
        out.set(i, i, x.at(i, i) / 2.0);
    }
    out
}

fn cholesky_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let l = cholesky_factor(&p[0]);
    // L⁻¹ dS L⁻ᵀ = (L⁻¹ (L⁻¹ dS)ᵀ)ᵀ
    let inner = solve_lower(&l, &solve_lower(&l, &t[0].sym()).t()).t();
    vec![l.matmul(&phi(&inner))]
}

fn cholesky_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let l = cholesky_factor(&p[0]);
    let lt = l.t();
    let middle = phi(&lt.matmul(&ct[0]));
    // L⁻ᵀ P L⁻¹ = (L⁻ᵀ (L⁻ᵀ P)ᵀ)ᵀ
    let grad = solve_upper(&lt, &solve_upper(&lt, &middle).t()).t();
    vec![grad.sym()]
}

fn qr_apply(p: &[Mat]) -> Vec<Mat> {
    let (q, r) = qr(&p[0]);
    vec![q, r]
}

/// The QR factors of a matrix whose derivative is defined (`m >= n`).
fn tall_qr(a: &Mat) -> (Mat, Mat) {
    if a.rows < a.cols {
        panic!(
            "qr: the derivative of the QR factors of a wide {}x{} matrix is not supported (m >= n only, as JAX's)",
            a.rows, a.cols
        );
    }
    qr(a)
}

fn qr_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let (q, r) = tall_qr(&p[0]);
    let dx_rinv = solve_lower(&r.t(), &t[0].t()).t(); // dA R⁻¹
    let c = q.t().matmul(&dx_rinv);
    let low = c.tril(-1);
    let omega = low.sub(&low.t());
    let dq = q.matmul(&omega.sub(&c)).add(&dx_rinv);
    let dr = c.sub(&omega).matmul(&r);
    vec![dq, dr]
}

fn qr_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let (q, r) = tall_qr(&p[0]);
    let (q_bar, r_bar) = (&ct[0], &ct[1]);
    let m = r_bar.matmul(&r.t()).sub(&q.t().matmul(q_bar));
    let n = m.sub(&m.sub(&m.t()).tril(-1));
    let lhs = q.matmul(&n).add(q_bar);
    vec![solve_upper(&r, &lhs.t()).t()] // (Q N + Q̄) R⁻ᵀ
}

fn eigh_apply(p: &[Mat]) -> Vec<Mat> {
    let (w, v) = eigh(&p[0].sym());
    vec![Mat::new(1, w.len(), w), v]
}

/// `F_ij = 1/(w_j − w_i)` off the diagonal, 0 on it.
fn gaps(w: &[f64]) -> Mat {
    let n = w.len();
    let mut f = Mat::zeros(n, n);
    for i in 0..n {
        for j in 0..n {
            if i != j {
                f.set(i, j, 1.0 / (w[j] - w[i]));
            }
        }
    }
    f
}

fn eigh_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let (w, v) = eigh(&p[0].sym());
    let c = v.t().matmul(&t[0].sym()).matmul(&v);
    let dw = (0..w.len()).map(|i| c.at(i, i)).collect();
    let dv = v.matmul(&gaps(&w).zip(&c, |f, x| f * x));
    vec![Mat::new(1, w.len(), dw), dv]
}

fn eigh_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let (w, v) = eigh(&p[0].sym());
    let mut inner = gaps(&w).zip(&v.t().matmul(&ct[1]), |f, x| f * x);
    for (i, wb) in ct[0].data.iter().enumerate() {
        inner.set(i, i, inner.at(i, i) + wb);
    }
    vec![v.matmul(&inner).matmul(&v.t()).sym()]
}

/// `(AᵀA)⁻¹ M = R⁻¹ R⁻ᵀ M` from the QR factor `R` of `A`.
fn normal_solve(r: &Mat, m: &Mat) -> Mat {
    solve_upper(r, &solve_lower(&r.t(), m))
}

fn lstsq_apply(p: &[Mat]) -> Vec<Mat> {
    let (q, r) = qr(&p[0]);
    vec![solve_upper(&r, &q.t().matmul(&p[1]))]
}

fn lstsq_jvp(p: &[Mat], t: &[Mat]) -> Vec<Mat> {
    let (a, b, da, db) = (&p[0], &p[1], &t[0], &t[1]);
    let (q, r) = qr(a);
    let x = solve_upper(&r, &q.t().matmul(b));
    let residual = b.sub(&a.matmul(&x));
    let rhs = da
        .t()
        .matmul(&residual)
        .add(&a.t().matmul(&db.sub(&da.matmul(&x))));
    vec![normal_solve(&r, &rhs)]
}

fn lstsq_vjp(p: &[Mat], ct: &[Mat]) -> Vec<Mat> {
    let (a, b) = (&p[0], &p[1]);
    let (q, r) = qr(a);
    let x = solve_upper(&r, &q.t().matmul(b));
    let residual = b.sub(&a.matmul(&x));
    let g = normal_solve(&r, &ct[0]);
    let ag = a.matmul(&g);
    vec![residual.matmul(&g.t()).sub(&ag.matmul(&x.t())), ag]
}
