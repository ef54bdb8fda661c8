//! Folding a node to a constant: from constant operands (with the scalar semantics of
//! `uop::alu`), or from bounds that leave it a single possible value.

use crate::uop::alu;
use crate::uop::{DType, Op, UOp};

/// The elementwise ops whose value on constant operands is computed at compile time: all of
/// them but `Copy`, which moves data between devices and is not arithmetic.
pub(super) fn foldable() -> Vec<Op> {
    Op::elementwise()
        .into_iter()
        .filter(|&op| op != Op::Copy)
        .collect()
}

/// The integer and bool ops whose value can be pinned down by the bounds of their operands.
pub(super) const BOUNDED: &[Op] = &[
    Op::Add,
    Op::Mul,
    Op::Max,
    Op::Mod,
    Op::Idiv,
    Op::CmpLt,
    Op::CmpNe,
    Op::And,
    Op::Or,
    Op::Shr,
    Op::Shl,
    Op::Sub,
    Op::Neg,
    Op::CmpGt,
    Op::CmpGe,
    Op::CmpLe,
    Op::CmpEq,
    Op::Where,
    Op::Cast,
];

/// The constant value of an elementwise node whose operands are all constants, computed
/// with the exact scalar semantics every backend follows (`uop::alu`).
pub fn fold_constants(u: &UOp) -> Option<UOp> {
    let bitwise = matches!(
        u.op(),
        Op::Xor | Op::Or | Op::And | Op::Shr | Op::Shl | Op::Threefry
    );
    let defined = u.op().is_elementwise()
        && u.op() != Op::Copy
        && u.dtype() != DType::Void
        && !(bitwise && u.dtype().is_float());
    if !defined {
        return None;
    }
    let args: Option<Vec<_>> = u.src().iter().map(|s| s.const_value()).collect();
    let args = args?;
    let operand = if u.op() == Op::Where {
        u.src().get(1)?.dtype()
    } else {
        u.src().first()?.dtype()
    };
    let value = alu::exec_typed(u.op(), u.dtype(), operand, &args);
    Some(UOp::constant(value, u.dtype()))
}

/// A commutative binary node with its constant operand moved to the right, so that equal
/// expressions built in different orders become the same node.
pub(super) fn constant_to_the_right(u: &UOp) -> Option<UOp> {
    match u.src() {
        [l, r] if l.op() == Op::Const && r.op() != Op::Const => {
            Some(u.with_src(vec![r.clone(), l.clone()]))
        }
        _ => None,
    }
}

/// The constant an integer or bool scalar node must equal because its bounds are one value.
pub(super) fn decided_by_bounds(u: &UOp) -> Option<UOp> {
    let exact = |d: DType| d.is_signed_int() || d == DType::Bool;
    if !exact(u.dtype()) || !u.src().iter().all(|s| exact(s.dtype())) {
        return None;
    }
    let (lo, hi) = u.min_max();
    (lo == hi && u.shape() == Some(&[])).then(|| UOp::constant(lo, u.dtype()))
}
