//! The bound on a kernel's code: a fused chain longer than [`CHAIN_BUDGET`] is cut by
//! realizing an intermediate value, so that no kernel grows beyond what the C compiler builds
//! in about a second.
//!
//! The C compiler's time grows with the code of one function, and faster than linearly (a
//! chain of 500 `sin`s fused into one kernel is some 100,000 lines of C: minutes of `cc`).
//! The scheduler measures a chain in the ops it lowers to ([`code_cost`]: a `sin` counts
//! the nodes of its decomposition into range reduction and polynomials, an add one, a load
//! or a view one, a padded load [`PAD_COST`], a constant nothing), along the costliest path
//! of values a kernel computes inline; a value realized into a buffer counts one (its load),
//! and the operands off the path add at most [`SIDE_COST`] each (views of buffers in full).
//! Walking the graph operands first, a node whose path would pass the budget has its
//! operand chains realized (tinygrad-style: an intermediate buffer ends one kernel and
//! starts the next; every operand computing more than [`SIDE_COST`] ops, so a value shared
//! by two of them is not computed in two kernels). Because operands off the path are capped, a value shared by several
//! paths is not counted once per path (a diamond of diamonds stays one kernel), and the pass
//! is one walk, linear in the graph.
//!
//! Graphs whose every chain is shorter than the budget (all but generated or unrolled
//! ones) are scheduled exactly as without this pass.

use super::realize::data_sources;
use crate::uop::{DType, Op, UOp};
use std::collections::{HashMap, HashSet};

/// The most lowered ops ([`code_cost`]) along one path of values fused into a kernel:
/// about 14 `f32` `sin`s or 2,000 adds, which `cc -O2` compiles in about half a second
/// (`codegen::heuristic` does not unroll a kernel that long).
pub const CHAIN_BUDGET: u64 = 2048;

/// The most an operand off a node's costliest path adds to the node's path: a few loads
/// and ops (more would count values shared by several paths once per path).
pub const SIDE_COST: u64 = 8;

/// What a `Pad` (a gated load in the kernel) counts: `cc -O2 -march=native` if-converts
/// the gated loads of a loop into masked vector loads in time that grows with their square
/// (a sum of 50 padded loads compiled in 0.8 s, of 100 in 3.2 s, of 200 in 11 s), so a
/// kernel holds about 40 of them.
pub const PAD_COST: u64 = 48;

/// The ops `op` on values of `dtype` lowers to in generated code: for the transcendentals
/// that `codegen::transcendental` decomposes on `f32`, `f16` and `bf16`, about the nodes of
/// their decomposition (range reduction, polynomials, and the paths for large or special
/// arguments, all of which are compiled), else 1.
pub fn code_cost(op: Op, dtype: DType) -> u64 {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return 1;
    }
    match op {
        Op::Exp2 => 36,
        Op::Log2 => 59,
        Op::Sin | Op::Cos => 140,
        Op::Erf => 85,
        Op::Erfc => 130,
        Op::Pow => 120,
        _ => 1,
    }
}

/// The nodes of `toposort` (operands first) to realize so that no path of inline values
/// costs more than `budget`; `realized` says which nodes have a buffer already.
pub fn chain_cuts(toposort: &[UOp], realized: &dyn Fn(&UOp) -> bool, budget: u64) -> Vec<UOp> {
    let mut chains = Chains {
        length: HashMap::new(),
        cut: Vec::new(),
        is_cut: HashSet::new(),
        realized,
    };
    for u in toposort {
        let length = chains.fit(u, budget);
        chains.length.insert(u.clone(), length);
    }
    chains.cut
}

struct Chains<'a> {
    /// The costliest inline path ending at each node walked (its own cost included).
    length: HashMap<UOp, u64>,
    /// The nodes cut so far, in order, and as a set.
    cut: Vec<UOp>,
    is_cut: HashSet<UOp>,
    realized: &'a dyn Fn(&UOp) -> bool,
}

