//! Behaviour of whole-graph rewriting.

use super::*;
use crate::uop::{AxisType, DType, Device, Op, UOp};

fn range(id: usize) -> UOp {
    UOp::range(8, id, AxisType::Loop)
}

fn alu(op: Op, src: &[&UOp]) -> UOp {
    UOp::alu(op, src.iter().map(|u| (*u).clone()).collect())
}

fn const_successor(from: i64, to: i64) -> PatternMatcher<()> {
    PatternMatcher::new().rule(UPat::konst(from as f64), move |_, _| Some(UOp::index(to)))
}

#[test]
fn a_chain_of_rules_is_followed_to_its_fixpoint() {
    // 1 -> 2 -> 3: the node produced by the first rule is itself rewritten.
    let rules = const_successor(1, 2) + const_successor(2, 3);
    let root = alu(Op::Add, &[&UOp::index(1), &range(0)]);
    let out = graph_rewrite(&root, &rules, &mut ());
    assert_eq!(out, alu(Op::Add, &[&UOp::index(3), &range(0)]));
}

#[test]
fn a_rewritten_operand_can_make_its_user_match() {
    // x*1 -> x turns (r*1)+0 into r+0, which then matches x+0 -> x.
    let x = || UPat::var("x");
    let rules = PatternMatcher::<()>::new()
        .rule(x() + 0, |m, _| Some(m["x"].clone()))
        .rule(x() * 1, |m, _| Some(m["x"].clone()));
    let root = alu(
        Op::Add,
        &[&alu(Op::Mul, &[&range(0), &UOp::index(1)]), &UOp::index(0)],
    );
    assert_eq!(graph_rewrite(&root, &rules, &mut ()), range(0));
}

#[test]
fn a_shared_subgraph_is_rewritten_once() {
    let shared = alu(Op::Add, &[&range(0), &range(1)]);
    let root = alu(
        Op::Mul,
        &[
            &alu(Op::Max, &[&shared, &UOp::index(2)]),
            &alu(Op::Idiv, &[&shared, &UOp::index(3)]),
        ],
    );
    let rules = PatternMatcher::<usize>::new().rule(
        UPat::var("a").dtype(DType::Index) + UPat::var("b"),
        |m, calls| {
            *calls += 1;
            Some(UOp::alu(Op::Sub, vec![m["a"].clone(), m["b"].clone()]))
        },
    );
    let mut calls = 0;
    let out = graph_rewrite(&root, &rules, &mut calls);
    assert_eq!(calls, 1);
    let replaced = alu(Op::Sub, &[&range(0), &range(1)]);
    assert_eq!(out.s(0).s(0), &replaced);
    assert_eq!(out.s(1).s(0), &replaced);
}

#[test]
fn top_down_tries_a_node_before_its_operands() {
    // exp2(log2(x)) -> x competes with log2(x) -> sqrt(x): bottom-up rewrites the inner
    // log2 first so the outer rule never sees it; top-down sees the outer pattern first.
    let rules = PatternMatcher::<()>::new()
        .rule(
            UPat::alu(Op::Exp2, vec![UPat::alu(Op::Log2, vec![UPat::var("x")])]),
            |m, _| Some(m["x"].clone()),
        )
        .rule(UPat::alu(Op::Log2, vec![UPat::var("x")]), |m, _| {
            Some(UOp::alu(Op::Sqrt, vec![m["x"].clone()]))
        });
    let x = UOp::new_buffer(4, DType::F32, Device::cpu());
    let root = alu(Op::Exp2, &[&alu(Op::Log2, &[&x])]);
    assert_eq!(graph_rewrite_top_down(&root, &rules, &mut ()), x);
    assert_eq!(
        graph_rewrite(&root, &rules, &mut ()),
        alu(Op::Exp2, &[&alu(Op::Sqrt, &[&x])])
    );
}

#[test]
fn top_down_rewrites_a_node_again_after_its_operands_change() {
    // Inner 1 -> 0 makes the outer x+0 match only after the operands are done.
    let rules = const_successor(1, 0).rule(UPat::var("x") + 0, |m, _| Some(m["x"].clone()));
    let root = alu(Op::Add, &[&range(0), &UOp::index(1)]);
    assert_eq!(graph_rewrite_top_down(&root, &rules, &mut ()), range(0));
}

#[test]
fn a_deep_chain_is_rewritten_without_overflowing_the_stack() {
    let rules = PatternMatcher::<()>::new().rule(UPat::var("x") + 0, |m, _| Some(m["x"].clone()));
    let mut chain = range(0);
    for _ in 0..100_000 {
        chain = alu(Op::Add, &[&chain, &UOp::index(0)]);
    }
    assert_eq!(graph_rewrite(&chain, &rules, &mut ()), range(0));
    assert_eq!(graph_rewrite_top_down(&chain, &rules, &mut ()), range(0));
}

#[test]
fn an_unmatched_graph_comes_back_unchanged() {
    let rules = const_successor(7, 8);
    let root = alu(Op::Add, &[&range(0), &UOp::index(1)]);
    assert_eq!(graph_rewrite(&root, &rules, &mut ()), root);
    assert_eq!(graph_rewrite_top_down(&root, &rules, &mut ()), root);
}

#[test]
#[should_panic(expected = "contains the node itself")]
fn a_rule_that_wraps_its_own_node_panics_instead_of_looping() {
    let rules = PatternMatcher::<()>::new().rule(UPat::op(Op::Range).named("r"), |m, _| {
        Some(UOp::alu(Op::Add, vec![m["r"].clone(), UOp::index(0)]))
    });
    graph_rewrite(&range(0), &rules, &mut ());
}

#[test]
#[should_panic(expected = "no fixpoint")]
fn a_rule_table_that_never_settles_panics_after_the_step_bound() {
    let rules = PatternMatcher::<()>::new().rule(UPat::cvar("c").dtype(DType::Index), |m, _| {
        Some(UOp::index(m["c"].const_value()?.as_i64() + 1))
    });
    graph_rewrite(&UOp::index(0), &rules, &mut ());
}
