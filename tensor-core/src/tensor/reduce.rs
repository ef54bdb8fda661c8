//! Reductions over chosen axes: `Reduce` (which keeps reduced axes as size 1) followed by a
//! reshape that drops them unless `keepdim`. `min` is `-max(-x)` (`~max(~x)` for integers),
//! `mean` is `sum * (1/n)`, and `argmax` finds the first maximal position with an arange and
//! a max, as tinygrad does.

use super::Tensor;
use super::broadcast::{Dims, IntoAxes, broadcast_uop, cast_uop, const_uop, resolve_axes};
use super::create::arange_uop;
use super::elementwise::{
    add_uop, complement_uop, eq_uop, mul_uop, ne_uop, neg_uop, not_uop, where_uop,
};
use crate::uop::{DType, Op, ReduceOp, Scalar, UOp};

/// An optional list of axes as one argument: what a caller holding `Option<&[isize]>` (a
/// function parameter, a config field, NumPy's `axis=None` passed through) gives any reduction
/// without matching on it. `None` is every axis, `Some(list)` those axes, `Some(axis)` one.
/// (A bare `None` or axis literal needs no `Axes`: see [`IntoAxes`].)
///
/// ```
/// # use tensor_core::{Axes, Tensor};
/// fn total(x: &Tensor, axes: Option<&[isize]>) -> Tensor {
///     x.sum(Axes::from(axes), false)                        // np.sum(x, axis=axes)
/// }
/// let x = Tensor::ones(&[2, 3], tensor_core::DType::F32);
/// assert_eq!(total(&x, None).shape(), Vec::<usize>::new());
/// assert_eq!(total(&x, Some(&[1])).shape(), vec![2]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axes(Result<Option<Vec<isize>>, String>);

impl IntoAxes for Axes {
    fn into_axes(self) -> Result<Option<Vec<isize>>, String> {
        self.0
    }
}

impl<D: Dims + ?Sized> From<Option<&D>> for Axes {
    fn from(axes: Option<&D>) -> Axes {
        Axes(axes.map(Dims::to_dims).transpose())
    }
}

macro_rules! impl_axes_from_optional_int {
    ($($t:ty),*) => {$(
        impl From<Option<$t>> for Axes {
            fn from(axis: Option<$t>) -> Axes {
                Axes(axis.map(|a| [a].to_dims()).transpose())
            }
        }
        impl From<Option<Vec<$t>>> for Axes {
            fn from(axes: Option<Vec<$t>>) -> Axes {
                Axes(axes.map(|a| a.to_dims()).transpose())
            }
        }
    )*};
}
impl_axes_from_optional_int!(i32, i64, isize, usize);

/// The dtype sums and products accumulate in: bools and narrow ints widen (to `i32`, or `u32`
/// for unsigned), as JAX does; wider types keep their dtype.
pub fn accumulate_dtype(dtype: DType) -> DType {
    match dtype {
        DType::Bool | DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::U16 => DType::U32,
        d => d,
    }
}

