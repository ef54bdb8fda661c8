//! vmap of an external call, by the call's [`BatchStrategy`] (seed: "Methods in detail"):
//!
//! - none: an error naming the call and the methods to choose from;
//! - `Sequential`: one call per batch element, the results stacked;
//! - `ExpandDims`: unbatched array operands get a leading 1, one call;
//! - `BroadcastAll`: unbatched array operands are broadcast to the batch, one call;
//! - `Auto`: `ExpandDims` when every batched differentiable input is rank-polymorphic and no
//!   batched input is non-differentiable, else `Sequential`.
//!
//! Derivative endpoints (seed: "Interaction with autodiff"): a `jvp` call broadcasts a primal
//! to its batched tangent (and a tangent to its batched primal) under every method but
//! `Sequential`; a `vjp` call whose cotangents are batched while no input is falls back to
//! `Sequential`, and otherwise broadcasts unbatched cotangents to the batch. Statics are never
//! batched. The batched call carries one more leading axis (`lead`), so nested vmaps compose.
//! A batch of no samples makes no call under any method: its results are empty.

use super::{CallInfo, External};
use crate::tensor::Tensor;
use crate::transform::func::transform_error;
use crate::transform::vmap::rules::BatchCtx;
use crate::uop::{BatchStrategy, Endpoint, UOp};

/// The batched image of the external `Call` `node` (some operand of which is batched): a
/// `Call` with a leading batch axis on every result, or a `Tuple` of stacked results.
pub fn batch_call(node: &UOp, ctx: &BatchCtx) -> UOp {
    let info = CallInfo::of(node).expect("batch_call takes an external call");
    let ext = info.external();
    let operands = &node.src()[1..];
    let batched: Vec<bool> = operands.iter().map(|u| ctx.is_batched(u)).collect();
    let Some(strategy) = info.strategy else {
        transform_error(&format!(
            "vmap: the external call {} has no vmap method, so it cannot be batched (jacfwd \
             and jacrev batch it too); choose one with call_with(.., Some(BatchStrategy::..)) \
             or the builder's vmap_method: Sequential, ExpandDims, BroadcastAll or Auto",
            info.describe()
        ))
    };
    if ctx.size() == 0 {
        return empty_batch(node);
    }
    match resolve(&ext, &info, &batched, strategy) {
        BatchStrategy::Sequential => sequential(node, &info, ctx),
        method => vectorized(node, &info, &ext, ctx, &batched, method),
    }
}

/// The method this call is batched by: `Auto` resolved, and the vjp fallback applied.
fn resolve(
    ext: &External,
    info: &CallInfo,
    batched: &[bool],
    strategy: BatchStrategy,
) -> BatchStrategy {
    let narrays = ext.array_inputs().len();
    let (primals, extra) = batched.split_at(narrays);
    if info.endpoint == Endpoint::Vjp && extra.iter().any(|&b| b) && !primals.contains(&true) {
        return BatchStrategy::Sequential;
    }
    if strategy != BatchStrategy::Auto {
        return strategy;
    }
    let diff = ext.differentiable_arrays();
    let mut inputs_batched: Vec<usize> = (0..narrays).filter(|&j| primals[j]).collect();
    if info.endpoint == Endpoint::Jvp {
        inputs_batched.extend(diff.iter().zip(extra).filter(|(_, b)| **b).map(|(j, _)| *j));
    }
    let safe = inputs_batched.iter().all(|&j| {
        let spec = ext.array_spec(j);
        spec.is_differentiable() && spec.is_rank_polymorphic()
    });
    if safe {
        BatchStrategy::ExpandDims
    } else {
        BatchStrategy::Sequential
    }
}

/// One call per batch element on the slices of the batched operands, results stacked.
fn sequential(node: &UOp, info: &CallInfo, ctx: &BatchCtx) -> UOp {
    let operands = &node.src()[1..];
    let narrays = info.external().array_inputs().len();
    let calls: Vec<UOp> = (0..ctx.size())
        .map(|b| {
            let sliced: Vec<UOp> = operands
                .iter()
                .map(|u| match ctx.image(u) {
                    Some(image) => sample(image, b),
                    None => u.clone(),
                })
                .collect();
            let (arrays, extra) = sliced.split_at(narrays);
            info.node(arrays.to_vec(), extra.to_vec())
        })
        .collect();
    let nresults = node.s(0).src().len();
    let stacked = (0..nresults)
        .map(|k| UOp::stack(calls.iter().map(|c| c.get_tuple(k)).collect()))
        .collect();
    UOp::tuple(stacked)
}

/// The results over a batch of no samples: each empty along the batch axis, and no call
/// made (the per-sample loop makes none, and a host function need not accept empty arrays).
fn empty_batch(node: &UOp) -> UOp {
    let empty = node
        .s(0)
        .src()
        .iter()
        .map(|r| Tensor::zeros(&[vec![0], r.shape_vec()].concat(), r.dtype()).uop())
        .collect();
    UOp::tuple(empty)
}

/// Element `b` of a batched value (batch axis first).
fn sample(image: &UOp, b: usize) -> UOp {
    let shape = image.shape_vec();
    let begins: Vec<usize> = std::iter::once(b)
        .chain(std::iter::repeat_n(0, shape.len() - 1))
        .collect();
    let mut ends = shape.clone();
    ends[0] = b + 1;
    image.shrink(&begins, &ends).reshape(&shape[1..])
}

/// One call with a leading batch axis on every array operand.
fn vectorized(
    node: &UOp,
    info: &CallInfo,
    ext: &External,
    ctx: &BatchCtx,
    batched: &[bool],
    method: BatchStrategy,
) -> UOp {
    let operands = &node.src()[1..];
    let narrays = ext.array_inputs().len();
    let partner = partners(info.endpoint, ext, narrays, operands.len());
    let any_primal = batched[..narrays].contains(&true);
    let n = ctx.size();
    let lifted: Vec<UOp> = operands
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let shape = u.shape_vec();
            let full = [vec![n], shape.clone()].concat();
            let one = [vec![1], shape].concat();
            match ctx.image(u) {
                Some(image) => image.clone(),
                None if partner[i].is_some_and(|p| batched[p]) => u.reshape(&one).expand(&full),
                None if info.endpoint == Endpoint::Vjp && i >= narrays && any_primal => {
                    u.reshape(&one).expand(&full)
                }
                None if method == BatchStrategy::BroadcastAll => u.reshape(&one).expand(&full),
                None => u.reshape(&one),
            }
        })
        .collect();
    let mut outer = info.clone();
    outer.lead += 1;
    let (arrays, extra) = lifted.split_at(narrays);
    outer.node(arrays.to_vec(), extra.to_vec())
}

/// For a jvp call: the operand paired with each operand (a differentiable primal with its
/// tangent and back); `None` elsewhere.
fn partners(endpoint: Endpoint, ext: &External, narrays: usize, n: usize) -> Vec<Option<usize>> {
    let mut partner = vec![None; n];
    if endpoint == Endpoint::Jvp {
        for (t, j) in ext.differentiable_arrays().into_iter().enumerate() {
            partner[j] = Some(narrays + t);
            partner[narrays + t] = Some(j);
        }
    }
    partner
}
