//! Blocked accumulation: no float sum adds more than [`BLOCK`] terms into one accumulator.
//!
//! A float accumulator that takes `n` terms one after another carries a rounding error that
//! grows with `n` (the sum of 2^25 ones stops at 2^24 in `f32`). Long sums are therefore
//! rewritten into sums of blocks, each block summed into its own accumulator first:
//!
//! ```text
//! Σ_{r<n} v(r)                  =>  Σ_{o<n/B} (Σ_{i<B} v(o*B + i)) + Σ_{j<n%B} v((n/B)*B + j)   (n > B)
//! Σ_{r1, .., rk} v              =>  Σ_{r1, .., rk-1} (Σ_{rk} v)                            (k > 1, Π n > B)
//! ```
//!
//! Both rules apply again to what they build (the sum over the blocks is itself long when
//! `n/B > B`), so a sum of `n` terms becomes `⌈log_B n⌉` levels of at most `B` terms each: its
//! worst-case error is `B · ⌈log_B n⌉ · ε` relative to the sum of magnitudes, instead of `n · ε`.
//! Sums of at most `B` terms, which is every matmul up to `K = 4096`, keep their one loop, so
//! the kernels users time most are unchanged. Integer sums are exact (wrapping) and `max` /
//! `min` round nothing, so only float `Add` reduces are blocked. The pass runs after the
//! OptOps: it blocks plain `Reduce` ranges, keeps a reduce's UNROLL and LANE ranges (its
//! partial accumulators, see `expand` and `render::c`) and its GROUP ranges (the threads of a
//! GPU block, each with its own accumulator, see `codegen::group`) in the innermost sum it
//! builds, so each partial accumulator takes at most `B` terms, and leaves a reduce with other
//! ranges in its list alone.

use super::expand::is_kernel_reduce;
use super::opt::kernel_ranges;
use crate::rewrite::{PatternMatcher, UPat, graph_rewrite};
use crate::symbolic::simplify;
use crate::uop::substitute;
use crate::uop::{Arg, AxisType, Op, ReduceOp, UOp};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The most terms one accumulator adds up.
pub const BLOCK: usize = 4096;

/// `ast` with every long float sum split into blocks of at most [`BLOCK`] terms.
pub fn block_long_sums(ast: &UOp) -> UOp {
    let mut ctx = FreshRanges {
        next_id: kernel_ranges(ast).last().map_or(0, |r| r.range_id() + 1),
    };
    graph_rewrite(ast, rules(), &mut ctx)
}

/// Hands out range ids no range of the kernel has.
struct FreshRanges {
    next_id: usize,
}

impl FreshRanges {
    fn reduce_range(&mut self, size: usize) -> UOp {
        self.next_id += 1;
        UOp::range(size, self.next_id - 1, AxisType::Reduce)
    }
}

fn rules() -> &'static PatternMatcher<FreshRanges> {
    static RULES: OnceLock<PatternMatcher<FreshRanges>> = OnceLock::new();
    RULES.get_or_init(|| {
        PatternMatcher::new()
            // Σ_{r1..rk, lanes} v => Σ_{r1..rk-1} (Σ_{rk, lanes} v)
            .rule(UPat::op(Op::Reduce), |m, _| {
                let (ranges, lanes) = long_sum_ranges(m.root())?;
                (ranges.len() > 1).then(|| nest_innermost(m.root(), &ranges, &lanes))
            })
            // Σ_{r<n, lanes} v(r) => Σ_o (Σ_{i, lanes} v(o*B + i)) + Σ_{j, lanes} v((n/B)*B + j)
            .rule(UPat::op(Op::Reduce), |m, ctx| {
                let (ranges, lanes) = long_sum_ranges(m.root())?;
                match ranges.as_slice() {
                    [r] => Some(blocks(m.root(), r, &lanes, ctx)),
                    _ => None,
                }
            })
    })
}

/// The plain `Reduce` ranges and the UNROLL ranges (lanes) of a float `Add` reduce whose
/// plain ranges take more than [`BLOCK`] terms per lane, if every range is one of the two
/// kinds and of constant size.
fn long_sum_ranges(reduce: &UOp) -> Option<(Vec<UOp>, Vec<UOp>)> {
    if !is_kernel_reduce(reduce)
        || reduce.reduce_op() != ReduceOp::Add
        || !reduce.dtype().is_float()
    {
        return None;
    }
    let (mut ranges, mut lanes) = (Vec::new(), Vec::new());
    let mut terms = 1usize;
    for r in &reduce.src()[1..] {
        if r.op() != Op::Range {
            return None;
        }
        match r.range_axis_type() {
            AxisType::Reduce => {
                terms = terms.saturating_mul(r.range_size()?);
                ranges.push(r.clone());
            }
            AxisType::Unroll | AxisType::Lane | AxisType::Group => lanes.push(r.clone()),
            _ => return None,
        }
    }
    (terms > BLOCK).then_some((ranges, lanes))
}

fn nest_innermost(reduce: &UOp, ranges: &[UOp], lanes: &[UOp]) -> UOp {
    let (innermost, outer) = ranges.split_last().expect("two or more ranges");
    let inner = sum_over(
        reduce.s(0).clone(),
        &[std::slice::from_ref(innermost), lanes].concat(),
    );
    sum_over(inner, outer)
}

