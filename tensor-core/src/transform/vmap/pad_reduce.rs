//! `vmap` by pad+reduce (seeds/vmap-vmapin-vmapout.md, section 7): sample `r` of each mapped
//! argument is a window `shrink_at(axis, r, 1)` sliding with a loop `Range` `r`; the function
//! runs on those slices; each result is put back at offset `r` of a new batch axis with
//! `pad_at` and summed over `r`. For every output position only the sample placed there is
//! non-zero, so the sum is the stacked results. The batch is a loop in the kernels, built from
//! ordinary ops whose operands vary with a range; the scheduler needs no scope ops for it, and
//! its reduce-collapse rule reads one sample per position instead of summing over all.

use crate::tensor::Tensor;
use crate::transform::vmap::looped::LoopMethod;
use crate::uop::UOp;

/// The pad+reduce method: samples are sliding windows, results are summed pads.
pub(crate) struct ByPadReduce;

impl LoopMethod for ByPadReduce {
    fn sample(&self, arg: &Tensor, axis: usize, r: &UOp) -> Tensor {
        arg.shrink_at(axis, r, 1).squeeze(axis as isize)
    }

    /// `Σ_r pad_at(result[None], r)`: the per-sample results stacked along axis 0.
    fn stack(&self, result: &Tensor, r: &UOp, size: usize) -> UOp {
        let placed = result.unsqueeze(0).pad_at(0, r, size);
        placed.sum_over_ranges(std::slice::from_ref(r)).uop()
    }
}