impl Chains<'_> {
    /// The path ending at `u` after cutting its operand chains until it fits: its own
    /// cost, its costliest operand's path, and the other operands' paths up to
    /// [`SIDE_COST`] each (a sum of 5,000 padded loads is long, though no path is).
    /// Over the budget, every operand computing more than [`SIDE_COST`] ops gets a buffer.
    fn fit(&mut self, u: &UOp, budget: u64) -> u64 {
        let own = own_cost(u);
        if u.op() == Op::Buffer {
            return own;
        }
        loop {
            let mut reads: Vec<(Read, &UOp)> = data_sources(u)
                .iter()
                .map(|s| (self.read_cost(s), s))
                .collect();
            reads.sort_by_key(|(read, _)| std::cmp::Reverse(read.cost));
            let Some(&(Read { cost: longest, .. }, _)) = reads.first() else {
                return own;
            };
            let sides: u64 = reads[1..].iter().map(|(read, _)| read.side_cost()).sum();
            let length = own + longest + sides;
            if length <= budget {
                return length;
            }
            // Every long operand ends its kernel: cutting only the costliest would leave a
            // value shared with it (`y` in `y + sin(y)`) inline in both kernels.
            let cuts: Vec<UOp> = reads
                .iter()
                .filter(|(read, _)| read.computed && read.cost > SIDE_COST)
                .filter_map(|(_, s)| self.cut_point(s))
                .collect();
            if cuts.is_empty() {
                return length;
            }
            for node in cuts {
                if self.is_cut.insert(node.clone()) {
                    self.cut.push(node);
                }
            }
        }
    }

    /// What reading `s` inline costs: its path, or one load once it has a buffer.
    fn read_cost(&self, s: &UOp) -> Read {
        let (mut node, mut views) = (s.clone(), 0);
        while node.op().is_movement() && !self.is_realized(&node) {
            views += own_cost(&node);
            node = node.src()[0].clone();
        }
        let computed = !self.is_realized(&node) && !node.op().is_source();
        let cost = match node.op() {
            _ if computed => views + self.length.get(&node).copied().unwrap_or(1),
            Op::Buffer => views + 1,
            // A view of a constant is the constant: a literal in the code.
            _ if !self.is_realized(&node) => 0,
            _ => views + 1,
        };
        Read { cost, computed }
    }

    /// The value to realize to cut the path through `s`: `s`, or the value under the
    /// movement ops `s` is (a view is recomputed, never buffered); `None` when that is a
    /// buffer or a constant already.
    fn cut_point(&self, s: &UOp) -> Option<UOp> {
        let mut node = s.clone();
        while node.op().is_movement() && !self.is_realized(&node) {
            node = node.src()[0].clone();
        }
        let value = node.op().is_elementwise() || node.op() == Op::Reduce;
        (value && !self.is_realized(&node) && node.shape().is_some()).then_some(node)
    }

    fn is_realized(&self, u: &UOp) -> bool {
        (self.realized)(u) || self.is_cut.contains(u)
    }
}

/// The cost of reading an operand inline.
#[derive(Clone, Copy)]
struct Read {
    /// The ops along its path, views and the load (or computation) under them included.
    cost: u64,
    /// It computes a value (else it is a view of a buffer or a constant).
    computed: bool,
}

impl Read {
    /// What it adds off the costliest path: a view of a buffer in full (nothing in it is
    /// shared), a computed value up to [`SIDE_COST`].
    fn side_cost(&self) -> u64 {
        match self.computed {
            true => self.cost.min(SIDE_COST),
            false => self.cost,
        }
    }
}

/// The ops `u` itself adds to a kernel computing it inline.
fn own_cost(u: &UOp) -> u64 {
    match u.op() {
        Op::Buffer => 1,
        Op::Pad => PAD_COST,
        op if op.is_source() => 0,
        op if op.is_elementwise() => code_cost(op, u.dtype()),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::transcendental::decompose_transcendentals;
    use crate::uop::Arg;

    /// The non-constant nodes of `op` applied to `f32` variables, decomposed.
    fn decomposed_size(op: Op) -> u64 {
        let arity = if op == Op::Pow { 2 } else { 1 };
        let inputs: Vec<UOp> = (0..arity)
            .map(|i| {
                UOp::new(
                    Op::DefineVar,
                    DType::F32,
                    vec![],
                    Arg::Name(format!("x{i}")),
                )
            })
            .collect();
        let nodes = decompose_transcendentals(&UOp::alu(op, inputs)).toposort();
        let computed = nodes.iter().filter(|u| u.op() != Op::Const).count();
        (computed - arity) as u64
    }

    #[test]
    fn code_costs_follow_the_decompositions() {
        for op in [Op::Exp2, Op::Log2, Op::Sin, Op::Cos, Op::Erf, Op::Erfc] {
            let (size, cost) = (decomposed_size(op), code_cost(op, DType::F32));
            assert!(
                size * 4 <= cost * 5 && cost * 4 <= size * 5,
                "{op}: code cost {cost}, but its decomposition has {size} nodes"
            );
        }
        assert_eq!(code_cost(Op::Sin, DType::F64), 1, "f64 is not decomposed");
        assert_eq!(code_cost(Op::Add, DType::F32), 1);
    }
}
