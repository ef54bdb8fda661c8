//! Methods that compute a [`Tensor`]: `realize`, `to_vec`, `to_ndarray`, on the shared CPU
//! device. A trait, because `Tensor` lives in `tensor-core`, which does no I/O.

use crate::error::Result;
use crate::realize::{realize, to_vec};
use ndarray::{ArrayD, IxDyn};
use tensor_core::{Element, Tensor};

/// Computing a lazy tensor: import it (it is in `tensor::prelude`) to call these on tensors.
pub trait Realize {
    /// Computes the tensor; afterwards it (and its clones) read the result buffer instead of
    /// recomputing it.
    fn realize(&self) -> Result<&Self>;

    /// The elements in row-major order; fails unless `T` is the tensor's element type.
    fn to_vec<T: Element>(&self) -> Result<Vec<T>>;

    /// The value as an `ndarray` array of the tensor's shape; fails unless `T` is the
    /// tensor's element type.
    fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>>;
}

impl Realize for Tensor {
    fn realize(&self) -> Result<&Self> {
        realize(&[self])?;
        Ok(self)
    }

    fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        to_vec(self)
    }

    fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let values = to_vec::<T>(self)?;
        Ok(ArrayD::from_shape_vec(IxDyn(&self.shape()), values)
            .expect("a tensor's values fill its shape"))
    }
}
