//! What an external host function sees: arrays in host memory with their shapes, static
//! values, and (for the derivative endpoints) tangents or cotangents; and the record of the
//! calls, for users and tests to see the batching strategy at work (a count per endpoint and
//! the last [`CALL_LOG_SIZE`] invocations, so a long run keeps no growing log).

use crate::uop::dtype::{Element, encode_scalars};
use crate::uop::{DType, Endpoint, Scalar};
use ndarray::{ArrayD, IxDyn};
use std::collections::VecDeque;

/// A row-major array in host memory: its shape, dtype and little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    shape: Vec<usize>,
    dtype: DType,
    bytes: Vec<u8>,
}

impl HostArray {
    /// An array of `shape` holding `values` (row-major).
    #[track_caller]
    pub fn new<T: Element>(values: Vec<T>, shape: &[usize]) -> HostArray {
        let numel: usize = shape.iter().product();
        assert_eq!(
            values.len(),
            numel,
            "HostArray::new: {} values do not fill shape {shape:?}",
            values.len()
        );
        let scalars: Vec<Scalar> = values.into_iter().map(Element::to_scalar).collect();
        HostArray {
            shape: shape.to_vec(),
            dtype: T::DTYPE,
            bytes: encode_scalars(&scalars, T::DTYPE),
        }
    }

    /// An array holding `array`'s elements in row-major order.
    pub fn from_array<T: Element>(array: ArrayD<T>) -> HostArray {
        let shape = array.shape().to_vec();
        HostArray::new(array.iter().copied().collect(), &shape)
    }

    /// An array of `dtype` and `shape` over `bytes` (row-major, little-endian), as the
    /// runtime reads a realized buffer.
    pub fn from_bytes(mut bytes: Vec<u8>, dtype: DType, shape: &[usize]) -> HostArray {
        bytes.truncate(shape.iter().product::<usize>() * dtype.size_bytes());
        HostArray {
            shape: shape.to_vec(),
            dtype,
            bytes,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The little-endian bytes, row-major.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The elements, row-major; panics (inside the host call, so it becomes an error of the
    /// realize) unless `T` is the array's dtype.
    #[track_caller]
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        assert_eq!(
            T::DTYPE,
            self.dtype,
            "HostArray::to_vec: the array holds {}, not {}",
            self.dtype,
            T::DTYPE
        );
        T::decode_all(&self.bytes)
    }

    /// The elements as an `ndarray` array of the array's shape (see [`HostArray::to_vec`]).
    #[track_caller]
    pub fn to_array<T: Element>(&self) -> ArrayD<T> {
        ArrayD::from_shape_vec(IxDyn(&self.shape), self.to_vec())
            .expect("a host array's elements fill its shape")
    }
}

/// One input as the host function receives it.
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    /// An array input, realized.
    Array(HostArray),
    /// A static input.
    Static(Scalar),
}

/// The arguments of one invocation of an endpoint.
#[derive(Clone, Debug)]
pub struct HostCall {
    /// The inputs in schema order (arrays and statics).
    pub inputs: Vec<HostValue>,
    /// The tangents (`jvp`: one per differentiable array input, in schema order) or the
    /// cotangents (`vjp`: one per output); empty for `apply`.
    pub extra: Vec<HostArray>,
}

impl HostCall {
    /// Input `k` (schema order), which must be an array.
    #[track_caller]
    pub fn array(&self, k: usize) -> &HostArray {
        match &self.inputs[k] {
            HostValue::Array(a) => a,
            HostValue::Static(_) => panic!("input {k} is a static value, not an array"),
        }
    }

    /// Input `k` (schema order), which must be static, as an `f64`.
    #[track_caller]
    pub fn static_f64(&self, k: usize) -> f64 {
        match &self.inputs[k] {
            HostValue::Static(s) => s.as_f64(),
            HostValue::Array(_) => panic!("input {k} is an array, not a static value"),
        }
    }

    /// The tangents of a `jvp` call (one per differentiable array input).
    pub fn tangents(&self) -> &[HostArray] {
        &self.extra
    }

    /// The cotangents of a `vjp` call (one per output).
    pub fn cotangents(&self) -> &[HostArray] {
        &self.extra
    }
}

/// One recorded invocation: the endpoint and the shapes of its array operands (the array
/// inputs, then the tangents or cotangents).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// Which endpoint ran.
    pub endpoint: Endpoint,
    /// The shape of every array it received, inputs first.
    pub shapes: Vec<Vec<usize>>,
}

/// How many of the latest invocations an external keeps (older ones are only counted).
pub const CALL_LOG_SIZE: usize = 256;

/// The invocations of one external: how many of each endpoint, and the latest
/// [`CALL_LOG_SIZE`] in order.
#[derive(Debug, Default)]
pub(crate) struct CallLog {
    recent: VecDeque<CallRecord>,
    counts: [usize; 3],
}

impl CallLog {
    /// Counts `record` and keeps it, forgetting the oldest beyond [`CALL_LOG_SIZE`].
    pub(crate) fn record(&mut self, record: CallRecord) {
        self.counts[slot(record.endpoint)] += 1;
        if self.recent.len() == CALL_LOG_SIZE {
            self.recent.pop_front();
        }
        self.recent.push_back(record);
    }

    /// The kept invocations, oldest first.
    pub(crate) fn recent(&self) -> Vec<CallRecord> {
        self.recent.iter().cloned().collect()
    }

    /// How many times `endpoint` ran.
    pub(crate) fn count(&self, endpoint: Endpoint) -> usize {
        self.counts[slot(endpoint)]
    }

    /// Forgets every invocation and count.
    pub(crate) fn clear(&mut self) {
        *self = CallLog::default();
    }
}

fn slot(endpoint: Endpoint) -> usize {
    match endpoint {
        Endpoint::Apply => 0,
        Endpoint::Jvp => 1,
        Endpoint::Vjp => 2,
    }
}
