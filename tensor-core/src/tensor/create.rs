//! Constructors: tensors from data.

use super::Tensor;
use crate::uop::dtype::{Element, encode_scalars};
use crate::uop::{Arg, BufferArg, BufferStorage, DType, Device, Op, Scalar, UOp};
use std::sync::Arc;

impl Tensor {
    /// A tensor of `shape` holding `data` in row-major order.
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Tensor {
        Tensor::from_slice(&data, shape)
    }

    /// A tensor of `shape` holding a copy of `data` in row-major order.
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        let numel: usize = shape.iter().product();
        if data.len() != numel {
            panic!(
                "from_slice: {} values do not fill shape {:?} ({} elements)",
                data.len(),
                shape,
                numel
            );
        }
        let scalars: Vec<Scalar> = data.iter().map(|v| v.to_scalar()).collect();
        Tensor::from_scalars(&scalars, T::DTYPE, shape)
    }

    /// A tensor of `shape` and `dtype` holding `values` (cast to `dtype`).
    #[track_caller]
    pub fn from_scalars(values: &[Scalar], dtype: DType, shape: &[usize]) -> Tensor {
        let bytes: Arc<[u8]> = encode_scalars(values, dtype).into();
        let storage = Arc::new(BufferStorage::with_host_bytes(bytes));
        let arg = BufferArg::with_storage(values.len(), dtype, Device::cpu(), storage);
        let buffer = UOp::new(Op::Buffer, dtype, vec![], Arg::Buffer(arg));
        Tensor::from_uop(buffer.reshape(shape))
    }
}
