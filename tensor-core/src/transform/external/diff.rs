//! Autodiff through external calls: the tangent of an `apply` call is one call of the `jvp`
//! endpoint, the cotangents of its inputs one call of the `vjp` endpoint. A missing endpoint,
//! or a derivative of a derivative endpoint, is an error when the transform is built.

use super::{CallInfo, External};
use crate::tensor::Tensor;
use crate::transform::func::transform_error;
use crate::uop::{Endpoint, ReduceOp, UOp};

fn derivative_info(node: &UOp, endpoint: Endpoint, transform: &str) -> (CallInfo, External) {
    let info = CallInfo::of(node).expect("an external call");
    let ext = info.external();
    if info.endpoint != Endpoint::Apply {
        transform_error(&format!(
            "{transform}: the external call {} is itself a derivative; its endpoints cannot be \
             differentiated again",
            info.describe()
        ));
    }
    if !ext.has(endpoint) {
        let which = if endpoint == Endpoint::Jvp {
            "jvp"
        } else {
            "vjp"
        };
        transform_error(&format!(
            "{transform}: the external `{}` has no {which} endpoint; give one with the \
             builder's .{which}(..) to differentiate through it",
            info.name
        ));
    }
    (info, ext)
}

/// The `jvp` call giving the tangents of the results of the `apply` call `node`, where
/// `tangent_of` gives an operand's tangent (`None`: zero); `None` when no differentiable
/// input has a tangent.
pub fn jvp_call(node: &UOp, tangent_of: impl Fn(&UOp) -> Option<UOp>) -> Option<UOp> {
    let arrays = node.src()[1..].to_vec();
    let info = CallInfo::of(node).expect("an external call");
    let diff = info.external().differentiable_arrays();
    if diff.iter().all(|&j| tangent_of(&arrays[j]).is_none()) {
        return None;
    }
    let (mut info, _) = derivative_info(node, Endpoint::Jvp, "jvp");
    let tangents = diff
        .iter()
        .map(|&j| {
            tangent_of(&arrays[j])
                .unwrap_or_else(|| Tensor::zeros(&arrays[j].shape_vec(), arrays[j].dtype()).uop())
        })
        .collect();
    info.endpoint = Endpoint::Jvp;
    Some(info.node(arrays, tangents))
}

/// The shares of the operands of the `apply` call `node` (one per operand, `None` for the
/// ones with no cotangent) from the cotangents of its results (`None`: zero).
pub fn vjp_shares(node: &UOp, cotangents: &[Option<UOp>]) -> Vec<Option<UOp>> {
    let (mut info, ext) = derivative_info(node, Endpoint::Vjp, "vjp");
    let arrays = node.src()[1..].to_vec();
    let results = node.s(0).src();
    let cts = cotangents
        .iter()
        .zip(results)
        .map(|(ct, r)| {
            ct.clone()
                .unwrap_or_else(|| Tensor::zeros(&r.shape_vec(), r.dtype()).uop())
        })
        .collect();
    info.endpoint = Endpoint::Vjp;
    let call = info.node(arrays.clone(), cts);
    let mut shares = vec![None; arrays.len()];
    for (k, j) in ext.differentiable_arrays().into_iter().enumerate() {
        shares[j] = Some(sum_to(&call.get_tuple(k), &arrays[j].shape_vec()));
    }
    shares
}

/// `u` summed over the leading axes along which `shape` is 1 but `u` is not (an input
/// broadcast along a batch gets the sum of the batch's cotangents).
fn sum_to(u: &UOp, shape: &[usize]) -> UOp {
    let axes: Vec<usize> = u
        .shape_vec()
        .iter()
        .zip(shape)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i)
        .collect();
    if axes.is_empty() {
        u.clone()
    } else {
        u.reduce(ReduceOp::Add, &axes)
    }
}
