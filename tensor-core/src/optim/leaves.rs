//! The per-leaf plumbing of an update: the leaves of parameters, gradients and state buffers
//! side by side, the learning rate checked, and the step count.

use crate::tensor::Tensor;
use crate::transform::tree::{Tree, TreeDef, tree_leaves, tree_unflatten};
use crate::uop::DType;

/// The structure of `params` and the leaves of `params` and `grads`. Panics, naming the path
/// of the first difference, when `grads` is not shaped like `params`.
#[track_caller]
pub(crate) fn params_and_grads<P: Tree>(
    op: &str,
    params: &P,
    grads: &P,
) -> (TreeDef, Vec<Tensor>, Vec<Tensor>) {
    let def = params.structure();
    if let Some(why) = def.mismatch(&grads.structure(), "grads") {
        panic!("{op}: the gradients are not shaped like the parameters: they differ {why}");
    }
    let (p, g) = (tree_leaves(params), tree_leaves(grads));
    for (i, (p, g)) in p.iter().zip(&g).enumerate() {
        if p.shape() != g.shape() {
            let path = &def.leaf_paths("params")[i];
            panic!(
                "{op}: the gradient of {path} has shape {:?}, the parameter {:?}; pass the \
                 gradients of these parameters",
                g.shape(),
                p.shape()
            );
        }
    }
    (def, p, g)
}

/// The leaves of a state buffer shaped like the parameters.
pub(crate) fn buffer<P: Tree>(tree: &P) -> Vec<Tensor> {
    tree_leaves(tree)
}

/// A tree of structure `def` from its leaves.
pub(crate) fn rebuild<P: Tree>(def: &TreeDef, leaves: Vec<Tensor>) -> P {
    tree_unflatten(def, leaves)
}

/// The learning rate as an `f64` 0-d tensor. Panics unless `lr` is a 0-d float tensor.
#[track_caller]
pub(crate) fn learning_rate(op: &str, lr: &Tensor) -> Tensor {
    if !lr.shape().is_empty() || !lr.dtype().is_float() {
        panic!(
            "{op}: the learning rate must be a 0-d float tensor (Tensor::scalar(0.01)), got \
             {}{:?}",
            lr.dtype(),
            lr.shape()
        );
    }
    lr.cast(DType::F64)
}

/// The step count after this step, and the same as an `f64` 0-d tensor (`t` of the formulas).
pub(crate) fn next_step(step: &Tensor) -> (Tensor, Tensor) {
    let t = step + 1;
    let t64 = t.cast(DType::F64);
    (t, t64)
}

/// `1 - beta^t` in `f64`, `t` a 0-d `f64` tensor.
pub(crate) fn bias_correction(beta: f64, t64: &Tensor) -> Tensor {
    1.0 - Tensor::full(&[0usize; 0], beta, DType::F64).pow(t64)
}

/// `x + weight_decay * p` (the L2 penalty torch adds to the gradient), or `x` for no decay.
pub(crate) fn with_decay(g: &Tensor, p: &Tensor, weight_decay: f64) -> Tensor {
    if weight_decay == 0.0 {
        g.clone()
    } else {
        g + &(p * weight_decay)
    }
}
