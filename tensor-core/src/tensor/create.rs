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
use super::broadcast::{Dims, const_uop, require_addressable};
use super::cumulative::prefix_sum_last_axis;
use crate::uop::dtype::{Element, encode_scalars};
use crate::uop::shape::MAX_ELEMENTS;
use crate::uop::{Arg, BufferArg, BufferStorage, DType, Device, Op, Scalar, Shape, UOp};
use std::sync::Arc;

/// The dtype integer ranges and indices are built in (as JAX's default int).
pub const INDEX_DTYPE: DType = DType::I32;

impl Tensor {
    /// A tensor of `shape` holding `data` in row-major order. The vector becomes the
    /// tensor's memory (no copy; CPU kernels read it in place, as for [`Tensor::from_ndarray`]).
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Tensor {
        let numel = require_addressable("from_slice", shape);
        if data.len() != numel {
            panic!(
                "from_slice: {} values do not fill shape {:?} ({} elements)",
                data.len(),
                shape,
                numel
            );
        }
        let storage = BufferStorage::with_host_data(Arc::new(data));
        host_buffer(storage, numel, T::DTYPE, shape)
    }

    /// A tensor of `shape` holding a copy of `data` in row-major order.
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// A tensor of `shape` and `dtype` holding `values` (cast to `dtype`).
    #[track_caller]
    pub fn from_scalars(values: &[Scalar], dtype: DType, shape: &[usize]) -> Tensor {
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
    #[track_caller]
    pub fn from_bytes(bytes: Vec<u8>, dtype: DType, shape: &[usize]) -> Tensor {
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

    /// A 0-d tensor holding `value`, of the dtype of its Rust type.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::from_uop(UOp::constant(value.to_scalar(), T::DTYPE))
    }

    /// A tensor of `shape` and `dtype` where every element is `value` (cast to `dtype`).
    #[track_caller]
    pub fn full<D: Dims + ?Sized>(shape: &D, value: impl Into<Scalar>, dtype: DType) -> Tensor {
        let shape = sizes("full", shape);
        Tensor::from_uop(const_uop(value.into(), dtype, &shape))
    }

    /// A tensor of `shape` and `dtype` filled with zeros.
    #[track_caller]
    pub fn zeros<D: Dims + ?Sized>(shape: &D, dtype: DType) -> Tensor {
        Tensor::full(shape, 0, dtype)
    }

    /// A tensor of `shape` and `dtype` filled with ones.
    #[track_caller]
    pub fn ones<D: Dims + ?Sized>(shape: &D, dtype: DType) -> Tensor {
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

    /// `[0, 1, ..., n-1]` as `i32` (as `i64` when `n - 1` does not fit an `i32`).
    #[track_caller]
    pub fn arange(n: usize) -> Tensor {
        require_addressable("arange", &[n]);
        Tensor::from_uop(arange_uop(n))
    }

    /// `[start, start+step, ...]` up to but excluding `stop`, as NumPy's `arange`, in the
    /// dtype of the Rust arguments (`arange_range(0, 10, 3)` is `i32`,
    /// `arange_range(0.0f32, 1.0, 0.25)` is `f32`).
    #[track_caller]
    pub fn arange_range<T: Element>(start: T, stop: T, step: T) -> Tensor {
        let (a, b, s) = (
            start.to_scalar().as_f64(),
            stop.to_scalar().as_f64(),
            step.to_scalar().as_f64(),
        );
        if s == 0.0 || !s.is_finite() {
            panic!("arange_range: step must be finite and non-zero, got {s}");
        }
        let n = ((b - a) / s).ceil().max(0.0);
        if n >= MAX_ELEMENTS as f64 {
            panic!(
                "arange_range: {n} steps from {a} to {b} by {s} are more than a tensor may hold"
            );
        }
        let n = n as usize;
        let dtype = T::DTYPE;
        let steps = arange_uop(n).cast(dtype);
        let scaled = UOp::alu(
            Op::Mul,
            vec![steps, const_uop(step.to_scalar(), dtype, &[n])],
        );
        let shifted = UOp::alu(
            Op::Add,
            vec![scaled, const_uop(start.to_scalar(), dtype, &[n])],
        );
        Tensor::from_uop(shifted)
    }

    /// The `n x n` identity matrix in `f32`.
    #[track_caller]
    pub fn eye(n: usize) -> Tensor {
        require_addressable("eye", &[n, n]);
        let rows = arange_uop(n).reshape(&[n, 1]).expand(&[n, n]);
        let cols = arange_uop(n).reshape(&[1, n]).expand(&[n, n]);
        let same = UOp::alu(Op::CmpNe, vec![rows, cols]);
        let same = UOp::alu(
            Op::CmpNe,
            vec![same, const_uop(true.into(), DType::Bool, &[n, n])],
        );
        Tensor::from_uop(same.cast(DType::F32))
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
    let dims = shape.to_dims();
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
