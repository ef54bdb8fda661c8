//! Reduce collapse: a sum over a range of a value that is zero except where the range takes
//! one value is that value at that index.
//!
//! ```text
//! Σ_{r < n} where(g <= r && r <= g && rest, v(r), 0)  =>  where(0 <= g < n, where(rest, v(g), 0), 0)
//! ```
//!
//! `g` must not depend on `r`; the two clauses may be written in any linear form (`r - 1 < g`,
//! `g < r + 1`, ...). The gate is a `Where` around the value or the gate of a load. Placing a
//! sample at a sliding offset with `pad_at` and summing over the range (vmap by pad+reduce)
//! lowers to exactly this, so the rule turns that method's `O(n²)` loop into `O(n)`.

use super::index::{and, int, less, truth};
use crate::symbolic::simplify;
use crate::uop::{Arg, DType, Op, ReduceOp, UOp, substitute};
use std::collections::HashMap;

/// `Reduce(value, ranges...)` with one range pinned by the value's gate, summed away (`None`
/// when no range is pinned).
pub fn collapse_reduce(reduce: &UOp) -> Option<UOp> {
    let Arg::Reduce(ReduceOp::Add, axes) = reduce.arg() else {
        return None;
    };
    if !axes.is_empty() || reduce.src().len() < 2 {
        return None;
    }
    let (value, ranges) = (reduce.s(0), &reduce.src()[1..]);
    let clauses = conjuncts(&gate_of(value)?);
    ranges.iter().enumerate().find_map(|(k, r)| {
        let (at, pinning) = pinned_value(&clauses, r)?;
        let others: Vec<UOp> = [&ranges[..k], &ranges[k + 1..]].concat();
        Some(summed_at(value, r, &at, &pinning, &others))
    })
}

/// `value` with `r := at`, valid only where `at` is a value of `r`, reduced over `others`.
fn summed_at(value: &UOp, r: &UOp, at: &UOp, pinning: &[UOp], others: &[UOp]) -> UOp {
    let mut satisfied: HashMap<UOp, UOp> =
        pinning.iter().map(|c| (c.clone(), truth(true))).collect();
    let without_pinning = substitute(value, &satisfied);
    satisfied.clear();
    satisfied.insert(r.clone(), at.clone());
    let image = substitute(&without_pinning, &satisfied);
    let n = int(r.vmax().as_i64() + 1);
    let in_range = and(Some(less(&int(-1), at)), Some(less(at, &n)));
    let collapsed = match in_range {
        Some(g) => UOp::alu(Op::Where, vec![g, image.clone(), zero_like(&image)]),
        None => image,
    };
    if others.is_empty() {
        return collapsed;
    }
    let mut src = vec![collapsed];
    src.extend(others.iter().cloned());
    UOp::new(
        Op::Reduce,
        value.dtype(),
        src,
        Arg::Reduce(ReduceOp::Add, vec![]),
    )
}

fn zero_like(u: &UOp) -> UOp {
    UOp::constant(0i64, u.dtype())
}

/// The gate under which `value` may be non-zero: the condition of `where(c, v, 0)` or the
/// gate of a gated load.
fn gate_of(value: &UOp) -> Option<UOp> {
    match value.op() {
        Op::Where if value.s(2).const_value().is_some_and(|z| z.as_f64() == 0.0) => {
            Some(value.s(0).clone())
        }
        Op::Load if value.s(0).src().len() == 3 => Some(value.s(0).s(2).clone()),
        _ => None,
    }
}

/// The clauses of an `And` tree.
fn conjuncts(gate: &UOp) -> Vec<UOp> {
    if gate.op() == Op::And && gate.dtype() == DType::Bool {
        [conjuncts(gate.s(0)), conjuncts(gate.s(1))].concat()
    } else {
        vec![gate.clone()]
    }
}

/// The one value `r` can take where every clause holds, if two clauses pin it from both
/// sides (`r >= g` and `r <= g`), with those two clauses.
fn pinned_value(clauses: &[UOp], r: &UOp) -> Option<(UOp, Vec<UOp>)> {
    let bounds: Vec<(Bound, UOp)> = clauses
        .iter()
        .filter_map(|c| Some((bound_on(c, r)?, c.clone())))
        .collect();
    for (lower, low_clause) in &bounds {
        let Bound::AtLeast(g) = lower else { continue };
        for (upper, high_clause) in &bounds {
            if matches!(upper, Bound::AtMost(h) if h == g) {
                return Some((g.clone(), vec![low_clause.clone(), high_clause.clone()]));
            }
        }
    }
    None
}

