//! Which tensor nodes get a buffer of their own, and the cost model behind the optional ones.
//!
//! Forced: the requested outputs (unless already a buffer), `Contiguous`, `Copy`, `Store`
//! and `Vmapout`. Optional: a `Reduce` or an elementwise value, decided per request by one
//! rule table ([`RULES`], first match wins) over the request's [`Facts`]: its inline cost per
//! element ([`CostModel`]: ALU ops and loads, a reduce counting its operand once per reduced
//! element), how many times the consuming kernel would compute each element (the loops it
//! ignores outside the innermost loop it uses, since the linearizer hoists it out of inner
//! ones; and windows or broadcasts by reshape that map several iterations to one element),
//! and at how many indices it is requested (in one kernel or several). A node is realized
//! when the work inlining repeats exceeds [`BUFFER_COST`] (a store, a load and a share of a
//! kernel), except elementwise values cheaper than [`MIN_VALUE_COST`] (about a load) and
//! values of positions only (the kernel rules fold those). Each decision is kept with its
//! rule ([`Decision`]) in the schedule; `DEBUG=3` prints them.
//!
//! Compared with tinygrad's rangeify (which realizes reduces read through an expand and
//! values with several consumers past a cost), the rule is the same for reduces and values,
//! counts windows as repetition, and says which rule decided.

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
    let mut u = u;
    while u.op() == Op::Reshape {
        u = u.s(0);
    }
    (u.op() == Op::Buffer).then(|| u.clone())
}

/// The scalar ops one lane of `op` runs once lowered: 1, except the transcendentals that
/// `codegen::transcendental` decomposes into range reductions and polynomials. Only the
/// epilogues of contractions are weighed this way ([`CostModel::epilogue`]): their ops run
/// lane by lane after a tiled reduce. Elsewhere every op counts one, the scale the other
/// realization bounds were set on.
pub fn lowered_op_cost(op: Op) -> u64 {
    match op {
        Op::Exp2 => 24,
        Op::Log2 => 32,
        Op::Sin | Op::Cos => 40,
        // Two polynomials (7 and 10 terms) and an `exp2`.
        Op::Erf | Op::Erfc => 64,
        _ => 1,
    }
}

/// Per-element cost of computing nodes inline: the number of scalar ops, with loads of
/// realized values counting one and a reduce counting its inner cost once per reduced element.
#[derive(Default)]
pub struct CostModel {
    memo: HashMap<UOp, u64>,
    /// Transcendentals cost their lowered ops ([`lowered_op_cost`]) rather than one.
    lowered: bool,
}

impl CostModel {
    /// The inline cost of `u`, where `is_realized` says which nodes are loaded from a buffer.
    ///
    /// Nodes below `u` not costed yet are costed first, operands before users (a walk with
    /// an explicit stack: a chain of any length).
    pub fn cost(&mut self, u: &UOp, is_realized: &dyn Fn(&UOp) -> bool) -> u64 {
        if let Some(&c) = self.memo.get(u) {
            return c;
        }
        let pending = u.toposort_along(
            |n| match is_realized(n) {
                true => &[],
                false => data_sources(n),
            },
            |n| !self.memo.contains_key(n),
        );
        for node in pending {
            let c = self.own_cost(&node, is_realized);
            self.memo.insert(node, c);
        }
        self.memo[u]
    }

    /// The cost of `u` from the costs of its operands (memoized already).
    fn own_cost(&self, u: &UOp, is_realized: &dyn Fn(&UOp) -> bool) -> u64 {
        if is_realized(u) {
            return 1;
        }
        let of = |s: &UOp| self.memo[s];
        match (u.op(), u.arg()) {
            (Op::Buffer | Op::Const | Op::Vconst, _) => 1,
            (Op::Reduce, Arg::Reduce(_, axes)) => {
                let shape = u.s(0).shape().unwrap_or(&[]);
                let over_ranges = u.src()[1..].iter().map(|r| r.vmax().as_i64() as u64 + 1);
                let n: u64 = axes
                    .iter()
                    .map(|&a| shape.get(a).copied().unwrap_or(1) as u64)
                    .chain(over_ranges)
                    .product();
                n.saturating_mul(of(u.s(0))).saturating_add(1)
            }
            (op, _) if op.is_movement() => {
                data_sources(u).iter().map(of).fold(0, u64::saturating_add)
            }
            (op, _) => data_sources(u)
                .iter()
                .map(of)
                .fold(self.op_cost(op), u64::saturating_add),
        }
    }
}

