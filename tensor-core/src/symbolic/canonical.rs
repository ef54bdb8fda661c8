//! Canonical form: rules that make equal computations one node and drop operations that
//! change no value, for every dtype where they are exact.
//!
//! ```text
//! x + (-0.0)  =>  x          floats (x + 0.0 is not x for x = -0.0; it stays)
//! x - 0.0     =>  x          floats
//! x / 1       =>  x          floats (integers: the symbolic table)
//! (a != b) != true  =>  a == b                 any dtype, NaN included
//! (x == true)  =>  x ,  (x == false)  =>  x != true      bools
//! x == x  =>  true                             integers (NaN != NaN)
//! a ⊕ b  =>  b ⊕ a    when key(b) < key(a)     commutative ⊕, neither a constant
//! cast(x) to x's dtype  =>  x
//! cast(cast(x, T1), T2)  =>  cast(x, T2)     when T1 holds every value x can take
//! ```
//!
//! The operand order of a commutative op is the order of `UOp::order_key`, hashes of the
//! operand's whole graph that are the same in every run, so `a + b` and `b + a` are one node
//! (and one C expression); constants stay on the right (the symbolic table moves them there).
//! The key first hashes the graph without the values of its constants, so the lanes of an
//! upcast axis (which differ only in index constants) order their operands alike.
//! Float `x * 0` is not here: it is NaN for infinite `x` (README, "Limits and numerics").

use super::{cap, row, truth};
use crate::rewrite::{PatternMatcher, UPat};
use crate::uop::{DType, Op, UOp};

/// Float dtypes, where only the IEEE-exact identities hold.
const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];

/// The canonical-form rows, added to the symbolic table.
pub(super) fn canonical_rules(pm: PatternMatcher<()>) -> PatternMatcher<()> {
    let x = || UPat::var("x");
    let y = || UPat::var("y");
    let c = || UPat::cvar("c");
    let is_const = |m: &crate::rewrite::Captures, want: f64| {
        m["c"]
            .const_value()
            .is_some_and(|v| v.as_f64().to_bits() == want.to_bits())
    };

    // ---- IEEE-exact float identities ----
    let pm = row(pm, (x() + c()).dtypes(FLOATS), move |m| {
        is_const(m, -0.0).then(|| cap(m, "x"))
    });
    let pm = row(pm, (x() - c()).dtypes(FLOATS), move |m| {
        is_const(m, 0.0).then(|| cap(m, "x"))
    });
    let pm = row(
        pm,
        UPat::alu(Op::Div, vec![x(), c()]).dtypes(FLOATS),
        move |m| is_const(m, 1.0).then(|| cap(m, "x")),
    );

    // ---- booleans ----
    let pm = row(pm, x().ne(y()).ne(true_()), |m| {
        Some(UOp::alu(Op::CmpEq, vec![cap(m, "x"), cap(m, "y")]))
    });
    let pm = row(pm, UPat::alu(Op::CmpEq, vec![x(), true_()]), |m| {
        (m["x"].dtype() == DType::Bool).then(|| cap(m, "x"))
    });
    let pm = row(pm, UPat::alu(Op::CmpEq, vec![x(), false_()]), |m| {
        (m["x"].dtype() == DType::Bool).then(|| UOp::alu(Op::CmpNe, vec![cap(m, "x"), truth(true)]))
    });
    let pm = row(pm, UPat::alu(Op::CmpEq, vec![x(), x()]), |m| {
        let d = m["x"].dtype();
        (d.is_int() || d == DType::Index || d == DType::Bool).then(|| truth(true))
    });

    // ---- commutative operand order ----
    let pm = row(pm, UPat::ops(Op::COMMUTATIVE), |m| in_key_order(m.root()));

    // ---- casts ----
    let pm = row(pm, x().cast(), |m| {
        (m["x"].dtype() == m.root().dtype()).then(|| cap(m, "x"))
    });
    row(pm, x().cast().cast(), |m| {
        let (x, inner) = (&m["x"], m.root().s(0));
        holds_every_value(inner.dtype(), x).then(|| x.cast(m.root().dtype()))
    })
}

/// The commutative-order row alone: tests put expected forms in the order the rules choose.
#[cfg(test)]
pub(crate) fn canonical_order() -> PatternMatcher<()> {
    row(PatternMatcher::new(), UPat::ops(Op::COMMUTATIVE), |m| {
        in_key_order(m.root())
    })
}

/// `a ⊕ b` as `b ⊕ a` when `b`'s order key is the smaller (and neither is a constant).
fn in_key_order(u: &UOp) -> Option<UOp> {
    match u.src() {
        [a, b] if a.op() != Op::Const && b.op() != Op::Const && b.order_key() < a.order_key() => {
            Some(u.with_src(vec![b.clone(), a.clone()]))
        }
        _ => None,
    }
}

