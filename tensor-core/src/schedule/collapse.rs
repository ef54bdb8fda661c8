//! Reduce collapse: a sum over a range whose gate bounds the range has a closed form.
//!
//! ```text
//! Σ_{r < n} where(g <= r && r <= g && rest, v(r), 0)  =>  where(0 <= g < n, where(rest, v(g), 0), 0)
//! Σ_{r < n} where(lo <= r && r <= hi && rest, c, 0)   =>  where(rest, c * count, 0)   (0 where count is 0)
//!     count = max(min(hi, n - 1) - max(lo, 0) + 1, 0)
//! Σ_{r < n} c                                          =>  c * n
//! Σ_{r < 0} v                                          =>  0
//! ```
//!
//! `g`, `lo`, `hi` and `c` must not depend on `r`; a bound may be written in any linear form
//! (`r - 1 < g`, `g < r + 1`, `r == g`, ...). The gate is a `Where` around the value or, for
//! the first rule, the gate of a load or a mask factor of a product:
//!
//! ```text
//! Σ_{r < n} v(r) * cast(r == g) * w(r)  =>  where(0 <= g < n, v(g) * w(g), 0)
//! ```
//!
//! which is how the one-hot basis of `jacfwd`/`jacrev` reaches a kernel through a matmul:
//! the contraction with the basis becomes one read. Placing a sample at a sliding offset with `pad_at` and
//! summing over the range (vmap by pad+reduce) lowers to the first form, and so does a gather
//! (`take`: a one-hot mask summed), which becomes one load; the prefix sums behind `arange`
//! are the second, so an arange is index arithmetic instead of a loop.

use super::index::{and, conjuncts, int, less, truth};
use crate::symbolic::simplify;
use crate::uop::{Arg, DType, Op, ReduceOp, UOp, substitute};
use std::collections::HashMap;

/// `Reduce(value, ranges...)` with one range pinned or counted by the value's gate, summed
/// away (`None` when no range has a closed form).
pub fn collapse_reduce(reduce: &UOp) -> Option<UOp> {
    let Arg::Reduce(ReduceOp::Add, axes) = reduce.arg() else {
        return None;
    };
    if !axes.is_empty() || reduce.src().len() < 2 {
        return None;
    }
    let (value, ranges) = (reduce.s(0), &reduce.src()[1..]);
    if ranges
        .iter()
        .any(|r| r.op() == Op::Range && r.vmax().as_i64() < 0)
    {
        return Some(zero_like(reduce));
    }
    if let Some(constant) = constant_sum(value, ranges) {
        return Some(constant);
    }
    let clauses = conjuncts(&gate_of(value)?);
    ranges.iter().enumerate().find_map(|(k, r)| {
        let others: Vec<UOp> = [&ranges[..k], &ranges[k + 1..]].concat();
        let bounds = RangeBounds::of(&clauses, r)?;
        let collapsed = match bounds.pinned() {
            Some((at, pinning)) => pinned_sum(value, r, &at, &pinning),
            None => counted_sum(value, r, &bounds)?,
        };
        Some(reduced_over(collapsed, &others))
    })
}

/// `Σ_{r < n} c = c * n` for a range `r` that `c` does not depend on (the other ranges stay).
fn constant_sum(value: &UOp, ranges: &[UOp]) -> Option<UOp> {
    let nodes = value.toposort();
    let k = ranges
        .iter()
        .position(|r| r.op() == Op::Range && !nodes.contains(r))?;
    let count = int(ranges[k].vmax().as_i64() + 1).cast(value.dtype());
    let others: Vec<UOp> = [&ranges[..k], &ranges[k + 1..]].concat();
    Some(reduced_over(
        UOp::alu(Op::Mul, vec![value.clone(), count]),
        &others,
    ))
}

/// The bounds a gate's clauses put on a range, and the clauses that do not mention it.
struct RangeBounds {
    bounds: Vec<(Bound, UOp)>,
    rest: Vec<UOp>,
}

