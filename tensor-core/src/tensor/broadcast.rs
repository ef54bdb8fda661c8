//! What every op checks before it builds nodes: shape and axis arguments as users write them,
//! negative axes, NumPy broadcasting, and the dtype operands meet at (with JAX-style weak
//! scalars). The panics here are the messages users see, so every function that can panic is
//! `#[track_caller]` and reports the line of the user's call.

use super::Tensor;
use crate::uop::shape::{MAX_ELEMENTS, broadcast, checked_numel};
use crate::uop::{DType, Scalar, Shape, UOp};

/// A list of sizes or axes as users write them: `&[2, -1]`, `&shape`, `&vec![0, 1]`.
///
/// Implemented for slices, arrays and vectors of `i32`, `i64`, `isize` and `usize`, so integer
/// literals need no suffix and a `Shape` can be passed as it is.
pub trait Dims {
    /// The values as signed integers (negative values mean "from the end" or "infer"), or a
    /// message naming the first value an `isize` cannot hold: an unsigned value is never read
    /// as a negative one, so `usize::MAX` is a size too large, not `-1`.
    fn to_dims(&self) -> Result<Vec<isize>, String>;
}

/// `values` as `isize`s, or the message of [`Dims::to_dims`] for the first that does not fit.
fn signed_dims<T>(values: &[T]) -> Result<Vec<isize>, String>
where
    T: Copy + TryInto<isize> + std::fmt::Debug + std::fmt::Display,
{
    values
        .iter()
        .map(|&v| {
            v.try_into()
                .map_err(|_| format!("{v} in {values:?} is larger than isize::MAX"))
        })
        .collect()
}

macro_rules! impl_dims {
    ($($t:ty),*) => {$(
        impl Dims for [$t] {
            fn to_dims(&self) -> Result<Vec<isize>, String> {
                signed_dims(self)
            }
        }
        impl<const N: usize> Dims for [$t; N] {
            fn to_dims(&self) -> Result<Vec<isize>, String> {
                signed_dims(self)
            }
        }
        impl Dims for Vec<$t> {
            fn to_dims(&self) -> Result<Vec<isize>, String> {
                signed_dims(self)
            }
        }
    )*};
}
impl_dims!(i32, i64, isize, usize);

/// The values of `dims` (sizes or axes, as `what` says) as `isize`s, or a panic naming `op`
/// for one too large.
#[track_caller]
pub(crate) fn dims_of<D: Dims + ?Sized>(op: &str, what: &str, dims: &D) -> Vec<isize> {
    let op = super::op_scope::user_op(op);
    match dims.to_dims() {
        Ok(d) => d,
        Err(m) => panic!("{op}: {what} {m}"),
    }
}

/// The axes a reduction (or `flip`) works on, as NumPy's `axis=` argument: one axis (`1`,
/// `-1`), several (`[0, 2]`, `&[0, 2]`, `&axes`), or `None` for every axis (an empty list means
/// no axis at all, as NumPy's `axis=()`).
pub trait IntoAxes {
    /// The axes as signed integers (negative counts from the end); `None` for every axis; an
    /// error for an unsigned axis too large for an `isize` (never read as a negative one).
    fn into_axes(self) -> Result<Option<Vec<isize>>, String>;
}

macro_rules! impl_into_axes_for_int {
    ($($t:ty),*) => {$(
        impl IntoAxes for $t {
            fn into_axes(self) -> Result<Option<Vec<isize>>, String> {
                Ok(Some(signed_dims(&[self])?))
            }
        }
        impl<const N: usize> IntoAxes for [$t; N] {
            fn into_axes(self) -> Result<Option<Vec<isize>>, String> {
                Ok(Some(self.to_dims()?))
            }
        }
    )*};
}
impl_into_axes_for_int!(i32, i64, isize, usize);

impl<D: Dims + ?Sized> IntoAxes for &D {
    fn into_axes(self) -> Result<Option<Vec<isize>>, String> {
        Ok(Some(self.to_dims()?))
    }
}

/// `None` is every axis (NumPy's `axis=None`); `Some(axis)` is that one axis.
impl IntoAxes for Option<isize> {
    fn into_axes(self) -> Result<Option<Vec<isize>>, String> {
        Ok(self.map(|a| vec![a]))
    }
}

