//! Rewriting a whole graph with a `PatternMatcher`, to a fixpoint.
//!
//! Both walks are iterative (an explicit stack, so a chain of a million nodes is fine) and
//! memoized per node (a shared subgraph is rewritten once). Every node a rule produces is
//! itself rewritten until no rule fires, so the result is a fixpoint of the rule table.
//!
//! Two safety nets stop rule tables that never settle: a rule whose result contains the
//! node being rewritten (a cycle) panics at once, and a rule table that keeps producing new
//! nodes panics after a step bound proportional to the size of the input graph.

use super::matcher::PatternMatcher;
use crate::uop::UOp;
use std::collections::{HashMap, HashSet};

/// Rule applications allowed per node of the input graph before a rewrite is declared
/// non-terminating (plus a fixed allowance for small graphs that legitimately grow).
const STEPS_PER_NODE: usize = 1000;
const BASE_STEPS: usize = 200_000;

/// Rewrites `root` bottom-up: operands first, then the node rebuilt over the rewritten
/// operands, then the matcher applied to it until no rule fires.
pub fn graph_rewrite<C>(root: &UOp, pm: &PatternMatcher<C>, ctx: &mut C) -> UOp {
    Rewriter::new(root, pm, ctx).run(root, Order::BottomUp)
}

/// Rewrites `root` top-down: the matcher is tried on a node before its operands; when a rule
/// fires, the result is rewritten from the top again; otherwise the walk descends into the
/// operands, and a node rebuilt over changed operands is rewritten again from the top.
pub fn graph_rewrite_top_down<C>(root: &UOp, pm: &PatternMatcher<C>, ctx: &mut C) -> UOp {
    Rewriter::new(root, pm, ctx).run(root, Order::TopDown)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    BottomUp,
    TopDown,
}

/// One unit of work on the explicit stack.
enum Task {
    /// Start on a node: (top-down) try the rules, then schedule its operands.
    Visit(UOp),
    /// All operands of the node are done: rebuild it over their results.
    Rebuild(UOp),
    /// The node was replaced by another: its result is the other's result.
    Link(UOp, UOp),
}

struct Rewriter<'a, C> {
    pm: &'a PatternMatcher<C>,
    ctx: &'a mut C,
    /// Final result of every finished node (finished results map to themselves).
    done: HashMap<UOp, UOp>,
    /// Nodes started and not finished: meeting one again means a rule built a cycle.
    active: HashSet<UOp>,
    stack: Vec<Task>,
    steps: usize,
    step_limit: usize,
}

impl<'a, C> Rewriter<'a, C> {
    fn new(root: &UOp, pm: &'a PatternMatcher<C>, ctx: &'a mut C) -> Self {
        let nodes = root.toposort().len();
        Rewriter {
            pm,
            ctx,
            done: HashMap::new(),
            active: HashSet::new(),
            stack: Vec::new(),
            steps: 0,
            step_limit: BASE_STEPS + STEPS_PER_NODE * nodes,
        }
    }

    fn run(mut self, root: &UOp, order: Order) -> UOp {
        self.stack.push(Task::Visit(root.clone()));
        while let Some(task) = self.stack.pop() {
            match task {
                Task::Visit(u) => self.visit(u, order),
                Task::Rebuild(u) => self.rebuild(u, order),
                Task::Link(from, to) => {
                    let result = self.done[&to].clone();
                    self.active.remove(&from);
                    self.done.insert(from, result);
                }
            }
        }
        self.done[root].clone()
    }

    fn visit(&mut self, u: UOp, order: Order) {
        if self.done.contains_key(&u) {
            return;
        }
        if !self.active.insert(u.clone()) {
            panic!(
                "graph_rewrite: a rule rewrote a node into a graph that contains the node \
                 itself, which can never settle: {u:?}"
            );
        }
        if order == Order::TopDown && self.try_rules(&u) {
            return;
        }
        self.stack.push(Task::Rebuild(u.clone()));
        for s in u.src().iter().rev() {
            if !self.done.contains_key(s) {
                self.stack.push(Task::Visit(s.clone()));
            }
        }
    }

    fn rebuild(&mut self, u: UOp, order: Order) {
        let src: Vec<UOp> = u.src().iter().map(|s| self.done[s].clone()).collect();
        let changed = src.iter().zip(u.src()).any(|(a, b)| a != b);
        let rebuilt = if changed { u.with_src(src) } else { u.clone() };
        if rebuilt != u {
            if order == Order::TopDown || self.done.contains_key(&rebuilt) {
                // Top-down: a node with new operands is a new node, tried from the top.
                self.replace(u, rebuilt);
                return;
            }
            self.active.insert(rebuilt.clone());
        }
        if order == Order::BottomUp && self.try_rules_on(&u, &rebuilt) {
            return;
        }
        self.active.remove(&u);
        self.active.remove(&rebuilt);
        self.done.insert(rebuilt.clone(), rebuilt.clone());
        self.done.insert(u, rebuilt);
    }

    /// Applies the matcher to `u`; when a rule fires, schedules its result and returns true.
    fn try_rules(&mut self, u: &UOp) -> bool {
        self.try_rules_on(u, u)
    }

    /// Applies the matcher to `node` (the current form of `original`); when a rule fires,
    /// `original`'s result becomes the (fully rewritten) result of the replacement.
    fn try_rules_on(&mut self, original: &UOp, node: &UOp) -> bool {
        let Some(out) = self.pm.rewrite(node, self.ctx) else {
            return false;
        };
        if &out == node {
            return false;
        }
        self.count_step(node, &out);
        if node != original {
            self.active.remove(node);
            self.stack.push(Task::Link(node.clone(), original.clone()));
        }
        self.replace(original.clone(), out);
        true
    }

    /// `from`'s result is `to`'s result, once `to` is rewritten.
    fn replace(&mut self, from: UOp, to: UOp) {
        self.stack.push(Task::Link(from, to.clone()));
        self.stack.push(Task::Visit(to));
    }

    fn count_step(&mut self, node: &UOp, out: &UOp) {
        self.steps += 1;
        if self.steps > self.step_limit {
            panic!(
                "graph_rewrite: no fixpoint after {} rule applications; the rule table keeps \
                 producing new nodes (last: {node:?} -> {out:?})",
                self.step_limit
            );
        }
    }
}
