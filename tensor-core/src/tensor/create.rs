//! Constructors: tensors from host data, constants, ranges and identity matrices.
//!
//! Constants are a `Const` reshaped and expanded, never a buffer, so they fold and fuse.
//!
//! `arange(n)` is built from primitives by digit decomposition: with `b = ceil(sqrt(n))` and
//! `a = ceil(n / b)`, every `i < a*b` is `(i / b) * b + i % b`, so
//! `arange(a*b) = arange(a)[:, None] * b + arange(b)[None, :]` flattened, then shrunk to `n`.
//! Small ranges (`n <= 4`) are tinyspec's prefix sum of ones minus one. This costs O(n) work
//! and O(log log n) depth where the pure prefix-sum construction costs O(n^2), and after
//! lowering the index expression is exactly `(x / c) * c + x % c`, which symbolic folds to `x`.

use super::Tensor;
use super::broadcast::{Dims, addressable, const_uop, dims_of, require_addressable};
use super::cumulative::prefix_sum_last_axis;
use super::error::ShapeError;
use crate::uop::dtype::{Element, encode_scalars};
use crate::uop::shape::MAX_ELEMENTS;
use crate::uop::{Arg, BufferArg, BufferStorage, DType, Device, Op, Scalar, Shape, UOp};
use std::sync::Arc;

/// The dtype integer ranges and indices are built in (as JAX's default int).
pub const INDEX_DTYPE: DType = DType::I32;

impl Tensor {
    /// A tensor of `shape` holding `data` in row-major order. The vector becomes the tensor's
    /// memory (no copy; CPU kernels read it in place, as for [`Tensor::from_ndarray`]).
    ///
    /// ```
    /// # use tensor_core::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!((x.shape(), x.dtype()), (vec![2, 2], DType::F32));
    /// assert!(Tensor::try_from_vec(vec![1.0f32, 2.0, 3.0], &[2, 2]).is_err());
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when `data` does not fill `shape` exactly; [`Tensor::try_from_vec`] returns the error
    /// instead.
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("from_vec");
        match Tensor::try_from_vec(data, shape) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::from_vec`], with data that does not fill the shape as an error.
    pub fn try_from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor, ShapeError> {
        let fail = |m: String| ShapeError::new("from_vec", m);
        let numel = addressable("from_vec", shape).map_err(fail)?;
        if data.len() != numel {
            return Err(fail(format!(
                "from_vec: {} values do not fill shape {:?} ({} elements)",
                data.len(),
                shape,
                numel
            )));
        }
        let storage = BufferStorage::with_host_data(Arc::new(data));
        Ok(host_buffer(storage, numel, T::DTYPE, shape))
    }

    /// A tensor of `shape` holding a copy of `data` in row-major order.
    ///
    /// # Panics
    ///
    /// Panics when `data` does not fill `shape` (see [`Tensor::try_from_vec`]).
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("from_slice");
        let mut copy = Vec::new();
        if copy.try_reserve_exact(data.len()).is_err() {
            panic!(
                "from_slice: cannot allocate {} bytes for a copy of {} elements; free memory, or \
                 move a Vec in with Tensor::from_vec (no copy)",
                std::mem::size_of_val(data),
                data.len()
            );
        }
        copy.extend_from_slice(data);
        Tensor::from_vec(copy, shape)
    }

    /// A tensor of `shape` and `dtype` holding `values` (cast to `dtype`).
    ///
    /// # Panics
    ///
    /// Panics when `values` does not fill `shape`.
    #[track_caller]
    pub fn from_scalars(values: &[Scalar], dtype: DType, shape: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("from_scalars");
        let numel = require_addressable("from_scalars", shape);
        if values.len() != numel {
            panic!(
                "from_scalars: {} values do not fill shape {:?} ({} elements)",
                values.len(),
                shape,
                numel
            );
        }
        let bytes: Arc<[u8]> = encode_scalars(values, dtype).into();
        let storage = BufferStorage::with_host_bytes(bytes, dtype);
        host_buffer(storage, values.len(), dtype, shape)
    }

    /// A tensor of `shape` and `dtype` over `bytes` (row-major, little-endian), as a host
    /// function's result comes back.
    ///
    /// # Panics
    ///
    /// When `bytes` does not hold exactly the elements of `dtype` and `shape`.
    #[track_caller]
    pub fn from_bytes(bytes: Vec<u8>, dtype: DType, shape: &[usize]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("from_bytes");
        let numel = require_addressable("from_bytes", shape);
        if bytes.len() != numel * dtype.size_bytes() {
            panic!(
                "from_bytes: {} bytes do not fill {dtype}{shape:?}",
                bytes.len()
            );
        }
        let storage = BufferStorage::with_host_bytes(bytes.into(), dtype);
        host_buffer(storage, numel, dtype, shape)
    }

    /// A tensor that keeps an owned `ndarray` array's own element vector as its memory.
    ///
    /// A standard-layout (C-contiguous) array is not copied: the vector is moved into the
    /// buffer, and a CPU kernel reads it in place. Any other layout (transposed, strided)
    /// costs one copy into row-major order, as [`Tensor::from_array`].
    pub fn from_ndarray<T, D>(array: ndarray::Array<T, D>) -> Tensor
    where
        T: Element,
        D: ndarray::Dimension,
    {
        if !array.is_standard_layout() {
            return Tensor::from_array(&array);
        }
        let shape = array.shape().to_vec();
        let numel = array.len();
        let (mut data, offset) = array.into_raw_vec_and_offset();
        let start = offset.unwrap_or(0);
        if start != 0 || data.len() != numel {
            // The array sees a contiguous part of a larger vector (sliced in place).
            data = data[start..start + numel].to_vec();
        }
        let storage = BufferStorage::with_host_data(Arc::new(data));
        host_buffer(storage, numel, T::DTYPE, &shape)
    }

    /// A copy of an `ndarray` array of any layout (strided, transposed, sliced), read in
    /// logical row-major order. An owned array can be moved in without a copy with
    /// [`Tensor::from_ndarray`].
    pub fn from_array<T, S, D>(array: &ndarray::ArrayBase<S, D>) -> Tensor
    where
        T: Element,
        S: ndarray::Data<Elem = T>,
        D: ndarray::Dimension,
    {
        let scalars: Vec<Scalar> = array.iter().map(|v| v.to_scalar()).collect();
        Tensor::from_scalars(&scalars, T::DTYPE, array.shape())
    }

    /// A 0-d tensor holding `value`, of the dtype of its Rust type. Called by the user, the
    /// value is bound at run time (a 0-d buffer), so a step counter or a key that changes every
    /// step changes no plan (see `tensor::value`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// assert_eq!(Tensor::scalar(2u8).dtype(), DType::U8);
    /// assert_eq!(Tensor::scalar(2.0f32).shape(), Vec::<usize>::new());
    /// ```
    pub fn scalar<T: Element>(value: T) -> Tensor {
        let _op = super::op_scope::OpScope::enter("scalar");
        Tensor::from_uop(super::value::fill_uop(value.to_scalar(), T::DTYPE, &[]))
    }

