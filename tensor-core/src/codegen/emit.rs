//! Statements for the passes that add lines to a lowered GPU kernel (`stage`, `vectorize`):
//! an expression of ranges, constants and loads computed into temps, and the removal of
//! computations nothing reads any more.

use super::fresh::Fresh;
use super::program::{Line, Value};
use crate::uop::{Op, UOp};
use std::collections::{HashMap, HashSet};

/// Emits the statements that compute an expression of ranges, constants and loads.
pub struct Emitter<'a> {
    fresh: &'a mut Fresh,
    /// The statements emitted so far.
    pub lines: Vec<Line>,
    values: HashMap<UOp, Value>,
}

impl<'a> Emitter<'a> {
    /// An emitter with no statements, numbering its temps from `fresh`.
    pub fn new(fresh: &'a mut Fresh) -> Emitter<'a> {
        Emitter {
            fresh,
            lines: Vec::new(),
            values: HashMap::new(),
        }
    }

    /// The value of `u`, after the statements that compute it (each node once, operands
    /// first, in the order of a depth-first walk with an explicit stack: a chain of any
    /// length).
    pub fn value(&mut self, u: &UOp) -> Value {
        if let Some(v) = self.values.get(u) {
            return v.clone();
        }
        let pending = u.toposort_along(value_operands, |n| !self.values.contains_key(n));
        for node in pending {
            let v = self.own_value(&node);
            self.values.insert(node, v);
        }
        self.values[u].clone()
    }

    /// The value of `u` from its operands' values (known already).
    fn own_value(&mut self, u: &UOp) -> Value {
        match u.op() {
            Op::Const => Value::Const(u.clone()),
            Op::Range => Value::Range(u.clone()),
            _ => {
                let operands = value_operands(u)
                    .iter()
                    .map(|s| self.values[s].clone())
                    .collect();
                let temp = self.fresh.temp();
                self.lines.push(Line::Assign {
                    temp,
                    node: u.clone(),
                    operands,
                });
                Value::Temp(temp)
            }
        }
    }
}

/// The nodes whose values `u`'s statement reads: a `Load` reads its address's index and
/// gate (not the buffer), constants and ranges read nothing.
fn value_operands(u: &UOp) -> &[UOp] {
    match u.op() {
        Op::Const | Op::Range => &[],
        Op::Load => &u.s(0).src()[1..],
        _ => u.src(),
    }
}

/// `lines` without the computations nothing reads (the index arithmetic of the loads that
/// now read shared memory).
pub fn drop_unused(mut lines: Vec<Line>) -> Vec<Line> {
    loop {
        let mut read: HashSet<usize> = HashSet::new();
        for line in &lines {
            for v in line.reads() {
                if let Value::Temp(t) = v {
                    read.insert(*t);
                }
            }
        }
        let before = lines.len();
        lines.retain(|l| !matches!(l, Line::Assign { temp, .. } if !read.contains(temp)));
        if lines.len() == before {
            return lines;
        }
    }
}
