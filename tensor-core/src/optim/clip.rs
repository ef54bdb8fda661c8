//! `torch.nn.utils.clip_grad_norm_` over a tree of gradients.

use crate::tensor::{OpScope, Tensor};
use crate::transform::tree::{Tree, tree_leaves, tree_map};
use crate::uop::DType;

/// The gradients scaled so that their global 2-norm (over every leaf of the tree) is at most
/// `max_norm`, and the norm before scaling, as `torch.nn.utils.clip_grad_norm_`: every leaf
/// is multiplied by `min(max_norm / (total + 1e-6), 1)`. The norm is computed in the first
/// leaf's float dtype (`f32` for a tree without leaves or of integers).
///
/// Called outside a traced function, `max_norm` is a value bound at run time, as any scalar
/// the user passes (a new bound compiles nothing).
///
/// ```
/// use tensor_core::Tensor;
/// use tensor_core::optim::clip_grad_norm;
/// # use tensor_core::interp::evaluate;
/// let g = (Tensor::from_vec(vec![3.0f32], &[1]), Tensor::from_vec(vec![4.0f32], &[1]));
/// let (clipped, total) = clip_grad_norm(&g, 1.0);
/// assert_eq!(evaluate(&total.uop()).to_vec::<f32>(), vec![5.0]);
/// let x = evaluate(&clipped.0.uop()).to_vec::<f32>()[0];
/// assert!((x - 0.6).abs() < 1e-6);
/// ```
///
/// # Panics
///
/// When a leaf is not a float tensor, or `max_norm` is negative or NaN.
#[track_caller]
pub fn clip_grad_norm<T: Tree>(grads: &T, max_norm: f64) -> (T, Tensor) {
    let leaves = tree_leaves(grads);
    let dtype = leaves
        .first()
        .map(Tensor::dtype)
        .filter(|d| d.is_float())
        .unwrap_or(DType::F32);
    // Made before the op's scope, so that a bound the user passes is a value, not code.
    let max_norm_value = Tensor::full(&[0usize; 0], max_norm, dtype);
    let _op = OpScope::enter("clip_grad_norm");
    if max_norm.is_nan() || max_norm < 0.0 {
        panic!("clip_grad_norm: max_norm must be >= 0, got {max_norm}");
    }
    if let Some(bad) = leaves.iter().find(|g| !g.dtype().is_float()) {
        panic!(
            "clip_grad_norm: gradients are float tensors; a leaf has dtype {} (shape {:?})",
            bad.dtype(),
            bad.shape()
        );
    }
    let total = leaves
        .iter()
        .map(|g| g.square().sum_all().cast(dtype))
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| Tensor::zeros(&[0usize; 0], dtype))
        .sqrt();
    let scale = (max_norm_value / &(&total + 1e-6)).minimum(1.0);
    let clipped = tree_map(grads, |g| g * &scale.cast(g.dtype()));
    (clipped, total)
}
