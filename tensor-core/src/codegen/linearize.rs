//! Linearize: place every computation of an expanded kernel in a loop nest, in an order where
//! operands come before their users.
//!
//! The output ranges become the outer loops (THREAD first, then reduce blocks, then by range
//! id, LOCAL ranges last). A value is
//! placed at the shallowest loop where all the ranges it uses are defined, so loop-invariant
//! code is hoisted without a separate pass. A Reduce becomes an accumulator defined where its
//! result is needed, a loop nest over its ranges that folds the value into it, and the
//! accumulator read after the loops. Independent Reduces over the same ranges (the lanes of an
//! upcast, or a sum and a sum of squares) share one loop. A LANE range is always the innermost
//! loop of its Reduce: the renderer gives the accumulator one element per lane.
//!
//! A Reduce whose value is `Where(a == b, x, identity)` (a one-hot contraction such as an
//! embedding's gradient, a diagonal, the ties of a maximum's backward) folds `x` only where the
//! equality holds, which is rare: its updates are placed in an `If` block on the gate, one
//! block per distinct gate, and `x` with everything it needs inside the reduce loop is computed
//! in the block (so a row of loads runs only where the gate holds). An equality is a
//! well-predicted branch; the select it replaces kept every load and a dependent add per
//! iteration. Reduces with a LANE range (vectorized by the C compiler) keep the select.

use super::expand::is_kernel_reduce;
use super::program::{Line, Program, Value};
use crate::uop::{AxisType, Op, ReduceOp, UOp};
use std::collections::{HashMap, HashSet};

/// The loop nest of an expanded kernel AST (a `Sink` of `Store`s).
#[track_caller]
pub fn linearize(ast: &UOp, threads: usize) -> Program {
    let mut lz = Linearizer::new(ast);
    for store in ast.src() {
        assert_eq!(store.op(), Op::Store, "a kernel AST is a Sink of Stores");
        lz.place_store(store);
    }
    let root = lz.stack.pop().expect("the root scope");
    let mut lines = Vec::new();
    flatten(root, &mut lines);
    Program { lines, threads }
}

/// Where a statement goes: a scope on the stack of open scopes and a loop depth in it.
type Pos = (usize, usize);

struct Scope {
    id: usize,
    loops: Vec<UOp>,
    /// `levels[d]` holds the statements inside the first `d` loops, before loop `d` opens.
    levels: Vec<Vec<Item>>,
    /// Where a Reduce scope sits in its parent.
    parent: Option<Pos>,
    /// The condition of an `If` block (a scope with no loops).
    guard: Option<Value>,
}

enum Item {
    Line(Line),
    Scope(Scope),
}

struct Placed {
    scope_id: usize,
    pos: Pos,
    value: Value,
}

struct Linearizer {
    stack: Vec<Scope>,
    bindings: HashMap<UOp, Pos>,
    placed: HashMap<UOp, Placed>,
    free_ranges: HashMap<UOp, HashSet<UOp>>,
    reduce_groups: HashMap<UOp, Vec<UOp>>,
    next_scope: usize,
    next_temp: usize,
    next_acc: usize,
    /// While the updates of a gated reduce are placed: the depth of the reduce's scope and
    /// the position of the open `If` block, where every value computed inside the reduce's
    /// loops goes.
    branch: Option<(usize, Pos)>,
}

impl Linearizer {
    fn new(ast: &UOp) -> Linearizer {
        let nodes = ast.toposort();
        let mut free_ranges = HashMap::new();
        for u in &nodes {
            let set = node_free_ranges(u, &free_ranges);
            free_ranges.insert(u.clone(), set);
        }
        let mut outputs: Vec<UOp> = free_ranges[ast].iter().cloned().collect();
        outputs.sort_by_key(|r| (loop_rank(r.range_axis_type()), r.range_id()));
        let mut lz = Linearizer {
            stack: Vec::new(),
            bindings: HashMap::new(),
            placed: HashMap::new(),
            reduce_groups: group_reduces(&nodes, &free_ranges),
            free_ranges,
            next_scope: 0,
            next_temp: 0,
            next_acc: 0,
            branch: None,
        };
        lz.push_scope(outputs, None);
        lz
    }

