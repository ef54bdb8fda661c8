//! Movement ops: new views of the same elements (reshape, permute, expand, pad, shrink, flip)
//! and the conveniences built from them (slicing, squeeze, flatten). Negative axes count from
//! the end everywhere.

use super::Tensor;
use super::broadcast::{
    Dims, IntoAxes, addressable, broadcast_uop, const_uop, dims_of, normalize_axes, normalize_axis,
    normalize_axis_in, require_addressable, resolve_axes, try_broadcast,
};
use super::elementwise::where_uop;
use super::error::ShapeError;
use crate::uop::shape::MAX_ELEMENTS;
use crate::uop::{DType, Op, Scalar, Shape};

impl Tensor {
    /// The same elements in row-major order under a new shape; one size may be `-1` (inferred).
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let x = Tensor::arange(6);
    /// assert_eq!(x.reshape(&[2, -1]).shape(), vec![2, 3]);
    /// assert!(x.try_reshape(&[4, -1]).is_err());
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when the element counts differ, on more than one `-1` or on a negative size;
    /// [`Tensor::try_reshape`] returns the error instead.
    #[track_caller]
    pub fn reshape<D: Dims + ?Sized>(&self, shape: &D) -> Tensor {
        let _op = super::op_scope::OpScope::enter("reshape");
        match self.try_reshape(shape) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::reshape`], with a shape that does not fit as an error instead of a panic.
    pub fn try_reshape<D: Dims + ?Sized>(&self, shape: &D) -> Result<Tensor, ShapeError> {
        let from = self.shape();
        let fail = |m: String| ShapeError::new("reshape", m);
        let dims = shape
            .to_dims()
            .map_err(|m| fail(format!("reshape: size {m}")))?;
        let to = infer_reshape(&from, &dims).map_err(fail)?;
        if to == from {
            return Ok(self.clone());
        }
        Ok(Tensor::from_uop(self.uop().reshape(&to)))
    }

    /// The axes reordered: axis `i` of the result is axis `order[i]` of `self` (NumPy's
    /// `transpose(x, order)`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::zeros(&[2, 3, 4], DType::F32);
    /// assert_eq!(x.permute(&[2, 0, 1]).shape(), vec![4, 2, 3]);
    /// assert_eq!(x.transpose(0, -1).shape(), vec![4, 3, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics unless `order` names every axis once.
    #[track_caller]
    pub fn permute<D: Dims + ?Sized>(&self, order: &D) -> Tensor {
        let _op = super::op_scope::OpScope::enter("permute");
        let shape = self.shape();
        let dims = dims_of("permute", "axis", order);
        if dims.len() != shape.len() {
            panic!(
                "permute: order {dims:?} does not name each of the {} axes of shape {shape:?} once",
                shape.len()
            );
        }
        normalize_axes("permute", &dims, &shape); // panics on an axis out of range or repeated
        let mut perm = Vec::with_capacity(dims.len());
        for &d in &dims {
            perm.push(normalize_axis("permute", d, &shape));
        }
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return self.clone();
        }
        Tensor::from_uop(self.uop().permute(&perm))
    }

    /// Axes `a` and `b` swapped (NumPy's `swapaxes`).
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("transpose");
        let shape = self.shape();
        let (a, b) = (
            normalize_axis("transpose", a, &shape),
            normalize_axis("transpose", b, &shape),
        );
        let mut order: Vec<usize> = (0..shape.len()).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// Broadcast to `shape` by NumPy's rules: leading axes may be added, size-1 axes are stretched;
    /// `-1` keeps an existing axis's size.
    ///
    /// # Panics
    ///
    /// Panics when an axis is neither 1 nor the target size, or the target has fewer axes;
    /// [`Tensor::try_expand`] returns the error.
    #[track_caller]
    pub fn expand<D: Dims + ?Sized>(&self, shape: &D) -> Tensor {
        let _op = super::op_scope::OpScope::enter("expand");
        match self.try_expand(shape) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::expand`], with a shape it cannot broadcast to as an error instead of a panic.
    pub fn try_expand<D: Dims + ?Sized>(&self, shape: &D) -> Result<Tensor, ShapeError> {
        let fail = |m: String| ShapeError::new("expand", m);
        let dims = shape
            .to_dims()
            .map_err(|m| fail(format!("expand: size {m}")))?;
        let to = expand_shape("expand", &self.shape(), &dims).map_err(fail)?;
        Ok(Tensor::from_uop(broadcast_uop(&self.uop(), &to)))
    }

