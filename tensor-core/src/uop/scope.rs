//! Range scopes: which loop `Range`s a tensor node's value varies with.
//!
//! A `Range` used inside a tensor graph (the batch range of a vmap scope, or the range a
//! pad+reduce vmap slices by) makes every node that reaches it depend on its current value,
//! until an op *closes* it: `Vmapout(x, vargs)` stacks `x` over its `Range` vargs and
//! `Reduce(x, ranges)` accumulates `x` over its `Range` operands. A node's *free ranges* are
//! the ranges it reaches through operands without passing such a closing op. The scheduler
//! gives a realized node with free ranges a buffer batched over them, the interpreter keys its
//! memo on their values, and reverse mode sums a cotangent over the ranges it leaves behind.

use super::{Op, UOp};
use std::collections::HashMap;

/// The `Range`s `node` closes: the `Range` vargs of a `Vmapout`, the `Range` operands of a
/// `Reduce`; none for any other op.
pub fn closed_ranges(node: &UOp) -> Vec<UOp> {
    match node.op() {
        Op::Vmapout | Op::Reduce => node.src()[1..]
            .iter()
            .filter(|s| s.op() == Op::Range)
            .cloned()
            .collect(),
        _ => Vec::new(),
    }
}

/// The free ranges of `node` given its operands' (in operand order, each outermost first):
/// their union in first-seen order, plus `node` itself if it is a `Range`, minus the ranges it
/// closes.
pub fn node_free_ranges<'a>(node: &UOp, operands: impl IntoIterator<Item = &'a [UOp]>) -> Vec<UOp> {
    let mut ranges: Vec<UOp> = Vec::new();
    for r in operands.into_iter().flatten() {
        if !ranges.contains(r) {
            ranges.push(r.clone());
        }
    }
    if node.op() == Op::Range && !ranges.contains(node) {
        ranges.push(node.clone());
    }
    let closed = closed_ranges(node);
    ranges.retain(|r| !closed.contains(r));
    ranges
}

/// The free ranges of every node of `graph` (operands before users, as `toposort` gives it),
/// outermost first; nodes with none are absent. Operands outside `graph` count as having none.
pub fn free_ranges(graph: &[UOp]) -> HashMap<UOp, Vec<UOp>> {
    let mut free: HashMap<UOp, Vec<UOp>> = HashMap::new();
    for node in graph {
        let operands = node
            .src()
            .iter()
            .map(|s| free.get(s).map(Vec::as_slice).unwrap_or(&[]));
        let ranges = node_free_ranges(node, operands);
        if !ranges.is_empty() {
            free.insert(node.clone(), ranges);
        }
    }
    free
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::{AxisType, DType, ReduceOp};

    fn batch(size: usize, id: usize) -> UOp {
        UOp::range(size, id, AxisType::Loop)
    }

    #[test]
    fn a_vmap_scope_opens_at_vmapin_and_closes_at_vmapout() {
        let r = batch(3, 1 << 30);
        let x = UOp::constant(1.0f32, DType::F32)
            .reshape(&[1, 1])
            .expand(&[3, 4]);
        let inner = x.vmapin(&[r.clone(), UOp::index(0)]);
        let doubled = UOp::alu(Op::Add, vec![inner.clone(), inner.clone()]);
        let out = doubled.vmapout(&[r.clone(), UOp::index(0)]);
        let free = free_ranges(&out.toposort());
        assert_eq!(free.get(&inner), Some(&vec![r.clone()]));
        assert_eq!(free.get(&doubled), Some(&vec![r.clone()]));
        assert!(!free.contains_key(&out));
        assert!(!free.contains_key(&x));
    }

    #[test]
    fn a_reduce_over_a_range_closes_it() {
        let r = batch(4, (1 << 30) + 7);
        let x = UOp::constant(2.0f32, DType::F32);
        let varying = UOp::alu(Op::Mul, vec![x, r.cast(DType::F32)]);
        let summed = varying.reduce_over(ReduceOp::Add, std::slice::from_ref(&r));
        let free = free_ranges(&summed.toposort());
        assert_eq!(free.get(&varying), Some(&vec![r]));
        assert!(!free.contains_key(&summed));
    }

    #[test]
    fn nested_scopes_list_the_outer_range_first() {
        let (outer, inner) = (batch(2, (1 << 30) + 20), batch(3, (1 << 30) + 21));
        let x = UOp::constant(1.0f32, DType::F32)
            .reshape(&[1, 1])
            .expand(&[2, 3]);
        let a = x.vmapin(&[outer.clone(), UOp::index(0)]);
        let b = a.vmapin(std::slice::from_ref(&inner));
        let free = free_ranges(&b.toposort());
        assert_eq!(free.get(&b), Some(&vec![outer, inner]));
    }
}
