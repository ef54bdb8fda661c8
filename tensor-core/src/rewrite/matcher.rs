//! `PatternMatcher`: an ordered table of rewrite rules, indexed by op.
//!
//! A rule is a pattern and a function of its captures (and a pass-specific context) that
//! returns the replacement node, or `None` to decline. Rules are tried in the order they were
//! added; a node only tries the rules whose pattern can match its op (rules with no op
//! restriction are tried for every node).

use super::upat::{Captures, UPat};
use crate::uop::{Op, UOp};
use std::collections::HashMap;
use std::fmt;
use std::ops;
use std::sync::Arc;

/// The function of a rule: the captures of a match and the pass context in, the replacement
/// (or `None` to decline) out.
pub type RuleFn<C> = dyn Fn(&Captures, &mut C) -> Option<UOp> + Send + Sync;

struct Rule<C> {
    pattern: UPat,
    apply: Arc<RuleFn<C>>,
}

impl<C> Clone for Rule<C> {
    fn clone(&self) -> Self {
        Rule {
            pattern: self.pattern.clone(),
            apply: Arc::clone(&self.apply),
        }
    }
}

/// An ordered table of rewrite rules over a context `C`.
pub struct PatternMatcher<C> {
    rules: Vec<Rule<C>>,
    /// For each op named by some rule: the indices of the rules it can try, in order.
    by_op: HashMap<Op, Vec<usize>>,
    /// The rules with no op restriction, in order (also merged into every `by_op` list).
    wildcard: Vec<usize>,
}

impl<C> Default for PatternMatcher<C> {
    fn default() -> Self {
        PatternMatcher {
            rules: Vec::new(),
            by_op: HashMap::new(),
            wildcard: Vec::new(),
        }
    }
}

impl<C> Clone for PatternMatcher<C> {
    fn clone(&self) -> Self {
        PatternMatcher {
            rules: self.rules.clone(),
            by_op: self.by_op.clone(),
            wildcard: self.wildcard.clone(),
        }
    }
}

impl<C> PatternMatcher<C> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table with one more rule, tried after the existing ones.
    pub fn rule<F>(mut self, pattern: UPat, apply: F) -> Self
    where
        F: Fn(&Captures, &mut C) -> Option<UOp> + Send + Sync + 'static,
    {
        self.push(Rule {
            pattern,
            apply: Arc::new(apply),
        });
        self
    }

    /// Appends `other`'s rules after this table's.
    pub fn extend(&mut self, other: &PatternMatcher<C>) {
        for rule in &other.rules {
            self.push(rule.clone());
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    fn push(&mut self, rule: Rule<C>) {
        let index = self.rules.len();
        match rule.pattern.op_set() {
            Some(ops) => {
                for &op in ops {
                    let wildcard = &self.wildcard;
                    let list = self.by_op.entry(op).or_insert_with(|| wildcard.clone());
                    if list.last() != Some(&index) {
                        list.push(index);
                    }
                }
            }
            None => {
                self.wildcard.push(index);
                for list in self.by_op.values_mut() {
                    list.push(index);
                }
            }
        }
        self.rules.push(rule);
    }

    /// The indices of the rules a node of `op` can try, in order.
    fn candidates(&self, op: Op) -> &[usize] {
        self.by_op.get(&op).unwrap_or(&self.wildcard)
    }

    /// The replacement for `u` from the first rule that matches it and does not decline, or
    /// `None` when no rule applies. A rule may return `u` itself, which means "no change".
    pub fn rewrite(&self, u: &UOp, ctx: &mut C) -> Option<UOp> {
        for &i in self.candidates(u.op()) {
            let rule = &self.rules[i];
            for caps in rule.pattern.match_all(u) {
                if let Some(out) = (rule.apply)(&caps, ctx) {
                    return Some(out);
                }
            }
        }
        None
    }
}

impl<C> ops::Add for PatternMatcher<C> {
    type Output = PatternMatcher<C>;
    /// The rules of `self`, then those of `rhs`.
    fn add(mut self, rhs: PatternMatcher<C>) -> PatternMatcher<C> {
        self.extend(&rhs);
        self
    }
}

impl<C> fmt::Debug for PatternMatcher<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.rules.iter().map(|r| &r.pattern))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::{AxisType, DType};

    fn r(id: usize) -> UOp {
        UOp::range(8, id, AxisType::Loop)
    }

    #[test]
    fn nodes_only_try_rules_for_their_op() {
        // Count how many rule functions run for an Add node.
        let pm = PatternMatcher::<usize>::new()
            .rule(UPat::op(Op::Mul), |_, calls| {
                *calls += 1;
                None
            })
            .rule(UPat::op(Op::Add), |_, calls| {
                *calls += 1;
                None
            })
            .rule(UPat::any(), |_, calls| {
                *calls += 1;
                None
            });
        let mut calls = 0;
        let sum = UOp::alu(Op::Add, vec![r(0), r(1)]);
        assert_eq!(pm.rewrite(&sum, &mut calls), None);
        assert_eq!(
            calls, 2,
            "the Add rule and the wildcard rule, not the Mul rule"
        );
        calls = 0;
        assert_eq!(pm.rewrite(&r(0), &mut calls), None);
        assert_eq!(calls, 1, "only the wildcard rule");
    }

    #[test]
    fn the_first_rule_that_does_not_decline_wins_in_table_order() {
        let pm = PatternMatcher::<()>::new()
            .rule(UPat::any(), |_, _| None)
            .rule(UPat::op(Op::Range), |_, _| Some(UOp::index(1)))
            .rule(UPat::any(), |_, _| Some(UOp::index(2)));
        assert_eq!(pm.rewrite(&r(0), &mut ()), Some(UOp::index(1)));
        assert_eq!(
            pm.rewrite(&UOp::index(5), &mut ()),
            Some(UOp::index(2)),
            "a Const tries only the wildcards"
        );
    }

    #[test]
    fn combined_matchers_keep_both_tables_in_order() {
        let a = PatternMatcher::<()>::new().rule(UPat::konst(1), |_, _| Some(UOp::index(10)));
        let b = PatternMatcher::<()>::new()
            .rule(UPat::konst(1), |_, _| Some(UOp::index(20)))
            .rule(UPat::konst(2), |_, _| Some(UOp::index(30)));
        let both = a + b;
        assert_eq!(both.len(), 3);
        assert_eq!(both.rewrite(&UOp::index(1), &mut ()), Some(UOp::index(10)));
        assert_eq!(both.rewrite(&UOp::index(2), &mut ()), Some(UOp::index(30)));
        assert_eq!(
            both.rewrite(&UOp::constant(2.0, DType::F32), &mut ()),
            Some(UOp::index(30))
        );
    }

    #[test]
    fn a_rule_sees_every_commutative_match_until_one_is_accepted() {
        // Both operands are Ranges; the rule only accepts the order that puts id 1 first.
        let pm = PatternMatcher::<()>::new().rule(UPat::var("a") + UPat::var("b"), |m, _| {
            (m["a"] == r(1)).then(|| m["b"].clone())
        });
        let sum = UOp::alu(Op::Add, vec![r(0), r(1)]);
        assert_eq!(pm.rewrite(&sum, &mut ()), Some(r(0)));
    }

    #[test]
    fn matchers_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<PatternMatcher<()>>();
    }
}