    /// A 0-d tensor holding `value` as code: a constant folded into the kernels that read it,
    /// where [`Tensor::scalar`] is a value bound at run time. A different value is a different
    /// graph structure, so it schedules and compiles anew; worth it only for a value fixed for
    /// the whole program that the rewrite rules can use (a scale of a power of two, a mask bit).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, uop::Op};
    /// let c = Tensor::constant(0.5f32);
    /// assert_eq!(c.uop().op(), Op::Const);
    /// ```
    pub fn constant<T: Element>(value: T) -> Tensor {
        Tensor::from_uop(UOp::constant(value.to_scalar(), T::DTYPE))
    }

    /// A tensor of `shape` and `dtype` where every element is `value` (cast to `dtype`), as NumPy's
    /// `full(shape, value, dtype=)`. Called by the user (not through `zeros`, `ones` or another
    /// op), the value is bound at run time: a 0-d buffer broadcast, so a new fill value
    /// compiles nothing.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let x = Tensor::full(&[2, 2], 7, DType::I16);
    /// assert_eq!(evaluate(&x.uop()).to_vec::<i16>(), vec![7; 4]);
    /// assert_eq!(Tensor::zeros(&[3], DType::F32).ones_like().dtype(), DType::F32);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on a negative size.
    #[track_caller]
    pub fn full<D: Dims + ?Sized>(shape: &D, value: impl Into<Scalar>, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("full");
        let shape = sizes("full", shape);
        Tensor::from_uop(super::value::fill_uop(value.into(), dtype, &shape))
    }

