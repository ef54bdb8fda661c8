//! Expand (tinyspec "Lowering Pipeline"): parallel ranges become copies of the scalar code.
//!
//! - An UPCAST range of size `k` turns each store that uses it into `k` stores, one per value
//!   of the range; the copies share every subterm that does not depend on it (hash-consing),
//!   and the C compiler vectorizes the `k` neighbouring statements. With several UPCAST
//!   ranges, the first one split (the contiguous axis) varies fastest.
//! - An UNROLL range of size `k` of a Reduce gives it `k` partial accumulators: the Reduce
//!   becomes `k` Reduces over its remaining ranges, one per value of the range, folded with
//!   the reduce op after their (shared) loop. The `k` accumulators are neighbouring
//!   statements, which the C compiler keeps in vector registers when the reduced values are
//!   neighbours in memory (a float sum is then added in another order: the reassociation
//!   the tolerance policy allows). Without remaining ranges the `k` values are folded at once.
//! - A range of size 1 is the constant 0.
//!
//! The result is simplified with the `symbolic` rules (substituted constants fold away) and
//! three rules for what a copy's constant gates leave behind:
//!
//! ```text
//! Address(buf, flat, true)          =>  Address(buf, flat)
//! Load(Address(buf, flat, false))   =>  0
//! (x + 0.0) + 0.0                   =>  x + 0.0        floats; exact, -0.0 included
//! ```

use crate::rewrite::{PatternMatcher, UPat, graph_rewrite};
use crate::symbolic::symbolic;
use crate::uop::substitute;
use crate::uop::{AxisType, DType, Op, UOp};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The kernel with UPCAST and UNROLL ranges expanded and size-1 ranges removed.
pub fn expand(ast: &UOp) -> UOp {
    graph_rewrite(
        &graph_rewrite(ast, expand_rules(), &mut ()),
        cleanup_rules(),
        &mut (),
    )
}

/// The `symbolic` rules and the constant-gate rules of the module doc.
fn cleanup_rules() -> &'static PatternMatcher<()> {
    static TABLE: OnceLock<PatternMatcher<()>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut rules = symbolic().clone();
        rules.extend(
            &PatternMatcher::new()
                .rule(UPat::op(Op::Address), |m, _| {
                    let gate = m.root().src().get(2)?;
                    (gate.const_value()?.as_bool())
                        .then(|| m.root().with_src(m.root().src()[..2].to_vec()))
                })
                .rule(UPat::op(Op::Load), |m, _| {
                    let gate = m.root().s(0).src().get(2)?;
                    let load = m.root();
                    (!gate.const_value()?.as_bool()).then(|| UOp::constant(0.0, load.dtype()))
                })
                .rule(
                    (UPat::var("x") + UPat::cvar("a")) + UPat::cvar("b"),
                    |m, _| {
                        let sum = m.root();
                        let zero = |c: &UOp| {
                            c.const_value().is_some_and(|v| {
                                v.as_f64() == 0.0 && !v.as_f64().is_sign_negative()
                            })
                        };
                        (FLOATS.contains(&sum.dtype()) && zero(&m["a"]) && zero(&m["b"]))
                            .then(|| sum.s(0).clone())
                    },
                ),
        );
        rules
    })
}

const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];

/// The rule table of the pass, one row per fact.
fn expand_rules() -> &'static PatternMatcher<()> {
    static TABLE: OnceLock<PatternMatcher<()>> = OnceLock::new();
    TABLE.get_or_init(|| {
        PatternMatcher::new()
            // range of size 1                  => 0
            .rule(UPat::op(Op::Range), |m, _| {
                (m.root().range_size() == Some(1)).then(|| UOp::index(0))
            })
            // Reduce(v, r.., 0, ..)              => Reduce(v, r..), and Reduce(v) => v
            .rule(UPat::op(Op::Reduce), |m, _| drop_constant_ranges(m.root()))
            // Reduce(v, r.., u:UNROLL)           => Reduce(v[u=0], r..) op .. op Reduce(v[u=k-1], r..)
            .rule(UPat::op(Op::Reduce), |m, _| unroll(m.root()))
            // Sink(.., Store(.. u:UPCAST ..), ..) => Sink(.., Store[u=0], .., Store[u=k-1], ..)
            .rule(UPat::op(Op::Sink), |m, _| upcast_stores(m.root()))
    })
}

fn ranges_of(u: &UOp) -> Vec<UOp> {
    u.toposort()
        .into_iter()
        .filter(|n| n.op() == Op::Range)
        .collect()
}

fn drop_constant_ranges(reduce: &UOp) -> Option<UOp> {
    if !is_kernel_reduce(reduce) || reduce.src()[1..].iter().all(|r| r.op() == Op::Range) {
        return None;
    }
    let kept: Vec<UOp> = reduce.src()[1..]
        .iter()
        .filter(|r| r.op() == Op::Range)
        .cloned()
        .collect();
    Some(with_ranges(reduce, reduce.s(0).clone(), kept))
}

/// `reduce` over `value` and `ranges`, or just `value` when no range is left.
fn with_ranges(reduce: &UOp, value: UOp, ranges: Vec<UOp>) -> UOp {
    if ranges.is_empty() {
        return value;
    }
    let mut src = vec![value];
    src.extend(ranges);
    reduce.with_src(src)
}

/// True for a kernel-level Reduce (a value and its ranges).
pub fn is_kernel_reduce(u: &UOp) -> bool {
    u.op() == Op::Reduce && u.src().len() > 1
}

fn unroll(reduce: &UOp) -> Option<UOp> {
    if !is_kernel_reduce(reduce) {
        return None;
    }
    let unroll = reduce.src()[1..]
        .iter()
        .find(|r| r.op() == Op::Range && r.range_axis_type() == AxisType::Unroll)?
        .clone();
    let combine = reduce.reduce_op().binary();
    let rest: Vec<UOp> = reduce.src()[1..]
        .iter()
        .filter(|r| **r != unroll)
        .cloned()
        .collect();
    lanes(reduce.s(0), &unroll)
        .into_iter()
        .map(|lane| with_ranges(reduce, lane, rest.clone()))
        .reduce(|a, b| UOp::alu(combine, vec![a, b]))
}

/// `u` once per value of `range`.
fn lanes(u: &UOp, range: &UOp) -> Vec<UOp> {
    let size = range
        .range_size()
        .expect("expanded ranges have constant sizes");
    (0..size)
        .map(|lane| {
            substitute(
                u,
                &HashMap::from([(range.clone(), UOp::index(lane as i64))]),
            )
        })
        .collect()
}

/// Expands the UPCAST range created last (the highest id) first, so the first upcast of the
/// heuristic, the contiguous axis, varies fastest among the copies: in a matmul tile the
/// stores, loads and accumulators of neighbouring columns are then neighbouring statements,
/// which the C compiler packs into vector registers (it does not when rows vary fastest).
fn upcast_stores(sink: &UOp) -> Option<UOp> {
    let upcast = ranges_of(sink)
        .into_iter()
        .filter(|r| r.range_axis_type() == AxisType::Upcast)
        .max_by_key(UOp::range_id)?;
    let stores = sink
        .src()
        .iter()
        .flat_map(|store| match store.toposort().contains(&upcast) {
            true => lanes(store, &upcast),
            false => vec![store.clone()],
        })
        .collect();
    Some(UOp::sink(stores))
}