/// The normalized, sorted axes `axes` names in a tensor of `shape` (every axis for `None`).
#[track_caller]
pub(crate) fn resolve_axes(op: &str, axes: impl IntoAxes, shape: &[usize]) -> Vec<usize> {
    match axes.into_axes() {
        Ok(Some(list)) => normalize_axes(op, &list, shape),
        Ok(None) => (0..shape.len()).collect(),
        Err(m) => panic!("{op}: axis {m}, out of range for shape {shape:?}"),
    }
}

/// The axis `axis` names in a tensor of `shape`, counting negative axes from the end.
#[track_caller]
pub(crate) fn normalize_axis(op: &str, axis: isize, shape: &[usize]) -> usize {
    normalize_axis_in(op, axis, shape.len(), shape)
}

/// The axis `axis` names among `ndim` axes (`ndim` may exceed the shape's rank by one for ops
/// that insert an axis, like `unsqueeze` and `stack`).
#[track_caller]
pub(crate) fn normalize_axis_in(op: &str, axis: isize, ndim: usize, shape: &[usize]) -> usize {
    match axis_in(op, axis, ndim, shape) {
        Ok(a) => a,
        Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
    }
}

/// The axis `axis` names among `ndim` axes, or the message [`normalize_axis_in`] panics with.
pub(crate) fn axis_in(
    op: &str,
    axis: isize,
    ndim: usize,
    shape: &[usize],
) -> Result<usize, String> {
    let op = super::op_scope::user_op(op);
    let resolved = if axis < 0 { axis + ndim as isize } else { axis };
    if resolved < 0 || resolved >= ndim as isize {
        return Err(format!(
            "{op}: axis {axis} is out of range for shape {shape:?} (valid axes are {} to {})",
            -(ndim as isize),
            ndim as isize - 1
        ));
    }
    Ok(resolved as usize)
}

/// Distinct axes, normalized and sorted; panics on an axis out of range or named twice.
#[track_caller]
pub(crate) fn normalize_axes(op: &str, axes: &[isize], shape: &[usize]) -> Vec<usize> {
    let op = super::op_scope::user_op(op);
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let axis = normalize_axis(op, a, shape);
        if out.contains(&axis) {
            panic!("{op}: axes {axes:?} name axis {axis} twice (shape {shape:?})");
        }
        out.push(axis);
    }
    out.sort_unstable();
    out
}

/// The element count of `shape`, or a panic naming the op and the shape when the count passes
/// [`MAX_ELEMENTS`] (or does not fit a `usize` at all): a shape is checked before anything is
/// built from it, so no size computed later can wrap.
#[track_caller]
pub(crate) fn require_addressable(op: &str, shape: &[usize]) -> usize {
    match addressable(op, shape) {
        Ok(v) => v,
        Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
    }
}

/// The element count of `shape`, or the message [`require_addressable`] panics with.
pub(crate) fn addressable(op: &str, shape: &[usize]) -> Result<usize, String> {
    let op = super::op_scope::user_op(op);
    if let Some(numel) = checked_numel(shape) {
        return Ok(numel);
    }
    if let Some(d) = shape.iter().find(|&&d| d > MAX_ELEMENTS) {
        return Err(format!(
            "{op}: shape {shape:?} has an axis of {d}, longer than the {MAX_ELEMENTS} (2^48) elements a tensor may have"
        ));
    }
    let count = shape
        .iter()
        .try_fold(1u128, |n, &d| n.checked_mul(d as u128))
        .map_or_else(|| "more than 2^128".to_string(), |n| n.to_string());
    Err(format!(
        "{op}: shape {shape:?} has {count} elements, more than the {MAX_ELEMENTS} (2^48) a tensor may have"
    ))
}

/// The NumPy broadcast of `shapes`, or a panic naming the op and every shape.
#[track_caller]
pub(crate) fn broadcast_shapes(op: &str, shapes: &[Shape]) -> Shape {
    let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
    match try_broadcast(op, &refs) {
        Ok(s) => s,
        Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
    }
}