    /// Broadcast to `shape` by NumPy's rules (as [`Tensor::expand`] without `-1`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2, 3], &[3]);
    /// assert_eq!(evaluate(&x.broadcast_to(&[2, 3]).uop()).to_vec::<i32>(), vec![1, 2, 3, 1, 2, 3]);
    /// assert!(x.try_broadcast_to(&[3, 2]).is_err());
    /// ```
    ///
    /// # Panics
    ///
    /// Where the shapes do not broadcast; [`Tensor::try_broadcast_to`] returns the error.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("broadcast_to");
        match self.try_broadcast_to(shape) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::broadcast_to`], with a shape it cannot broadcast to as an error instead of a
    /// panic.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let x = Tensor::zeros(&[2, 1], DType::F32);
    /// assert_eq!(x.try_broadcast_to(&[4, 2, 5]).unwrap().shape(), vec![4, 2, 5]);
    /// let err = x.try_broadcast_to(&[3, 5]).unwrap_err();
    /// assert!(err.message.starts_with("broadcast_to: cannot broadcast shape [2, 1] to [3, 5]"));
    /// ```
    pub fn try_broadcast_to(&self, shape: &[usize]) -> Result<Tensor, ShapeError> {
        let fail = |m: String| ShapeError::new("broadcast_to", m);
        let dims: Vec<isize> = match shape.iter().map(|&d| isize::try_from(d)).collect() {
            Ok(d) => d,
            Err(_) => return Err(fail(format!("broadcast_to: shape {shape:?} is too large"))),
        };
        let to = expand_shape("broadcast_to", &self.shape(), &dims).map_err(fail)?;
        Ok(Tensor::from_uop(broadcast_uop(&self.uop(), &to)))
    }

    /// The shape NumPy's broadcasting gives operands of `shapes` (NumPy's `broadcast_shapes`),
    /// or the error every elementwise op (`+`, [`Tensor::maximum`], [`Tensor::where_`], ...)
    /// panics with for them: the way to check operands before a binary op. Those ops have no
    /// fallible twins of their own, since broadcasting is the only shape check they make.
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// assert_eq!(Tensor::broadcast_shapes(&[&[2, 1], &[3]]).unwrap(), vec![2, 3]);
    /// let err = Tensor::broadcast_shapes(&[&[2, 3], &[4]]).unwrap_err();
    /// assert_eq!(err.message, "broadcast: shapes [2, 3] and [4] cannot broadcast");
    /// ```
    pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Shape, ShapeError> {
        try_broadcast("broadcast", shapes).map_err(|m| ShapeError::new("broadcast", m))
    }

    /// Zeros added `(before, after)` each axis: `pad_mode(pads, PadMode::Constant(0))` for
    /// non-negative pads. [`Tensor::pad_mode`] is the front door for every mode; this is the
    /// primitive it is built on, kept under NumPy's default.
    ///
    /// # Panics
    ///
    /// Panics unless there is one pair per axis.
    #[track_caller]
    pub fn pad(&self, pads: &[(usize, usize)]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("pad");
        let shape = self.shape();
        if pads.len() != shape.len() {
            panic!(
                "pad: {} (before, after) pairs given for shape {shape:?} with {} axes",
                pads.len(),
                shape.len()
            );
        }
        if pads.iter().all(|&(b, e)| b == 0 && e == 0) {
            return self.clone();
        }
        let padded: Option<Shape> = shape
            .iter()
            .zip(pads)
            .map(|(&d, &(b, e))| d.checked_add(b)?.checked_add(e))
            .collect();
        match padded {
            Some(padded) => require_addressable("pad", &padded),
            None => panic!("pad: pads {pads:?} overflow the sizes of shape {shape:?}"),
        };
        let begins: Vec<usize> = pads.iter().map(|p| p.0).collect();
        let ends: Vec<usize> = pads.iter().map(|p| p.1).collect();
        Tensor::from_uop(self.uop().pad(&begins, &ends))
    }

    /// `value` added `(before, after)` each axis: a zero pad, then `Where` over a padded mask;
    /// `pad_mode(pads, PadMode::Constant(value))` for non-negative pads (see
    /// [`Tensor::pad_mode`], the front door for every mode).
    ///
    /// # Panics
    ///
    /// Unless there is one pair per axis, or when the padded shape has more elements than a tensor
    /// may hold.
    #[track_caller]
    pub fn pad_value(&self, pads: &[(usize, usize)], value: impl Into<Scalar>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("pad_value");
        let padded = self.pad(pads);
        let mask =
            Tensor::from_uop(const_uop(Scalar::Bool(true), DType::Bool, &self.shape())).pad(pads);
        let fill = super::value::operand_uop(value.into(), self.dtype(), &padded.shape());
        Tensor::from_uop(where_uop(&mask.uop(), &padded.uop(), &fill))
    }

