//! Reading part of a lazy value computes the whole value once and keeps it.
//!
//! A slice (`narrow`, `slice`, an integer index), a transpose or any chain of movement ops
//! read from a lazy tensor is a view of its *base*, the node under the chain. Realizing the
//! view alone fuses the chain into the base's kernels, which is best when the base is read once;
//! but reading a second slice of a per-sample gradient would run the whole backward pass again.
//!
//! The policy: a realize of a view computes its base whole, as one more output of the same plan,
//! and keeps it ([`crate::realized`]), when
//! - the chain is not only reshapes (a reshape of a computed base is that base's buffer, which
//!   is kept as it is),
//! - the base is lazy (not a buffer) and reads buffers,
//! - the base is *expensive*: its graph holds a reduction, a function call (the backward pass
//!   of `grad`, the body of a `vmap`) or an explicit `contiguous`, so computing the view from it
//!   would repeat that work,
//! - and something besides the view holds the base (the lazy tensor itself, or another graph
//!   read from it): only then can it be read again.
//!
//! A base that is one result of a function call (one gradient of a `grad`) is computed with the
//! call's other results that the program still holds, as a realize computes a tensor's
//! siblings: they share its work, and reading them later then runs nothing.
//!
//! So reading `k` slices of a lazy gradient that the program still holds costs one backward
//! pass and `k` small copies; reading one slice of a temporary (`f(x).narrow(..)` with nothing
//! else holding `f(x)`) stays fused and computes only what the slice needs.

use tensor_core::uop::fast_hash::FastSet;
use tensor_core::uop::tuple_body;
use tensor_core::{Op, UOp};

/// The movement ops a view chain is made of.
pub(crate) fn is_movement(op: Op) -> bool {
    matches!(
        op,
        Op::Reshape | Op::Permute | Op::Shrink | Op::Expand | Op::Flip | Op::Pad
    )
}

/// The node under the chain of movement ops at the top of `graph` (`graph` itself when its top
/// is not one), and whether the chain has an op other than a reshape.
pub(crate) fn base_of(graph: &UOp) -> (&UOp, bool) {
    let mut node = graph;
    let mut moves = false;
    while is_movement(node.op()) {
        moves |= node.op() != Op::Reshape;
        node = node.s(0);
    }
    (node, moves)
}

/// The base a realize of `graph` computes whole and keeps first (see the module docs), if any.
pub(crate) fn shared_expensive_base(graph: &UOp) -> Option<UOp> {
    let (base, moves) = base_of(graph);
    let lazy = base.op() != Op::Buffer && base.reads_buffers();
    // The one holder the chain accounts for is the movement op right above the base.
    let shared = base.holders() > 1;
    (moves && lazy && shared && is_expensive(base)).then(|| base.clone())
}

/// `base` and, when it is one result of a call, the call's other results that something holds
/// (an unheld result is not made: asking for it would create it with this one handle).
pub(crate) fn with_held_siblings(base: UOp) -> Vec<UOp> {
    let mut all = vec![base.clone()];
    if base.op() != Op::GetTuple {
        return all;
    }
    let call = base.s(0);
    let results = tuple_body(call).map_or(0, |body| body.src().len());
    for k in 0..results {
        let sibling = call.get_tuple(k);
        if sibling != base && sibling.holders() > 1 {
            all.push(sibling);
        }
    }
    all
}

/// Whether computing `node` again would repeat a reduction, a call or an explicit realization
/// (a walk of the lazy part of its graph that stops at the first one found).
fn is_expensive(node: &UOp) -> bool {
    let mut seen: FastSet<usize> = FastSet::default();
    let mut stack = vec![node];
    while let Some(next) = stack.pop() {
        if matches!(
            next.op(),
            Op::Reduce | Op::Function | Op::Call | Op::Contiguous
        ) {
            return true;
        }
        for operand in next.src() {
            if operand.reads_buffers() && seen.insert(operand.id()) {
                stack.push(operand);
            }
        }
    }
    false
}
