//! Index expressions as affine forms `c + Σ kᵢ·aᵢ`: integer coefficients of atoms (any node
//! that is not a constant, `Add`, `Sub`, `Neg` or a `Mul` by a constant). Interning makes
//! structurally equal atoms one node, so two expressions that differ by a constant have forms
//! whose atom terms cancel. This is all the arithmetic shape derivation needs (the size of a
//! window sliding with a range), without the rewrite rules of `symbolic`.

use super::{Op, UOp};
use std::collections::{BTreeMap, HashMap};

/// An affine form: a constant plus integer multiples of atoms (keyed by node id).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Affine {
    /// The constant term.
    pub constant: i64,
    /// The coefficient of each atom, by node id; no entry is zero.
    pub terms: BTreeMap<usize, i64>,
}

/// The operands whose forms a node's form is built from.
fn linear_operands(x: &UOp) -> &[UOp] {
    match x.op() {
        Op::Add | Op::Sub | Op::Neg | Op::Mul => x.src(),
        _ => &[],
    }
}

impl Affine {
    /// The affine form of an integer expression, `None` where a coefficient overflows `i64`.
    ///
    /// The forms of the sums, differences and scalings under `x` are built operands first, each
    /// node once (a walk with an explicit stack: an expression of any depth).
    pub fn of(x: &UOp) -> Option<Affine> {
        let mut forms: HashMap<UOp, Option<Affine>> = HashMap::new();
        for node in x.toposort_along(linear_operands, |_| true) {
            let form = Affine::of_node(&node, |s| forms.get(s).cloned().flatten());
            forms.insert(node, form);
        }
        forms.remove(x).flatten()
    }

    /// The form of `x` given its operands' forms (`of`).
    fn of_node(x: &UOp, of: impl Fn(&UOp) -> Option<Affine>) -> Option<Affine> {
        match x.op() {
            Op::Const => Some(Affine {
                constant: x.const_value()?.as_i64(),
                terms: BTreeMap::new(),
            }),
            Op::Add => of(x.s(0))?.plus(&of(x.s(1))?, 1),
            Op::Sub => of(x.s(0))?.plus(&of(x.s(1))?, -1),
            Op::Neg => Affine::default().plus(&of(x.s(0))?, -1),
            Op::Mul => {
                let (a, b) = (of(x.s(0))?, of(x.s(1))?);
                match (a.as_constant(), b.as_constant()) {
                    (_, Some(k)) => Affine::default().plus(&a, k),
                    (Some(k), _) => Affine::default().plus(&b, k),
                    _ => Some(Affine::atom(x)),
                }
            }
            _ => Some(Affine::atom(x)),
        }
    }

    /// The value of the form when it has no atom terms.
    pub fn as_constant(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    fn atom(x: &UOp) -> Affine {
        Affine {
            constant: 0,
            terms: BTreeMap::from([(x.id(), 1)]),
        }
    }

    /// `self + k * other`, `None` on overflow.
    fn plus(mut self, other: &Affine, k: i64) -> Option<Affine> {
        self.constant = self.constant.checked_add(other.constant.checked_mul(k)?)?;
        for (&atom, &c) in &other.terms {
            let sum = self
                .terms
                .get(&atom)
                .copied()
                .unwrap_or(0)
                .checked_add(c.checked_mul(k)?)?;
            if sum == 0 {
                self.terms.remove(&atom);
            } else {
                self.terms.insert(atom, sum);
            }
        }
        Some(self)
    }
}

/// The constant value of an integer expression, when its affine form has no atom terms.
pub fn constant_value(x: &UOp) -> Option<i64> {
    Affine::of(x)?.as_constant()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::AxisType;

    #[test]
    fn a_window_that_slides_with_a_range_has_a_constant_size() {
        let r = UOp::range(5, 0, AxisType::Loop);
        let begin = UOp::alu(Op::Mul, vec![r.clone(), UOp::index(2)]);
        let end = UOp::alu(
            Op::Add,
            vec![
                UOp::alu(Op::Add, vec![r.clone(), UOp::index(3)]),
                UOp::alu(Op::Mul, vec![UOp::index(1), r.clone()]),
            ],
        );
        let size = UOp::alu(Op::Sub, vec![end, begin.clone()]);
        assert_eq!(constant_value(&size), Some(3));
        assert_eq!(constant_value(&begin), None);
        let negated = UOp::alu(Op::Add, vec![UOp::alu(Op::Neg, vec![r.clone()]), r]);
        assert_eq!(constant_value(&negated), Some(0));
    }
}