impl CostModel {
    fn op_cost(&self, op: Op) -> u64 {
        match self.lowered {
            true => lowered_op_cost(op),
            false => 1,
        }
    }

    /// The per-element cost of `root` with every `Reduce` and every node `is_realized`
    /// accepts counted as one load: the elementwise work a kernel computing `root` does
    /// around its reduces. `lowered`: transcendentals cost their lowered ops
    /// ([`lowered_op_cost`]), else one like every op.
    pub fn epilogue(root: &UOp, is_realized: &dyn Fn(&UOp) -> bool, lowered: bool) -> u64 {
        let mut model = CostModel {
            lowered,
            ..CostModel::default()
        };
        model.cost(root, &|u| u.op() == Op::Reduce || is_realized(u))
    }
}

/// What the cost model knows about one request of an optional node inside a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The node is a `Reduce` (else an elementwise value).
    pub reduce: bool,
    /// Computing it reads a buffer or draws random bits (else it is a function of positions
    /// only: an arange, a one-hot mask, index arithmetic).
    pub reads_memory: bool,
    /// It is a product with a mask of positions (a 0/1 value of comparisons of indices, as
    /// the one-hot bases of `jacfwd`/`jacrev`): a reduce over the masked axis collapses to
    /// an index, so fused it costs a load whatever its redundancy.
    pub masked: bool,
    /// It is a sum of products of two values read from memory (a matmul, a convolution),
    /// which the kernel rules tile: its epilogue runs once per lane of the tile, unvectorized.
    pub contraction: bool,
    /// Its inline cost per element ([`CostModel`]).
    pub cost: u64,
    /// How many times the consuming kernel computes each element at one index: the product
    /// of the sizes of the enclosing loops its index does not use (1 when it uses them all).
    pub redundancy: u64,
    /// At how many different indices (in this kernel or others) it has been requested.
    pub requests: u64,
    /// It is requested under a gate (read through a `Pad`, outside any sliding window): the
    /// consuming kernel runs its loops at every position, the masked ones included.
    pub gated: bool,
    /// For a reduce not nested in another one: the per-element cost of the consuming
    /// kernel's output around it, every reduce and realized value counting as one load
    /// ([`CostModel::epilogue`]); 0 otherwise.
    pub epilogue: u64,
}

impl Facts {
    /// How many times each element would be computed if it stays inline.
    pub fn computations(&self) -> u64 {
        self.redundancy.saturating_mul(self.requests.max(1))
    }

    /// The work inlining repeats per element beyond the first computation.
    pub fn repeated_work(&self) -> u64 {
        self.cost
            .saturating_mul(self.computations().saturating_sub(1))
    }
}

/// Which rule decided that a node is realized into a buffer or fused into its consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Realized: a requested output.
    Output,
    /// Realized: `Contiguous`, `Copy`, `Store` or `Vmapout` always end a kernel.
    Forced,
    /// Fused: a reduce of index arithmetic with a closed form costs nothing inline.
    ClosedForm,
    /// Realized: a reduce read through a pad; inline, its loop would run at the padded
    /// positions too (the gradients of `narrow`s summed into one tensor: three matmuls, each
    /// run over the whole sum).
    GatedReduce,
    /// Realized: a reduce whose consumer computes a costly epilogue per element (the
    /// derivative of a GELU after `dy @ W`): fused, the epilogue's scalar, branchy code
    /// shares the kernel with the reduce loop and keeps the C compiler from vectorizing it.
    CostlyEpilogue,
    /// Fused: every element is computed once (no enclosing loop it ignores, one index).
    ComputedOnce,
    /// Fused: a value of positions only (it reads no buffer) is left to the kernel rules,
    /// which fold it (the closed form of an arange, a one-hot mask collapsed to an index).
    PositionsOnly,
    /// Fused: a product with a mask of positions, which the kernel rules collapse to an
    /// index in the reduce that consumes it (its other factor is decided on its own).
    MaskedProduct,
    /// Realized: a reduce whose recomputation repeats more work than a buffer round trip.
    RepeatedReduce,
    /// Realized: an elementwise value of at least [`MIN_VALUE_COST`] ops whose
    /// recomputation repeats more work than a buffer round trip.
    RepeatedValue,
    /// Fused: repeated, but the repeated work is below a buffer round trip (or, for an
    /// elementwise value, it is cheaper than [`MIN_VALUE_COST`]: about a load's worth).
    CheapToRepeat,
    /// Realized: fused, it would make a chain of inline values longer than the C compiler
    /// builds in about a second (`schedule::kernel_size`).
    LongChain,
}

