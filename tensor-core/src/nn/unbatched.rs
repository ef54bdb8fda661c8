//! Torch's unbatched forms: a layer given one sample (no batch axis, `[C, *spatial]` for a
//! convolution) runs its batched path on a batch of one and drops the batch axis again, so
//! a per-sample function under `vmap` is written as torch writes it.

use crate::tensor::Tensor;

/// `f` applied to `x` with a leading batch axis of one, and that axis removed from the result.
#[track_caller]
pub(crate) fn as_batch_of_one(x: &Tensor, f: impl FnOnce(&Tensor) -> Tensor) -> Tensor {
    f(&x.unsqueeze(0)).squeeze(0)
}
