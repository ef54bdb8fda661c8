//! The rule table applied to every kernel AST: the `symbolic` rules, the merging of chained
//! float scalings by a power of two (exact), the collapse of a sum over a range that only one
//! value of the range contributes to, and a gated load's offset simplified for the range
//! values its gate allows.
//!
//! ```text
//! (x * c1) * c2  =>  x * (c1 * c2)      float dtypes, c1 or c2 a power of two
//! reduce_{r < 0} v  =>  identity of the reduce
//! Σ_r where(r == g, v(r), 0)  =>  where(0 <= g < n, v(g), 0)      (see `collapse`)
//! Address(buf, flat, true)  =>  Address(buf, flat)
//! Address(buf, flat(r), c < r ∧ ..)  =>  Address(buf, flat simplified for r > c)   (see `gated_offset`)
//! ```
//!
//! Float sums are never reassociated: `(x + 1) - 1` is not `x` for a tiny `x`, and
//! compensated arithmetic (Kahan's `log1p`, two-sums, rounding by adding `1.5·2^23`) depends
//! on the rounding each step does. A product by a power of two is exact, so merging one into
//! another scaling changes no value (short of an intermediate overflow or underflow).

use super::collapse::collapse_reduce;
use super::gated_offset::offset_within_gate;
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
                .rule(((x() * c1()) * c2()).dtypes(FLOATS), |m, _| {
                    merge_scalings(m)
                })
                .rule(UPat::op(Op::Reduce), |m, _| empty_reduce(m.root()))
                .rule(UPat::op(Op::Reduce), |m, _| collapse_reduce(m.root()))
                .rule(UPat::op(Op::Address), |m, _| drop_true_gate(m.root()))
                .rule(UPat::op(Op::Address), |m, _| offset_within_gate(m.root())),
        );
        rules
    })
}

/// `reduce_{r < 0} v  =>  identity`: a reduction over an empty range is its identity (0, 1 or
/// the lowest value), whatever `v` is (`Σ_{r < 0} inf` is 0, not `inf * 0`), and reads nothing.
fn empty_reduce(reduce: &UOp) -> Option<UOp> {
    let Arg::Reduce(op, _) = reduce.arg() else {
        return None;
    };
    reduce.src()[1..]
        .iter()
        .any(|r| r.op() == Op::Range && r.vmax().as_i64() < 0)
        .then(|| UOp::constant(op.identity(reduce.dtype()), reduce.dtype()))
}

/// `Address(buf, flat, true)  =>  Address(buf, flat)`: a gate that always holds guards nothing.
fn drop_true_gate(index: &UOp) -> Option<UOp> {
    let gate = index.src().get(2)?;
    gate.const_value()
        .is_some_and(|g| g.as_bool())
        .then(|| index.with_src(index.src()[..2].to_vec()))
}

/// `(x * c1) * c2  =>  x * (c1 * c2)` when `c1` or `c2` is a power of two, so the merged
/// scaling rounds exactly as the two did.
fn merge_scalings(m: &Captures) -> Option<UOp> {
    let dtype = m.root().dtype();
    let (a, b) = (m["c1"].const_value()?, m["c2"].const_value()?);
    let power_of_two = |v: f64| v.is_normal() && v.to_bits() & ((1u64 << 52) - 1) == 0;
    if !power_of_two(a.as_f64()) && !power_of_two(b.as_f64()) {
        return None;
    }
    let folded = exec(Op::Mul, dtype, &[a, b]);
    Some(UOp::alu(
        Op::Mul,
        vec![m["x"].clone(), UOp::constant(folded, dtype)],
    ))
}

/// `expression` rewritten to a fixpoint with the kernel rule table (no renumbering): how an
/// index expression of a kernel simplifies, for passes that try a substitution first.
pub(super) fn simplify_expression(expression: &UOp) -> UOp {
    graph_rewrite(expression, kernel_rules(), &mut ())
}
