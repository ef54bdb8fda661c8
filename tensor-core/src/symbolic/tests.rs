//! One test per rule, plus agreement of simplified and original expressions at every point.

use super::simplify;
use crate::uop::alu;
use crate::uop::{Arg, AxisType, DType, Device, Op, Scalar, UOp};
use std::collections::HashMap;

fn r(bound: usize, id: usize) -> UOp {
    UOp::range(bound, id, AxisType::Loop)
}
fn i(v: i64) -> UOp {
    UOp::index(v)
}
fn op2(op: Op, a: &UOp, b: &UOp) -> UOp {
    UOp::alu(op, vec![a.clone(), b.clone()])
}
fn add(a: &UOp, b: &UOp) -> UOp {
    op2(Op::Add, a, b)
}
fn mul(a: &UOp, b: &UOp) -> UOp {
    op2(Op::Mul, a, b)
}
fn div(a: &UOp, b: &UOp) -> UOp {
    op2(Op::Idiv, a, b)
}
fn rem(a: &UOp, b: &UOp) -> UOp {
    op2(Op::Mod, a, b)
}
fn lt(a: &UOp, b: &UOp) -> UOp {
    op2(Op::CmpLt, a, b)
}
fn where_(c: &UOp, a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Where, vec![c.clone(), a.clone(), b.clone()])
}
fn truth(v: bool) -> UOp {
    UOp::constant(v, DType::Bool)
}
/// A bool value the rules cannot decide (its bounds are [false, true]).
fn unknown_bool() -> UOp {
    lt(&r(8, 0), &r(8, 1))
}
/// An int scalar with no useful bounds (a load from an i32 buffer).
fn loaded_i32() -> UOp {
    let buf = UOp::new(Op::DefineGlobal, DType::I32, vec![], Arg::Int(0));
    let idx = UOp::new(Op::Address, DType::I32, vec![buf, i(0)], Arg::None);
    UOp::new(Op::Load, DType::I32, vec![idx], Arg::None)
}

/// `e` with the operands of its commutative ops in the canonical order. That order follows
/// content keys (hashes), not the order an expression is written in, so an expected form is
/// put in it before it is compared.
fn ordered(e: &UOp) -> UOp {
    let rules = crate::symbolic::canonical::canonical_order();
    crate::rewrite::graph_rewrite(e, &rules, &mut ())
}

// ---- constants ----

#[test]
fn constant_integer_arithmetic_folds_with_c_semantics() {
    assert_eq!(simplify(&div(&i(-7), &i(2))), i(-3));
    assert_eq!(simplify(&rem(&i(-7), &i(2))), i(-1));
    assert_eq!(simplify(&add(&mul(&i(3), &i(4)), &i(5))), i(17));
    assert_eq!(simplify(&lt(&i(2), &i(3))), truth(true));
    let wrapped = op2(
        Op::Add,
        &UOp::constant(127, DType::I8),
        &UOp::constant(1, DType::I8),
    );
    assert_eq!(simplify(&wrapped), UOp::constant(-128, DType::I8));
}

#[test]
fn constant_float_arithmetic_folds_in_the_node_dtype() {
    let f = |v: f64| UOp::constant(v, DType::F32);
    assert_eq!(simplify(&mul(&f(1.5), &f(2.0))), f(3.0));
    assert_eq!(simplify(&UOp::alu(Op::Sqrt, vec![f(4.0)])), f(2.0));
    assert_eq!(
        simplify(&f(0.1).cast(DType::F64)),
        UOp::constant(0.1f32 as f64, DType::F64)
    );
}

#[test]
fn constants_move_to_the_right_of_commutative_ops() {
    let x = r(8, 0);
    assert_eq!(simplify(&op2(Op::Max, &i(3), &x)), op2(Op::Max, &x, &i(3)));
}

#[test]
fn integer_sub_and_neg_become_add_and_mul_by_minus_one() {
    let (x, y) = (r(8, 0), r(8, 1));
    assert_eq!(
        simplify(&op2(Op::Sub, &x, &y)),
        ordered(&add(&x, &mul(&y, &i(-1))))
    );
    assert_eq!(
        simplify(&UOp::alu(Op::Neg, vec![x.clone()])),
        ordered(&mul(&x, &i(-1)))
    );
}