/// The NumPy broadcast of `shapes`, or the message [`broadcast_shapes`] panics with.
pub(crate) fn try_broadcast(op: &str, shapes: &[&[usize]]) -> Result<Shape, String> {
    let op = super::op_scope::user_op(op);
    match broadcast(shapes) {
        Some(s) => addressable(op, &s).map(|_| s),
        None => Err(format!(
            "{op}: shapes {} cannot broadcast",
            list_in_words(&shapes.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>())
        )),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list_in_words(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `u` broadcast to `shape` (which must be a broadcast of its shape): leading size-1 axes are
/// added by a reshape, size-1 axes are stretched by an expand.
pub(crate) fn broadcast_uop(u: &UOp, shape: &[usize]) -> UOp {
    let from = u.shape_vec();
    if from == shape {
        return u.clone();
    }
    let mut padded = vec![1; shape.len() - from.len()];
    padded.extend_from_slice(&from);
    let reshaped = if padded == from {
        u.clone()
    } else {
        u.reshape(&padded)
    };
    if padded == shape {
        reshaped
    } else {
        reshaped.expand(shape)
    }
}

/// A constant of `dtype` filling `shape`: a `Const` reshaped and expanded, never a buffer.
pub(crate) fn const_uop(value: Scalar, dtype: DType, shape: &[usize]) -> UOp {
    let c = UOp::constant(value, dtype);
    if shape.is_empty() {
        return c;
    }
    let ones = vec![1; shape.len()];
    let reshaped = c.reshape(&ones);
    if ones == shape {
        reshaped
    } else {
        reshaped.expand(shape)
    }
}

/// The right-hand side of a binary op: a tensor, or a Rust scalar that takes the tensor's
/// dtype (weak typing, as in JAX: `int_tensor * 2.5` is `f32`, `f16_tensor * 2.5` stays `f16`).
#[derive(Clone, Debug)]
pub enum Operand {
    /// A tensor operand: its dtype takes part in promotion.
    Tensor(Tensor),
    /// A weakly typed scalar: it adapts to the other operands.
    Scalar(Scalar),
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Operand {
        Operand::Tensor(t)
    }
}
impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Operand {
        Operand::Tensor(t.clone())
    }
}
macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand {
            fn from(v: $t) -> Operand {
                Operand::Scalar(v.into())
            }
        }
    )*};
}
scalar_operand!(
    f32, f64, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, bool
);

impl Operand {
    fn shape(&self) -> Shape {
        match self {
            Operand::Tensor(t) => t.shape(),
            Operand::Scalar(_) => vec![],
        }
    }
}

/// The dtype operands meet at: tensors promote by `DType::promote`; a weak scalar adopts it,
/// except that a float scalar lifts an integer or bool result to `f32` and an int scalar lifts
/// a bool result to `i32`. With no tensor at all, floats default to `f32` and ints to `i32`.
pub(crate) fn result_dtype(operands: &[Operand]) -> DType {
    let strong = operands
        .iter()
        .filter_map(|o| match o {
            Operand::Tensor(t) => Some(t.dtype()),
            Operand::Scalar(_) => None,
        })
        .reduce(DType::promote);
    let mut dtype = strong.unwrap_or(DType::Bool);
    for o in operands {
        if let Operand::Scalar(s) = o {
            dtype = join_weak(dtype, *s);
        }
    }
    dtype
}

fn join_weak(dtype: DType, s: Scalar) -> DType {
    match s {
        Scalar::Float(_) if !dtype.is_float() => DType::F32,
        Scalar::Int(_) if dtype == DType::Bool => DType::I32,
        _ => dtype,
    }
}

/// The operands as nodes of one dtype and one shape, ready for an elementwise op: cast to
/// [`result_dtype`], broadcast to the NumPy broadcast of their shapes.
#[track_caller]
pub(crate) fn elementwise_operands(op: &str, operands: &[Operand]) -> (Vec<UOp>, DType) {
    let op = super::op_scope::user_op(op);
    let dtype = result_dtype(operands);
    let shapes: Vec<Shape> = operands.iter().map(Operand::shape).collect();
    let shape = broadcast_shapes(op, &shapes);
    let uops = operands
        .iter()
        .map(|o| match o {
            Operand::Tensor(t) => broadcast_uop(&cast_uop(&t.uop(), dtype), &shape),
            Operand::Scalar(s) => super::value::operand_uop(*s, dtype, &shape),
        })
        .collect();
    (uops, dtype)
}

/// `u` cast to `dtype`, or `u` itself when it already has it.
pub(crate) fn cast_uop(u: &UOp, dtype: DType) -> UOp {
    if u.dtype() == dtype {
        u.clone()
    } else {
        u.cast(dtype)
    }
}
