//! `vmap` a chunk of the batch at a time (torch.func's `chunk_size`): the mapped arguments are
//! cut along their batch axes into chunks of `chunk_size` samples, the batched function is
//! called on each, and the results are joined along their `out_axes`. The values are those of
//! the whole batch at once; the chunks' graphs are independent, so the plan runs one chunk's
//! kernels after another and their intermediate buffers (sized by the chunk) are shared.

use super::axes::resolve_in_axes;
use super::{InAxes, OutAxes, VmapMethod, vmap_with};
use crate::tensor::Tensor;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::function::traced_once;

/// [`vmap_with`] over chunks of at most `chunk_size` samples (the last chunk may be
/// smaller). Panics (naming `vmap`) on a chunk size of 0.
#[track_caller]
pub fn vmap_chunked<M>(
    f: impl IntoFunc<M>,
    in_axes: impl Into<InAxes>,
    out_axes: impl Into<OutAxes>,
    method: VmapMethod,
    chunk_size: usize,
) -> Func {
    if chunk_size == 0 {
        transform_error("vmap: chunk_size must be at least 1 (or None for the whole batch)");
    }
    let (in_axes, out_axes) = (in_axes.into(), out_axes.into());
    let inner = vmap_with(f, in_axes.clone(), out_axes.clone(), method);
    let chunked = Func::new(inner.arity(), move |args: &[Tensor]| {
        chunked_call(&inner, args, &in_axes, &out_axes, chunk_size)
    });
    traced_once("vmap", chunked)
}

/// `batched` (a vmapped function) called on each chunk of `args`, the results joined.
pub(crate) fn chunked_call(
    batched: &Func,
    args: &[Tensor],
    in_axes: &InAxes,
    out_axes: &OutAxes,
    chunk_size: usize,
) -> Vec<Tensor> {
    let (axes, size) = resolve_in_axes(args, in_axes);
    if size <= chunk_size {
        return batched.call(args);
    }
    let chunks: Vec<Vec<Tensor>> = (0..size)
        .step_by(chunk_size)
        .map(|start| {
            let len = chunk_size.min(size - start);
            let part: Vec<Tensor> = args
                .iter()
                .zip(&axes)
                .map(|(arg, axis)| match axis {
                    Some(axis) => arg.narrow(*axis as isize, start as isize, len),
                    None => arg.clone(),
                })
                .collect();
            batched.call(&part)
        })
        .collect();
    let nresults = chunks[0].len();
    out_axes
        .per_result(nresults)
        .into_iter()
        .enumerate()
        .map(|(i, axis)| match axis {
            // An unbatched result is the same for every chunk.
            None => chunks[0][i].clone(),
            Some(axis) => {
                let parts: Vec<Tensor> = chunks.iter().map(|c| c[i].clone()).collect();
                Tensor::cat(&parts, axis)
            }
        })
        .collect()
}