    /// A tensor of `shape` and `dtype` filled with zeros.
    ///
    /// # Panics
    ///
    /// Panics on a negative size.
    #[track_caller]
    pub fn zeros<D: Dims + ?Sized>(shape: &D, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("zeros");
        Tensor::full(shape, 0, dtype)
    }

    /// A tensor of `shape` and `dtype` filled with ones.
    ///
    /// # Panics
    ///
    /// Panics on a negative size.
    #[track_caller]
    pub fn ones<D: Dims + ?Sized>(shape: &D, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("ones");
        Tensor::full(shape, 1, dtype)
    }

    /// A tensor of this tensor's shape and dtype where every element is `value`.
    pub fn full_like(&self, value: impl Into<Scalar>) -> Tensor {
        Tensor::from_uop(const_uop(value.into(), self.dtype(), &self.shape()))
    }

    /// Zeros of this tensor's shape and dtype.
    pub fn zeros_like(&self) -> Tensor {
        self.full_like(0)
    }

    /// Ones of this tensor's shape and dtype.
    pub fn ones_like(&self) -> Tensor {
        self.full_like(1)
    }

    /// Evenly spaced values in `[start, stop)`, as NumPy's `arange`: `arange(stop)`,
    /// `arange((start, stop))` or `arange((start, stop, step))`, with an optional `DType` last
    /// (`arange((0, 10, 2, DType::F32))`; see [`ArangeArgs`]). Without one the dtype is the
    /// arguments' Rust type (an unsuffixed integer is `i32`, an unsuffixed float `f64`, a `usize`
    /// stop `i32`, or `i64` when `stop - 1` does not fit an `i32`).
    ///
    /// ```
    /// # use tensor_core::{DType, Tensor, interp::evaluate};
    /// let ints = |t: Tensor| evaluate(&t.uop()).to_vec::<i32>();
    /// assert_eq!(ints(Tensor::arange(4)), vec![0, 1, 2, 3]);              // np.arange(4)
    /// assert_eq!(ints(Tensor::arange((2, 5))), vec![2, 3, 4]);            // np.arange(2, 5)
    /// assert_eq!(ints(Tensor::arange((5, 0, -2))), vec![5, 3, 1]);
    /// let x = Tensor::arange((0, 1, 0.25, DType::F32));                  // dtype=np.float32
    /// assert_eq!(evaluate(&x.uop()).to_vec::<f32>(), vec![0.0, 0.25, 0.5, 0.75]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics, as NumPy raises, on a NaN or infinite bound, a zero or non-finite step and on
    /// more elements than a tensor may hold (`arange(usize::MAX)` too: an unsigned bound is
    /// never wrapped to a negative one).
    #[track_caller]
    pub fn arange(args: impl ArangeArgs) -> Tensor {
        let _op = super::op_scope::OpScope::enter("arange");
        let form = args.into_arange();
        if let (Scalar::Int(0), Scalar::Int(stop), Scalar::Int(1), None, INDEX_DTYPE) =
            (form.start, form.stop, form.step, form.dtype, form.natural)
        {
            // `arange(n)`: the index dtype, widened to `i64` when `n - 1` does not fit it.
            let n = stop.max(0) as usize;
            require_addressable("arange", &[n]);
            return Tensor::from_uop(arange_uop(n));
        }
        let dtype = form.dtype.unwrap_or(form.natural);
        arange_steps(form.start, form.stop, form.step, dtype)
    }