// ---- identities ----

#[test]
fn adding_zero_is_identity_on_ints_only() {
    let x = r(8, 0);
    assert_eq!(simplify(&add(&x, &i(0))), x);
    let fx = UOp::new_buffer(1, DType::F32, Device::cpu());
    let f_plus_zero = add(&fx, &UOp::constant(0.0, DType::F32));
    assert_eq!(simplify(&f_plus_zero), f_plus_zero, "-0.0 + 0 is 0.0");
}

#[test]
fn multiplying_by_one_is_identity_on_every_dtype() {
    let x = r(8, 0);
    assert_eq!(simplify(&mul(&x, &i(1))), x);
    let fx = UOp::new_buffer(1, DType::F32, Device::cpu());
    assert_eq!(simplify(&mul(&fx, &UOp::constant(1.0, DType::F32))), fx);
}

#[test]
fn multiplying_by_zero_is_zero_on_ints_only() {
    assert_eq!(
        simplify(&mul(&loaded_i32(), &UOp::constant(0, DType::I32))),
        UOp::constant(0, DType::I32)
    );
    let f = UOp::new_buffer(1, DType::F32, Device::cpu()).reshape(&[]);
    let f_times_zero = mul(&f, &UOp::constant(0.0, DType::F32));
    assert_eq!(simplify(&f_times_zero), f_times_zero, "NaN * 0 is NaN");
}

#[test]
fn rules_never_change_the_shape_of_a_node() {
    let ints = UOp::new_buffer(6, DType::I32, Device::cpu()).reshape(&[2, 3]);
    let times_zero = mul(&ints, &UOp::constant(0, DType::I32));
    assert_eq!(simplify(&times_zero), times_zero);
}

#[test]
fn dividing_by_one_is_identity_and_remainder_by_one_is_zero() {
    let x = loaded_i32();
    let one = UOp::constant(1, DType::I32);
    assert_eq!(simplify(&div(&x, &one)), x);
    assert_eq!(simplify(&rem(&x, &one)), UOp::constant(0, DType::I32));
}

#[test]
fn a_term_added_to_itself_doubles() {
    let x = r(8, 0);
    assert_eq!(simplify(&add(&x, &x)), mul(&x, &i(2)));
}

// ---- nested constants ----

#[test]
fn nested_constant_additions_fold() {
    let x = r(8, 0);
    assert_eq!(simplify(&add(&add(&x, &i(2)), &i(3))), add(&x, &i(5)));
}

#[test]
fn nested_constant_products_fold() {
    let x = r(8, 0);
    assert_eq!(simplify(&mul(&mul(&x, &i(2)), &i(3))), mul(&x, &i(6)));
}

#[test]
fn constants_move_outward_through_sums() {
    let (x, y) = (r(8, 0), r(8, 1));
    assert_eq!(
        simplify(&add(&add(&x, &i(2)), &y)),
        // up to the canonical order of the two ranges
        simplify(&add(&add(&x, &y), &i(2)))
    );
}

#[test]
fn constant_factors_distribute_over_constant_offsets() {
    let x = r(8, 0);
    assert_eq!(
        simplify(&mul(&add(&x, &i(1)), &i(4))),
        add(&mul(&x, &i(4)), &i(4))
    );
}

// ---- division and remainder ----

#[test]
fn quotient_times_divisor_plus_remainder_is_the_dividend() {
    let x = loaded_i32();
    let c = UOp::constant(5, DType::I32);
    let e = add(&mul(&div(&x, &c), &c), &rem(&x, &c));
    assert_eq!(simplify(&e), x, "holds for negative x too in C semantics");
}

#[test]
fn partial_unravel_recombines_into_a_wider_remainder() {
    let x = r(100, 0);
    let e = add(&mul(&rem(&div(&x, &i(4)), &i(3)), &i(4)), &rem(&x, &i(4)));
    assert_eq!(simplify(&e), rem(&x, &i(12)));
}

