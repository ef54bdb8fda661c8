//! Scope crossing in reverse mode: a cotangent share that varies with a range its operand
//! does not vary with is summed over that range.
//!
//! Inside a vmap scope every node stands for one sample (the value at the current value of
//! the batch `Range`). An operand that does not vary with the range (an unmapped weight used
//! inside the scope, a constant computed outside it) is one value used by every sample, so
//! its cotangent is the sum of the per-sample shares: `Σ_r share(r)`. The same holds for a
//! `Reduce` over ranges and for nested scopes (one sum per range left behind).
//!
//! Only ranges the differentiated graph itself closes (by `Vmapout` or a `Reduce` over
//! ranges) are summed: a range that stays open at the function's results belongs to an
//! enclosing scope (the function is called inside a range vmap), and the cotangent of every
//! node legitimately varies with it.

use crate::uop::scope::{closed_ranges, free_ranges, node_free_ranges};
use crate::uop::{Op, ReduceOp, UOp};
use std::collections::{HashMap, HashSet};

/// The free ranges of the forward graph and of the shares built from it, and the ranges the
/// forward graph closes.
pub(crate) struct Crossing {
    /// Free ranges of every node seen so far (empty for nodes that have none).
    free: HashMap<UOp, Vec<UOp>>,
    /// The ranges some node of the forward graph closes.
    scoped: HashSet<UOp>,
}

impl Crossing {
    /// The scopes of the forward graph `order` (operands before users).
    pub(crate) fn of_forward(order: &[UOp]) -> Crossing {
        let mut free = free_ranges(order);
        for node in order {
            free.entry(node.clone()).or_default();
        }
        let scoped = order.iter().flat_map(closed_ranges).collect();
        Crossing { free, scoped }
    }

    /// `share`, a cotangent share flowing into `operand`, summed over the ranges of the
    /// differentiated graph that it varies with and `operand` does not.
    pub(crate) fn settle(&mut self, share: UOp, operand: &UOp) -> UOp {
        let kept = self.ranges_of(operand);
        let left_behind: Vec<UOp> = self
            .ranges_of(&share)
            .into_iter()
            .filter(|r| self.scoped.contains(r) && !kept.contains(r))
            .collect();
        if left_behind.is_empty() {
            return share;
        }
        sum_over_ranges(&share, &left_behind)
    }

    /// The free ranges of `u`, computing those of the nodes not seen yet (operands first).
    fn ranges_of(&mut self, u: &UOp) -> Vec<UOp> {
        for node in u.toposort_where(|n| !self.free.contains_key(n)) {
            let ranges = {
                let operands = node.src().iter().map(|s| self.free[s].as_slice());
                node_free_ranges(&node, operands)
            };
            self.free.insert(node, ranges);
        }
        self.free[u].clone()
    }
}

/// `Σ` of `share` over every value of `ranges`: a value that no longer varies with them, of
/// the same shape.
pub(crate) fn sum_over_ranges(share: &UOp, ranges: &[UOp]) -> UOp {
    share.reduce_over(ReduceOp::Add, ranges)
}

/// True for a `Reduce` over ranges (`UOp::reduce_over`) rather than over axes.
pub(crate) fn is_reduce_over_ranges(node: &UOp) -> bool {
    node.op() == Op::Reduce && node.src()[1..].iter().any(|s| s.op() == Op::Range)
}
