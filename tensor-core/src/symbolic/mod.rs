//! Symbolic simplification: the rules that fold constants and simplify index arithmetic.
//!
//! The table reads like the algebra: one identity per row, with the condition under which it
//! holds. `/` is integer division truncating toward zero and `%` the remainder with the sign of
//! the dividend (C semantics, `uop::alu`). Rules whose truth depends on exact integer arithmetic
//! are restricted to integer dtypes (`x * 0 => 0` is false for a NaN `x`, `x + 0 => x` for
//! `x = -0.0`); rules that use bounds (`vmin`/`vmax`) are restricted to signed integers and
//! `Index`, and assume the arithmetic does not overflow, as index arithmetic never does.
//!
//! The canonical-form rows (`canonical`: exact float identities, equality, operand order,
//! cast chains) are part of the same table.
//!
//! Every rule keeps the shape of the node it rewrites (a rule that would replace a shaped
//! tensor by a scalar declines), so the table is safe on tensor-level graphs too.
//!
//! ```
//! use tensor_core::symbolic::simplify;
//! use tensor_core::{AxisType, Op, UOp};
//!
//! let r = UOp::range(12, 0, AxisType::Loop);
//! let div = UOp::alu(Op::Idiv, vec![r.clone(), UOp::index(4)]);
//! let rem = UOp::alu(Op::Mod, vec![r.clone(), UOp::index(4)]);
//! let flat = UOp::alu(Op::Add, vec![UOp::alu(Op::Mul, vec![div, UOp::index(4)]), rem]);
//! assert_eq!(simplify(&flat), r);
//! ```

mod canonical;
mod fold;
mod sum;

#[cfg(test)]
mod tests;

use crate::rewrite::{Captures, PatternMatcher, UPat, graph_rewrite};
use crate::uop::{DType, Op, UOp};
use std::sync::OnceLock;

pub use fold::fold_constants;

/// Integer dtypes on which the exact-arithmetic identities hold.
const INTS: &[DType] = &[
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Index,
];

/// Signed integer dtypes, on which bound- and sign-based rules hold.
const SIGNED: &[DType] = &[DType::I8, DType::I16, DType::I32, DType::I64, DType::Index];

/// The symbolic rule table, built once.
pub fn symbolic() -> &'static PatternMatcher<()> {
    static TABLE: OnceLock<PatternMatcher<()>> = OnceLock::new();
    TABLE.get_or_init(build_table)
}

/// `u` rewritten with the symbolic rules to a fixpoint.
pub fn simplify(u: &UOp) -> UOp {
    graph_rewrite(u, symbolic(), &mut ())
}

// ---- pattern and node vocabulary of the table ----

fn x() -> UPat {
    UPat::var("x")
}
fn y() -> UPat {
    UPat::var("y")
}
fn a() -> UPat {
    UPat::var("a")
}
fn b() -> UPat {
    UPat::var("b")
}
fn c() -> UPat {
    UPat::cvar("c")
}
fn c1() -> UPat {
    UPat::cvar("c1")
}
fn c2() -> UPat {
    UPat::cvar("c2")
}
fn d() -> UPat {
    UPat::cvar("d")
}
fn n() -> UPat {
    UPat::cvar("n")
}
/// The pattern restricted to integer dtypes.
fn int(p: UPat) -> UPat {
    p.dtypes(INTS)
}
/// The pattern restricted to signed integer dtypes.
fn signed(p: UPat) -> UPat {
    p.dtypes(SIGNED)
}
/// The pattern restricted to bools.
fn boolean(p: UPat) -> UPat {
    p.dtype(DType::Bool)
}

/// `Cast(inner)` to the root's dtype, when `inner` is index arithmetic over the captured
/// `x` (and `y`), all `Index`, whose every value fits the root's dtype (so the cast of the
/// whole equals the wrapping arithmetic on the casts).
fn hoisted_cast(m: &Captures, inner: UOp) -> Option<UOp> {
    let dtype = m.root().dtype();
    let operands_are_index = ["x", "y"]
        .iter()
        .filter_map(|n| m.get(n))
        .all(|u| u.dtype() == DType::Index);
    let fits = dtype.min_value().as_i64() <= lo(&inner) && hi(&inner) <= dtype.max_value().as_i64();
    (operands_are_index && inner.dtype() == DType::Index && fits).then(|| inner.cast(dtype))
}