#[test]
fn remainder_of_a_value_below_the_divisor_is_the_value() {
    let x = r(8, 0);
    assert_eq!(simplify(&rem(&x, &i(8))), x);
    assert_eq!(simplify(&rem(&x, &i(7))), rem(&x, &i(7)));
}

#[test]
fn quotient_of_a_value_below_the_divisor_is_zero() {
    let x = r(8, 0);
    assert_eq!(simplify(&div(&x, &i(8))), i(0));
    assert_eq!(simplify(&div(&x, &i(7))), div(&x, &i(7)));
}

#[test]
fn a_multiple_divided_by_its_factor_is_the_multiplicand() {
    let x = loaded_i32();
    let c = UOp::constant(3, DType::I32);
    assert_eq!(simplify(&div(&mul(&x, &c), &c)), x);
    assert_eq!(
        simplify(&rem(&mul(&x, &c), &c)),
        UOp::constant(0, DType::I32)
    );
}

#[test]
fn dividing_a_scaled_sum_splits_off_the_multiple() {
    let (x, y) = (r(10, 0), r(100, 1));
    let e = add(&mul(&x, &i(8)), &y);
    assert_eq!(
        simplify(&div(&e, &i(8))),
        ordered(&add(&x, &div(&y, &i(8))))
    );
    assert_eq!(simplify(&rem(&e, &i(8))), rem(&y, &i(8)));
}

#[test]
fn dividing_a_scaled_sum_needs_non_negative_terms() {
    let (x, y) = (loaded_i32(), r(100, 1).cast(DType::I32));
    let c = UOp::constant(8, DType::I32);
    let e = div(&add(&mul(&x, &c), &y), &c);
    // Left as it is, up to the canonical order of the sum's terms.
    let s = simplify(&e);
    assert_eq!(
        s.op(),
        Op::Idiv,
        "x may be negative: (-8 + 1) / 8 is 0, not -1"
    );
    assert_eq!(s.s(1), &c);
    let mut terms = s.s(0).src().to_vec();
    terms.sort_by_key(|t| t.id());
    let mut want = vec![mul(&x, &c), y];
    want.sort_by_key(|t| t.id());
    assert_eq!(terms, want, "x may be negative: (-8 + 1) / 8 is 0, not -1");
}

#[test]
fn scaled_values_divide_by_common_factors() {
    let x = r(10, 0);
    assert_eq!(simplify(&div(&mul(&x, &i(2)), &i(6))), div(&x, &i(3)));
    assert_eq!(simplify(&div(&mul(&x, &i(6)), &i(2))), mul(&x, &i(3)));
    assert_eq!(simplify(&rem(&mul(&x, &i(6)), &i(3))), i(0));
}

#[test]
fn nested_quotients_multiply_their_divisors() {
    let x = r(100, 0);
    assert_eq!(simplify(&div(&div(&x, &i(4)), &i(3))), div(&x, &i(12)));
}

#[test]
fn a_remainder_of_a_remainder_by_a_divisor_of_it_is_one_remainder() {
    let x = r(100, 0);
    assert_eq!(simplify(&rem(&rem(&x, &i(12)), &i(4))), rem(&x, &i(4)));
    assert_eq!(
        simplify(&rem(&rem(&x, &i(12)), &i(5))),
        rem(&rem(&x, &i(12)), &i(5))
    );
}

#[test]
fn a_remainder_within_one_quotient_bucket_is_an_offset() {
    let x = add(&r(4, 0), &i(8)); // 8..=11, all with quotient 2 by 4
    assert_eq!(simplify(&rem(&x, &i(4))), r(4, 0));
}

#[test]
fn dividing_a_linear_sum_divides_each_coefficient() {
    let (a, b) = (r(5, 0), r(3, 1));
    // (12a + 4b + 2) / 4 = 3a + b (+ 2/4 = 0), and the remainder is 2.
    let e = add(&add(&mul(&a, &i(12)), &mul(&b, &i(4))), &i(2));
    assert_eq!(
        simplify(&div(&e, &i(4))),
        simplify(&add(&mul(&a, &i(3)), &b))
    );
    assert_eq!(simplify(&rem(&e, &i(4))), i(2));
}

// ---- sums of unravelled offsets ----