impl Rule {
    /// True for the rules that give the node a buffer.
    pub fn realizes(self) -> bool {
        matches!(
            self,
            Rule::Output
                | Rule::Forced
                | Rule::GatedReduce
                | Rule::CostlyEpilogue
                | Rule::RepeatedReduce
                | Rule::RepeatedValue
                | Rule::LongChain
        )
    }

    /// One line on why the rule decides as it does.
    pub fn reason(self) -> &'static str {
        match self {
            Rule::Output => "a requested output",
            Rule::Forced => "contiguous/copy/store/vmapout always end a kernel",
            Rule::ClosedForm => "a reduce of index arithmetic with a closed form",
            Rule::GatedReduce => "a reduce read through a pad would loop at padded positions too",
            Rule::CostlyEpilogue => {
                "a reduce loop is kept apart from a costly elementwise epilogue"
            }
            Rule::ComputedOnce => "each element is computed once inline",
            Rule::PositionsOnly => "a function of positions only, folded by the kernel rules",
            Rule::MaskedProduct => "a product with a mask of positions, collapsed to an index",
            Rule::RepeatedReduce => "recomputing the reduce repeats more than a buffer round trip",
            Rule::RepeatedValue => "recomputing the value repeats more than a buffer round trip",
            Rule::CheapToRepeat => "repeated work is cheaper than a buffer round trip",
            Rule::LongChain => "a longer fused chain would take the C compiler too long",
        }
    }
}

/// An elementwise value cheaper than this (per element) is always recomputed: a few loads
/// and ops cost about what reading them back from a buffer costs, and realizing every
/// operand of a matmul would add a kernel per layer.
pub const MIN_VALUE_COST: u64 = 8;

/// An elementwise epilogue costing at least this (ops and loads per element, its reduces
/// counted as loads) gets a kernel of its own: a bias, an activation or a normalization
/// (tens of ops) stays fused with its reduce.
pub const EPILOGUE_COST: u64 = 96;

/// The same bound after a contraction, whose tiled kernel runs the epilogue lane by lane
/// where an elementwise kernel would vectorize it: a bias and a ReLU stay fused with their
/// matmul; the GELU derivative after `dy @ W` (an exponential) does not.
pub const TILE_EPILOGUE_COST: u64 = 40;

/// A reduce whose inline cost per element is at least this is a loop worth vectorizing
/// apart from its epilogue (a dot product of 32 or more products).
pub const MIN_LOOP_COST: u64 = 64;

type Predicate = fn(&Facts) -> bool;

/// The realization rule table for optional nodes: the first rule whose predicate holds
/// decides. Deterministic: it reads only the facts of one request.
pub const RULES: [(Rule, Predicate); 8] = [
    (Rule::GatedReduce, |f| {
        f.reduce && f.gated && f.reads_memory && f.cost > BUFFER_COST
    }),
    (Rule::CostlyEpilogue, |f| {
        let bound = match f.contraction {
            true => TILE_EPILOGUE_COST,
            false => EPILOGUE_COST,
        };
        f.reduce && f.reads_memory && f.cost >= MIN_LOOP_COST && f.epilogue >= bound
    }),
    (Rule::ComputedOnce, |f| f.computations() <= 1),
    (Rule::PositionsOnly, |f| !f.reads_memory),
    (Rule::MaskedProduct, |f| f.masked),
    (Rule::RepeatedReduce, |f| {
        f.reduce && f.repeated_work() > BUFFER_COST
    }),
    (Rule::RepeatedValue, |f| {
        !f.reduce && f.cost >= MIN_VALUE_COST && f.repeated_work() > BUFFER_COST
    }),
    (Rule::CheapToRepeat, |_| true),
];

/// The rule of [`RULES`] that decides a request with `facts`.
pub fn decide(facts: &Facts) -> Rule {
    RULES
        .iter()
        .find(|(_, applies)| applies(facts))
        .map(|(rule, _)| *rule)
        .unwrap_or(Rule::CheapToRepeat)
}