impl RangeBounds {
    /// `None` when a clause mentions `r` in a way that is not a linear bound.
    fn of(clauses: &[UOp], r: &UOp) -> Option<RangeBounds> {
        let mut bounds = Vec::new();
        let mut rest = Vec::new();
        for c in clauses {
            if !c.toposort().contains(r) {
                rest.push(c.clone());
                continue;
            }
            for b in bounds_on(c, r)? {
                bounds.push((b, c.clone()));
            }
        }
        (!bounds.is_empty()).then_some(RangeBounds { bounds, rest })
    }

    /// The one value the range can take, if a lower and an upper bound agree, with the
    /// clauses that say so.
    fn pinned(&self) -> Option<(UOp, Vec<UOp>)> {
        self.lowers().find_map(|(g, low)| {
            self.uppers()
                .find(|(h, _)| *h == g)
                .map(|(_, high)| (g.clone(), vec![low.clone(), high.clone()]))
        })
    }

    fn lowers(&self) -> impl Iterator<Item = (&UOp, &UOp)> {
        self.bounds.iter().filter_map(|(b, c)| match b {
            Bound::AtLeast(g) => Some((g, c)),
            Bound::AtMost(_) => None,
        })
    }

    fn uppers(&self) -> impl Iterator<Item = (&UOp, &UOp)> {
        self.bounds.iter().filter_map(|(b, c)| match b {
            Bound::AtMost(h) => Some((h, c)),
            Bound::AtLeast(_) => None,
        })
    }
}

/// `Σ_r where(lo <= r <= hi && rest, c, 0)` for `c` free of `r`: `c` times the number of
/// values of `r` in `[max(lo, 0), min(hi, n - 1)]`, where `rest` holds.
fn counted_sum(value: &UOp, r: &UOp, bounds: &RangeBounds) -> Option<UOp> {
    if value.op() != Op::Where || value.s(1).toposort().contains(r) {
        return None;
    }
    let (mut lowers, mut uppers) = (bounds.lowers(), bounds.uppers());
    let (lo, hi) = (lowers.next(), uppers.next());
    if lowers.next().is_some() || uppers.next().is_some() {
        return None;
    }
    let max = |a: UOp, b: UOp| UOp::alu(Op::Max, vec![a, b]);
    let neg = |a: UOp| UOp::alu(Op::Mul, vec![a, int(-1)]);
    let first = max(lo.map_or(int(0), |(g, _)| g.clone()), int(0));
    let last_index = int(r.vmax().as_i64());
    let last = neg(max(
        neg(hi.map_or(last_index.clone(), |(h, _)| h.clone())),
        neg(last_index),
    ));
    let span = UOp::alu(Op::Add, vec![last, neg(first)]);
    let count = max(UOp::alu(Op::Add, vec![span, int(1)]), int(0));
    let c = value.s(1);
    let mut total = UOp::alu(Op::Mul, vec![c.clone(), count.cast(c.dtype())]);
    if c.dtype().is_float() {
        // No term counted: the sum is 0 even where `c` is infinite or NaN (`inf * 0` is NaN).
        let counted = less(&int(0), &count);
        total = UOp::alu(Op::Where, vec![counted, total, zero_like(c)]);
    }
    Some(
        match bounds
            .rest
            .iter()
            .cloned()
            .reduce(|a, b| UOp::alu(Op::And, vec![a, b]))
        {
            Some(rest) => UOp::alu(Op::Where, vec![rest, total, zero_like(c)]),
            None => total,
        },
    )
}

/// `collapsed` reduced over the ranges `others` (itself when there are none).
fn reduced_over(collapsed: UOp, others: &[UOp]) -> UOp {
    if others.is_empty() {
        return collapsed;
    }
    let dtype = collapsed.dtype();
    let mut src = vec![collapsed];
    src.extend(others.iter().cloned());
    UOp::new(Op::Reduce, dtype, src, Arg::Reduce(ReduceOp::Add, vec![]))
}