/// The flat offset of a contiguous `shape` at the unravelled index of `flat`.
fn reravel(flat: &UOp, shape: &[i64]) -> UOp {
    let mut stride = 1;
    let mut terms = Vec::new();
    for &d in shape.iter().rev() {
        let idx = rem(&div(flat, &i(stride)), &i(d));
        terms.push(mul(&idx, &i(stride)));
        stride *= d;
    }
    terms.reverse();
    terms
        .iter()
        .skip(1)
        .fold(terms[0].clone(), |acc, t| add(&acc, t))
}

#[test]
fn a_reshape_round_trip_of_a_flat_index_simplifies_to_the_index() {
    let flat = r(120, 0);
    assert_eq!(simplify(&reravel(&flat, &[2, 3, 4, 5])), flat);
}

#[test]
fn unravelled_terms_recombine_in_any_order() {
    let flat = r(24, 0);
    let t0 = mul(&div(&flat, &i(12)), &i(12));
    let t1 = mul(&rem(&div(&flat, &i(4)), &i(3)), &i(4));
    let t2 = rem(&flat, &i(4));
    assert_eq!(simplify(&add(&add(&t2, &t0), &t1)), flat);
}

#[test]
fn strided_unravelled_terms_recombine_with_their_stride() {
    // An axis of size 6 split as (2, 3), both scaled by an outer stride 5, plus another axis.
    let (x, y) = (r(6, 0), r(5, 1));
    let e = add(
        &add(&mul(&div(&x, &i(3)), &i(15)), &y),
        &mul(&rem(&x, &i(3)), &i(5)),
    );
    assert_eq!(simplify(&e), ordered(&add(&mul(&x, &i(5)), &y)));
}

#[test]
fn like_terms_merge_across_a_sum() {
    let (x, y) = (r(6, 0), r(5, 1));
    let e = add(&add(&mul(&x, &i(2)), &y), &mul(&x, &i(3)));
    assert_eq!(simplify(&e), ordered(&add(&mul(&x, &i(5)), &y)));
}

// ---- comparisons ----

#[test]
fn a_value_is_neither_less_than_nor_unequal_to_itself() {
    let x = add(&r(8, 0), &r(8, 1));
    assert_eq!(simplify(&lt(&x, &x)), truth(false));
    assert_eq!(simplify(&op2(Op::CmpNe, &x, &x)), truth(false));
}

#[test]
fn comparisons_with_constants_are_decided_by_bounds() {
    let x = r(8, 0);
    assert_eq!(simplify(&lt(&x, &i(8))), truth(true));
    assert_eq!(simplify(&lt(&x, &i(0))), truth(false));
    assert_eq!(simplify(&lt(&x, &i(5))), lt(&x, &i(5)));
}

#[test]
fn an_offset_moves_to_the_constant_side_of_a_comparison() {
    let x = r(8, 0);
    assert_eq!(simplify(&lt(&add(&x, &i(1)), &i(5))), lt(&x, &i(4)));
    assert_eq!(simplify(&lt(&add(&x, &i(1)), &i(9))), truth(true));
}

#[test]
fn a_scale_divides_out_of_a_comparison_rounding_up() {
    let x = r(8, 0);
    assert_eq!(simplify(&lt(&mul(&x, &i(4)), &i(9))), lt(&x, &i(3)));
    assert_eq!(simplify(&lt(&mul(&x, &i(4)), &i(8))), lt(&x, &i(2)));
}

#[test]
fn max_of_a_value_and_itself_is_the_value() {
    let x = add(&r(8, 0), &r(8, 1));
    assert_eq!(simplify(&op2(Op::Max, &x, &x)), simplify(&x));
}

#[test]
fn max_is_decided_when_one_side_bounds_the_other() {
    let x = r(8, 0);
    assert_eq!(simplify(&op2(Op::Max, &x, &i(-1))), x);
    assert_eq!(simplify(&op2(Op::Max, &x, &i(3))), op2(Op::Max, &x, &i(3)));
}

// ---- where and bools ----

#[test]
fn where_with_a_constant_condition_picks_a_branch() {
    let (a, b) = (r(8, 0), r(8, 1));
    assert_eq!(simplify(&where_(&truth(true), &a, &b)), a);
    assert_eq!(simplify(&where_(&truth(false), &a, &b)), b);
}