    /// The elements `[begin, end)` of each axis.
    ///
    /// # Panics
    ///
    /// Panics unless there is one pair per axis, each within its axis.
    #[track_caller]
    pub fn shrink(&self, bounds: &[(usize, usize)]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("shrink");
        let shape = self.shape();
        if bounds.len() != shape.len() {
            panic!(
                "shrink: {} (begin, end) pairs given for shape {shape:?} with {} axes",
                bounds.len(),
                shape.len()
            );
        }
        for (axis, (&(b, e), &d)) in bounds.iter().zip(&shape).enumerate() {
            if b > e || e > d {
                panic!(
                    "shrink: bounds ({b}, {e}) do not fit axis {axis} of shape {shape:?} (need begin <= end <= {d})"
                );
            }
        }
        if bounds
            .iter()
            .zip(&shape)
            .all(|(&(b, e), &d)| b == 0 && e == d)
        {
            return self.clone();
        }
        let begins: Vec<usize> = bounds.iter().map(|p| p.0).collect();
        let ends: Vec<usize> = bounds.iter().map(|p| p.1).collect();
        Tensor::from_uop(self.uop().shrink(&begins, &ends))
    }

    /// Elements `start..end` along `axis`, as Python slicing: negative positions count from the end
    /// and positions past either end are clamped (so the result may be empty).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::arange(5);
    /// assert_eq!(evaluate(&x.slice(0, 1, -1).uop()).to_vec::<i32>(), vec![1, 2, 3]); // x[1:-1]
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn slice(&self, axis: isize, start: isize, end: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("slice");
        let shape = self.shape();
        let axis = normalize_axis("slice", axis, &shape);
        let n = shape[axis] as isize;
        let clamp = |p: isize| (if p < 0 { p + n } else { p }).clamp(0, n) as usize;
        let (b, e) = (clamp(start), clamp(end));
        self.shrink_axis(axis, b, e.max(b))
    }

    /// `len` elements from `start` along `axis` (negative `start` counts from the end).
    ///
    /// # Panics
    ///
    /// On an axis out of range or when the elements do not fit the axis.
    #[track_caller]
    pub fn narrow(&self, axis: isize, start: isize, len: usize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("narrow");
        let shape = self.shape();
        let ax = normalize_axis("narrow", axis, &shape);
        let n = shape[ax];
        let begin = if start < 0 { start + n as isize } else { start };
        let end = usize::try_from(begin).ok().and_then(|b| b.checked_add(len));
        if end.is_none_or(|e| e > n) {
            panic!("narrow: {len} elements from {start} do not fit axis {axis} of shape {shape:?}");
        }
        self.shrink_axis(ax, begin as usize, begin as usize + len)
    }

    fn shrink_axis(&self, axis: usize, begin: usize, end: usize) -> Tensor {
        let mut bounds: Vec<(usize, usize)> = self.shape().iter().map(|&d| (0, d)).collect();
        bounds[axis] = (begin, end);
        self.shrink(&bounds)
    }

    /// The elements in reverse order along `axes` (`None`: every axis, as NumPy's `flip`).
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn flip(&self, axes: impl IntoAxes) -> Tensor {
        let _op = super::op_scope::OpScope::enter("flip");
        let shape = self.shape();
        let axes = resolve_axes("flip", axes, &shape);
        if axes.is_empty() {
            return self.clone();
        }
        let flags: Vec<bool> = (0..shape.len()).map(|a| axes.contains(&a)).collect();
        Tensor::from_uop(self.uop().flip(&flags))
    }

    /// `axis` (which must have size 1) removed.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::zeros(&[3], DType::F32).unsqueeze(0);   // x[None, :]
    /// assert_eq!(x.shape(), vec![1, 3]);
    /// assert_eq!(x.squeeze(0).shape(), vec![3]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or of another size.
    #[track_caller]
    pub fn squeeze(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("squeeze");
        let shape = self.shape();
        let ax = normalize_axis("squeeze", axis, &shape);
        if shape[ax] != 1 {
            panic!(
                "squeeze: axis {axis} of shape {shape:?} has size {}, not 1",
                shape[ax]
            );
        }
        let mut to = shape.clone();
        to.remove(ax);
        Tensor::from_uop(self.uop().reshape(&to))
    }

    /// A size-1 axis inserted so that it becomes axis `axis` of the result (`-1` appends).
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn unsqueeze(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("unsqueeze");
        let shape = self.shape();
        let ax = normalize_axis_in("unsqueeze", axis, shape.len() + 1, &shape);
        let mut to = shape.clone();
        to.insert(ax, 1);
        Tensor::from_uop(self.uop().reshape(&to))
    }

