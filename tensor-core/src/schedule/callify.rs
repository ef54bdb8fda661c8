//! Callify: turn the tensor graph into one stateless function the scheduler can index.
//!
//! Rules, applied bottom-up until none matches:
//!
//! ```text
//! GetTuple(Function(Tuple(v0, v1, ..), a0, a1, ..), k) => v_k[Param(j) := a_j]
//! GetTuple(Function[precompile](..), k)                => Contiguous(v_k[Param(j) := a_j])
//! GetTuple(Tuple(v0, v1, ..), k)                      => v_k
//! Detach(x)                                           => x
//! ContiguousBackward(x)                               => x
//! ```
//!
//! The markers are identities on data; `Contiguous` is kept because it forces a realization.
//! That is also how a precompiled function stays one unit: its results are realized, so its
//! body compiles into kernels of its own (the same kernels, from the program caches, at every
//! call with the same signature) instead of fusing into its callers.

use crate::rewrite::{Captures, PatternMatcher, UPat, graph_rewrite};
use crate::transform::function::{CallMode, call_mode_of};
use crate::uop::substitute;
use crate::uop::{Arg, Op, UOp, tuple_body};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The graphs of `outputs` with every function call inlined and scheduling-neutral markers
/// removed.
pub fn callify(outputs: &[UOp]) -> Vec<UOp> {
    let sink = graph_rewrite(&UOp::sink(outputs.to_vec()), callify_rules(), &mut ());
    sink.src().to_vec()
}

fn callify_rules() -> &'static PatternMatcher<()> {
    static RULES: OnceLock<PatternMatcher<()>> = OnceLock::new();
    RULES.get_or_init(|| {
        let x = || UPat::var("x");
        PatternMatcher::new()
            .rule(
                UPat::op(Op::GetTuple)
                    .src(vec![UPat::ops(&[Op::Tuple, Op::Function]).named("call")]),
                |m, _| inline_element(m),
            )
            .rule(UPat::op(Op::Detach).src(vec![x()]), |m, _| {
                Some(m["x"].clone())
            })
            .rule(UPat::op(Op::ContiguousBackward).src(vec![x()]), |m, _| {
                Some(m["x"].clone())
            })
    })
}

/// Element `k` of the tuple a `GetTuple` reads, with a function's parameters substituted.
fn inline_element(m: &Captures) -> Option<UOp> {
    let Arg::Int(k) = m.root().arg() else {
        return None;
    };
    let call = &m["call"];
    let value = tuple_body(call)?
        .src()
        .get(usize::try_from(*k).ok()?)?
        .clone();
    match call_mode_of(call) {
        Some(CallMode::Precompile) => {
            Some(substitute_params(&value, &call.src()[1..]).unary_marker(Op::Contiguous))
        }
        Some(CallMode::Inline) => Some(substitute_params(&value, &call.src()[1..])),
        None => Some(value),
    }
}

/// `value` with every `Param(j)` replaced by `args[j]`, all at once: an argument that is itself
/// a `Param` (of an enclosing function, when captured functions nest) is not substituted again.
fn substitute_params(value: &UOp, args: &[UOp]) -> UOp {
    let params: HashMap<UOp, UOp> = value
        .toposort()
        .into_iter()
        .filter_map(|u| match u.arg() {
            Arg::Param { slot, .. } if u.op() == Op::Param => match args.get(*slot) {
                Some(a) => Some((u.clone(), a.clone())),
                None => panic!(
                    "callify: Param slot {slot} but the Function has {} arguments",
                    args.len()
                ),
            },
            _ => None,
        })
        .collect();
    substitute(value, &params)
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
    fn a_nested_call_whose_arguments_are_params_is_inlined_once() {
        // outer(a, b) = inner(b, a) where inner(p0, p1) = p0 - p1: the inner call's arguments
        // are the outer Params in swapped slots, so substituting them again would be wrong.
        let p = |slot| UOp::param(slot, &[4], DType::F32, None);
        let minus = |a: UOp, b: UOp| UOp::alu(Op::Add, vec![a, UOp::alu(Op::Neg, vec![b])]);
        let inner = UOp::tuple(vec![minus(p(0), p(1))]);
        let outer = UOp::tuple(vec![UOp::function(inner, vec![p(1), p(0)]).get_tuple(0)]);
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let y = UOp::new_buffer(4, DType::F32, Device::cpu());
        let call = UOp::function(outer, vec![x.clone(), y.clone()]);
        assert_eq!(callify(&[call.get_tuple(0)])[0], minus(y, x));
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