fn blocks(reduce: &UOp, r: &UOp, lanes: &[UOp], ctx: &mut FreshRanges) -> UOp {
    let n = r
        .range_size()
        .expect("a long sum's range has a constant size");
    let value = reduce.s(0);
    let at = |index: UOp| simplify(&substitute(value, &HashMap::from([(r.clone(), index)])));
    let (o, i) = (ctx.reduce_range(n / BLOCK), ctx.reduce_range(BLOCK));
    let in_block = UOp::alu(
        Op::Add,
        vec![
            UOp::alu(Op::Mul, vec![o.clone(), block_index(BLOCK)]),
            i.clone(),
        ],
    );
    let whole_blocks = sum_over(sum_over(at(in_block), &[&[i], lanes].concat()), &[o]);
    if n.is_multiple_of(BLOCK) {
        return whole_blocks;
    }
    let j = ctx.reduce_range(n % BLOCK);
    let past_blocks = UOp::alu(Op::Add, vec![block_index(n / BLOCK * BLOCK), j.clone()]);
    let tail = sum_over(at(past_blocks), &[&[j], lanes].concat());
    UOp::alu(Op::Add, vec![whole_blocks, tail])
}

fn block_index(v: usize) -> UOp {
    UOp::index(i64::try_from(v).expect("range sizes fit an i64"))
}

fn sum_over(value: UOp, ranges: &[UOp]) -> UOp {
    let dtype = value.dtype();
    let mut src = vec![value];
    src.extend(ranges.iter().cloned());
    UOp::new(Op::Reduce, dtype, src, Arg::Reduce(ReduceOp::Add, vec![]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::DType;

    fn float_of(r: &UOp) -> UOp {
        r.cast(DType::F32)
    }

    fn reduces(ast: &UOp) -> Vec<UOp> {
        ast.toposort()
            .into_iter()
            .filter(is_kernel_reduce)
            .collect()
    }

    #[test]
    fn a_sum_of_at_most_a_block_is_unchanged() {
        let r = UOp::range(BLOCK, 0, AxisType::Reduce);
        let sum = sum_over(float_of(&r), std::slice::from_ref(&r));
        assert_eq!(block_long_sums(&sum), sum);
    }

    #[test]
    fn no_accumulator_of_a_long_sum_takes_more_than_a_block() {
        let n = BLOCK * BLOCK * 3 + 5;
        let r = UOp::range(n, 0, AxisType::Reduce);
        let blocked = block_long_sums(&sum_over(float_of(&r), &[r]));
        let sums = reduces(&blocked);
        assert!(sums.len() >= 4, "levels and a tail: {blocked:?}");
        for s in &sums {
            let terms: usize = s.src()[1..]
                .iter()
                .map(|r| r.range_size().unwrap())
                .product();
            assert!(terms <= BLOCK, "a sum of {terms} terms remains");
        }
    }

    #[test]
    fn integer_sums_and_maxima_are_not_blocked() {
        let r = UOp::range(BLOCK * 4, 0, AxisType::Reduce);
        let int_sum = sum_over(r.cast(DType::I32), std::slice::from_ref(&r));
        assert_eq!(block_long_sums(&int_sum), int_sum);
        let max = UOp::new(
            Op::Reduce,
            DType::F32,
            vec![float_of(&r), r.clone()],
            Arg::Reduce(ReduceOp::Max, vec![]),
        );
        assert_eq!(block_long_sums(&max), max);
    }

    #[test]
    fn a_sum_over_two_long_ranges_nests_them() {
        let (a, b) = (
            UOp::range(BLOCK, 0, AxisType::Reduce),
            UOp::range(8, 1, AxisType::Reduce),
        );
        let value = UOp::alu(Op::Add, vec![float_of(&a), float_of(&b)]);
        let blocked = block_long_sums(&sum_over(value, &[a.clone(), b.clone()]));
        let sums = reduces(&blocked);
        assert_eq!(sums.len(), 2);
        assert!(sums.iter().all(|s| s.src().len() == 2), "{blocked:?}");
    }

    #[test]
    fn a_long_sum_with_lanes_keeps_them_in_its_innermost_sums() {
        let (r, lane) = (
            UOp::range(BLOCK * 16 + 8, 0, AxisType::Reduce),
            UOp::range(16, 1, AxisType::Unroll),
        );
        let value = UOp::alu(Op::Add, vec![float_of(&r), float_of(&lane)]);
        let blocked = block_long_sums(&sum_over(value, &[r, lane.clone()]));
        let mut with_lanes = 0;
        for s in reduces(&blocked) {
            let plain: usize = s.src()[1..]
                .iter()
                .filter(|r| r.range_axis_type() == AxisType::Reduce)
                .map(|r| r.range_size().unwrap())
                .product();
            assert!(plain <= BLOCK, "a lane takes {plain} terms");
            if s.src()[1..].contains(&lane) {
                with_lanes += 1;
                let innermost = !s.s(0).toposort().iter().any(is_kernel_reduce);
                assert!(
                    innermost,
                    "the lanes stay in the innermost sums: {blocked:?}"
                );
            }
        }
        assert_eq!(with_lanes, 2, "the blocks' sum and the tail's: {blocked:?}");
    }
}
