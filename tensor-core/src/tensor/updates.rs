//! Functional updates, all from one table: for `scatter*` along `axis`, `hit[.., p, j, ..]`
//! says that index entry `j` names position `p` (tinyspec's scatter: an arange compared with
//! the indices), and each update reduces the sources over `j` where they hit. `scatter`
//! assigns (the last of repeated indices wins), `scatter_reduce` sums, multiplies, averages or
//! takes the extremes (with or without the old value, as PyTorch's `include_self`), `at` is
//! JAX's `x.at[i].set/add/mul/min/max`, and `dynamic_slice`/`dynamic_update_slice` take
//! their offsets as a tensor or as plain integers (clamped so the window fits, as in JAX).
//! `scatter` and `at` take a scalar value as well as a tensor (torch's `scatter(dim, index,
//! value)`, JAX's `x.at[i].set(0.0)`). Gradients follow from the masks. Negative indices count
//! from the end; indices outside the axis update nothing.

use super::Tensor;
use super::broadcast::{Operand, normalize_axis};
use super::value::operand_uop;
use crate::uop::{DType, Scalar};

/// The start offsets of [`Tensor::dynamic_slice`] and [`Tensor::dynamic_update_slice`], one per
/// axis: a 1-D integer tensor (values computed in the graph), or integers (`[1, 0]`, `&starts`,
/// a `Vec`), as JAX's `start_indices`; or 0-d integer tensors, one per axis (`&[i, j]`).
pub trait IntoStarts {
    /// The starts as a 1-D tensor.
    fn into_starts(self) -> Tensor;
}

impl IntoStarts for &Tensor {
    fn into_starts(self) -> Tensor {
        self.clone()
    }
}

impl IntoStarts for Tensor {
    fn into_starts(self) -> Tensor {
        self
    }
}

impl IntoStarts for &[Tensor] {
    /// 0-d integer tensors stacked into one `i64` vector (a non-0-d one is refused by the op,
    /// which sees a tensor of the wrong shape).
    fn into_starts(self) -> Tensor {
        if self.is_empty() {
            return Tensor::from_vec(Vec::<i64>::new(), &[0]);
        }
        let scalars: Vec<Tensor> = self.iter().map(|t| t.cast(DType::I64)).collect();
        Tensor::stack(&scalars, 0)
    }
}

impl<const N: usize> IntoStarts for &[Tensor; N] {
    fn into_starts(self) -> Tensor {
        self.as_slice().into_starts()
    }
}

macro_rules! impl_into_starts_for_ints {
    ($($t:ty),*) => {$(
        impl IntoStarts for &[$t] {
            fn into_starts(self) -> Tensor {
                // An offset past i64's range is clamped as any offset past the axis is.
                let v: Vec<i64> = self.iter().map(|&s| i64::try_from(s).unwrap_or(i64::MAX)).collect();
                Tensor::from_vec(v, &[self.len()])
            }
        }
        impl<const N: usize> IntoStarts for [$t; N] {
            fn into_starts(self) -> Tensor {
                self.as_slice().into_starts()
            }
        }
        impl<const N: usize> IntoStarts for &[$t; N] {
            fn into_starts(self) -> Tensor {
                self.as_slice().into_starts()
            }
        }
        impl IntoStarts for Vec<$t> {
            fn into_starts(self) -> Tensor {
                self.as_slice().into_starts()
            }
        }
        impl IntoStarts for &Vec<$t> {
            fn into_starts(self) -> Tensor {
                self.as_slice().into_starts()
            }
        }
    )*};
}
impl_into_starts_for_ints!(i32, i64, isize, usize);

/// How [`Tensor::scatter_reduce`] combines the values sent to one position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// Their sum.
    Sum,
    /// Their product.
    Prod,
    /// Their mean (computed in the float type and converted back).
    Mean,
    /// Their maximum (NaN wins).
    Amax,
    /// Their minimum (NaN wins).
    Amin,
}

/// The scatter table of `self`, `axis`, `index`, `src` (see the module docs).
struct Table {
    /// `[.., k, n, ..]`: index entry `j` (axis `ax + 1`) names position `p` (axis `ax`).
    hit: Tensor,
    /// The sources broadcast over the positions, `[.., k, n, ..]`.
    values: Tensor,
    /// The axis of the positions; the entries are axis `ax + 1`.
    ax: usize,
}

