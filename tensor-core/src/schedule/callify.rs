//! Callify: turn the tensor graph into one stateless function the scheduler can index.
//!
//! Rules, applied bottom-up until none matches:
//!
//! ```text
//! GetTuple(Function(Tuple(v0, v1, ..), a0, a1, ..), k) => v_k[Param(j) := a_j]
//! GetTuple(Tuple(v0, v1, ..), k)                      => v_k
//! Detach(x)                                           => x
//! ContiguousBackward(x)                               => x
//! ```
//!
//! The markers are identities on data; `Contiguous` is kept because it forces a realization.

use crate::uop::{Arg, Op, UOp, tuple_body};
use std::collections::HashMap;

/// The graphs of `outputs` with every function call inlined and scheduling-neutral markers
/// removed.
pub fn callify(outputs: &[UOp]) -> Vec<UOp> {
    let mut memo = HashMap::new();
    outputs.iter().map(|o| rewrite(o, &mut memo)).collect()
}

fn rewrite(root: &UOp, memo: &mut HashMap<UOp, UOp>) -> UOp {
    for node in root.toposort() {
        if memo.contains_key(&node) {
            continue;
        }
        let src: Vec<UOp> = node.src().iter().map(|s| memo[s].clone()).collect();
        let rebuilt = if src.as_slice() == node.src() {
            node.clone()
        } else {
            node.with_src(src)
        };
        let result = match apply_rule(&rebuilt) {
            Some(next) => rewrite(&next, memo),
            None => rebuilt,
        };
        memo.insert(node, result);
    }
    memo[root].clone()
}

fn apply_rule(u: &UOp) -> Option<UOp> {
    match u.op() {
        Op::Detach | Op::ContiguousBackward => Some(u.s(0).clone()),
        Op::GetTuple => {
            let Arg::Int(k) = u.arg() else { return None };
            let call = u.s(0);
            let body = tuple_body(call)?;
            let value = body.src().get(usize::try_from(*k).ok()?)?.clone();
            match call.op() {
                Op::Tuple => Some(value),
                Op::Function => Some(substitute_params(&value, &call.src()[1..])),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `body` with every `Param(j)` replaced by `args[j]`.
fn substitute_params(body: &UOp, args: &[UOp]) -> UOp {
    let mut memo: HashMap<UOp, UOp> = HashMap::new();
    for node in body.toposort() {
        let replaced = match (node.op(), node.arg()) {
            (Op::Param, Arg::Param { slot, .. }) => match args.get(*slot) {
                Some(a) => a.clone(),
                None => panic!(
                    "callify: Param slot {slot} but the Function has {} arguments",
                    args.len()
                ),
            },
            _ => {
                let src: Vec<UOp> = node.src().iter().map(|s| memo[s].clone()).collect();
                if src.as_slice() == node.src() {
                    node.clone()
                } else {
                    node.with_src(src)
                }
            }
        };
        memo.insert(node, replaced);
    }
    memo[body].clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::{DType, Device};

    #[test]
    fn a_function_call_is_inlined_with_its_arguments() {
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let p = UOp::param(0, &[4], DType::F32, None);
        let body = UOp::alu(Op::Add, vec![p.clone(), p]);
        let call = UOp::function(UOp::tuple(vec![body]), vec![x.clone()]);
        let out = callify(&[call.get_tuple(0)]);
        assert_eq!(out[0], UOp::alu(Op::Add, vec![x.clone(), x]));
    }

    #[test]
    fn detach_and_contiguous_backward_disappear_but_contiguous_stays() {
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let marked = x
            .unary_marker(Op::Detach)
            .unary_marker(Op::ContiguousBackward)
            .unary_marker(Op::Contiguous);
        assert_eq!(callify(&[marked])[0], x.unary_marker(Op::Contiguous));
    }
}