    /// `num` evenly spaced values from `start` to `stop` inclusive, in `dtype`, as NumPy's
    /// `linspace(start, stop, num, dtype=)`: value `i` is `start + i * (stop - start) / (num - 1)`
    /// computed in `f64` and rounded once to `dtype` (floored for integers, as NumPy), the last one
    /// exactly `stop`.
    ///
    /// ```
    /// # use tensor_core::{DType, Tensor, interp::evaluate};
    /// let x = Tensor::linspace(0.0, 1.0, 5, DType::F32);
    /// assert_eq!(evaluate(&x.uop()).to_vec::<f32>(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when `num` is more than a tensor may hold.
    #[track_caller]
    pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("linspace");
        require_addressable("linspace", &[num]);
        if num == 1 {
            return Tensor::full(&[1], start, dtype);
        }
        let step = (stop - start) / (num.max(2) - 1) as f64;
        let steps = Tensor::from_uop(arange_uop(num));
        let values = steps.cast(DType::F64).mul(step).add(start);
        let values = steps.eq(num as i64 - 1).where_(stop, values);
        if dtype.is_float() {
            return values.cast(dtype);
        }
        values.floor().cast(dtype)
    }

    /// The `n x n` identity matrix in `dtype` (NumPy's `eye(n, dtype=)`).
    ///
    /// ```
    /// # use tensor_core::{DType, Tensor, interp::evaluate};
    /// let i = Tensor::eye(2, DType::I32);
    /// assert_eq!(evaluate(&i.uop()).to_vec::<i32>(), vec![1, 0, 0, 1]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when `n * n` is more than a tensor may hold.
    #[track_caller]
    pub fn eye(n: usize, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("eye");
        require_addressable("eye", &[n, n]);
        Tensor::from_uop(diagonal_offset(n, n)).eq(0).cast(dtype)
    }

    /// The upper triangle of the last two axes: elements with `col - row >= k` kept, the others
    /// zero (NumPy's `triu(x, k)`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6, 7, 8, 9], &[3, 3]);
    /// assert_eq!(evaluate(&x.triu(0).uop()).to_vec::<i32>(), vec![1, 2, 3, 0, 5, 6, 0, 0, 9]);
    /// assert_eq!(evaluate(&x.tril(-1).uop()).to_vec::<i32>(), vec![0, 0, 0, 4, 0, 0, 7, 8, 0]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics for fewer than two axes.
    #[track_caller]
    pub fn triu(&self, k: i64) -> Tensor {
        let _op = super::op_scope::OpScope::enter("triu");
        self.keep_triangle("triu", k, true)
    }

    /// The lower triangle of the last two axes: elements with `col - row <= k` kept, the others
    /// zero (NumPy's `tril(x, k)`).
    ///
    /// # Panics
    ///
    /// Panics for fewer than two axes.
    #[track_caller]
    pub fn tril(&self, k: i64) -> Tensor {
        let _op = super::op_scope::OpScope::enter("tril");
        self.keep_triangle("tril", k, false)
    }

    #[track_caller]
    fn keep_triangle(&self, op: &str, k: i64, upper: bool) -> Tensor {
        let op = super::op_scope::user_op(op);
        let shape = self.shape();
        if shape.len() < 2 {
            panic!("{op}: needs at least two axes, got shape {shape:?}");
        }
        let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let offset = Tensor::from_uop(diagonal_offset(rows, cols));
        let keep = if upper { offset.ge(k) } else { offset.le(k) };
        keep.where_(self, self.zeros_like())
    }
}

/// `col - row` over an `rows x cols` grid, in the index dtype.
fn diagonal_offset(rows: usize, cols: usize) -> UOp {
    let r = arange_uop(rows)
        .cast(DType::I64)
        .reshape(&[rows, 1])
        .expand(&[rows, cols]);
    let c = arange_uop(cols)
        .cast(DType::I64)
        .reshape(&[1, cols])
        .expand(&[rows, cols]);
    UOp::alu(Op::Sub, vec![c, r])
}

/// `[start, start+step, ...)` below `stop` (above it for a negative step) in `dtype`.
#[track_caller]
fn arange_steps(start: Scalar, stop: Scalar, step: Scalar, dtype: DType) -> Tensor {
    let n = arange_count(start, stop, step);
    if dtype.is_int() {
        for v in [start, step] {
            if let Scalar::Float(f) = v
                && f.abs() >= i64::MAX as f64
            {
                panic!(
                    "arange: {} does not fit an i64, which integer aranges count in",
                    readable(f)
                );
            }
        }
    }
    let steps = arange_uop(n).cast(dtype);
    let scaled = UOp::alu(Op::Mul, vec![steps, const_uop(step, dtype, &[n])]);
    let shifted = UOp::alu(Op::Add, vec![scaled, const_uop(start, dtype, &[n])]);
    Tensor::from_uop(shifted)
}