impl Tensor {
    /// PyTorch's `scatter` (assign): a copy of `self` with `self[.., index[.., j, ..], ..] =
    /// src[.., j, ..]` along `axis`. `index` has as many axes as `self`, is no longer than
    /// `src` on any axis and than `self` off `axis` (the leading part of `src` is used).
    /// Where an index repeats, the last entry along `axis` wins. A scalar `src` is written at
    /// every position the index names, as torch's `scatter(dim, index, value)`.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::zeros(&[2, 3], tensor_core::DType::F32);
    /// let index = Tensor::from_vec(vec![2i64, 0], &[2, 1]);
    /// let y = x.scatter(1, &index, 5.0);                 // torch: x.scatter(1, index, 5.0)
    /// assert_eq!(evaluate(&y.uop()).to_vec::<f32>(), vec![0.0, 0.0, 5.0, 5.0, 0.0, 0.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range, an index that is not of an integer type, or index and source shapes
    /// that do not fit as described.
    #[track_caller]
    pub fn scatter(&self, axis: isize, index: &Tensor, src: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("scatter");
        let src = match src.into() {
            Operand::Tensor(t) => t,
            Operand::Scalar(v) => Tensor::from_uop(operand_uop(v, self.dtype(), &index.shape())),
        };
        let t = self.scatter_table("scatter", axis, index, &src);
        let n = t.hit.shape()[t.ax + 1];
        let entry = entry_positions(n, t.hit.ndim(), t.ax + 1);
        let last = t.hit.where_(&entry, -1i64).max(t.ax as isize + 1, true);
        let chosen = t.hit.logical_and(entry.eq(&last));
        let zero = Tensor::zeros(&[0usize; 0], t.values.dtype());
        let value = chosen
            .where_(&t.values, &zero)
            .sum(t.ax as isize + 1, false)
            .cast(self.dtype());
        last.squeeze(t.ax as isize + 1).ge(0).where_(value, self)
    }