/// True when converting `x` to `dtype` keeps its value exactly, whatever value `x` takes:
/// integers by `x`'s bounds, bools always, floats to a float as wide or wider, integers to a
/// float whose mantissa holds them.
fn holds_every_value(dtype: DType, x: &UOp) -> bool {
    let from = x.dtype();
    // `U64` bounds saturate at `i64::MAX`: it is left out rather than reasoned about.
    let integral = |d: DType| d.is_int() && d != DType::U64;
    if from == DType::Bool {
        return true;
    }
    if integral(from) && integral(dtype) {
        let (lo, hi) = x.min_max();
        return dtype.min_value().as_i64() <= lo.as_i64()
            && hi.as_i64() <= dtype.max_value().as_i64();
    }
    if integral(from) && dtype.is_float() {
        let (lo, hi) = x.min_max();
        let exact = 1i64 << mantissa_bits(dtype);
        return -exact <= lo.as_i64() && hi.as_i64() <= exact;
    }
    from.is_float()
        && dtype.is_float()
        && float_rank(from) <= float_rank(dtype)
        && !matches!(
            (from, dtype),
            (DType::F16, DType::BF16) | (DType::BF16, DType::F16)
        )
}

/// Significand bits (with the implicit one) of a float dtype.
fn mantissa_bits(d: DType) -> u32 {
    match d {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        _ => 53,
    }
}

/// Float widths in order (`F16` and `BF16` hold different values: neither holds the other).
fn float_rank(d: DType) -> u8 {
    match d {
        DType::F16 | DType::BF16 => 0,
        DType::F32 => 1,
        _ => 2,
    }
}

fn true_() -> UPat {
    UPat::konst(1).dtype(DType::Bool)
}
fn false_() -> UPat {
    UPat::konst(0).dtype(DType::Bool)
}

#[cfg(test)]
mod tests {
    use crate::symbolic::simplify;
    use crate::uop::{Arg, AxisType, DType, Op, UOp};