/// The dtype a float sum or product accumulates in before it is rounded back: `f32` for the
/// half-precision types (`f16`, `bf16`), as NumPy, PyTorch and JAX do; the dtype itself
/// otherwise.
pub fn float_accumulator(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// `u` reduced by `op` over `axes` (kept as size 1), with sums and products of half-precision
/// floats accumulated in `f32` and rounded once to `u`'s dtype (an `f16` accumulator loses
/// the low bits of every term once the total is large). Every sum the front end and the
/// gradients build goes through here.
pub fn accumulated_reduce(u: &UOp, op: ReduceOp, axes: &[usize]) -> UOp {
    let acc = float_accumulator(u.dtype());
    if acc == u.dtype() || op == ReduceOp::Max {
        return u.reduce(op, axes);
    }
    u.cast(acc).reduce(op, axes).cast(u.dtype())
}

/// `u` reduced by `op` over the (normalized) `axes` in its own dtype (half floats accumulate
/// in `f32`, see [`accumulated_reduce`]); reduced axes are kept as size 1 when `keepdim`,
/// dropped otherwise.
pub(crate) fn reduce_uop(u: &UOp, op: ReduceOp, axes: &[usize], keepdim: bool) -> UOp {
    if axes.is_empty() {
        return u.clone();
    }
    let reduced = accumulated_reduce(u, op, axes);
    if keepdim {
        return reduced;
    }
    let kept: Vec<usize> = u
        .shape_vec()
        .iter()
        .enumerate()
        .filter(|(a, _)| !axes.contains(a))
        .map(|(_, &d)| d)
        .collect();
    reduced.reshape(&kept)
}

/// The maximum over `axes` of a node in its own dtype (bools through `u8`).
fn max_uop(u: &UOp, axes: &[usize], keepdim: bool) -> UOp {
    if u.dtype() == DType::Bool {
        return reduce_uop(&u.cast(DType::U8), ReduceOp::Max, axes, keepdim).cast(DType::Bool);
    }
    reduce_uop(u, ReduceOp::Max, axes, keepdim)
}

/// The order-reversing map used for `min` and `argmin`: `-x`, `~x` for ints, `!x` for bools.
fn reverse_order(u: &UOp) -> UOp {
    match u.dtype() {
        DType::Bool => not_uop(u),
        d if d.is_float() => neg_uop(u),
        _ => complement_uop(u),
    }
}

impl Tensor {
    #[track_caller]
    fn axes_of(&self, op: &str, axes: impl IntoAxes) -> Vec<usize> {
        resolve_axes(op, axes, &self.shape())
    }

    fn all_axes(&self) -> Vec<usize> {
        (0..self.ndim()).collect()
    }

    fn signed(axes: &[usize]) -> Vec<isize> {
        axes.iter().map(|&a| a as isize).collect()
    }

    /// Panics if one of `axes` is empty: the maximum of nothing is undefined (as in NumPy).
    #[track_caller]
    fn require_nonempty(&self, op: &str, axes: &[usize]) {
        let op = super::op_scope::user_op(op);
        let shape = self.shape();
        for &a in axes {
            if shape[a] == 0 {
                panic!(
                    "{op}: cannot reduce the empty axis {a} of shape {shape:?} (there is no identity)"
                );
            }
        }
    }

    /// The sum over `axes` (one axis, several, or `None` for all; see [`IntoAxes`]), keeping them
    /// as size 1 when `keepdim`; bools and narrow ints sum in `i32` (see `accumulate_dtype`).
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    /// assert_eq!(x.sum(0, false).shape(), vec![3]);          // np.sum(x, axis=0)
    /// assert_eq!(x.sum(-1, true).shape(), vec![2, 1]);       // keepdims=True
    /// assert_eq!(x.sum([0, 1], false).shape(), Vec::<usize>::new());
    /// assert_eq!(x.sum(None, true).shape(), vec![1, 1]);     // axis=None
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn sum(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("sum");
        let axes = self.axes_of("sum", axes);
        self.sum_over(&axes, keepdim)
    }

    /// The sum of all elements (a 0-d tensor): `sum(None, false)`.
    pub fn sum_all(&self) -> Tensor {
        self.sum_over(&self.all_axes(), false)
    }

    fn sum_over(&self, axes: &[usize], keepdim: bool) -> Tensor {
        let u = cast_uop(&self.uop(), accumulate_dtype(self.dtype()));
        Tensor::from_uop(reduce_uop(&u, ReduceOp::Add, axes, keepdim))
    }

    /// The product over `axes`; bools and narrow ints multiply in `i32`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn prod(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("prod");
        let axes = self.axes_of("prod", axes);
        let u = cast_uop(&self.uop(), accumulate_dtype(self.dtype()));
        Tensor::from_uop(reduce_uop(&u, ReduceOp::Mul, &axes, keepdim))
    }

    /// The product of all elements: `prod(None, false)`.
    pub fn prod_all(&self) -> Tensor {
        self.prod(None, false)
    }

    /// The maximum over `axes`, in the input dtype.
    ///
    /// # Panics
    ///
    /// Panics on an empty axis.
    #[track_caller]
    pub fn max(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("max");
        let axes = self.axes_of("max", axes);
        self.require_nonempty("max", &axes);
        Tensor::from_uop(max_uop(&self.uop(), &axes, keepdim))
    }

    /// The maximum of all elements: `max(None, false)`.
    ///
    /// # Panics
    ///
    /// Panics for an empty tensor.
    #[track_caller]
    pub fn max_all(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("max_all");
        self.max(None, false)
    }

    /// The minimum over `axes` as `-max(-x)` (`~max(~x)` for integers).
    ///
    /// # Panics
    ///
    /// Panics on an empty axis.
    #[track_caller]
    pub fn min(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("min");
        let axes = self.axes_of("min", axes);
        self.require_nonempty("min", &axes);
        let u = self.uop();
        Tensor::from_uop(reverse_order(&max_uop(&reverse_order(&u), &axes, keepdim)))
    }

    /// The minimum of all elements: `min(None, false)`.
    ///
    /// # Panics
    ///
    /// Panics for an empty tensor.
    #[track_caller]
    pub fn min_all(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("min_all");
        self.min(None, false)
    }

    /// The mean over `axes` as `sum * (1/n)`, in the float type (`f32` for ints and bools). The
    /// mean over an empty axis is NaN, as in NumPy.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2, 3, 4], &[2, 2]);
    /// assert_eq!(evaluate(&x.mean(0, false).uop()).to_vec::<f32>(), vec![2.0, 3.0]);
    /// assert_eq!(evaluate(&x.max(None, false).uop()).to_vec::<i32>(), vec![4]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn mean(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("mean");
        let axes = self.axes_of("mean", axes);
        let shape = self.shape();
        let count: usize = axes.iter().map(|&a| shape[a]).product();
        let float = self.dtype().to_float();
        let sum = reduce_uop(&cast_uop(&self.uop(), float), ReduceOp::Add, &axes, keepdim);
        let scale = const_uop(Scalar::Float(1.0 / count as f64), float, &sum.shape_vec());
        Tensor::from_uop(mul_uop(&sum, &scale))
    }

    /// The mean of all elements: `mean(None, false)`.
    pub fn mean_all(&self) -> Tensor {
        self.mean(None, false)
    }

    /// The population variance over `axes` (NumPy's `var` with `ddof=0`): `mean((x - mean(x))^2)`,
    /// in the float type.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn var(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("var");
        let axes = Tensor::signed(&self.axes_of("var", axes));
        let centered = self.sub(self.mean(&axes, true));
        centered.square().mean(&axes, keepdim)
    }

    /// The population standard deviation over `axes`: `sqrt(var)`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn std(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("std");
        self.var(axes, keepdim).sqrt()
    }

    /// The variance over `axes` with Bessel's `correction` (PyTorch's `correction`, NumPy's
    /// `ddof`): `sum((x - mean(x))^2) / max(0, n - correction)`, in the float type; `1` gives the
    /// unbiased sample variance, and `n <= correction` divides by zero (inf or NaN), as both peers
    /// do.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn var_with(&self, axes: impl IntoAxes, correction: f64, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("var_with");
        let axes = self.axes_of("var_with", axes);
        let shape = self.shape();
        let n: usize = axes.iter().map(|&a| shape[a]).product();
        let signed = Tensor::signed(&axes);
        let centered = self.sub(self.mean(&signed, true));
        let squares = centered.square();
        let total = squares.sum(&signed, keepdim);
        total.div((n as f64 - correction).max(0.0))
    }

    /// The standard deviation with Bessel's `correction`: `sqrt(var_with)`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn std_with(&self, axes: impl IntoAxes, correction: f64, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("std_with");
        self.var_with(axes, correction, keepdim).sqrt()
    }

    /// The vector `ord`-norm of the elements over `axes` taken together, in the float type, as
    /// `torch.linalg.vector_norm` / `jnp.linalg.vector_norm`: `sum(|x|^ord)^(1/ord)`, the maximum
    /// of `|x|` for `f64::INFINITY`, the minimum for `-INFINITY`, the count of non-zeros for `0`.
    /// `norm(2.0, None, false)` is NumPy's default `norm(x)` (the Frobenius norm of a matrix);
    /// NumPy's matrix norms over two axes (`np.linalg.norm(x, 1, axis=(0, 1))`, the largest
    /// column sum, ...) are [`Tensor::matrix_norm`].
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![3.0f32, -4.0], &[2]);
    /// assert_eq!(evaluate(&x.norm(2.0, None, false).uop()).to_vec::<f32>(), vec![5.0]);
    /// assert_eq!(evaluate(&x.norm(1.0, 0, false).uop()).to_vec::<f32>(), vec![7.0]);
    /// assert_eq!(evaluate(&x.norm(f64::INFINITY, 0, false).uop()).to_vec::<f32>(), vec![4.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn norm(&self, ord: f64, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("norm");
        let axes = Tensor::signed(&self.axes_of("norm", axes));
        let a = self.cast(self.dtype().to_float()).abs();
        match ord {
            o if o == f64::INFINITY => a.max(&axes, keepdim),
            o if o == f64::NEG_INFINITY => a.min(&axes, keepdim),
            0.0 => a.ne(0).cast(a.dtype()).sum(&axes, keepdim),
            1.0 => a.sum(&axes, keepdim),
            2.0 => root_at_zero_too(&a.square().sum(&axes, keepdim), |s| s.sqrt()),
            o => root_at_zero_too(&a.pow(o).sum(&axes, keepdim), |s| s.pow(1.0 / o)),
        }
    }

    /// True where any element over `axes` is non-zero (bool).
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn any(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("any");
        let axes = self.axes_of("any", axes);
        let u = cast_uop(&self.uop(), DType::Bool);
        Tensor::from_uop(max_uop(&u, &axes, keepdim))
    }

    /// True where every element over `axes` is non-zero (bool).
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn all(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("all");
        let axes = self.axes_of("all", axes);
        let u = not_uop(&cast_uop(&self.uop(), DType::Bool));
        Tensor::from_uop(not_uop(&max_uop(&u, &axes, keepdim)))
    }

    /// The index (`i64`, as every index an op returns: torch's `argmax`) of the first maximum
    /// over `axes` (of the first NaN if there is one): one axis as NumPy's `argmax(axis=)`,
    /// `None` for the index into the flattened tensor, several axes for the row-major index into
    /// the block they span.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![3, 9, 2, 7, 1, 8], &[2, 3]);
    /// assert_eq!(evaluate(&x.argmax(1, false).uop()).to_vec::<i64>(), vec![1, 2]);
    /// assert_eq!(evaluate(&x.argmax(None, false).uop()).to_vec::<i64>(), vec![1]);
    /// assert_eq!(evaluate(&x.argmin(0, true).uop()).shape, vec![1, 3]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an empty axis.
    #[track_caller]
    pub fn argmax(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("argmax");
        let axes = self.axes_of("argmax", axes);
        self.require_nonempty("argmax", &axes);
        self.first_index_of_max(&self.uop(), &axes, keepdim)
    }

    /// The index of the first maximum of the flattened tensor: `argmax(None, false)`.
    ///
    /// # Panics
    ///
    /// Panics for an empty tensor.
    #[track_caller]
    pub fn argmax_all(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("argmax_all");
        self.argmax(None, false)
    }

    /// The index (`i64`) of the first minimum over `axes`, as [`Tensor::argmax`].
    ///
    /// # Panics
    ///
    /// Panics on an empty axis.
    #[track_caller]
    pub fn argmin(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("argmin");
        let axes = self.axes_of("argmin", axes);
        self.require_nonempty("argmin", &axes);
        self.first_index_of_max(&reverse_order(&self.uop()), &axes, keepdim)
    }

    /// The index of the first minimum of the flattened tensor: `argmin(None, false)`.
    ///
    /// # Panics
    ///
    /// Panics for an empty tensor.
    #[track_caller]
    pub fn argmin_all(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("argmin_all");
        self.argmin(None, false)
    }

    /// The first index of the maximum of `u` (this tensor's value or its order reversal) over
    /// `axes`: the axes are moved last and merged into one, and the result gets the reduced
    /// axes back as size 1 when `keepdim`.
    fn first_index_of_max(&self, u: &UOp, axes: &[usize], keepdim: bool) -> Tensor {
        let shape = u.shape_vec();
        if let [axis] = axes {
            return Tensor::from_uop(first_max_index(u, *axis, keepdim));
        }
        let kept: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
        let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
        let mut merged: Vec<usize> = kept.iter().map(|&a| shape[a]).collect();
        merged.push(axes.iter().map(|&a| shape[a]).product());
        let flat = u.permute(&order).reshape(&merged);
        let index = first_max_index(&flat, kept.len(), false);
        if !keepdim {
            return Tensor::from_uop(index);
        }
        let ones: Vec<usize> = (0..shape.len())
            .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
            .collect();
        Tensor::from_uop(index.reshape(&ones))
    }
}