#[test]
fn where_with_equal_branches_is_the_branch() {
    let a = r(8, 0);
    assert_eq!(simplify(&where_(&unknown_bool(), &a, &a)), a);
}

#[test]
fn a_decided_condition_selects_its_branch() {
    let (x, a, b) = (r(8, 0), r(8, 1), r(8, 2));
    assert_eq!(simplify(&where_(&lt(&x, &i(8)), &a, &b)), a);
}

#[test]
fn bool_and_or_with_constants_and_themselves_simplify() {
    let p = unknown_bool();
    let and = |a: &UOp, b: &UOp| op2(Op::And, a, b);
    let or = |a: &UOp, b: &UOp| op2(Op::Or, a, b);
    assert_eq!(simplify(&and(&p, &truth(true))), p);
    assert_eq!(simplify(&and(&p, &truth(false))), truth(false));
    assert_eq!(simplify(&or(&p, &truth(true))), truth(true));
    assert_eq!(simplify(&or(&p, &truth(false))), p);
    assert_eq!(simplify(&and(&p, &p)), p);
    assert_eq!(simplify(&or(&p, &p)), p);
}

#[test]
fn double_negation_and_comparison_with_false_are_identities() {
    let p = unknown_bool();
    let not = |a: &UOp| op2(Op::CmpNe, a, &truth(true));
    assert_eq!(simplify(&not(&not(&p))), p);
    assert_eq!(simplify(&op2(Op::CmpNe, &p, &truth(false))), p);
    assert_eq!(simplify(&not(&p)), not(&p));
}

#[test]
fn any_integer_op_whose_bounds_are_one_value_is_that_value() {
    let x = r(8, 0);
    assert_eq!(simplify(&op2(Op::And, &x, &i(0))), i(0));
    assert_eq!(simplify(&op2(Op::CmpNe, &x, &i(9))), truth(true));
}

#[test]
fn ranges_are_never_folded_even_when_of_size_one() {
    let one = r(1, 0);
    assert_eq!(simplify(&one), one);
}

// ---- agreement at every point ----

/// The value of an index expression with each range bound to a value.
fn eval(u: &UOp, env: &HashMap<usize, i64>) -> Scalar {
    let mut values: HashMap<usize, Scalar> = HashMap::new();
    for node in u.toposort() {
        let v = match (node.op(), node.arg()) {
            (Op::Const, Arg::Const(c)) => *c,
            (Op::Range, Arg::Range { id, .. }) => Scalar::Int(env[id]),
            _ => {
                let args: Vec<Scalar> = node.src().iter().map(|s| values[&s.id()]).collect();
                let operand = node.src()[usize::from(node.op() == Op::Where)].dtype();
                alu::exec_typed(node.op(), node.dtype(), operand, &args)
            }
        };
        values.insert(node.id(), v);
    }
    values[&u.id()]
}

/// A small deterministic generator (64-bit LCG).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
    fn small(&mut self) -> i64 {
        self.next(13) as i64 - 4
    }
}

fn random_index_expr(g: &mut Lcg, ranges: &[UOp], depth: u32) -> UOp {
    if depth == 0 || g.next(5) == 0 {
        return if g.next(3) == 0 {
            i(g.small())
        } else {
            ranges[g.next(ranges.len() as u64) as usize].clone()
        };
    }
    let a = random_index_expr(g, ranges, depth - 1);
    let positive = |g: &mut Lcg| i(g.next(6) as i64 + 1);
    match g.next(9) {
        0 | 1 => add(&a, &random_index_expr(g, ranges, depth - 1)),
        2 => mul(&a, &i(g.small())),
        3 => div(&a, &positive(g)),
        4 => rem(&a, &positive(g)),
        5 => op2(Op::Sub, &a, &random_index_expr(g, ranges, depth - 1)),
        6 => op2(Op::Max, &a, &random_index_expr(g, ranges, depth - 1)),
        7 => where_(
            &lt(&a, &random_index_expr(g, ranges, depth - 1)),
            &random_index_expr(g, ranges, depth - 1),
            &a,
        ),
        _ => mul(&a, &random_index_expr(g, ranges, depth - 1)),
    }
}

