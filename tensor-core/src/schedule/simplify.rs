//! The rule table applied to every kernel AST: the `symbolic` rules, the reassociation of
//! chained float constants that `symbolic` leaves alone because it is not exact, and the
//! collapse of a sum over a range that only one value of the range contributes to.
//!
//! ```text
//! (x + c1) + c2  =>  x + (c1 + c2)      float dtypes
//! (x * c1) * c2  =>  x * (c1 * c2)      float dtypes
//! Σ_r where(r == g, v(r), 0)  =>  where(0 <= g < n, v(g), 0)      (see `collapse`)
//! Address(buf, flat, true)  =>  Address(buf, flat)
//! Address(buf, flat(r), c < r ∧ ..)  =>  Address(buf, flat simplified for r in (c, n))
//! ```
//!
//! The last rule reads the bounds a load's gate puts on a range (`0 < r`, `r < 25`: the
//! inside of a padded window) and simplifies the offset as if the range ran over those
//! values only: the offset is only used where the gate holds. `(r - 1) % 24` is `r - 1`
//! there, and a range a gate pins to one value is that value.
//!
//! Like tinygrad's scheduler (and C compilers under fast-math), a kernel folds `(a + 4) + 3`
//! into `a + 7`; the result may differ from the unfused graph in the last bit.

use super::collapse::collapse_reduce;
use crate::rewrite::{Captures, PatternMatcher, UPat, graph_rewrite};
use crate::symbolic::symbolic;
use crate::uop::alu::exec;
use crate::uop::{Arg, DType, Op, UOp, substitute};
use std::collections::HashMap;
use std::sync::OnceLock;

const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];

/// `ast` rewritten to a fixpoint with the kernel rule table, its range ids then counted from
/// 0 again (a collapsed reduce leaves a gap) so equal kernels stay equal ASTs. Renumbered
/// ranges change the content keys that order commutative operands, so a renumbered AST is
/// rewritten once more.
pub fn simplify_kernel(ast: &UOp) -> UOp {
    let simplified = graph_rewrite(ast, kernel_rules(), &mut ());
    let renumbered = renumber_ranges(&simplified);
    if renumbered == simplified {
        return simplified;
    }
    graph_rewrite(&renumbered, kernel_rules(), &mut ())
}

/// `ast` with its ranges numbered `0..n` in the order of their ids.
fn renumber_ranges(ast: &UOp) -> UOp {
    let mut ranges: Vec<(usize, UOp)> = ast
        .toposort()
        .into_iter()
        .filter_map(|u| match u.arg() {
            Arg::Range { id, .. } if u.op() == Op::Range => Some((*id, u.clone())),
            _ => None,
        })
        .collect();
    ranges.sort_by_key(|(id, _)| *id);
    let renumbered: HashMap<UOp, UOp> = ranges
        .into_iter()
        .enumerate()
        .filter(|(k, (id, _))| k != id)
        .map(|(k, (_, r))| {
            let Arg::Range { axis_type, .. } = r.arg() else {
                unreachable!("filtered to ranges")
            };
            let arg = Arg::Range {
                id: k,
                axis_type: *axis_type,
            };
            let image = UOp::new(Op::Range, r.dtype(), r.src().to_vec(), arg);
            (r, image)
        })
        .collect();
    substitute(ast, &renumbered)
}

fn kernel_rules() -> &'static PatternMatcher<()> {
    static RULES: OnceLock<PatternMatcher<()>> = OnceLock::new();
    RULES.get_or_init(|| {
        let (x, c1, c2) = (|| UPat::var("x"), || UPat::cvar("c1"), || UPat::cvar("c2"));
        let mut rules = symbolic().clone();
        rules.extend(
            &PatternMatcher::new()
                .rule(((x() + c1()) + c2()).dtypes(FLOATS), |m, _| {
                    merge_constants(m, Op::Add)
                })
                .rule(((x() * c1()) * c2()).dtypes(FLOATS), |m, _| {
                    merge_constants(m, Op::Mul)
                })
                .rule(UPat::op(Op::Reduce), |m, _| collapse_reduce(m.root()))
                .rule(UPat::op(Op::Address), |m, _| drop_true_gate(m.root()))
                .rule(UPat::op(Op::Address), |m, _| offset_given_gate(m.root())),
        );
        rules
    })
}

/// `Address(buf, flat, true)  =>  Address(buf, flat)`: a gate that always holds guards nothing.
fn drop_true_gate(index: &UOp) -> Option<UOp> {
    let gate = index.src().get(2)?;
    gate.const_value()
        .is_some_and(|g| g.as_bool())
        .then(|| index.with_src(index.src()[..2].to_vec()))
}