    fn push_scope(&mut self, loops: Vec<UOp>, parent: Option<Pos>) -> Vec<(UOp, Option<Pos>)> {
        let depth = self.stack.len();
        let saved = loops
            .iter()
            .enumerate()
            .map(|(i, r)| (r.clone(), self.bindings.insert(r.clone(), (depth, i + 1))))
            .collect();
        self.stack.push(Scope {
            id: self.next_scope,
            levels: (0..=loops.len()).map(|_| Vec::new()).collect(),
            loops,
            parent,
            guard: None,
        });
        self.next_scope += 1;
        saved
    }

    fn pop_scope(&mut self, saved: Vec<(UOp, Option<Pos>)>) {
        let scope = self.stack.pop().expect("a pushed scope");
        for (range, old) in saved {
            match old {
                Some(pos) => self.bindings.insert(range, pos),
                None => self.bindings.remove(&range),
            };
        }
        let (depth, level) = scope.parent.expect("only Reduce scopes are popped");
        self.stack[depth].levels[level].push(Item::Scope(scope));
    }

    fn emit(&mut self, pos: Pos, line: Line) {
        self.stack[pos.0].levels[pos.1].push(Item::Line(line));
    }

    /// The placement of `u` if it is visible from the open scopes.
    fn visible(&self, u: &UOp) -> Option<(Pos, Value)> {
        let p = self.placed.get(u)?;
        let scope = self.stack.get(p.pos.0)?;
        (scope.id == p.scope_id).then(|| (p.pos, p.value.clone()))
    }

    fn record(&mut self, u: &UOp, pos: Pos, value: Value) {
        let scope_id = self.stack[pos.0].id;
        self.placed.insert(
            u.clone(),
            Placed {
                scope_id,
                pos,
                value,
            },
        );
    }

    /// Places `u` and everything it needs, returning where its value lives. Reduces go
    /// first: a loop-invariant value combined with a reduce's result (the output an
    /// accumulating matmul adds to) is then read after the reduce loop instead of before it,
    /// where it would stay live across the loop and cost the C compiler a register.
    fn place(&mut self, u: &UOp) -> (Pos, Value) {
        let (reduces, rest): (Vec<UOp>, Vec<UOp>) = self
            .unplaced_nodes(u)
            .into_iter()
            .partition(is_kernel_reduce);
        for node in reduces.iter().chain(&rest) {
            self.place_one(node);
        }
        self.visible(u).expect("placed above")
    }

    /// The nodes `u` needs that are not visible yet, operands first, not descending into
    /// Reduces (whose values are placed inside their own loops).
    fn unplaced_nodes(&self, u: &UOp) -> Vec<UOp> {
        u.toposort_along(walked_operands, |node| self.visible(node).is_none())
    }

    fn operand(&mut self, u: &UOp) -> (Pos, Value) {
        match self.visible(u) {
            Some(found) => found,
            None => self.place(u),
        }
    }

    fn place_one(&mut self, u: &UOp) {
        if self.visible(u).is_some() {
            return;
        }
        match u.op() {
            Op::Const => self.record(u, (0, 0), Value::Const(u.clone())),
            Op::Range => {
                let pos = *self.bindings.get(u).unwrap_or_else(|| {
                    panic!("range {} is used outside of its loop", u.range_id())
                });
                self.record(u, pos, Value::Range(u.clone()));
            }
            Op::Reduce if is_kernel_reduce(u) => self.place_reduce_group(u),
            Op::Load => self.place_assign(u, load_operands(u)),
            op if op.is_elementwise() => self.place_assign(u, u.src().to_vec()),
            op => panic!("codegen: {op} cannot appear in a kernel AST value ({u:?})"),
        }
    }

    fn place_assign(&mut self, u: &UOp, operands: Vec<UOp>) {
        let mut pos = (0, 0);
        let mut values = Vec::new();
        for s in &operands {
            let (p, v) = self.operand(s);
            pos = pos.max(p);
            values.push(v);
        }
        if let Some((depth, block)) = self.branch
            && pos >= (depth, 1)
        {
            pos = block;
        }
        let temp = self.next_temp;
        self.next_temp += 1;
        self.emit(
            pos,
            Line::Assign {
                temp,
                node: u.clone(),
                operands: values,
            },
        );
        self.record(u, pos, Value::Temp(temp));
    }