    /// PyTorch's `scatter_reduce`: the values sent to each position by `index` along `axis`
    /// (shapes as in [`Tensor::scatter`]) combined by `reduce`, with the old value of the
    /// position taking part when `include_self`; positions no index names keep their value.
    ///
    /// # Panics
    ///
    /// As [`Tensor::scatter`] does.
    #[track_caller]
    pub fn scatter_reduce(
        &self,
        axis: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Tensor {
        let _op = super::op_scope::OpScope::enter("scatter_reduce");
        let t = self.scatter_table("scatter_reduce", axis, index, src);
        let over = t.ax as isize + 1;
        let dtype = self.dtype();
        let count = t.hit.cast(DType::I64).sum(over, false);
        let filled = |fill: Scalar| {
            let fill = Tensor::full(&[0usize; 0], fill, t.values.dtype());
            t.hit.where_(&t.values, &fill)
        };
        let combined = match reduce {
            ScatterReduce::Sum => {
                let s = filled(Scalar::Int(0)).sum(over, false).cast(dtype);
                if include_self { self.add(&s) } else { s }
            }
            ScatterReduce::Prod => {
                let p = filled(Scalar::Int(1)).prod(over, false).cast(dtype);
                if include_self { self.mul(&p) } else { p }
            }
            ScatterReduce::Amax => {
                let m = filled(extreme(dtype, false)).max(over, false);
                if include_self { self.maximum(&m) } else { m }
            }
            ScatterReduce::Amin => {
                let m = filled(extreme(dtype, true)).min(over, false);
                if include_self { self.minimum(&m) } else { m }
            }
            ScatterReduce::Mean => {
                let float = dtype.to_float();
                let mut total = filled(Scalar::Int(0)).cast(float).sum(over, false);
                let mut n = count.cast(float);
                if include_self {
                    total = total + self.cast(float);
                    n = n + 1.0;
                }
                total.div(n.maximum(1.0)).cast(dtype)
            }
        };
        if include_self {
            return combined;
        }
        count.gt(0).where_(combined, self)
    }

    /// JAX's `x.at[index]`: updates of the rows `index` (integers of any shape) along axis 0.
    pub fn at(&self, index: &Tensor) -> At {
        At {
            x: self.clone(),
            index: index.clone(),
        }
    }

    /// The window of `sizes` starting at `starts` (one per axis: a 1-D integer tensor, integers,
    /// or 0-d tensors, see [`IntoStarts`]), as JAX's `lax.dynamic_slice`: a negative start counts
    /// from the end, and each start is clamped so the window fits.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// let w = x.dynamic_slice([1, 5], &[1, 2]);        // lax.dynamic_slice(x, (1, 5), (1, 2))
    /// assert_eq!(evaluate(&w.uop()).to_vec::<i32>(), vec![4, 5]);
    /// ```
    ///
    /// # Panics
    ///
    /// When `starts` is not one integer per axis, or the window does not fit the shape.
    #[track_caller]
    pub fn dynamic_slice(&self, starts: impl IntoStarts, sizes: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("dynamic_slice");
        let starts = &starts.into_starts();
        let shape = self.shape();
        check_window("dynamic_slice", &shape, starts, sizes);
        let mut out = self.clone();
        for (d, (&n, &size)) in shape.iter().zip(sizes).enumerate() {
            let start = clamped_start(starts, d, n, size);
            let positions = Tensor::arange(size).cast(DType::I64) + start;
            out = out.take(&positions, d as isize);
        }
        out
    }

    /// `self` with `update` written at `starts` (one per axis: a 1-D integer tensor, integers,
    /// or 0-d tensors), as JAX's `lax.dynamic_update_slice`: starts as in
    /// [`Tensor::dynamic_slice`].
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::zeros(&[4], tensor_core::DType::I32);
    /// let y = x.dynamic_update_slice(&Tensor::from_vec(vec![7, 8], &[2]), [1]);
    /// assert_eq!(evaluate(&y.uop()).to_vec::<i32>(), vec![0, 7, 8, 0]);
    /// ```
    ///
    /// # Panics
    ///
    /// When `starts` is not one integer per axis, or `update` does not fit inside `self`.
    #[track_caller]
    pub fn dynamic_update_slice(&self, update: &Tensor, starts: impl IntoStarts) -> Tensor {
        let _op = super::op_scope::OpScope::enter("dynamic_update_slice");
        let starts = &starts.into_starts();
        let shape = self.shape();
        let sizes = update.shape();
        check_window("dynamic_update_slice", &shape, starts, &sizes);
        let mut spread = update.cast(self.dtype());
        let mut inside = Tensor::full(&[0usize; 0], true, DType::Bool);
        for (d, (&n, &size)) in shape.iter().zip(&sizes).enumerate() {
            let start = clamped_start(starts, d, n, size);
            let offset = Tensor::arange(n).cast(DType::I64) - start;
            let within = offset.ge(0).logical_and(offset.lt(size as i64));
            let mut along = vec![1isize; shape.len()];
            along[d] = n as isize;
            inside = inside.logical_and(within.reshape(&along));
            let source = offset.clamp(0i64, size.max(1) as i64 - 1);
            spread = if size == 0 {
                let mut s = spread.shape();
                s[d] = n;
                Tensor::zeros(&s, self.dtype())
            } else {
                spread.take(&source, d as isize)
            };
        }
        inside.where_(spread, self)
    }

    #[track_caller]
    fn scatter_table(&self, op: &str, axis: isize, index: &Tensor, src: &Tensor) -> Table {
        let op = super::op_scope::user_op(op);
        let (s, i, v) = (self.shape(), index.shape(), src.shape());
        if !index.dtype().is_int() {
            panic!("{op}: index dtype {} is not an integer type", index.dtype());
        }
        let ax = normalize_axis(op, axis, &s);
        let fits = i.len() == s.len()
            && v.len() == s.len()
            && (0..s.len()).all(|d| i[d] <= v[d] && (d == ax || i[d] <= s[d]));
        if !fits {
            panic!(
                "{op}: index shape {i:?} must have the axes of the input {s:?} and the source {v:?}, and be no longer than the source, nor than the input off axis {axis}"
            );
        }
        let k = s[ax];
        let src = src.shrink(&i.iter().map(|&d| (0, d)).collect::<Vec<_>>());
        let idx = index.cast(DType::I64);
        let idx = idx.lt(0).where_(&idx + k as i64, &idx);
        // Off the axis the index may be shorter than the input: padded entries name no position.
        let pads: Vec<(usize, usize)> = (0..s.len())
            .map(|d| (0, if d == ax { 0 } else { s[d] - i[d] }))
            .collect();
        let idx = idx.pad_value(&pads, k as i64);
        let src = src.cast(self.dtype()).pad(&pads);
        let positions = entry_positions(k, s.len() + 1, ax);
        let hit = idx.unsqueeze(ax as isize).eq(&positions);
        let full = hit.shape();
        let values = src.unsqueeze(ax as isize).expand(&dims(&full));
        Table { hit, values, ax }
    }
}

/// JAX's `x.at[index]` (see [`Tensor::at`]): each method returns the updated copy.
pub struct At {
    x: Tensor,
    index: Tensor,
}

impl At {
    /// The rows themselves (`x[index]`).
    ///
    /// # Panics
    ///
    /// On a 0-d `x` or an index that is not of an integer type.
    #[track_caller]
    pub fn get(&self) -> Tensor {
        let _op = super::op_scope::OpScope::enter("get");
        self.x.take(&self.index, 0)
    }

