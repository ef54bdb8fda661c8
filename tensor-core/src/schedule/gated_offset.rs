//! A gated load's offset simplified for the range values its own gate allows.
//!
//! ```text
//! Address(buf, f(r), lo <= r ∧ r <= hi ∧ ..)  =>  Address(buf, f(v)|v:=r, lo <= r ∧ r <= hi ∧ ..)
//!     v a variable over [max(lo, 0), min(hi, n - 1)] while the symbolic rules run on f
//! ```
//!
//! A padded window reads `x[r - 1]` through reshapes, so its offset is a chain of `/` and
//! `%` that only folds for `1 <= r <= n - 2`: outside, the flattened offset leaves the row.
//! Those are exactly the values the load's gate lets through, and the offset is not used
//! elsewhere, so it may be simplified for them: `(r - 1) % 24` is `r - 1` there, and a range
//! the gate pins to one value is that value.
//!
//! What keeps it sound:
//! - the bounds come from clauses of this load's gate that compare a range with a constant
//!   (`c < r`, `r < c`), intersected with the range's own `0..n`; any other clause (a loaded
//!   index of a gather, `(r + k) % 2`, a sum of ranges) is left out, which only widens the
//!   set of values the offset is simplified for;
//! - only the offset changes; the gate is kept as it was;
//! - an offset that reads memory (a gather's index) is left alone: that inner load runs
//!   whether or not the outer gate holds, so its address must stay valid for every value;
//! - a narrowed range may leave the offset (`r < 1` pins it to 0): the offset is then right
//!   for the values of the gate's ranges in their `0..n` only. A reduce collapse that puts an
//!   arbitrary value for a range (`collapse::pinned_sum`) therefore gates every load whose
//!   gate mentions it too, not only those whose offset does.

use super::index::conjuncts;
use crate::rewrite::graph_rewrite;
use crate::symbolic::symbolic;
use crate::uop::{Arg, DType, Op, UOp, substitute};
use std::collections::HashMap;

/// `Address(buf, flat, gate)` with `flat` simplified for the values of its ranges that
/// `gate`'s range-with-constant clauses allow, or `None` when none narrows a range of
/// `flat`, `flat` loads memory, or the result is no smaller.
pub fn offset_within_gate(address: &UOp) -> Option<UOp> {
    let (flat, gate) = (address.src().get(1)?, address.src().get(2)?);
    // In range order, so the stand-in variables (and the AST) are the same on every run.
    let mut bounds: Vec<_> = gate_bounds(gate).into_iter().collect();
    bounds.sort_by_key(|(r, _)| match r.arg() {
        Arg::Range { id, .. } => *id,
        _ => usize::MAX,
    });
    if bounds.is_empty() {
        return None;
    }
    let nodes = flat.toposort();
    if nodes.iter().any(|u| u.op() == Op::Load) {
        return None;
    }
    let mut narrowed = HashMap::new();
    let mut back = HashMap::new();
    for (r, (lo, hi)) in bounds {
        let (n_lo, n_hi) = (r.vmin().as_i64(), r.vmax().as_i64());
        let (lo, hi) = (lo.max(n_lo), hi.min(n_hi));
        if (lo, hi) == (n_lo, n_hi) || lo > hi || !nodes.contains(&r) {
            continue;
        }
        let image = if lo == hi {
            UOp::index(lo)
        } else {
            let var = bounded_var(back.len(), lo, hi);
            if nodes.contains(&var) {
                return None;
            }
            back.insert(var.clone(), r.clone());
            var
        };
        narrowed.insert(r, image);
    }
    if narrowed.is_empty() {
        return None;
    }
    let within = graph_rewrite(&substitute(flat, &narrowed), symbolic(), &mut ());
    let simplified = substitute(&within, &back);
    (simplified.toposort().len() < nodes.len()).then(|| {
        let mut src = address.src().to_vec();
        src[1] = simplified;
        address.with_src(src)
    })
}

/// An index variable over `lo..=hi` standing in for a narrowed range while the symbolic
/// rules run (its name cannot be a kernel's own variable's).
fn bounded_var(k: usize, lo: i64, hi: i64) -> UOp {
    UOp::new(
        Op::DefineVar,
        DType::Index,
        vec![UOp::index(lo), UOp::index(hi)],
        Arg::Name(format!("<gate range {k}>")),
    )
}

