//! `vmap` by graph rewrite (seeds/vmap-rewrite-design.md): trace the function on unbatched
//! placeholders, walk the traced graph operands-first, and give every node that depends on a
//! mapped argument its batched image, in which the batch is a real leading axis. No loop over
//! samples is ever built: the scheduler sees one graph with one more dimension.

pub mod axes;
pub mod chunked;
pub mod looped;
pub mod pad_reduce;
pub mod range;
pub mod rules;

pub use axes::{DeferredAxes, InAxes, OutAxes};
pub use chunked::vmap_chunked;

use crate::tensor::Tensor;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::function::traced_once;
use crate::transform::trace::{placeholder, trace};
use crate::uop::UOp;
use axes::resolve_in_axes;
use rules::BatchCtx;
use std::collections::HashMap;

/// How `vmap` batches a function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VmapMethod {
    /// Rewrite the traced graph so the batch is a real leading dimension (the default).
    #[default]
    Rewrite,
    /// Bracket the function with `Vmapin`/`Vmapout`: the batch becomes a loop in the kernels.
    Range,
    /// Slice each sample out with a window sliding with a loop `Range`, put each result back
    /// with a pad at that offset, and sum over the range (seed section 7): only ordinary
    /// tensor ops whose operands vary with the range, no scope ops.
    PadReduce,
}

/// `f` mapped over the `in_axes` of its arguments, with the batch placed at `out_axes` of its
/// results, as `jax.vmap`.
pub fn vmap<M>(
    f: impl IntoFunc<M>,
    in_axes: impl Into<InAxes>,
    out_axes: impl Into<OutAxes>,
) -> Func {
    vmap_with(f, in_axes, out_axes, VmapMethod::Rewrite)
}

/// `vmap` with a choice of method; all give the same values.
pub fn vmap_with<M>(
    f: impl IntoFunc<M>,
    in_axes: impl Into<InAxes>,
    out_axes: impl Into<OutAxes>,
    method: VmapMethod,
) -> Func {
    let f = f.into_func();
    let (in_axes, out_axes) = (in_axes.into(), out_axes.into());
    let batched = Func::new(f.arity(), move |args: &[Tensor]| match method {
        VmapMethod::Rewrite => vmapped_call(&f, args, &in_axes, &out_axes),
        VmapMethod::Range => {
            looped::vmapped_call_in_loop(&range::ByRange, &f, args, &in_axes, &out_axes)
        }
        VmapMethod::PadReduce => {
            looped::vmapped_call_in_loop(&pad_reduce::ByPadReduce, &f, args, &in_axes, &out_axes)
        }
    });
    traced_once("vmap", batched)
}

fn vmapped_call(f: &Func, args: &[Tensor], in_axes: &InAxes, out_axes: &OutAxes) -> Vec<Tensor> {
    let (axes, size) = resolve_in_axes(args, in_axes);
    let mut seeds = HashMap::new();
    let inputs: Vec<UOp> = args
        .iter()
        .zip(&axes)
        .map(|(arg, axis)| match axis {
            Some(axis) => {
                let batched = move_axis(&arg.uop(), *axis, 0);
                let unbatched_shape = &batched.shape_vec()[1..];
                let p = placeholder(unbatched_shape, arg.dtype(), arg.device());
                seeds.insert(p.clone(), batched);
                p
            }
            None => arg.uop(),
        })
        .collect();
    let _library = crate::tensor::LibraryScope::enter();
    let traced = trace(f, inputs);
    let mut ctx = BatchCtx::new(size, seeds);
    for node in UOp::sink(traced.outputs.clone()).toposort() {
        if !ctx.is_batched(&node)
            && node.src().iter().any(|s| ctx.is_batched(s))
            && node.op() != crate::uop::Op::Sink
        {
            ctx.batch(&node);
        }
    }
    let out_axes = out_axes.per_result(traced.outputs.len());
    traced
        .outputs
        .iter()
        .zip(out_axes)
        .enumerate()
        .map(|(i, (out, axis))| Tensor::from_uop(place_batch(&ctx, out, axis, i)))
        .collect()
}

/// The result `out` with its batch axis at `axis` (an unbatched result is repeated along the
/// batch, as JAX does; `None` keeps an unbatched result as it is).
fn place_batch(ctx: &BatchCtx, out: &UOp, axis: Option<isize>, index: usize) -> UOp {
    let Some(axis) = axis else {
        if ctx.is_batched(out) {
            transform_error(&format!(
                "vmap: out_axes is None for result {index}, but that result depends on the mapped arguments"
            ));
        }
        return out.clone();
    };
    let batched = ctx.broadcast_to(out, &out.shape_vec());
    looped::batch_axis_to(&batched, axis, index)
}

/// `u` with axis `from` moved to position `to`, the others keeping their order.
pub fn move_axis(u: &UOp, from: usize, to: usize) -> UOp {
    if from == to {
        return u.clone();
    }
    let mut perm: Vec<usize> = (0..u.ndim()).filter(|&a| a != from).collect();
    perm.insert(to, from);
    u.permute(&perm)
}