/// How many values `arange(start, stop, step)` has: NumPy's `ceil((stop - start) / step)`,
/// exact for integer arguments. Panics, as NumPy raises, on a NaN or infinite bound, a zero or
/// non-finite step, and on more values than a tensor may hold.
#[track_caller]
fn arange_count(start: Scalar, stop: Scalar, step: Scalar) -> usize {
    let (a, b, s) = (start.as_f64(), stop.as_f64(), step.as_f64());
    if !a.is_finite() || !b.is_finite() {
        panic!(
            "arange: start and stop must be finite, got start {} and stop {}",
            readable(a),
            readable(b)
        );
    }
    if s == 0.0 || !s.is_finite() {
        panic!(
            "arange: step must be finite and non-zero, got {}",
            readable(s)
        );
    }
    let count = match (start, stop, step) {
        (Scalar::Int(a), Scalar::Int(b), Scalar::Int(s)) => {
            let (span, s) = (i128::from(b) - i128::from(a), i128::from(s));
            let rounds_up = span % s != 0 && (span > 0) == (s > 0);
            (span / s + i128::from(rounds_up)).max(0) as f64
        }
        _ => ((b - a) / s).ceil().max(0.0),
    };
    if count >= MAX_ELEMENTS as f64 {
        panic!(
            "arange: {} values from {} to {} by {} are more than the {MAX_ELEMENTS} (2^48) a tensor may hold",
            readable(count),
            readable(a),
            readable(b),
            readable(s)
        );
    }
    count as usize
}