/// The integer value of the constant captured as `name`.
fn val(m: &Captures, name: &str) -> i64 {
    m[name].const_value().map_or(0, |v| v.as_i64())
}
/// The captured node `name`.
fn cap(m: &Captures, name: &str) -> UOp {
    m[name].clone()
}
fn lo(u: &UOp) -> i64 {
    u.vmin().as_i64()
}
fn hi(u: &UOp) -> i64 {
    u.vmax().as_i64()
}

/// A constant of `u`'s dtype.
fn konst(u: &UOp, v: i64) -> UOp {
    UOp::constant(v, u.dtype())
}
fn add(a: UOp, b: UOp) -> UOp {
    UOp::alu(Op::Add, vec![a, b])
}
fn mul(a: UOp, b: UOp) -> UOp {
    UOp::alu(Op::Mul, vec![a, b])
}
fn mul_c(a: UOp, v: i64) -> UOp {
    let k = konst(&a, v);
    mul(a, k)
}
fn add_c(a: UOp, v: i64) -> UOp {
    let k = konst(&a, v);
    add(a, k)
}
fn idiv_c(a: UOp, v: i64) -> UOp {
    let k = konst(&a, v);
    UOp::alu(Op::Idiv, vec![a, k])
}
fn mod_c(a: UOp, v: i64) -> UOp {
    let k = konst(&a, v);
    UOp::alu(Op::Mod, vec![a, k])
}
fn lt_c(a: UOp, v: i64) -> UOp {
    let k = konst(&a, v);
    UOp::alu(Op::CmpLt, vec![a, k])
}
/// The bool constant `v` (a comparison's result).
fn truth(v: bool) -> UOp {
    UOp::constant(v, DType::Bool)
}

/// Adds a rule whose replacement must have the shape of the node it replaces.
fn row<F>(pm: PatternMatcher<()>, pattern: UPat, f: F) -> PatternMatcher<()>
where
    F: Fn(&Captures) -> Option<UOp> + Send + Sync + 'static,
{
    pm.rule(pattern, move |m, _| {
        let out = f(m)?;
        (out.shape() == m.root().shape()).then_some(out)
    })
}

