//! `vmap` by range (seeds/vmap-vmapin-vmapout.md): the batch never becomes a graph dimension.
//! Each mapped argument enters the scope through `Vmapin` with a loop `Range`, the function
//! runs on the per-sample slices, and each result leaves through `Vmapout`; the scheduler
//! turns the range into a loop inside the kernels.

use crate::tensor::Tensor;
use crate::transform::func::Func;
use crate::transform::vmap::axes::{InAxes, OutAxes, normalize_axis, resolve_in_axes};
use crate::transform::vmap::move_axis;
use crate::uop::{AxisType, UOp};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Range ids of vmap loops start here, apart from the ids the scheduler gives kernel loops.
const VMAP_RANGE_ID_BASE: usize = 1 << 30;

/// A fresh batch loop of `size` iterations (a distinct id per vmap, so nested vmaps nest).
pub fn batch_range(size: usize) -> UOp {
    static NEXT: AtomicUsize = AtomicUsize::new(VMAP_RANGE_ID_BASE);
    UOp::range(size, NEXT.fetch_add(1, Ordering::Relaxed), AxisType::Loop)
}

/// One call of `f` under a range vmap.
pub(crate) fn vmapped_call_by_range(
    f: &Func,
    args: &[Tensor],
    in_axes: &InAxes,
    out_axes: &OutAxes,
) -> Vec<Tensor> {
    let (axes, size) = resolve_in_axes(args, in_axes);
    let range = batch_range(size);
    let inner: Vec<Tensor> = args
        .iter()
        .zip(&axes)
        .map(|(arg, axis)| match axis {
            Some(axis) => {
                let vargs: Vec<UOp> = (0..arg.ndim())
                    .map(|a| {
                        if a == *axis {
                            range.clone()
                        } else {
                            UOp::index(0)
                        }
                    })
                    .collect();
                arg.vmapin(&vargs)
            }
            None => arg.clone(),
        })
        .collect();
    let results = f.call(&inner);
    let out_axes = out_axes.per_result(results.len());
    results
        .iter()
        .zip(out_axes)
        .enumerate()
        .map(|(i, (result, axis))| {
            let vargs: Vec<UOp> = std::iter::once(range.clone())
                .chain((0..result.ndim()).map(|_| UOp::index(0)))
                .collect();
            let batched = result.vmapout(&vargs).uop();
            let axis = axis.unwrap_or_else(|| {
                crate::transform::func::transform_error(&format!(
                    "vmap: out_axes None (result {i}) is not supported by the range method"
                ))
            });
            let target = normalize_axis(axis, batched.ndim()).unwrap_or_else(|| {
                crate::transform::func::transform_error(&format!(
                    "vmap: out_axes {axis} is out of range for result {i} of rank {}",
                    batched.ndim()
                ))
            });
            Tensor::from_uop(move_axis(&batched, 0, target))
        })
        .collect()
}