/// `value` with `r := at`, valid only where `at` is a value of `r`.
fn pinned_sum(value: &UOp, r: &UOp, at: &UOp, pinning: &[UOp]) -> UOp {
    let satisfied: HashMap<UOp, UOp> = pinning.iter().map(|c| (c.clone(), truth(true))).collect();
    let without_pinning = substitute(value, &satisfied);
    let image = substitute(&without_pinning, &HashMap::from([(r.clone(), at.clone())]));
    let n = int(r.vmax().as_i64() + 1);
    match and(Some(less(&int(-1), at)), Some(less(at, &n))) {
        Some(valid) => {
            // `r` only took in-range values; `at` may not, so its loads are gated too.
            let guarded = gate_loads_at(&image, at, &valid);
            UOp::alu(Op::Where, vec![valid, guarded, zero_like(&image)])
        }
        None => image,
    }
}

/// `u` with `valid` added to the gate of every memory address whose offset or gate is
/// computed from `at`.
///
/// Built bottom-up, so an address that reads memory at `at` (a gather of a gather) has its
/// inner loads gated too: otherwise the outer load's gate or index would read out of bounds.
/// An address whose gate alone mentions `at` is gated as well: its offset may have been
/// simplified for the values its gate allows while `r` still ran over `0..n` only (a gate
/// `r < 1` pins `r` to 0 there, not at `at = -1`; `simplify::offset_within_gate`).
fn gate_loads_at(u: &UOp, at: &UOp, valid: &UOp) -> UOp {
    let mut image: HashMap<UOp, UOp> = HashMap::new();
    for n in u.toposort() {
        let src: Vec<UOp> = n
            .src()
            .iter()
            .map(|s| image.get(s).cloned().unwrap_or_else(|| s.clone()))
            .collect();
        let mut m = if src.as_slice() == n.src() {
            n.clone()
        } else {
            n.with_src(src)
        };
        if n.op() == Op::Address && n.src()[1..].iter().any(|s| s.toposort().contains(at)) {
            let gate = and(m.src().get(2).cloned(), Some(valid.clone()));
            let mut src = m.src()[..2].to_vec();
            src.extend(gate);
            m = m.with_src(src);
        }
        if m != n {
            image.insert(n, m);
        }
    }
    image.get(u).cloned().unwrap_or_else(|| u.clone())
}

fn zero_like(u: &UOp) -> UOp {
    UOp::constant(0i64, u.dtype())
}

/// The gate under which `value` may be non-zero: the condition of `where(c, v, 0)`, the
/// gate of a gated load, or the masks of a product with masks `v * cast(c)` (the form a
/// one-hot basis takes through `jvp` and `vjp`; all masks of the product, joined by `And`).
fn gate_of(value: &UOp) -> Option<UOp> {
    match value.op() {
        Op::Where if value.s(2).const_value().is_some_and(|z| z.as_f64() == 0.0) => {
            Some(value.s(0).clone())
        }
        Op::Load if value.s(0).src().len() == 3 => Some(value.s(0).s(2).clone()),
        Op::Mul if value.dtype().is_float() => mask_factors(value)
            .into_iter()
            .map(Some)
            .reduce(and)
            .flatten(),
        _ => None,
    }
}

/// The conditions `c` of the factors `cast(c)` (with `c` a bool) of a product: where any of
/// them is false, the product is 0 (for finite other factors: README, "Limits and numerics").
fn mask_factors(product: &UOp) -> Vec<UOp> {
    let mut masks = Vec::new();
    let mut factors = vec![product.clone()];
    while let Some(f) = factors.pop() {
        match f.op() {
            Op::Mul if f.dtype() == product.dtype() => factors.extend(f.src().iter().cloned()),
            Op::Cast if f.s(0).dtype() == DType::Bool => masks.push(f.s(0).clone()),
            _ => {}
        }
    }
    masks
}