/// The bounds the conjuncts of `gate` put on ranges: `c < r` raises the low end of `r`,
/// `r < c` lowers its high end. Only ranges compared with constants are read.
fn range_bounds(gate: &UOp, bounds: &mut HashMap<UOp, (i64, i64)>) {
    if gate.op() == Op::And {
        range_bounds(gate.s(0), bounds);
        range_bounds(gate.s(1), bounds);
        return;
    }
    if gate.op() != Op::CmpLt {
        return;
    }
    let (a, b) = (gate.s(0), gate.s(1));
    let whole = |r: &UOp| (r.vmin().as_i64(), r.vmax().as_i64());
    if let (Op::Range, Some(c)) = (a.op(), b.const_value()) {
        let e = bounds.entry(a.clone()).or_insert_with(|| whole(a));
        e.1 = e.1.min(c.as_i64() - 1);
    } else if let (Some(c), Op::Range) = (a.const_value(), b.op()) {
        let e = bounds.entry(b.clone()).or_insert_with(|| whole(b));
        e.0 = e.0.max(c.as_i64() + 1);
    }
}

/// The offset of a gated `Address` simplified for the values of its ranges the gate allows
/// (each narrowed range stands in as a variable with those bounds while the symbolic rules
/// run, then is put back), or `None` when nothing narrows or nothing simplifies.
fn offset_given_gate(address: &UOp) -> Option<UOp> {
    let (flat, gate) = (address.src().get(1)?, address.src().get(2)?);
    let mut bounds = HashMap::new();
    range_bounds(gate, &mut bounds);
    let flat_ranges: Vec<UOp> = flat
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Range)
        .collect();
    let mut to_var = HashMap::new();
    let mut back = HashMap::new();
    for (r, (lo, hi)) in bounds {
        let narrower = lo > r.vmin().as_i64() || hi < r.vmax().as_i64();
        if !narrower || lo > hi || !flat_ranges.contains(&r) {
            continue;
        }
        let image = if lo == hi {
            UOp::index(lo)
        } else {
            let name = format!("gated_range_{}", to_var.len());
            let (l, h) = (UOp::index(lo), UOp::index(hi));
            let var = UOp::new(Op::DefineVar, DType::Index, vec![l, h], Arg::Name(name));
            back.insert(var.clone(), r.clone());
            var
        };
        to_var.insert(r, image);
    }
    if to_var.is_empty() {
        return None;
    }
    let narrowed = graph_rewrite(&substitute(flat, &to_var), symbolic(), &mut ());
    let simplified = substitute(&narrowed, &back);
    let size = |u: &UOp| u.toposort().len();
    (simplified != *flat && size(&simplified) < size(flat)).then(|| {
        let mut src = address.src().to_vec();
        src[1] = simplified;
        address.with_src(src)
    })
}

fn merge_constants(m: &Captures, op: Op) -> Option<UOp> {
    let dtype = m.root().dtype();
    let (a, b) = (m["c1"].const_value()?, m["c2"].const_value()?);
    let folded = exec(op, dtype, &[a, b]);
    Some(UOp::alu(
        op,
        vec![m["x"].clone(), UOp::constant(folded, dtype)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::AxisType;

    fn address(flat: UOp, gate: UOp) -> UOp {
        let dg = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(1));
        UOp::new(Op::Address, DType::F32, vec![dg, flat, gate], Arg::None)
    }

    fn alu(op: Op, a: &UOp, b: i64) -> UOp {
        UOp::alu(op, vec![a.clone(), UOp::index(b)])
    }

    #[test]
    fn a_gated_offset_is_simplified_for_the_values_the_gate_allows() {
        // Column r - 1 of a row of 24 inside a window padded by one (r in 0..26, read where
        // 0 < r < 25): the remainder is the column itself there.
        let r = UOp::range(26, 0, AxisType::Loop);
        let flat = alu(Op::Mod, &alu(Op::Add, &r, -1), 24);
        let inside = UOp::alu(
            Op::And,
            vec![
                UOp::alu(Op::CmpLt, vec![UOp::index(0), r.clone()]),
                alu(Op::CmpLt, &r, 25),
            ],
        );
        let simplified = offset_given_gate(&address(flat.clone(), inside.clone()))
            .expect("the gate narrows r to 1..=24");
        assert_eq!(simplified.s(1), &alu(Op::Add, &r, -1));
        assert_eq!(simplified.s(2), &inside, "the gate itself is kept");
        // A gate that pins a range to one value puts that value in.
        let k = UOp::range(2, 1, AxisType::Loop);
        let pinned = UOp::alu(Op::CmpLt, vec![UOp::index(0), k.clone()]);
        let offset = alu(Op::Idiv, &alu(Op::Add, &k, 1), 2);
        let one = offset_given_gate(&address(offset, pinned)).expect("k is 1");
        assert_eq!(one.s(1).const_value().map(|v| v.as_i64()), Some(1));
        // Without a gate on its ranges nothing changes.
        let ungated = address(flat, UOp::alu(Op::CmpLt, vec![k.clone(), UOp::index(1)]));
        assert!(offset_given_gate(&ungated).is_none());
    }
}