/// The bounds `[lo, hi]` the clauses of `gate` (an `And` tree) put on ranges: `c < r`
/// raises `lo` to `c + 1`, `r < c` lowers `hi` to `c - 1`. Other clauses are not read.
fn gate_bounds(gate: &UOp) -> HashMap<UOp, (i64, i64)> {
    let mut bounds: HashMap<UOp, (i64, i64)> = HashMap::new();
    for clause in conjuncts(gate) {
        if clause.op() != Op::CmpLt {
            continue;
        }
        let (a, b) = (clause.s(0), clause.s(1));
        let (r, lo, hi) = match (a.op(), a.const_value(), b.op(), b.const_value()) {
            (Op::Range, _, _, Some(c)) => (a, i64::MIN, c.as_i64() - 1),
            (_, Some(c), Op::Range, _) => (b, c.as_i64() + 1, i64::MAX),
            _ => continue,
        };
        let e = bounds.entry(r.clone()).or_insert((i64::MIN, i64::MAX));
        *e = (e.0.max(lo), e.1.min(hi));
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate;
    use crate::schedule::create_schedule;
    use crate::schedule::exec::run;
    use crate::symbolic::simplify;
    use crate::tensor::Tensor;
    use crate::uop::AxisType;

    fn i(v: i64) -> UOp {
        UOp::index(v)
    }
    fn add(a: &UOp, b: &UOp) -> UOp {
        UOp::alu(Op::Add, vec![a.clone(), b.clone()])
    }
    fn mul(a: &UOp, c: i64) -> UOp {
        UOp::alu(Op::Mul, vec![a.clone(), i(c)])
    }
    fn div(a: &UOp, c: i64) -> UOp {
        UOp::alu(Op::Idiv, vec![a.clone(), i(c)])
    }
    fn rem(a: &UOp, c: i64) -> UOp {
        UOp::alu(Op::Mod, vec![a.clone(), i(c)])
    }
    fn less(a: &UOp, b: &UOp) -> UOp {
        UOp::alu(Op::CmpLt, vec![a.clone(), b.clone()])
    }
    fn and(a: &UOp, b: &UOp) -> UOp {
        UOp::alu(Op::And, vec![a.clone(), b.clone()])
    }
    fn address(flat: UOp, gate: UOp) -> UOp {
        let dg = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(1));
        UOp::new(Op::Address, DType::F32, vec![dg, flat, gate], Arg::None)
    }
    fn divisions(u: &UOp) -> usize {
        u.toposort()
            .iter()
            .filter(|n| matches!(n.op(), Op::Idiv | Op::Mod))
            .count()
    }

    /// The col2im read of one tap: a `[2, 3, 4, 4]` view padded by one to `6 x 6`, its
    /// shifted flat position unravelled into tap 1 of a `[2, 3, 2, 4, 4]` buffer, read where
    /// `0 < y < 5` and `0 < x < 5`.
    fn col2im_tap() -> (UOp, [UOp; 4]) {
        let sizes = [2, 3, 6, 6];
        let [b, c, y, x] = [0, 1, 2, 3].map(|k| UOp::range(sizes[k], k, AxisType::Loop));
        let s = add(
            &add(&add(&mul(&b, 48), &mul(&c, 16)), &add(&mul(&y, 4), &x)),
            &i(-5),
        );
        let flat = [
            mul(&rem(&div(&s, 4), 4), 4),
            mul(&rem(&div(&s, 16), 3), 32),
            mul(&rem(&div(&s, 48), 2), 96),
            rem(&add(&x, &i(3)), 4),
            i(16),
        ]
        .iter()
        .fold(i(0), |acc, t| add(&acc, t));
        let gate = [less(&i(0), &x), less(&x, &i(5)), less(&i(0), &y)]
            .iter()
            .fold(less(&y, &i(5)), |acc, c| and(&acc, c));
        (address(flat, gate), [b, c, y, x])
    }

    /// `u` with the ranges at `values`, folded to a constant.
    fn at(u: &UOp, ranges: &[UOp], values: &[i64]) -> i64 {
        let fixed: HashMap<UOp, UOp> = ranges
            .iter()
            .zip(values)
            .map(|(r, &v)| (r.clone(), i(v)))
            .collect();
        let folded = simplify(&substitute(u, &fixed));
        folded.const_value().expect("a constant").as_i64()
    }

    #[test]
    fn a_col2im_offset_loses_its_divisions_where_its_gate_holds() {
        let (index, ranges) = col2im_tap();
        let before = simplify(index.s(1));
        assert!(divisions(&before) >= 6, "without the gate the chain stays");
        let narrowed = offset_within_gate(&address(before.clone(), index.s(2).clone()))
            .expect("the gate narrows y and x to 1..=4");
        assert_eq!(divisions(narrowed.s(1)), 0, "{:?}", narrowed.s(1));
        assert_eq!(narrowed.s(2), index.s(2), "the gate itself is kept");
        let mut checked = 0;
        for v in (0..2 * 3 * 6 * 6).map(|k| [k / 108, k / 36 % 3, k / 6 % 6, k % 6]) {
            if at(index.s(2), &ranges, &v) == 0 {
                continue;
            }
            let (want, got) = (at(index.s(1), &ranges, &v), at(narrowed.s(1), &ranges, &v));
            assert_eq!(got, want, "offset at {v:?}");
            assert!((0..192).contains(&got));
            checked += 1;
        }
        assert_eq!(checked, 2 * 3 * 4 * 4);
    }

    #[test]
    fn a_gate_pins_a_range_to_one_value() {
        let k = UOp::range(2, 1, AxisType::Loop);
        let offset = div(&add(&k, &i(1)), 2);
        let one = offset_within_gate(&address(offset, less(&i(0), &k))).expect("k is 1");
        assert_eq!(one.s(1).const_value().map(|v| v.as_i64()), Some(1));
    }

    #[test]
    fn clauses_other_than_a_range_and_a_constant_narrow_nothing() {
        let r = UOp::range(26, 0, AxisType::Loop);
        let q = UOp::range(2, 1, AxisType::Loop);
        let column = rem(&add(&r, &i(-1)), 24);
        let loaded = UOp::new(
            Op::Load,
            DType::Index,
            vec![UOp::new(
                Op::Address,
                DType::Index,
                vec![
                    UOp::new(Op::DefineGlobal, DType::Index, vec![], Arg::Int(2)),
                    q.clone(),
                ],
                Arg::None,
            )],
            Arg::None,
        );
        for gate in [
            less(&i(0), &rem(&add(&r, &q), 2)),
            less(&loaded, &r),
            less(&add(&r, &q), &i(25)),
        ] {
            assert!(offset_within_gate(&address(column.clone(), gate)).is_none());
        }
        // A gathered offset keeps its inner load's address: that load is not gated.
        let gathered = add(&column, &mul(&loaded, 26));
        let inside = and(&less(&i(0), &r), &less(&r, &i(25)));
        assert!(offset_within_gate(&address(gathered, inside)).is_none());
    }

    #[test]
    fn a_padded_reshaped_view_reads_without_divisions() {
        // Tap 1 of a [2, 3, 2, 4, 4] buffer, squeezed by a reshape and padded by one: the
        // lowering reads it through the unravel of a shifted flat position (col2im's read).
        let data: Vec<f32> = (0..192).map(|k| k as f32 * 0.5 - 7.0).collect();
        let x = Tensor::from_vec(data, &[2, 3, 2, 4, 4]);
        let view = x.slice(2, 1, 2).reshape(&[2, 3, 4, 4]);
        let weights: Vec<f32> = (0..216).map(|k| k as f32).collect();
        let padded = view
            .pad(&[(0, 0), (0, 0), (1, 1), (1, 1)])
            .mul(Tensor::from_vec(weights, &[2, 3, 6, 6]));
        let schedule = create_schedule(&[padded.uop()]);
        let ast = &schedule.items.last().expect("a kernel").ast;
        let gated: Vec<UOp> = ast
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Op::Address && u.src().len() == 3)
            .collect();
        assert_eq!(gated.len(), 1, "{ast:?}");
        assert_eq!(divisions(ast), 0, "{ast:?}");
        let got = run(&schedule).pop().expect("one output");
        let want = evaluate(&padded.uop()).to_f64_vec();
        let got: Vec<f64> = got.iter().map(|v| v.as_f64()).collect();
        assert_eq!(got, want);
    }
}