/// A bound on a range read off one clause.
enum Bound {
    AtLeast(UOp),
    AtMost(UOp),
}

/// The bounds one clause puts on `r`: `a < b` with `a - b = ±r + rest` (`rest` free of `r`)
/// gives `r <= -rest - 1` or `r >= rest + 1`; `a == b` (or `(a != b) != true`) gives
/// both `r >= -rest` and `r <= -rest` (or `rest`, for `-r`). `None` for any other clause.
/// `r` may appear through an integer cast that holds all its values.
fn bounds_on(clause: &UOp, r: &UOp) -> Option<Vec<Bound>> {
    let minus = |x: &UOp| UOp::alu(Op::Mul, vec![x.clone(), konst_like(x, -1)]);
    let sum = |a: &UOp, b: &UOp| UOp::alu(Op::Add, vec![a.clone(), b.clone()]);
    let linear = |a: &UOp, b: &UOp| -> Option<(i64, UOp)> {
        if a.dtype() != DType::Index && !a.dtype().is_signed_int() {
            return None;
        }
        let diff = simplify(&sum(a, &minus(b)));
        let coef = coefficient_of(&diff, r)?;
        let rest = simplify(&substitute(&diff, &HashMap::from([(r.clone(), int(0))])));
        Some((coef, rest))
    };
    match clause.op() {
        // An order is only read off exact (`Index`) arithmetic; a wrapping difference could
        // change its sign. An equality survives wrapping, so any signed integer will do.
        Op::CmpLt if clause.s(0).dtype() == DType::Index => match linear(clause.s(0), clause.s(1))?
        {
            (1, rest) => Some(vec![Bound::AtMost(as_index(simplify(&sum(
                &minus(&rest),
                &konst_like(&rest, -1),
            ))))]),
            (-1, rest) => Some(vec![Bound::AtLeast(as_index(simplify(&sum(
                &rest,
                &konst_like(&rest, 1),
            ))))]),
            _ => None,
        },
        Op::CmpNe | Op::CmpEq if equality(clause).is_some() => {
            let inner = equality(clause)?;
            let at = as_index(match linear(inner.s(0), inner.s(1))? {
                (1, rest) => simplify(&minus(&rest)),
                (-1, rest) => rest,
                _ => return None,
            });
            Some(vec![Bound::AtLeast(at.clone()), Bound::AtMost(at)])
        }
        _ => None,
    }
}

/// The `a != b` whose negation `clause` is: `(a != b) != true` itself, or `a == b` (the
/// canonical form) read as the node `a != b`.
fn equality(clause: &UOp) -> Option<UOp> {
    match clause.op() {
        Op::CmpNe if is_true(clause.s(1)) && clause.s(0).op() == Op::CmpNe => {
            Some(clause.s(0).clone())
        }
        Op::CmpEq => Some(UOp::alu(Op::CmpNe, clause.src().to_vec())),
        _ => None,
    }
}

/// An integer cast of an index value (or of such a cast: `i64(i32(r))`) that holds every
/// value of it (so it is the identity on the values and a bound through it is a bound on the
/// index).
fn is_exact_int_cast(u: &UOp) -> bool {
    u.op() == Op::Cast
        && u.dtype().is_signed_int()
        && (u.s(0).dtype() == DType::Index || is_exact_int_cast(u.s(0)))
        && u.dtype().min_value().as_i64() <= u.s(0).vmin().as_i64()
        && u.s(0).vmax().as_i64() <= u.dtype().max_value().as_i64()
}

/// `u` as an index value (integer bounds are compared and substituted as `Index`).
fn as_index(u: UOp) -> UOp {
    if u.dtype() == DType::Index {
        u
    } else {
        simplify(&u.cast(DType::Index))
    }
}

/// The integer `v` in `u`'s dtype.
fn konst_like(u: &UOp, v: i64) -> UOp {
    UOp::constant(v, u.dtype())
}

