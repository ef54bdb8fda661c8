//! `vmap` by pad+reduce (seeds/vmap-vmapin-vmapout.md, section 7): sample `r` of each mapped
//! argument is a window `shrink_at(axis, r, 1)` sliding with a loop `Range` `r`; the function
//! runs on those slices; each result is put back at offset `r` of a new batch axis with
//! `pad_at` and summed over `r`. For every output position only the sample placed there is
//! non-zero, so the sum is the stacked results. The batch is a loop in the kernels, built from
//! ordinary ops whose operands vary with a range; the scheduler needs no scope ops for it.

use crate::tensor::Tensor;
use crate::transform::func::Func;
use crate::transform::vmap::axes::{InAxes, OutAxes, resolve_in_axes};
use crate::transform::vmap::range::batch_range;
use crate::transform::vmap::{batch_axis_to, unbatched_result};
use crate::uop::UOp;

/// One call of `f` under a pad+reduce vmap.
pub(crate) fn vmapped_call_by_pad_reduce(
    f: &Func,
    args: &[Tensor],
    in_axes: &InAxes,
    out_axes: &OutAxes,
) -> Vec<Tensor> {
    let (axes, size) = resolve_in_axes(args, in_axes);
    let r = batch_range(size);
    let samples: Vec<Tensor> = args
        .iter()
        .zip(&axes)
        .map(|(arg, axis)| match axis {
            Some(axis) => arg.shrink_at(*axis, &r, 1).squeeze(*axis as isize),
            None => arg.clone(),
        })
        .collect();
    let results = f.call(&samples);
    let out_axes = out_axes.per_result(results.len());
    results
        .iter()
        .zip(out_axes)
        .enumerate()
        .map(|(i, (result, axis))| match axis {
            Some(axis) => Tensor::from_uop(stacked(result, &r, size, axis, i)),
            None => unbatched_result(result, &r, i),
        })
        .collect()
}

/// `Σ_r pad_at(result[None], r)`: the per-sample results stacked along `axis`.
fn stacked(result: &Tensor, r: &UOp, size: usize, axis: isize, index: usize) -> UOp {
    let placed = result.unsqueeze(0).pad_at(0, r, size);
    let batched = placed.sum_over_ranges(std::slice::from_ref(r)).uop();
    batch_axis_to(&batched, axis, index)
}
