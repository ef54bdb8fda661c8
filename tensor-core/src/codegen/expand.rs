//! Expand (tinyspec "Lowering Pipeline"): parallel ranges become copies of the scalar code.
//!
//! - An UPCAST range of size `k` turns each store that uses it into `k` stores, one per value
//!   of the range; the copies share every subterm that does not depend on it (hash-consing),
//!   and the C compiler vectorizes the `k` neighbouring statements.
//! - An UNROLL range of a Reduce folds the `k` copies of the reduced value with the reduce op
//!   inside one iteration, and leaves the Reduce's remaining ranges as loops.
//! - A range of size 1 is the constant 0.
//!
//! The result is simplified with the `symbolic` rules (substituted constants fold away).

use super::opt::{range_axis_type, range_size, substitute};
use crate::symbolic::simplify;
use crate::uop::{Arg, AxisType, Op, ReduceOp, UOp};
use std::collections::HashMap;

/// The kernel with UPCAST and UNROLL ranges expanded and size-1 ranges removed.
pub fn expand(ast: &UOp) -> UOp {
    let ast = remove_unit_ranges(ast);
    let ast = unroll_reduces(&ast);
    let stores = ast.src().iter().flat_map(upcast_store).collect();
    simplify(&UOp::sink(stores))
}

fn ranges_of(u: &UOp) -> Vec<UOp> {
    u.toposort()
        .into_iter()
        .filter(|n| n.op() == Op::Range)
        .collect()
}

fn remove_unit_ranges(ast: &UOp) -> UOp {
    let unit: HashMap<UOp, UOp> = ranges_of(ast)
        .into_iter()
        .filter(|r| range_size(r) == Some(1))
        .map(|r| (r, UOp::index(0)))
        .collect();
    if unit.is_empty() {
        return ast.clone();
    }
    let ast = substitute(ast, &unit);
    drop_constant_reduce_ranges(&ast)
}

/// Reduces whose range list lost a range to substitution keep only their real ranges; a
/// Reduce with none left is its value.
fn drop_constant_reduce_ranges(ast: &UOp) -> UOp {
    let map: HashMap<UOp, UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| is_kernel_reduce(u) && u.src()[1..].iter().any(|r| r.op() != Op::Range))
        .map(|u| {
            let kept: Vec<UOp> = u.src()[1..]
                .iter()
                .filter(|r| r.op() == Op::Range)
                .cloned()
                .collect();
            let replacement = if kept.is_empty() {
                u.s(0).clone()
            } else {
                let mut src = vec![u.s(0).clone()];
                src.extend(kept);
                u.with_src(src)
            };
            (u, replacement)
        })
        .collect();
    if map.is_empty() {
        ast.clone()
    } else {
        drop_constant_reduce_ranges(&substitute(ast, &map))
    }
}

/// True for a kernel-level Reduce (a value and its ranges).
pub fn is_kernel_reduce(u: &UOp) -> bool {
    u.op() == Op::Reduce && u.src().len() > 1
}

/// The combining op of a kernel Reduce.
#[track_caller]
pub fn reduce_op(u: &UOp) -> ReduceOp {
    match u.arg() {
        Arg::Reduce(op, _) => *op,
        other => panic!("expected a Reduce arg, got {other:?}"),
    }
}

fn unroll_reduces(ast: &UOp) -> UOp {
    let Some(reduce) = ast.toposort().into_iter().find(|u| {
        is_kernel_reduce(u)
            && u.src()[1..]
                .iter()
                .any(|r| range_axis_type(r) == AxisType::Unroll)
    }) else {
        return ast.clone();
    };
    let unroll = reduce.src()[1..]
        .iter()
        .find(|r| range_axis_type(r) == AxisType::Unroll)
        .expect("found above")
        .clone();
    let combine = reduce_op(&reduce).binary();
    let copies = lanes(&reduce.src()[0], &unroll);
    let folded = copies
        .into_iter()
        .reduce(|a, b| UOp::alu(combine, vec![a, b]))
        .expect("an unrolled range has at least one lane");
    let rest: Vec<UOp> = reduce.src()[1..]
        .iter()
        .filter(|r| **r != unroll)
        .cloned()
        .collect();
    let replacement = if rest.is_empty() {
        folded
    } else {
        let mut src = vec![folded];
        src.extend(rest);
        reduce.with_src(src)
    };
    unroll_reduces(&substitute(ast, &HashMap::from([(reduce, replacement)])))
}

/// `u` once per value of `range`.
fn lanes(u: &UOp, range: &UOp) -> Vec<UOp> {
    let size = range_size(range).expect("expanded ranges have constant sizes");
    (0..size)
        .map(|lane| {
            substitute(
                u,
                &HashMap::from([(range.clone(), UOp::index(lane as i64))]),
            )
        })
        .collect()
}

fn upcast_store(store: &UOp) -> Vec<UOp> {
    let upcast = ranges_of(store)
        .into_iter()
        .find(|r| range_axis_type(r) == AxisType::Upcast);
    match upcast {
        Some(r) => lanes(store, &r).iter().flat_map(upcast_store).collect(),
        None => vec![store.clone()],
    }
}