// `x * 0` and `x % 1` below are patterns, not arithmetic.
#[allow(clippy::erasing_op, clippy::modulo_one)]
fn build_table() -> PatternMatcher<()> {
    let pm = PatternMatcher::new();

    // ---- constants ----
    let pm = row(pm, UPat::ops(&fold::foldable()), |m| {
        fold_constants(m.root())
    });
    let pm = row(pm, UPat::ops(Op::COMMUTATIVE), |m| {
        fold::constant_to_the_right(m.root())
    });

    // ---- canonical integer form: only Add and Mul(-1) ----
    let pm = row(pm, signed(x() - y()), |m| {
        Some(add(cap(m, "x"), mul_c(cap(m, "y"), -1)))
    });
    let pm = row(pm, signed(-x()), |m| Some(mul_c(cap(m, "x"), -1)));

    // ---- identities ----
    let pm = row(pm, int(x() + 0), |m| Some(cap(m, "x")));
    let pm = row(pm, x() * 1, |m| Some(cap(m, "x")));
    let pm = row(pm, int(x() * 0), |m| Some(konst(m.root(), 0)));
    let pm = row(pm, int(x() / 1), |m| Some(cap(m, "x")));
    let pm = row(pm, int(x() % 1), |m| Some(konst(m.root(), 0)));
    let pm = row(pm, signed(x() + x()), |m| Some(mul_c(cap(m, "x"), 2)));

    // ---- nested constants ----
    let pm = row(pm, signed((x() + c1()) + c2()), |m| {
        Some(add_c(cap(m, "x"), val(m, "c1").checked_add(val(m, "c2"))?))
    });
    let pm = row(pm, signed((x() * c1()) * c2()), |m| {
        Some(mul_c(cap(m, "x"), val(m, "c1").checked_mul(val(m, "c2"))?))
    });
    let pm = row(pm, signed((x() + c()) + y()), |m| {
        let y = cap(m, "y");
        (y.op() != Op::Const).then(|| add(add(cap(m, "x"), y), cap(m, "c")))
    });
    let pm = row(pm, signed((x() + c1()) * c2()), |m| {
        let k = val(m, "c1").checked_mul(val(m, "c2"))?;
        Some(add_c(mul(cap(m, "x"), cap(m, "c2")), k))
    });

    // ---- integer casts of index values move outward while nothing wraps ----
    // cast(x) + cast(y) => cast(x + y),  cast(x) + c => cast(x + c),  cast(x) * c => cast(x * c)
    let pm = row(pm, signed(x().cast() + y().cast()), |m| {
        hoisted_cast(m, add(cap(m, "x"), cap(m, "y")))
    });
    let pm = row(pm, signed(x().cast() + c()), |m| {
        hoisted_cast(m, add_c(cap(m, "x"), val(m, "c")))
    });
    let pm = row(pm, signed(x().cast() * c()), |m| {
        hoisted_cast(m, mul_c(cap(m, "x"), val(m, "c")))
    });

    // ---- max decided by bounds: max(x, y) => x when y <= x always ----
    let pm = row(pm, signed(x().max(y())), |m| {
        let (x, y) = (cap(m, "x"), cap(m, "y"));
        if hi(&y) <= lo(&x) {
            Some(x)
        } else if hi(&x) <= lo(&y) {
            Some(y)
        } else {
            None
        }
    });

    // ---- division and remainder ----
    let pm = row(pm, signed((x() / c()) * c() + x() % c()), |m| {
        Some(cap(m, "x"))
    });
    let pm = row(pm, signed(((x() / c()) % d()) * c() + x() % c()), |m| {
        let x = cap(m, "x");
        let cd = val(m, "c").checked_mul(val(m, "d"))?;
        (lo(&x) >= 0 && val(m, "c") > 0 && val(m, "d") > 0).then(|| mod_c(x, cd))
    });
    let pm = row(pm, signed(x() % n()), |m| {
        let x = cap(m, "x");
        (0 <= lo(&x) && hi(&x) < val(m, "n")).then_some(x)
    });
    let pm = row(pm, signed(x() / n()), |m| {
        let x = cap(m, "x");
        (0 <= lo(&x) && hi(&x) < val(m, "n")).then(|| konst(&x, 0))
    });
    let pm = row(pm, signed((x() * c()) / c()), |m| {
        (val(m, "c") != 0).then(|| cap(m, "x"))
    });
    let pm = row(pm, signed((x() * c()) % c()), |m| {
        (val(m, "c") != 0).then(|| konst(m.root(), 0))
    });
    let pm = row(pm, signed((x() * c() + y()) / c()), |m| {
        let (x, y) = (cap(m, "x"), cap(m, "y"));
        (val(m, "c") > 0 && lo(&x) >= 0 && lo(&y) >= 0).then(|| add(x, idiv_c(y, val(m, "c"))))
    });
    let pm = row(pm, signed((x() * c() + y()) % c()), |m| {
        let (x, y) = (cap(m, "x"), cap(m, "y"));
        (val(m, "c") > 0 && lo(&x) >= 0 && lo(&y) >= 0).then(|| mod_c(y, val(m, "c")))
    });
    let pm = row(pm, signed((x() * c1()) / c2()), |m| {
        let (c1, c2) = (val(m, "c1"), val(m, "c2"));
        if c1 > 0 && c2 > 0 && c2 % c1 == 0 {
            Some(idiv_c(cap(m, "x"), c2 / c1))
        } else if c1 > 0 && c2 > 0 && c1 % c2 == 0 {
            Some(mul_c(cap(m, "x"), c1 / c2))
        } else {
            None
        }
    });
    let pm = row(pm, signed((x() * c1()) % c2()), |m| {
        let (c1, c2) = (val(m, "c1"), val(m, "c2"));
        (c2 != 0 && c1 % c2 == 0).then(|| konst(m.root(), 0))
    });
    let pm = row(pm, signed((x() / c1()) / c2()), |m| {
        let (c1, c2) = (val(m, "c1"), val(m, "c2"));
        (c1 > 0 && c2 > 0).then(|| Some(idiv_c(cap(m, "x"), c1.checked_mul(c2)?)))?
    });
    let pm = row(pm, signed((x() % c1()) % c2()), |m| {
        let (c1, c2) = (val(m, "c1"), val(m, "c2"));
        (c2 > 0 && c1 % c2 == 0).then(|| mod_c(cap(m, "x"), c2))
    });
    let pm = row(pm, signed(x() % c()), |m| {
        sum::remainder_in_one_bucket(&cap(m, "x"), val(m, "c"))
    });
    let pm = row(
        pm,
        signed(UPat::ops(&[Op::Idiv, Op::Mod]).src(vec![x(), c()])),
        |m| sum::divmod_of_linear_sum(m.root().op(), &cap(m, "x"), val(m, "c")),
    );
    let pm = row(pm, signed(UPat::op(Op::Add)), |m| sum::fold_terms(m.root()));

    // ---- comparisons ----
    let pm = row(pm, signed(x()).lt(x()), |_| Some(truth(false)));
    let pm = row(pm, signed(x()).ne(x()), |_| Some(truth(false)));
    let pm = row(pm, signed(x()).lt(c()), |m| {
        let (x, c) = (cap(m, "x"), val(m, "c"));
        if hi(&x) < c {
            Some(truth(true))
        } else if lo(&x) >= c {
            Some(truth(false))
        } else {
            None
        }
    });
    let pm = row(pm, signed(x() + c1()).lt(c2()), |m| {
        Some(lt_c(cap(m, "x"), val(m, "c2").checked_sub(val(m, "c1"))?))
    });
    let pm = row(pm, signed(x() * c1()).lt(c2()), |m| {
        let (c1, c2) = (val(m, "c1"), val(m, "c2"));
        // x*c1 < c2  <=>  x < ceil(c2 / c1) for c1 > 0.
        (c1 > 0).then(|| {
            lt_c(
                cap(m, "x"),
                c2.div_euclid(c1) + (c2.rem_euclid(c1) != 0) as i64,
            )
        })
    });
    let pm = row(pm, x().max(x()), |m| Some(cap(m, "x")));
    let pm = row(pm, signed(x().max(y())), |m| {
        let (x, y) = (cap(m, "x"), cap(m, "y"));
        (lo(&x) >= hi(&y)).then_some(x)
    });

    // ---- where ----
    let pm = row(pm, UPat::where_(c(), a(), b()), |m| {
        let cond = m["c"].const_value()?.as_bool();
        Some(if cond { cap(m, "a") } else { cap(m, "b") })
    });
    let pm = row(pm, UPat::where_(UPat::any(), a(), a()), |m| {
        Some(cap(m, "a"))
    });

    // ---- bools ----
    let pm = row(pm, boolean(x().and(x())), |m| Some(cap(m, "x")));
    let pm = row(pm, boolean(x().or(x())), |m| Some(cap(m, "x")));
    let pm = row(pm, boolean(x().and(c())), |m| {
        let keep = m["c"].const_value()?.as_bool();
        Some(if keep { cap(m, "x") } else { truth(false) })
    });
    let pm = row(pm, boolean(x().or(c())), |m| {
        let set = m["c"].const_value()?.as_bool();
        Some(if set { truth(true) } else { cap(m, "x") })
    });
    let pm = row(pm, boolean(x().dtype(DType::Bool).ne(false_())), |m| {
        Some(cap(m, "x"))
    });
    let pm = row(
        pm,
        boolean(x().dtype(DType::Bool).ne(true_()).ne(true_())),
        |m| Some(cap(m, "x")),
    );

    // ---- canonical form (canonical.rs) ----
    let pm = canonical::canonical_rules(pm);

    // ---- anything the bounds decide ----
    row(pm, UPat::ops(fold::BOUNDED), |m| {
        fold::decided_by_bounds(m.root())
    })
}

fn true_() -> UPat {
    UPat::konst(1).dtype(DType::Bool)
}
fn false_() -> UPat {
    UPat::konst(0).dtype(DType::Bool)
}