/// The first index (`i64`) of the maximum of `u` along `axis` (see [`Tensor::argmax`]).
/// `root(s)` of a sum of powers `s >= 0`, 0 where `s` is 0 with a zero gradient there (torch's
/// subgradient of a norm at the zero vector), where the root's derivative is infinite.
fn root_at_zero_too(s: &Tensor, root: impl Fn(&Tensor) -> Tensor) -> Tensor {
    let zero = s.eq(0.0);
    zero.where_(0.0, root(&zero.where_(1.0, s)))
}

fn first_max_index(u: &UOp, axis: usize, keepdim: bool) -> UOp {
    const INDEX: DType = DType::I64;
    let shape = u.shape_vec();
    let n = shape[axis];
    let maxima = broadcast_uop(&max_uop(u, &[axis], true), &shape);
    let mut is_max = eq_uop(u, &maxima);
    if u.dtype().is_float() {
        // A NaN makes the maximum NaN, which equals nothing: pick the first NaN, as NumPy does.
        let is_nan = ne_uop(u, u);
        is_max = UOp::alu(Op::Or, vec![is_max, is_nan]);
    }
    let mut along = vec![1; shape.len()];
    along[axis] = n;
    let countdown = add_uop(
        &neg_uop(&cast_uop(&arange_uop(n), INDEX)),
        &const_uop(Scalar::Int(n as i64), INDEX, &[n]),
    );
    let countdown = broadcast_uop(&countdown.reshape(&along), &shape);
    let zero = const_uop(Scalar::Int(0), INDEX, &shape);
    let score = reduce_uop(
        &where_uop(&is_max, &countdown, &zero),
        ReduceOp::Max,
        &[axis],
        keepdim,
    );
    add_uop(
        &neg_uop(&score),
        &const_uop(Scalar::Int(n as i64), INDEX, &score.shape_vec()),
    )
}
