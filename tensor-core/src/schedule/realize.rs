//! Which tensor nodes get a buffer of their own, and the cost model behind the optional ones.
//!
//! Forced: the requested outputs (unless already a buffer), `Contiguous`, `Copy`, `Store`
//! and `Vmapout`. Optional: a `Reduce` whose inline recomputation would repeat work — it is
//! consumed through an expand (the consuming kernel loops over ranges the reduce's index
//! does not use, so every value is recomputed once per iteration of those loops), or it is
//! requested at several different indices (in one kernel or several). It is realized when the
//! repeated work per element exceeds [`BUFFER_COST`]; otherwise recomputing it is cheaper than
//! a store, a load and a kernel boundary, and it stays fused. Elementwise chains and movement
//! ops are never realized by choice: recomputing them costs about as much as loading them.

use crate::uop::{Arg, Op, UOp};
use std::collections::HashMap;

/// The cost, in scalar operations per element, of storing a value and loading it back in
/// another kernel (the store, the load, and a share of the extra kernel's overhead).
pub const BUFFER_COST: u64 = 16;

/// True for the ops that always end a kernel.
pub fn is_forced(u: &UOp) -> bool {
    matches!(u.op(), Op::Contiguous | Op::Copy | Op::Store | Op::Vmapout)
}

/// The underlying `Buffer` when `u` is a buffer seen through reshapes only: a value that is
/// already realized in row-major order and needs no kernel.
pub fn as_contiguous_buffer(u: &UOp) -> Option<UOp> {
    match u.op() {
        Op::Buffer => Some(u.clone()),
        Op::Reshape => as_contiguous_buffer(u.s(0)),
        _ => None,
    }
}

/// Per-element cost of computing nodes inline: the number of scalar ops, with loads of
/// realized values counting one and a reduce counting its inner cost once per reduced element.
#[derive(Default)]
pub struct CostModel {
    memo: HashMap<UOp, u64>,
}

impl CostModel {
    /// The inline cost of `u`, where `is_realized` says which nodes are loaded from a buffer.
    pub fn cost(&mut self, u: &UOp, is_realized: &dyn Fn(&UOp) -> bool) -> u64 {
        if let Some(&c) = self.memo.get(u) {
            return c;
        }
        let c = if is_realized(u) {
            1
        } else {
            match (u.op(), u.arg()) {
                (Op::Buffer | Op::BufferView | Op::Const | Op::Vconst, _) => 1,
                (Op::Reduce, Arg::Reduce(_, axes)) => {
                    let shape = u.s(0).shape().unwrap_or(&[]);
                    let over_ranges = u.src()[1..].iter().map(|r| r.vmax().as_i64() as u64 + 1);
                    let n: u64 = axes
                        .iter()
                        .map(|&a| shape.get(a).copied().unwrap_or(1) as u64)
                        .chain(over_ranges)
                        .product();
                    n.saturating_mul(self.cost(u.s(0), is_realized))
                        .saturating_add(1)
                }
                (op, _) if op.is_movement() => data_sources(u)
                    .iter()
                    .map(|s| self.cost(s, is_realized))
                    .fold(0, u64::saturating_add),
                _ => data_sources(u)
                    .iter()
                    .map(|s| self.cost(s, is_realized))
                    .fold(1, u64::saturating_add),
            }
        };
        self.memo.insert(u.clone(), c);
        c
    }
}

/// Should a reduce of inline cost `cost` be realized, when its consumers would compute it
/// `redundancy` times per element at each of `requests` different indices?
pub fn worth_realizing(cost: u64, redundancy: u64, requests: u64) -> bool {
    let computations = redundancy.saturating_mul(requests.max(1));
    cost.saturating_mul(computations.saturating_sub(1)) > BUFFER_COST
}

/// The operands of `u` that carry tensor data (not shape operands of movement ops).
pub fn data_sources(u: &UOp) -> &[UOp] {
    match u.op() {
        Op::Reshape | Op::Expand | Op::Pad | Op::Shrink => &u.src()[..1],
        Op::Vmapin | Op::Vmapout | Op::Reduce => &u.src()[..1],
        _ => u.src(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_cheap_work_is_recomputed_and_repeated_heavy_work_is_buffered() {
        assert!(!worth_realizing(100, 1, 1));
        assert!(!worth_realizing(4, 2, 1));
        assert!(worth_realizing(40, 2, 1));
        assert!(worth_realizing(17, 1, 2));
    }
}