    /// Axes `start..=end` merged into one (PyTorch's `flatten`; [`Tensor::ravel`] is NumPy's
    /// `flatten()`, every axis).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::zeros(&[2, 3, 4], DType::F32);
    /// assert_eq!(x.flatten(1, -1).shape(), vec![2, 12]);
    /// assert_eq!(x.ravel().shape(), vec![24]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or when `start` comes after `end`.
    #[track_caller]
    pub fn flatten(&self, start: isize, end: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("flatten");
        let shape = self.shape();
        if shape.is_empty() {
            return self.reshape(&[1]);
        }
        let (s, e) = (
            normalize_axis("flatten", start, &shape),
            normalize_axis("flatten", end, &shape),
        );
        if s > e {
            panic!("flatten: start axis {start} comes after end axis {end} in shape {shape:?}");
        }
        let mut to: Shape = shape[..s].to_vec();
        to.push(shape[s..=e].iter().product());
        to.extend_from_slice(&shape[e + 1..]);
        self.reshape(&to)
    }

    /// All elements in one axis, row-major.
    pub fn ravel(&self) -> Tensor {
        self.reshape(&[self.numel()])
    }

    /// The same value, marked to be materialized in its own contiguous buffer (a kernel
    /// boundary for the scheduler).
    pub fn contiguous(&self) -> Tensor {
        Tensor::from_uop(self.uop().unary_marker(Op::Contiguous))
    }

    /// The same value, with gradients stopped here.
    pub fn detach(&self) -> Tensor {
        Tensor::from_uop(self.uop().unary_marker(Op::Detach))
    }
}

/// The target of a reshape, with its one `-1` resolved; panics when the element counts differ.
#[track_caller]
fn infer_reshape(from: &[usize], dims: &[isize]) -> Result<Shape, String> {
    let numel: usize = from.iter().product();
    let mut inferred = None;
    let mut known = 1usize;
    for (i, &d) in dims.iter().enumerate() {
        match d {
            -1 if inferred.is_none() => inferred = Some(i),
            -1 => return Err(format!("reshape: more than one -1 in {dims:?}")),
            d if d < 0 => return Err(format!("reshape: negative size {d} in {dims:?}")),
            d => match known.checked_mul(d as usize) {
                Some(k) if k <= MAX_ELEMENTS => known = k,
                _ => {
                    return Err(format!(
                        "reshape: cannot reshape {from:?} ({numel} elements) to {dims:?}"
                    ));
                }
            },
        }
    }
    let mut to: Shape = dims.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = inferred {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(format!(
                "reshape: cannot reshape {from:?} ({numel} elements) to {dims:?}"
            ));
        }
        to[i] = numel / known;
    } else if known != numel {
        return Err(format!(
            "reshape: cannot reshape {from:?} ({numel} elements) to {dims:?} ({known} elements)"
        ));
    }
    super::broadcast::addressable("reshape", &to)?;
    Ok(to)
}

/// The shape `expand` (or `broadcast_to`, named by `op`) gives `from` for the sizes `dims`
/// (`-1` keeps a size), or the message it panics with.
fn expand_shape(op: &str, from: &[usize], dims: &[isize]) -> Result<Shape, String> {
    let verb = if op == "expand" {
        "expand"
    } else {
        "broadcast"
    };
    let op = super::op_scope::user_op(op);
    if dims.len() < from.len() {
        return Err(format!(
            "{op}: cannot {verb} shape {from:?} to {dims:?}, which has fewer axes"
        ));
    }
    let offset = dims.len() - from.len();
    let mut to = Vec::with_capacity(dims.len());
    for (i, &d) in dims.iter().enumerate() {
        let old = i.checked_sub(offset).map(|a| from[a]);
        let size = match (d, old) {
            (-1, Some(o)) => o,
            (d, _) if d < 0 => {
                return Err(format!(
                    "{op}: size {d} at axis {i} of {dims:?} is not allowed"
                ));
            }
            (d, Some(o)) if o != 1 && o != d as usize => {
                let allowed = if d == 1 {
                    "which is not 1".to_string()
                } else {
                    format!("which is neither 1 nor {d}")
                };
                return Err(format!(
                    "{op}: cannot {verb} shape {from:?} to {dims:?}: axis {} has size {o}, {allowed}",
                    i - offset
                ));
            }
            (d, _) => d as usize,
        };
        to.push(size);
    }
    addressable(op, &to)?;
    Ok(to)
}