fn is_true(u: &UOp) -> bool {
    u.dtype() == DType::Bool && u.const_value().is_some_and(|v| v.as_bool())
}

/// `c` when `e` is `c·r + (terms free of r)` (sums and constant multiples of sums are walked
/// through); `None` when `r` occurs in any other way.
fn coefficient_of(e: &UOp, r: &UOp) -> Option<i64> {
    let mut coef = 0i64;
    let mut terms = vec![(e.clone(), 1i64)];
    while let Some((term, scale)) = terms.pop() {
        if &term == r {
            coef = coef.checked_add(scale)?;
        } else if term.op() == Op::Add {
            terms.extend(term.src().iter().map(|t| (t.clone(), scale)));
        } else if term.op() == Op::Mul
            && let Some(c) = term.s(1).const_value()
        {
            terms.push((term.s(0).clone(), scale.checked_mul(c.as_i64())?));
        } else if is_exact_int_cast(&term) {
            terms.push((term.s(0).clone(), scale));
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

    /// The value of a collapsed index expression at `g = v` (other ranges 0).
    fn at(u: &UOp, g: &UOp, v: i64) -> i64 {
        let fixed = substitute(u, &HashMap::from([(g.clone(), int(v))]));
        simplify(&fixed).const_value().expect("a constant").as_i64()
    }

    #[test]
    fn a_load_whose_gate_alone_mentions_the_range_is_gated_too() {
        // Σ_{r<3} where(r == g, x[5] if r < 1, 0), g = k - 1 in -1..=3: the offset `5` is
        // right for `r` in 0..3 only (a gate-aware simplification may have pinned `r` to 0
        // in it), so the load must not run at g = -1 although `g < 1` holds there.
        let k = UOp::range(5, 0, AxisType::Loop);
        let g = UOp::alu(Op::Add, vec![k.clone(), int(-1)]);
        let r = UOp::range(3, 1, AxisType::Reduce);
        let dg = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(1));
        let address = UOp::new(
            Op::Address,
            DType::F32,
            vec![dg, int(5), less(&r, &int(1))],
            Arg::None,
        );
        let load = UOp::new(Op::Load, DType::F32, vec![address], Arg::None);
        let equal = UOp::alu(Op::CmpEq, vec![r.clone(), g]);
        let value = UOp::alu(
            Op::Where,
            vec![equal, load, UOp::constant(0i64, DType::F32)],
        );
        let collapsed = collapse_reduce(&sum_over(value, &r)).expect("collapses");
        let address = collapsed
            .toposort()
            .into_iter()
            .find(|u| u.op() == Op::Address)
            .expect("the load stays");
        let gate = address.s(2);
        let open: Vec<i64> = (0..5).map(|v| at(gate, &k, v)).collect();
        assert_eq!(open, [0, 1, 0, 0, 0], "{gate:?}");
    }

    #[test]
    fn a_prefix_count_becomes_its_closed_form() {
        // Σ_{r<5} where(r <= g, 1, 0) = g + 1 for g in 0..5 (an arange's prefix sum).
        let g = UOp::range(5, 0, AxisType::Loop);
        let r = UOp::range(5, 1, AxisType::Reduce);
        let gate = less(&r, &UOp::alu(Op::Add, vec![g.clone(), int(1)]));
        let one = UOp::constant(1i64, DType::I32);
        let value = UOp::alu(Op::Where, vec![gate, one, UOp::constant(0i64, DType::I32)]);
        let reduce = UOp::new(
            Op::Reduce,
            DType::I32,
            vec![value, r.clone()],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        let collapsed = collapse_reduce(&reduce).expect("collapses");
        assert!(!collapsed.toposort().contains(&r));
        for v in 0..5 {
            assert_eq!(at(&collapsed, &g, v), v + 1, "at g = {v}");
        }
    }

    #[test]
    fn an_equality_with_the_range_pins_it() {
        // Σ_{r<6} where(r == g + 2, 2r, 0) = 2(g + 2) where g + 2 < 6, else 0.
        let g = UOp::range(6, 0, AxisType::Loop);
        let r = UOp::range(6, 1, AxisType::Reduce);
        let target = UOp::alu(Op::Add, vec![g.clone(), int(2)]);
        let differs = UOp::alu(Op::CmpNe, vec![r.clone(), target]);
        let equal = UOp::alu(Op::CmpNe, vec![differs, truth(true)]);
        let twice = UOp::alu(Op::Mul, vec![r.clone(), int(2)]);
        let value = UOp::alu(Op::Where, vec![equal, twice, int(0)]);
        let reduce = UOp::new(
            Op::Reduce,
            DType::Index,
            vec![value, r.clone()],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        let collapsed = collapse_reduce(&reduce).expect("collapses");
        assert!(!collapsed.toposort().contains(&r));
        for v in 0..6 {
            let want = if v + 2 < 6 { 2 * (v + 2) } else { 0 };
            assert_eq!(at(&collapsed, &g, v), want, "at g = {v}");
        }
    }

    #[test]
    fn a_nonlinear_use_of_the_range_is_not_a_bound() {
        let g = UOp::range(3, 0, AxisType::Loop);
        let r = UOp::range(3, 1, AxisType::Reduce);
        let square = UOp::alu(Op::Mul, vec![r.clone(), r.clone()]);
        assert!(bounds_on(&less(&square, &g), &r).is_none());
        assert!(bounds_on(&less(&r, &g), &r).is_some());
    }

    #[test]
    fn a_sum_of_a_product_with_a_one_hot_mask_is_one_term() {
        // Σ_{r<6} 2r * cast(r == g) * 3 = 6g, the form jvp/vjp give a one-hot basis.
        let g = UOp::range(6, 0, AxisType::Loop);
        let r = UOp::range(6, 1, AxisType::Reduce);
        let equal = UOp::alu(Op::CmpEq, vec![g.clone(), r.clone()]);
        let mask = equal.cast(DType::I32);
        let twice = UOp::alu(Op::Mul, vec![r.cast(DType::I32), int(2).cast(DType::I32)]);
        let value = UOp::alu(
            Op::Mul,
            vec![
                UOp::alu(Op::Mul, vec![twice, mask]),
                UOp::constant(3i64, DType::I32),
            ],
        );
        // Integer products take the mask form too; float ones are what Jacobians make.
        let reduce = UOp::new(
            Op::Reduce,
            DType::I32,
            vec![value.clone(), r.clone()],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        assert!(
            collapse_reduce(&reduce).is_none(),
            "only float products collapse"
        );
        let fvalue = UOp::alu(
            Op::Mul,
            vec![
                UOp::alu(Op::Mul, vec![r.cast(DType::F32), equal.cast(DType::F32)]),
                UOp::constant(6.0f32, DType::F32),
            ],
        );
        let collapsed = collapse_reduce(&sum_over(fvalue, &r)).expect("collapses");
        let collapsed = simplify(&collapsed);
        assert!(!collapsed.toposort().contains(&r), "{collapsed:?}");
        for v in 0..6 {
            let fixed = substitute(&collapsed, &HashMap::from([(g.clone(), int(v))]));
            let value = simplify(&fixed).const_value().expect("a constant").as_f64();
            assert_eq!(value, 6.0 * v as f64, "at g = {v}");
        }
    }

    #[test]
    fn a_product_without_a_mask_on_the_range_stays_a_sum() {
        let g = UOp::range(6, 0, AxisType::Loop);
        let r = UOp::range(6, 1, AxisType::Reduce);
        let below = less(&r, &g).cast(DType::F32);
        let value = UOp::alu(Op::Mul, vec![r.cast(DType::F32), below]);
        assert!(collapse_reduce(&sum_over(value, &r)).is_none());
    }
}