    /// The rows set to `values` (a scalar, or a tensor broadcast to `index.shape +
    /// x.shape[1..]`); for a repeated
    /// index the last value wins.
    ///
    /// # Panics
    ///
    /// On a 0-d `x`, or when `values` does not broadcast to `index.shape + x.shape[1..]`, or the
    /// index is not of an integer type.
    #[track_caller]
    pub fn set(&self, values: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("set");
        let (idx, v) = self.entries(values.into());
        self.x.scatter(0, &idx, &v)
    }

    /// The rows plus `values` (repeated indices add up).
    ///
    /// # Panics
    ///
    /// As [`At::set`] does.
    #[track_caller]
    pub fn add(&self, values: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("add");
        self.reduce(values.into(), ScatterReduce::Sum)
    }

    /// The rows times `values`.
    ///
    /// # Panics
    ///
    /// As [`At::set`] does.
    #[track_caller]
    pub fn mul(&self, values: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("mul");
        self.reduce(values.into(), ScatterReduce::Prod)
    }

    /// The rows' minimum with `values`.
    ///
    /// # Panics
    ///
    /// As [`At::set`] does.
    #[track_caller]
    pub fn min(&self, values: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("min");
        self.reduce(values.into(), ScatterReduce::Amin)
    }

    /// The rows' maximum with `values`.
    ///
    /// # Panics
    ///
    /// As [`At::set`] does.
    #[track_caller]
    pub fn max(&self, values: impl Into<Operand>) -> Tensor {
        let _op = super::op_scope::OpScope::enter("max");
        self.reduce(values.into(), ScatterReduce::Amax)
    }

    #[track_caller]
    fn reduce(&self, values: Operand, how: ScatterReduce) -> Tensor {
        let (idx, v) = self.entries(values);
        self.x.scatter_reduce(0, &idx, &v, how, true)
    }

    /// The flattened index broadcast over the rows, and the values (a scalar: a 0-d tensor of
    /// `x`'s dtype) shaped to match.
    #[track_caller]
    fn entries(&self, values: Operand) -> (Tensor, Tensor) {
        let shape = self.x.shape();
        if shape.is_empty() {
            panic!("at: a 0-d tensor has no rows to index");
        }
        let values = match values {
            Operand::Tensor(t) => t,
            Operand::Scalar(v) => Tensor::from_uop(operand_uop(v, self.x.dtype(), &[])),
        };
        let m = self.index.numel();
        let rest = &shape[1..];
        let target: Vec<usize> = [self.index.shape().as_slice(), rest].concat();
        let v = values.expand(&dims(&target));
        let flat: Vec<usize> = [&[m], rest].concat();
        let mut column = vec![1usize; shape.len()];
        column[0] = m;
        let idx = self.index.reshape(&dims(&column)).expand(&dims(&flat));
        (idx, v.reshape(&dims(&flat)))
    }
}

fn dims(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// `0..n` as `i64` along axis `axis` of an `ndim`-axis shape of ones.
fn entry_positions(n: usize, ndim: usize, axis: usize) -> Tensor {
    let mut along = vec![1isize; ndim];
    along[axis] = n as isize;
    Tensor::arange(n).cast(DType::I64).reshape(&along)
}

/// The identity of `max` (`lowest = false`: the smallest value) or of `min`.
fn extreme(dtype: DType, largest: bool) -> Scalar {
    match dtype {
        DType::Bool => Scalar::Bool(largest),
        d if d.is_float() => Scalar::Float(if largest {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        }),
        d if d.is_signed_int() => {
            let min = i64::MIN >> (64 - d.bits());
            Scalar::Int(if largest { !min } else { min })
        }
        d => Scalar::Int(if largest {
            (u64::MAX >> (64 - d.bits())) as i64
        } else {
            0
        }),
    }
}

#[track_caller]
fn check_window(op: &str, shape: &[usize], starts: &Tensor, sizes: &[usize]) {
    let op = super::op_scope::user_op(op);
    if starts.shape() != [shape.len()] || !starts.dtype().is_int() {
        panic!(
            "{op}: starts must be a 1-D integer tensor with one entry per axis of {shape:?}, got {} {:?}",
            starts.dtype(),
            starts.shape()
        );
    }
    if sizes.len() != shape.len() || sizes.iter().zip(shape).any(|(s, n)| s > n) {
        panic!("{op}: window {sizes:?} does not fit shape {shape:?}");
    }
}

/// `starts[d]` as a 0-d `i64`, counted from the end when negative (as JAX does), then clamped
/// to `0..=n - size`.
fn clamped_start(starts: &Tensor, d: usize, n: usize, size: usize) -> Tensor {
    let start = starts
        .slice(0, d as isize, d as isize + 1)
        .reshape(&[0isize; 0])
        .cast(DType::I64);
    let start = start.lt(0).where_(&start + n as i64, &start);
    start.clamp(0i64, (n - size) as i64)
}