#[test]
fn simplified_random_index_expressions_agree_at_every_range_value() {
    let ranges = [r(3, 0), r(4, 1), r(6, 2)];
    let mut g = Lcg(0x5eed);
    let mut changed = 0;
    for case in 0..400 {
        let e = random_index_expr(&mut g, &ranges, 4);
        let s = simplify(&e);
        changed += usize::from(s != e);
        for a in 0..3 {
            for b in 0..4 {
                for c in 0..6 {
                    let env = HashMap::from([(0, a), (1, b), (2, c)]);
                    assert_eq!(
                        eval(&e, &env),
                        eval(&s, &env),
                        "case {case} at r0={a} r1={b} r2={c}:\n  {e:?}\n  simplified to {s:?}"
                    );
                }
            }
        }
    }
    assert!(
        changed > 200,
        "the generator should mostly produce simplifiable expressions"
    );
}

#[test]
fn simplified_unravel_expressions_agree_at_every_range_value() {
    // Reshape round trips through random shapes, with random strides and offsets on top.
    let mut g = Lcg(42);
    for _ in 0..60 {
        let shape: Vec<i64> = (0..3).map(|_| g.next(4) as i64 + 1).collect();
        let n: i64 = shape.iter().product();
        let flat = r(n as usize, 0);
        let offset = add(&mul(&flat, &i(g.next(3) as i64 + 1)), &i(g.small()));
        let e = add(&reravel(&offset, &shape), &r(2, 1));
        let s = simplify(&e);
        for a in 0..n {
            for b in 0..2 {
                let env = HashMap::from([(0, a), (1, b)]);
                assert_eq!(
                    eval(&e, &env),
                    eval(&s, &env),
                    "{e:?}\n  simplified to {s:?}"
                );
            }
        }
    }
}

#[test]
fn a_deep_sum_simplifies_without_overflowing_the_stack() {
    let x = r(8, 0);
    let mut e = x.clone();
    for k in 0..5_000 {
        e = add(&e, &if k % 2 == 0 { i(1) } else { x.clone() });
    }
    // 2_500 ones and 2_500 more copies of x.
    assert_eq!(simplify(&e), add(&mul(&x, &i(2_501)), &i(2_500)));
}

// ---- max by bounds, casts of index values ----

#[test]
fn max_is_decided_when_one_operand_is_never_below_the_other() {
    let x = add(&r(4, 0), &i(5));
    assert_eq!(simplify(&op2(Op::Max, &x, &i(2))), simplify(&x));
    assert_eq!(simplify(&op2(Op::Max, &i(-1), &r(4, 0))), r(4, 0));
    let undecided = op2(Op::Max, &r(4, 0), &r(4, 1));
    let kept = simplify(&undecided);
    assert_eq!(kept.op(), Op::Max, "{kept:?}");
    assert_eq!(kept, simplify(&op2(Op::Max, &r(4, 1), &r(4, 0))));
}

#[test]
fn integer_casts_of_index_values_move_outward_while_nothing_wraps() {
    let (a, b) = (r(8, 0), r(8, 1));
    let cast = |u: &UOp| u.cast(DType::I32);
    assert_eq!(
        simplify(&add(&cast(&a), &cast(&b))),
        simplify(&cast(&add(&a, &b)))
    );
    assert_eq!(
        simplify(&add(
            &mul(&cast(&a), &UOp::constant(3, DType::I32)),
            &UOp::constant(-2, DType::I32)
        )),
        simplify(&cast(&add(&mul(&a, &i(3)), &i(-2))))
    );
    // In i8 the sum of two values up to 100 can wrap: the casts stay where they are.
    let big = r(101, 2);
    let wraps = simplify(&add(&big.cast(DType::I8), &r(101, 3).cast(DType::I8)));
    assert_eq!(wraps.op(), Op::Add, "{wraps:?}");
    let doubled = simplify(&mul(&big.cast(DType::I8), &UOp::constant(2, DType::I8)));
    assert_eq!(doubled.op(), Op::Mul, "{doubled:?}");
}
