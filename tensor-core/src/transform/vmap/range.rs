//! `vmap` by range (seeds/vmap-vmapin-vmapout.md): the batch never becomes a graph dimension.
//! Each mapped argument enters the scope through `Vmapin` with a loop `Range`, the function
//! runs on the per-sample slices, and each result leaves through `Vmapout`; the scheduler
//! turns the range into a loop inside the kernels.

use crate::tensor::Tensor;
use crate::transform::vmap::looped::LoopMethod;
use crate::uop::UOp;

/// The range method: samples enter a `Vmapin` scope and results leave through `Vmapout`.
pub(crate) struct ByRange;

impl LoopMethod for ByRange {
    fn sample(&self, arg: &Tensor, axis: usize, r: &UOp) -> Tensor {
        let vargs: Vec<UOp> = (0..arg.ndim())
            .map(|a| if a == axis { r.clone() } else { UOp::index(0) })
            .collect();
        arg.vmapin(&vargs)
    }

    fn stack(&self, result: &Tensor, r: &UOp, _size: usize) -> UOp {
        let vargs: Vec<UOp> = std::iter::once(r.clone())
            .chain((0..result.ndim()).map(|_| UOp::index(0)))
            .collect();
        result.vmapout(&vargs).uop()
    }
}