/// One realization decision, for `DEBUG=3` and for tests.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The tensor node decided on.
    pub node: UOp,
    /// The rule that decided.
    pub rule: Rule,
    /// The facts of the request that decided it (`None` for outputs and forced nodes).
    pub facts: Option<Facts>,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.rule.realizes() {
            "realize"
        } else {
            "fuse   "
        };
        let shape = self.node.shape().map(|s| s.to_vec()).unwrap_or_default();
        write!(
            f,
            "{verdict} {:<10} {:<18} {:?}: {}",
            format!("{}", self.node.op()),
            format!("{shape:?}"),
            self.rule,
            self.rule.reason()
        )?;
        if let Some(x) = &self.facts {
            write!(
                f,
                " (cost {} x {} computations = {} repeated, buffer {BUFFER_COST})",
                x.cost,
                x.computations(),
                x.repeated_work()
            )?;
            if self.rule == Rule::CostlyEpilogue {
                write!(f, " (epilogue {} per element)", x.epilogue)?;
            }
        }
        Ok(())
    }
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

    fn facts(reduce: bool, cost: u64, redundancy: u64, requests: u64) -> Facts {
        Facts {
            reduce,
            reads_memory: true,
            masked: false,
            contraction: false,
            cost,
            redundancy,
            requests,
            gated: false,
            epilogue: 0,
        }
    }

    #[test]
    fn rule_table_decisions_and_reasons() {
        assert_eq!(decide(&facts(true, 1000, 1, 1)), Rule::ComputedOnce);
        assert_eq!(decide(&facts(false, 1000, 1, 1)), Rule::ComputedOnce);
        assert_eq!(decide(&facts(true, 40, 2, 1)), Rule::RepeatedReduce);
        assert_eq!(decide(&facts(true, 17, 1, 2)), Rule::RepeatedReduce);
        assert_eq!(decide(&facts(true, 4, 2, 1)), Rule::CheapToRepeat);
        assert_eq!(decide(&facts(false, 60, 64, 1)), Rule::RepeatedValue);
        // A relu of a loaded value: cheap however often it repeats.
        assert_eq!(decide(&facts(false, 4, 1000, 9)), Rule::CheapToRepeat);
        assert_eq!(decide(&facts(false, 9, 2, 1)), Rule::CheapToRepeat);
        let positions = Facts {
            reads_memory: false,
            ..facts(false, 70, 64, 1)
        };
        assert_eq!(decide(&positions), Rule::PositionsOnly);
        let masked = Facts {
            masked: true,
            ..facts(false, 2000, 256, 1)
        };
        assert_eq!(decide(&masked), Rule::MaskedProduct);
        let epilogue = |cost, epilogue| Facts {
            epilogue,
            ..facts(true, cost, 1, 1)
        };
        assert_eq!(decide(&epilogue(193, 474)), Rule::CostlyEpilogue);
        assert_eq!(decide(&epilogue(193, 20)), Rule::ComputedOnce);
        assert_eq!(decide(&epilogue(13, 474)), Rule::ComputedOnce);
        // After a matmul, whose tile runs the epilogue lane by lane, an exponential is costly.
        let tiled = |epilogue| Facts {
            contraction: true,
            ..Facts {
                epilogue,
                ..facts(true, 129, 1, 1)
            }
        };
        assert_eq!(decide(&tiled(43)), Rule::CostlyEpilogue);
        assert_eq!(decide(&tiled(8)), Rule::ComputedOnce, "a bias and a relu");
        assert_eq!(decide(&epilogue(129, 40)), Rule::ComputedOnce);
        for (rule, _) in RULES {
            assert!(!rule.reason().is_empty());
        }
        assert!(Rule::RepeatedValue.realizes() && !Rule::CheapToRepeat.realizes());
        let padded = |reduce, cost| Facts {
            gated: true,
            ..facts(reduce, cost, 1, 1)
        };
        assert_eq!(decide(&padded(true, 64)), Rule::GatedReduce);
        assert_eq!(
            decide(&padded(true, 8)),
            Rule::ComputedOnce,
            "a short reduce stays"
        );
        assert_eq!(
            decide(&padded(false, 64)),
            Rule::ComputedOnce,
            "values are gated cheaply"
        );
    }
}