/// `v` for a message: plain below `1e16`, in exponent form beyond (`1e300`, not 301 digits).
fn readable(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e16 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// An `arange` bound as a [`Scalar`]: an integer as `Int` where it fits an `i64`, else (a `u64`
/// or `usize` above `i64::MAX`) as a `Float`, never wrapped to a negative `Int`.
trait ArangeBound {
    fn bound(self) -> Scalar;
}

macro_rules! int_bound {
    ($($t:ty),*) => {$(
        impl ArangeBound for $t {
            fn bound(self) -> Scalar {
                match i64::try_from(self) {
                    Ok(v) => Scalar::Int(v),
                    Err(_) => Scalar::Float(self as f64),
                }
            }
        }
    )*};
}
int_bound!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

impl ArangeBound for f32 {
    fn bound(self) -> Scalar {
        Scalar::from(self)
    }
}

impl ArangeBound for f64 {
    fn bound(self) -> Scalar {
        Scalar::from(self)
    }
}

/// The arguments of [`Tensor::arange`], as NumPy's positional forms: `stop`, `(start, stop)`,
/// `(start, stop, step)`, each optionally followed by a `DType` inside the tuple
/// (`(stop, DType::F32)`, `(start, stop, step, DType::F32)`). Implemented for every primitive
/// numeric type; the bounds of one call share their type, except that a float step may follow
/// integer bounds (`(0, 1, 0.25, DType::F32)`).
pub trait ArangeArgs {
    /// The normalized form.
    fn into_arange(self) -> ArangeForm;
}

/// `arange`'s arguments normalized: the bounds and step, the dtype asked for, and the dtype the
/// arguments' Rust types give.
#[derive(Clone, Copy, Debug)]
pub struct ArangeForm {
    /// The first value.
    pub start: Scalar,
    /// The bound the values stay below (above, for a negative step).
    pub stop: Scalar,
    /// The distance between neighbours.
    pub step: Scalar,
    /// The dtype asked for, if any.
    pub dtype: Option<DType>,
    /// The dtype of the arguments' Rust types.
    pub natural: DType,
}

fn form(
    start: Scalar,
    stop: Scalar,
    step: Scalar,
    dtype: Option<DType>,
    natural: DType,
) -> ArangeForm {
    ArangeForm {
        start,
        stop,
        step,
        dtype,
        natural,
    }
}

macro_rules! arange_args {
    ($($t:ty => $natural:expr),*) => {$(
        impl ArangeArgs for $t {
            fn into_arange(self) -> ArangeForm {
                form(Scalar::from(0 as $t), self.bound(), Scalar::from(1 as $t), None, $natural)
            }
        }
        impl ArangeArgs for ($t, DType) {
            fn into_arange(self) -> ArangeForm {
                let f = self.0.into_arange();
                ArangeForm { dtype: Some(self.1), ..f }
            }
        }
        impl ArangeArgs for ($t, $t) {
            fn into_arange(self) -> ArangeForm {
                form(self.0.bound(), self.1.bound(), Scalar::from(1 as $t), None, $natural)
            }
        }
        impl ArangeArgs for ($t, $t, DType) {
            fn into_arange(self) -> ArangeForm {
                ArangeForm { dtype: Some(self.2), ..(self.0, self.1).into_arange() }
            }
        }
        impl ArangeArgs for ($t, $t, $t) {
            fn into_arange(self) -> ArangeForm {
                form(self.0.bound(), self.1.bound(), self.2.bound(), None, $natural)
            }
        }
        impl ArangeArgs for ($t, $t, $t, DType) {
            fn into_arange(self) -> ArangeForm {
                ArangeForm { dtype: Some(self.3), ..(self.0, self.1, self.2).into_arange() }
            }
        }
    )*};
}
arange_args!(
    i8 => DType::I8, i16 => DType::I16, i32 => DType::I32, i64 => DType::I64,
    u8 => DType::U8, u16 => DType::U16, u32 => DType::U32, u64 => DType::U64,
    usize => INDEX_DTYPE, isize => DType::I64, f32 => DType::F32, f64 => DType::F64
);

/// Integer bounds with a float step: `(0, 1, 0.25)` (`f64`, as NumPy gives).
impl ArangeArgs for (i32, i32, f64) {
    fn into_arange(self) -> ArangeForm {
        form(
            self.0.into(),
            self.1.into(),
            self.2.into(),
            None,
            DType::F64,
        )
    }
}

/// Integer bounds with a float step in `dtype`: `(0, 1, 0.25, DType::F32)`.
impl ArangeArgs for (i32, i32, f64, DType) {
    fn into_arange(self) -> ArangeForm {
        ArangeForm {
            dtype: Some(self.3),
            ..(self.0, self.1, self.2).into_arange()
        }
    }
}

/// A CPU `Buffer` of `size` elements over `storage`, reshaped to `shape`.
fn host_buffer(storage: BufferStorage, size: usize, dtype: DType, shape: &[usize]) -> Tensor {
    let arg = BufferArg::with_storage(size, dtype, Device::cpu(), Arc::new(storage));
    let buffer = UOp::new(Op::Buffer, dtype, vec![], Arg::Buffer(arg));
    Tensor::from_uop(buffer.reshape(shape))
}

/// The sizes of a shape argument; panics on a negative size.
#[track_caller]
pub(crate) fn sizes<D: Dims + ?Sized>(op: &str, shape: &D) -> Shape {
    let op = super::op_scope::user_op(op);
    let dims = dims_of(op, "size", shape);
    let mut out = Vec::with_capacity(dims.len());
    for &d in &dims {
        if d < 0 {
            panic!("{op}: negative size {d} in shape {dims:?}");
        }
        out.push(d as usize);
    }
    require_addressable(op, &out);
    out
}

/// `[0, 1, ..., n-1]` in [`INDEX_DTYPE`], or in `i64` where `n - 1` does not fit it (see the
/// module doc for the construction).
pub(crate) fn arange_uop(n: usize) -> UOp {
    let dtype = if i32::try_from(n).is_ok() {
        INDEX_DTYPE
    } else {
        DType::I64
    };
    arange_in(n, dtype)
}

fn arange_in(n: usize, dtype: DType) -> UOp {
    if n <= 1 {
        return const_uop(Scalar::Int(0), dtype, &[n]);
    }
    if n <= 4 {
        let counts = prefix_sum_last_axis(&const_uop(Scalar::Int(1), dtype, &[n]));
        return UOp::alu(
            Op::Add,
            vec![counts, const_uop(Scalar::Int(-1), dtype, &[n])],
        );
    }
    let b = (n as f64).sqrt().ceil() as usize;
    let a = n.div_ceil(b);
    let high = UOp::alu(
        Op::Mul,
        vec![
            arange_in(a, dtype),
            const_uop(Scalar::Int(b as i64), dtype, &[a]),
        ],
    );
    let high = high.reshape(&[a, 1]).expand(&[a, b]);
    let low = arange_in(b, dtype).reshape(&[1, b]).expand(&[a, b]);
    let flat = UOp::alu(Op::Add, vec![high, low]).reshape(&[a * b]);
    if a * b == n {
        flat
    } else {
        flat.shrink(&[0], &[n])
    }
}