    fn place_reduce_group(&mut self, reduce: &UOp) {
        let group: Vec<UOp> = self.reduce_groups[reduce]
            .iter()
            .filter(|r| self.visible(r).is_none())
            .cloned()
            .collect();
        let pos = self.free_ranges[reduce]
            .iter()
            .map(|r| {
                *self
                    .bindings
                    .get(r)
                    .unwrap_or_else(|| panic!("range {} is used outside of its loop", r.range_id()))
            })
            .max()
            .unwrap_or((0, 0));
        let accs: Vec<usize> = group
            .iter()
            .map(|r| {
                let acc = self.next_acc;
                self.next_acc += 1;
                self.emit(
                    pos,
                    Line::DefineAcc {
                        acc,
                        reduce: r.clone(),
                    },
                );
                acc
            })
            .collect();
        let mut ranges = reduce.src()[1..].to_vec();
        ranges.sort_by_key(|r| r.range_axis_type() == AxisType::Lane);
        let inner = (self.stack.len(), ranges.len());
        let saved = self.push_scope(ranges, Some(pos));
        let mut branches: Vec<(UOp, Vec<(UOp, usize)>)> = Vec::new();
        for (r, &acc) in group.iter().zip(&accs) {
            if let Some(gate) = branch_gate(r) {
                match branches.iter_mut().find(|(g, _)| *g == gate) {
                    Some((_, members)) => members.push((r.clone(), acc)),
                    None => branches.push((gate, vec![(r.clone(), acc)])),
                }
                continue;
            }
            let (_, value) = self.place(r.s(0));
            self.emit(inner, accumulate(r, acc, value));
        }
        for (gate, members) in branches {
            self.place_branch(inner, &gate, &members);
        }
        self.pop_scope(saved);
        for (r, acc) in group.iter().zip(accs) {
            self.record(r, pos, Value::Acc(acc));
        }
    }

    /// The updates of `members` (gated Reduces and their accumulators) in an `If` block on
    /// `gate` at `inner`, the innermost loop of their reduce scope: each folds the value its
    /// Where selects where `gate` holds.
    fn place_branch(&mut self, inner: Pos, gate: &UOp, members: &[(UOp, usize)]) {
        let (_, cond) = self.place(gate);
        let block = (self.stack.len(), 0);
        let saved = self.push_scope(Vec::new(), Some(inner));
        self.stack[block.0].guard = Some(cond);
        self.branch = Some((inner.0, block));
        for (r, acc) in members {
            let (_, value) = self.place(r.s(0).s(1));
            self.emit(block, accumulate(r, *acc, value));
        }
        self.branch = None;
        self.pop_scope(saved);
    }

    fn place_store(&mut self, store: &UOp) {
        let index = store.s(0);
        assert_eq!(
            index.op(),
            Op::Address,
            "a Store writes through an Address of a DefineGlobal"
        );
        let (p_idx, idx) = self.operand(index.s(1));
        let gate = index.src().get(2).map(|g| self.operand(g));
        let (p_val, value) = self.operand(store.s(1));
        let mut pos = p_idx.max(p_val);
        if let Some((p, _)) = &gate {
            pos = pos.max(*p);
        }
        self.emit(
            pos,
            Line::Store {
                store: store.clone(),
                index: idx,
                gate: gate.map(|g| g.1),
                value,
            },
        );
    }
}

fn accumulate(reduce: &UOp, acc: usize, value: Value) -> Line {
    Line::Accumulate {
        acc,
        op: reduce.reduce_op(),
        reduce: reduce.clone(),
        value,
    }
}

/// The gate `a == b` of a Reduce that folds `Where(a == b, x, identity)`, when its update goes
/// in an `If` block: the Reduce has no LANE range and `x` contains no Reduce of the kernel.
fn branch_gate(reduce: &UOp) -> Option<UOp> {
    let value = reduce.s(0);
    let lanes = reduce.src()[1..]
        .iter()
        .any(|r| r.range_axis_type() == AxisType::Lane);
    let gated = value.op() == Op::Where
        && value.s(0).op() == Op::CmpEq
        && is_identity(value.s(2), reduce.reduce_op());
    if lanes || !gated || value.s(1).toposort().iter().any(is_kernel_reduce) {
        return None;
    }
    Some(value.s(0).clone())
}

