//! Tracing a function into a graph over placeholders, and putting values back in.
//!
//! Every transform works the same way: call the function on placeholders (fresh `Param`
//! nodes no other graph contains), transform the traced graph, then substitute the real
//! arguments for the placeholders.

use crate::tensor::Tensor;
use crate::transform::func::Func;
use crate::uop::{Arg, DType, Device, Op, UOp, tuple_body};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Substitution of nodes in a traced graph (the one definition lives in `uop`).
pub use crate::uop::substitute;
use crate::uop::{outside_bodies, rebuild, substitute_in_scope};

/// Slots of placeholders start here, far above the slots `#[function]` gives its parameters.
const PLACEHOLDER_SLOT_BASE: usize = 1 << 40;

/// A fresh placeholder of the given shape, dtype and device: a `Param` with a slot no other
/// placeholder has, so nested transforms never confuse each other's inputs.
pub fn placeholder(shape: &[usize], dtype: DType, device: Device) -> UOp {
    static NEXT: AtomicUsize = AtomicUsize::new(PLACEHOLDER_SLOT_BASE);
    let slot = NEXT.fetch_add(1, Ordering::Relaxed);
    UOp::param(slot, shape, dtype, Some(device))
}

/// A placeholder standing for `like`'s shape, dtype and device.
pub fn placeholder_like(like: &Tensor) -> UOp {
    placeholder(&like.shape(), like.dtype(), like.device())
}

/// A function traced on placeholders: the placeholders it was called with and its outputs.
pub struct Traced {
    /// One placeholder per argument, in order.
    pub inputs: Vec<UOp>,
    /// The graph of each result, over the placeholders.
    pub outputs: Vec<UOp>,
}

/// Calls `f` on `inputs` (placeholders, or values a transform leaves alone), returning its
/// graph with `Function` calls inlined.
#[track_caller]
pub fn trace(f: &Func, inputs: Vec<UOp>) -> Traced {
    // The graph is kept per signature: its scalars are code, not values bound per call.
    let _library = crate::tensor::LibraryScope::enter();
    let args: Vec<Tensor> = inputs.iter().cloned().map(Tensor::from_uop).collect();
    let outputs = f
        .call(&args)
        .into_iter()
        .map(|t| inline_functions(&t.uop()))
        .collect();
    Traced { inputs, outputs }
}

/// `root` with every `GetTuple(Function(Tuple(body), args), i)` replaced by `body[i]` with
/// the function's `Param(k)` replaced by `args[k]`: the Function's graph, inlined.
pub fn inline_functions(root: &UOp) -> UOp {
    if !root.toposort().iter().any(|u| u.op() == Op::Function) {
        return root.clone();
    }
    let mut images: HashMap<UOp, UOp> = HashMap::new();
    for node in root.toposort() {
        let rebuilt = rebuild(&node, &images);
        let image = match inlined_result(&rebuilt) {
            Some(result) => result,
            None => rebuilt,
        };
        images.insert(node, image);
    }
    images.remove(root).expect("root is in its own toposort")
}

/// The value of `GetTuple(Function(...), i)` with the arguments substituted, if `node` is one.
fn inlined_result(node: &UOp) -> Option<UOp> {
    if node.op() != Op::GetTuple
        || node.s(0).op() != Op::Function
        || matches!(node.s(0).arg(), Arg::Custom(_))
    {
        return None;
    }
    let function = node.s(0);
    let Arg::Int(idx) = node.arg() else {
        return None;
    };
    let body = tuple_body(function)?.s(*idx as usize).clone();
    let args = &function.src()[1..];
    // the Params of functions called inside the body are theirs, not this function's
    let params: HashMap<UOp, UOp> = body
        .toposort_along(outside_bodies, |_| true)
        .into_iter()
        .filter_map(|u| match u.arg() {
            Arg::Param { slot, .. } if u.op() == Op::Param && *slot < args.len() => {
                Some((u.clone(), args[*slot].clone()))
            }
            _ => None,
        })
        .collect();
    Some(substitute_in_scope(&body, &params))
}

/// True when `root` depends on any of `inputs`.
pub fn depends_on(root: &UOp, inputs: &[UOp]) -> bool {
    root.toposort().iter().any(|u| inputs.contains(u))
}
