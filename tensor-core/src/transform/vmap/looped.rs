//! What the loop methods of `vmap` (range, pad+reduce) share: the batch is a loop `Range`, never
//! a graph dimension. Each mapped argument is entered as its sample at the range, the function
//! runs once on the samples, and each result leaves stacked over the range; a method says only
//! how a sample is entered and how a result is stacked.

use crate::tensor::Tensor;
use crate::transform::func::{Func, transform_error};
use crate::transform::trace::{depends_on, placeholder, trace};
use crate::transform::vmap::axes::normalize_axis;
use crate::transform::vmap::axes::{InAxes, OutAxes, resolve_in_axes};
use crate::transform::vmap::move_axis;
use crate::uop::scope::free_ranges;
use crate::uop::{AxisType, UOp};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Range ids of vmap loops start here, apart from the ids the scheduler gives kernel loops.
const VMAP_RANGE_ID_BASE: usize = 1 << 30;

/// A fresh batch loop of `size` iterations (a distinct id per vmap, so nested vmaps nest).
pub fn batch_range(size: usize) -> UOp {
    static NEXT: AtomicUsize = AtomicUsize::new(VMAP_RANGE_ID_BASE);
    UOp::range(size, NEXT.fetch_add(1, Ordering::Relaxed), AxisType::Loop)
}

/// How one loop method enters samples and stacks results.
pub(crate) trait LoopMethod {
    /// Sample `r` of `arg` along its batch `axis` (that axis removed).
    fn sample(&self, arg: &Tensor, axis: usize, r: &UOp) -> Tensor;
    /// The per-sample `result` stacked over the `size` values of `r`, along a new axis 0.
    fn stack(&self, result: &Tensor, r: &UOp, size: usize) -> UOp;
}

/// One call of `f` vmapped by the loop method `method`.
pub(crate) fn vmapped_call_in_loop(
    method: &impl LoopMethod,
    f: &Func,
    args: &[Tensor],
    in_axes: &InAxes,
    out_axes: &OutAxes,
) -> Vec<Tensor> {
    // The batched graph is kept per signature: its scalars are code, not values.
    let _library = crate::tensor::LibraryScope::enter();
    let (axes, size) = resolve_in_axes(args, in_axes);
    if size == 0 {
        return empty_batch_call(f, args, &axes, out_axes);
    }
    let r = batch_range(size);
    let samples: Vec<Tensor> = args
        .iter()
        .zip(&axes)
        .map(|(arg, axis)| match axis {
            Some(axis) => method.sample(arg, *axis, &r),
            None => arg.clone(),
        })
        .collect();
    let results = f.call(&samples);
    refuse_external_calls(&results, &r);
    let out_axes = out_axes.per_result(results.len());
    results
        .iter()
        .zip(out_axes)
        .enumerate()
        .map(|(i, (result, axis))| match axis {
            Some(axis) => Tensor::from_uop(batch_axis_to(&method.stack(result, &r, size), axis, i)),
            None => unbatched_result(result, &r, i),
        })
        .collect()
}

/// `f` over a batch of no samples. No loop is built (a range of no iterations has no value
/// for a window to slide to): `f` is traced on placeholders of one sample for the shapes and
/// dtypes of its results, and each result is empty along its batch axis.
fn empty_batch_call(
    f: &Func,
    args: &[Tensor],
    axes: &[Option<usize>],
    out_axes: &OutAxes,
) -> Vec<Tensor> {
    let mut samples = Vec::new();
    for (arg, axis) in args.iter().zip(axes) {
        samples.push(match axis {
            Some(axis) => {
                let mut shape = arg.shape();
                shape.remove(*axis);
                placeholder(&shape, arg.dtype(), arg.device())
            }
            None => arg.uop(),
        });
    }
    let traced = trace(f, samples.clone());
    let mapped: Vec<UOp> = samples
        .into_iter()
        .zip(axes)
        .filter_map(|(s, axis)| axis.map(|_| s))
        .collect();
    let out_axes = out_axes.per_result(traced.outputs.len());
    traced
        .outputs
        .iter()
        .zip(out_axes)
        .enumerate()
        .map(|(i, (out, axis))| match axis {
            Some(axis) => {
                let shape = [vec![0], out.shape_vec()].concat();
                let empty = Tensor::zeros(&shape, out.dtype()).uop();
                Tensor::from_uop(batch_axis_to(&empty, axis, i))
            }
            None if depends_on(out, &mapped) => unbatched_error(i),
            None => Tensor::from_uop(out.clone()),
        })
        .collect()
}

/// Result `index`, batched along axis 0, with its batch axis moved to `out_axes` entry `axis`.
pub(crate) fn batch_axis_to(batched: &UOp, axis: isize, index: usize) -> UOp {
    let ndim = batched.ndim();
    let target = normalize_axis(axis, ndim).unwrap_or_else(|| {
        transform_error(&format!(
            "vmap: out_axes {axis} is out of range for result {index} of rank {ndim} (with the batch axis)"
        ))
    });
    move_axis(batched, 0, target)
}

/// A result kept without a batch axis (`out_axes` None): it must not vary with the batch
/// range `r`.
fn unbatched_result(result: &Tensor, r: &UOp, index: usize) -> Tensor {
    let varies = free_ranges(&result.uop().toposort())
        .get(&result.uop())
        .is_some_and(|ranges| ranges.contains(r));
    if varies {
        unbatched_error(index);
    }
    result.clone()
}

fn unbatched_error(index: usize) -> ! {
    transform_error(&format!(
        "vmap: out_axes is None for result {index}, but that result depends on the mapped arguments"
    ))
}

/// An external call whose operands vary with the batch loop cannot run on the host once per
/// loop: the loop methods refuse it (the rewrite method batches it by its strategy).
fn refuse_external_calls(results: &[Tensor], r: &UOp) {
    let roots: Vec<UOp> = results.iter().map(Tensor::uop).collect();
    for node in UOp::sink(roots).toposort() {
        if let Some(info) = crate::transform::external::CallInfo::of(&node)
            && crate::transform::trace::depends_on(&node, std::slice::from_ref(r))
        {
            transform_error(&format!(
                "vmap: the external call {} depends on the batch, which the Range and \
                 PadReduce methods make a loop inside kernels; use VmapMethod::Rewrite",
                info.describe()
            ));
        }
    }
}
