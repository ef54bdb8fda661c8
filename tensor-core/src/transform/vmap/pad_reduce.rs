//! `vmap` by pad+reduce (seeds/vmap-vmapin-vmapout.md, section 7): sample `r` of each mapped
//! argument is a window `shrink_at(axis, r, 1)` sliding with a loop `Range` `r`; the function
//! runs on those slices; each result is put back at offset `r` of a new batch axis with
//! `pad_at` and summed over `r`. For every output position only the sample placed there is
//! non-zero, so the sum is the stacked results. The batch is a loop in the kernels, built from
//! ordinary ops whose operands vary with a range; the scheduler needs no scope ops for it.

use crate::tensor::Tensor;
use crate::transform::func::{Func, transform_error};
use crate::transform::vmap::axes::{InAxes, OutAxes, normalize_axis, resolve_in_axes};
use crate::transform::vmap::move_axis;
use crate::transform::vmap::range::batch_range;
use crate::uop::UOp;
use crate::uop::scope::free_ranges;

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
            None => unbatched(result, &r, i),
        })
        .collect()
}

/// `Σ_r pad_at(result[None], r)`: the per-sample results stacked along `axis`.
fn stacked(result: &Tensor, r: &UOp, size: usize, axis: isize, index: usize) -> UOp {
    let placed = result.unsqueeze(0).pad_at(0, r, size);
    let batched = placed.sum_over_ranges(std::slice::from_ref(r)).uop();
    let target = normalize_axis(axis, batched.ndim()).unwrap_or_else(|| {
        transform_error(&format!(
            "vmap: out_axes {axis} is out of range for result {index} of rank {}",
            batched.ndim()
        ))
    });
    move_axis(&batched, 0, target)
}

/// A result kept without a batch axis (`out_axes` None): it must not vary with the samples.
fn unbatched(result: &Tensor, r: &UOp, index: usize) -> Tensor {
    let varies = free_ranges(&result.uop().toposort())
        .get(&result.uop())
        .is_some_and(|ranges| ranges.contains(r));
    if varies {
        transform_error(&format!(
            "vmap: out_axes is None for result {index}, but that result depends on the mapped arguments"
        ));
    }
    result.clone()
}