/// True when folding the constant `c` leaves any accumulator of `op` unchanged (an Add
/// accumulator starts at +0 and is never -0, so adding either zero is a no-op).
fn is_identity(c: &UOp, op: ReduceOp) -> bool {
    let Some(v) = c.const_value() else {
        return false;
    };
    match op {
        ReduceOp::Add => v.as_f64() == 0.0,
        ReduceOp::Mul => v.as_f64() == 1.0,
        ReduceOp::Max => v == c.dtype().min_value(),
    }
}

/// The order of the output loops by axis type: the THREAD axis outermost, then reduce blocks
/// (cache blocking: every output tile is visited once per block), then the rest by range id.
fn loop_rank(axis: AxisType) -> u8 {
    match axis {
        AxisType::Thread => 0,
        AxisType::ReduceBlock => 1,
        // The threads of a block: the innermost grid indices (`codegen::gpu`).
        AxisType::Local => 3,
        _ => 2,
    }
}

/// The nodes a Load reads its address from: the element index and the optional gate.
#[track_caller]
fn load_operands(load: &UOp) -> Vec<UOp> {
    let index = load.s(0);
    assert_eq!(
        index.op(),
        Op::Address,
        "a Load reads through an Address of a DefineGlobal"
    );
    index.src()[1..].to_vec()
}

/// The operands a node's value is computed from (a Load's address parts, not the Address),
/// none for a kernel Reduce (its value is placed inside its own loops).
fn walked_operands(u: &UOp) -> &[UOp] {
    match u.op() {
        _ if is_kernel_reduce(u) => &[],
        Op::Load => &u.s(0).src()[1..],
        Op::Range | Op::Const => &[],
        _ => u.src(),
    }
}

/// The ranges `u` depends on that are not closed by a Reduce inside it.
fn node_free_ranges(u: &UOp, known: &HashMap<UOp, HashSet<UOp>>) -> HashSet<UOp> {
    if u.op() == Op::Range {
        return HashSet::from([u.clone()]);
    }
    let mut set: HashSet<UOp> = HashSet::new();
    for s in u.src() {
        if let Some(sub) = known.get(s) {
            set.extend(sub.iter().cloned());
        }
    }
    if is_kernel_reduce(u) {
        for r in &u.src()[1..] {
            set.remove(r);
        }
    }
    set
}

/// Groups Reduces that can share one loop: same ranges in the same order, same free ranges,
/// and none computed from another.
fn group_reduces(
    nodes: &[UOp],
    free_ranges: &HashMap<UOp, HashSet<UOp>>,
) -> HashMap<UOp, Vec<UOp>> {
    let mut groups: Vec<Vec<UOp>> = Vec::new();
    for r in nodes.iter().filter(|u| is_kernel_reduce(u)) {
        let below: HashSet<UOp> = r.s(0).toposort().into_iter().collect();
        let fits = |g: &Vec<UOp>| {
            g[0].src()[1..] == r.src()[1..]
                && free_ranges[&g[0]] == free_ranges[r]
                && g.iter().all(|m| !below.contains(m))
        };
        match groups.iter_mut().find(|g| fits(g)) {
            Some(g) => g.push(r.clone()),
            None => groups.push(vec![r.clone()]),
        }
    }
    let mut by_member = HashMap::new();
    for g in groups {
        for m in &g {
            by_member.insert(m.clone(), g.clone());
        }
    }
    by_member
}

fn flatten(scope: Scope, out: &mut Vec<Line>) {
    let Scope {
        loops,
        levels,
        guard,
        ..
    } = scope;
    let guarded = guard.is_some();
    if let Some(cond) = guard {
        out.push(Line::If(cond));
    }
    for (depth, level) in levels.into_iter().enumerate() {
        if depth > 0 {
            out.push(Line::Loop(loops[depth - 1].clone()));
        }
        for item in level {
            match item {
                Item::Line(line) => out.push(line),
                Item::Scope(s) => flatten(s, out),
            }
        }
    }
    out.extend(loops.iter().map(|_| Line::EndLoop));
    if guarded {
        out.push(Line::EndIf);
    }
}