    fn load(dtype: DType, slot: i64) -> UOp {
        let buf = UOp::new(Op::DefineGlobal, dtype, vec![], Arg::Int(slot));
        let idx = UOp::new(Op::Address, dtype, vec![buf, UOp::index(0)], Arg::None);
        UOp::new(Op::Load, dtype, vec![idx], Arg::None)
    }
    fn load_at(slot: i64, index: i64) -> UOp {
        let buf = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(slot));
        let idx = UOp::new(
            Op::Address,
            DType::F32,
            vec![buf, UOp::index(index)],
            Arg::None,
        );
        UOp::new(Op::Load, DType::F32, vec![idx], Arg::None)
    }
    fn f32c(v: f32) -> UOp {
        UOp::constant(v, DType::F32)
    }
    fn alu(op: Op, a: &UOp, b: &UOp) -> UOp {
        UOp::alu(op, vec![a.clone(), b.clone()])
    }

    #[test]
    fn adding_negative_zero_is_the_identity_on_floats() {
        let x = load(DType::F32, 0);
        assert_eq!(simplify(&alu(Op::Add, &x, &f32c(-0.0))), x);
        let plus_zero = alu(Op::Add, &x, &f32c(0.0));
        assert_eq!(simplify(&plus_zero), plus_zero, "-0.0 + 0.0 is +0.0: stays");
    }

    #[test]
    fn subtracting_zero_is_the_identity_on_floats() {
        let x = load(DType::F32, 0);
        assert_eq!(simplify(&alu(Op::Sub, &x, &f32c(0.0))), x);
        let minus_neg_zero = alu(Op::Sub, &x, &f32c(-0.0));
        assert_eq!(
            simplify(&minus_neg_zero),
            minus_neg_zero,
            "-0.0 - -0.0 is +0.0"
        );
    }

    #[test]
    fn dividing_by_one_is_the_identity_on_floats() {
        let x = load(DType::F64, 0);
        assert_eq!(
            simplify(&alu(Op::Div, &x, &UOp::constant(1.0, DType::F64))),
            x
        );
    }

    #[test]
    fn a_negated_inequality_is_an_equality() {
        let (a, b) = (load(DType::F32, 0), load(DType::F32, 1));
        let ne = alu(Op::CmpNe, &a, &b);
        let negated = alu(Op::CmpNe, &ne, &UOp::constant(true, DType::Bool));
        let eq = simplify(&negated);
        assert_eq!(eq.op(), Op::CmpEq, "{eq:?}");
        let mut operands = eq.src().to_vec();
        operands.sort_by_key(|u| u.id());
        let mut want = vec![a, b];
        want.sort_by_key(|u| u.id());
        assert_eq!(operands, want);
    }

    #[test]
    fn a_bool_compared_with_a_constant_is_itself_or_its_negation() {
        let p = alu(
            Op::CmpLt,
            &UOp::range(4, 0, AxisType::Loop),
            &UOp::range(4, 1, AxisType::Loop),
        );
        let t = UOp::constant(true, DType::Bool);
        let f = UOp::constant(false, DType::Bool);
        assert_eq!(simplify(&alu(Op::CmpEq, &p, &t)), p);
        let not_p = simplify(&alu(Op::CmpEq, &p, &f));
        assert_eq!(not_p, alu(Op::CmpNe, &p, &t));
    }

    #[test]
    fn an_integer_equals_itself_but_a_float_may_not() {
        let i = load(DType::I32, 0);
        assert_eq!(
            simplify(&alu(Op::CmpEq, &i, &i)),
            UOp::constant(true, DType::Bool)
        );
        let f = load(DType::F32, 0);
        let nan_check = alu(Op::CmpEq, &f, &f);
        assert_eq!(simplify(&nan_check), nan_check, "NaN == NaN is false");
    }

    #[test]
    fn commutative_operands_are_ordered_one_way() {
        let (a, b) = (load(DType::F32, 0), load(DType::F32, 1));
        for op in [Op::Add, Op::Mul, Op::Max] {
            let ab = simplify(&alu(op, &a, &b));
            let ba = simplify(&alu(op, &b, &a));
            assert_eq!(ab, ba, "{op}: a ⊕ b and b ⊕ a are one node");
            assert!(ab.s(0).order_key() <= ab.s(1).order_key());
        }
        // A constant stays on the right whatever its key.
        let with_const = simplify(&alu(Op::Mul, &f32c(3.0), &a));
        assert_eq!(with_const.s(1), &f32c(3.0));
    }

    #[test]
    fn the_lanes_of_an_upcast_order_their_operands_alike() {
        // Lane k multiplies a[k] by w[k]: the lanes differ only in index constants, so every
        // lane puts the same buffer first (the C compiler packs isomorphic lanes).
        let first_slots: Vec<UOp> = (0..16)
            .map(|k| {
                let (a, w) = (load_at(0, k), load_at(1, 100 + k));
                let product = simplify(&alu(Op::Mul, &w, &a));
                product.s(0).s(0).s(0).clone()
            })
            .collect();
        assert!(
            first_slots.windows(2).all(|p| p[0] == p[1]),
            "{first_slots:?}"
        );
    }

    #[test]
    fn content_keys_do_not_depend_on_addresses() {
        let key = || {
            let a = load(DType::F32, 3);
            alu(Op::Add, &a, &f32c(2.0)).content_key()
        };
        let first = key();
        // Rebuilt after the first graph is freed: a new address, the same key.
        assert_eq!(key(), first);
        assert_ne!(
            load(DType::F32, 4).content_key(),
            load(DType::F32, 3).content_key()
        );
    }

    #[test]
    fn a_cast_to_the_same_dtype_is_dropped() {
        let x = load(DType::I32, 0);
        assert_eq!(simplify(&x.cast(DType::I32)), x);
    }

    #[test]
    fn a_cast_through_a_type_that_holds_every_value_is_one_cast() {
        // i32 -> i64 -> f64 is i32 -> f64; f16 -> f32 -> f64 is f16 -> f64.
        let i = load(DType::I32, 0);
        assert_eq!(
            simplify(&i.cast(DType::I64).cast(DType::F64)),
            i.cast(DType::F64)
        );
        let h = load(DType::F16, 0);
        assert_eq!(
            simplify(&h.cast(DType::F32).cast(DType::F64)),
            h.cast(DType::F64)
        );
        // A range of 100 fits an i8: index -> i8 -> i32 is index -> i32.
        let r = UOp::range(100, 0, AxisType::Loop);
        assert_eq!(
            simplify(&r.cast(DType::I8).cast(DType::I32)),
            simplify(&r.cast(DType::I32))
        );
    }

    #[test]
    fn a_narrowing_cast_in_a_chain_stays() {
        // i32 -> i8 wraps; f64 -> f32 rounds; i64 -> f32 rounds above 2^24.
        let i = load(DType::I32, 0);
        let wrap = i.cast(DType::I8).cast(DType::I32);
        assert_eq!(simplify(&wrap), wrap);
        let d = load(DType::F64, 0);
        let round = d.cast(DType::F32).cast(DType::F64);
        assert_eq!(simplify(&round), round);
        let l = load(DType::I64, 0);
        let through_f32 = l.cast(DType::F32).cast(DType::F64);
        assert_eq!(simplify(&through_f32), through_f32);
        let h = load(DType::F16, 0);
        let to_bf16 = h.cast(DType::BF16).cast(DType::F32);
        assert_eq!(simplify(&to_bf16), to_bf16);
    }
}