/// A bound on a range read off one clause.
enum Bound {
    AtLeast(UOp),
    AtMost(UOp),
}

/// `a < b` with `a - b = ±r + rest` (`rest` free of `r`): `r <= -rest - 1` or `r >= rest + 1`.
fn bound_on(clause: &UOp, r: &UOp) -> Option<Bound> {
    if clause.op() != Op::CmpLt || clause.s(0).dtype() != DType::Index {
        return None;
    }
    let minus = |x: &UOp| UOp::alu(Op::Mul, vec![x.clone(), int(-1)]);
    let sum = |a: &UOp, b: &UOp| UOp::alu(Op::Add, vec![a.clone(), b.clone()]);
    let diff = simplify(&sum(clause.s(0), &minus(clause.s(1))));
    let coef = coefficient_of(&diff, r)?;
    let rest = simplify(&substitute(&diff, &HashMap::from([(r.clone(), int(0))])));
    match coef {
        1 => Some(Bound::AtMost(simplify(&sum(&minus(&rest), &int(-1))))),
        -1 => Some(Bound::AtLeast(simplify(&sum(&rest, &int(1))))),
        _ => None,
    }
}

/// `c` when the sum `e` is `c·r + (terms free of r)`; `None` when `r` occurs in any other way.
fn coefficient_of(e: &UOp, r: &UOp) -> Option<i64> {
    let mut coef = 0;
    let mut terms = vec![e.clone()];
    while let Some(term) = terms.pop() {
        if term.op() == Op::Add {
            terms.extend(term.src().iter().cloned());
        } else if &term == r {
            coef += 1;
        } else if term.op() == Op::Mul && term.s(0) == r {
            coef += term.s(1).const_value()?.as_i64();
        } else if term.toposort().contains(r) {
            return None;
        }
    }
    Some(coef)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::AxisType;

    fn gate_value(gate: UOp, r: &UOp) -> UOp {
        let v = UOp::alu(
            Op::Mul,
            vec![r.cast(DType::F32), UOp::constant(2.0f32, DType::F32)],
        );
        UOp::alu(Op::Where, vec![gate, v, UOp::constant(0i64, DType::F32)])
    }

    fn sum_over(value: UOp, r: &UOp) -> UOp {
        UOp::new(
            Op::Reduce,
            DType::F32,
            vec![value, r.clone()],
            Arg::Reduce(ReduceOp::Add, vec![]),
        )
    }

    #[test]
    fn a_sum_pinned_to_one_value_of_its_range_becomes_that_value() {
        let g = UOp::range(3, 0, AxisType::Loop);
        let r = UOp::range(3, 1, AxisType::Reduce);
        let from_below = less(&UOp::alu(Op::Add, vec![r.clone(), int(-1)]), &g);
        let from_above = less(&g, &UOp::alu(Op::Add, vec![r.clone(), int(1)]));
        let gate = and(Some(from_below), Some(from_above)).unwrap();
        let collapsed = collapse_reduce(&sum_over(gate_value(gate, &r), &r)).expect("collapses");
        let nodes = collapsed.toposort();
        assert!(
            !nodes.contains(&r),
            "the reduce range is gone: {collapsed:?}"
        );
        assert!(nodes.iter().all(|u| u.op() != Op::Reduce));
        assert!(nodes.contains(&g));
    }

    #[test]
    fn a_sum_over_a_range_bounded_from_one_side_stays() {
        let g = UOp::range(3, 0, AxisType::Loop);
        let r = UOp::range(3, 1, AxisType::Reduce);
        let gate = less(&r, &g);
        assert!(collapse_reduce(&sum_over(gate_value(gate, &r), &r)).is_none());
    }

    #[test]
    fn a_nonlinear_use_of_the_range_is_not_a_bound() {
        let g = UOp::range(3, 0, AxisType::Loop);
        let r = UOp::range(3, 1, AxisType::Reduce);
        let square = UOp::alu(Op::Mul, vec![r.clone(), r.clone()]);
        assert!(bound_on(&less(&square, &g), &r).is_none());
        assert!(bound_on(&less(&r, &g), &r).is_some());
    }
}
