//! Per-sample gradient norms and clipped gradient sums of a loss over trees: the parameters
//! are any [`Tree`] (a `#[derive(Tree)]` struct), the batch any tree whose leaves have the
//! batch as axis 0, and the loss is written for one sample, as `vmap(grad(loss))` takes it.

use tensor_core::Tensor;
use tensor_core::dp as core_dp;
use tensor_core::transform::tree::{Tree, tree_leaves, tree_structure, tree_unflatten};
use tensor_core::transform::{Func, VmapMethod};

/// The norm of each sample's gradient over all parameters, `[B]`: `‖∇_θ loss(θ, x_i)‖₂`
/// (Opacus's per-sample norms), with the `B × P` per-sample gradients reduced inside the
/// kernels that compute them, never stored.
///
/// ```
/// use tensor::prelude::*;
/// #[derive(Clone, Tree)]
/// struct Affine { w: Tensor, b: Tensor }
/// let p = Affine { w: Tensor::from_vec(vec![1.0f32, 2.0], &[2]), b: Tensor::scalar(0.0f32) };
/// // loss_i = w·x_i + b: the gradient of sample i is (x_i, 1), its norm sqrt(|x_i|² + 1).
/// let loss = |p: &Affine, x: &Tensor| (&p.w * x).sum_all() + &p.b;
/// let x = Tensor::from_vec(vec![3.0f32, 4.0, 0.0, 0.0], &[2, 2]);
/// let norms = tensor::dp::per_sample_grad_norms(loss, &p, &x);
/// let n = norms.to_vec::<f32>().unwrap();
/// assert!((n[0] - 26f32.sqrt()).abs() < 1e-5 && (n[1] - 1.0).abs() < 1e-6);
/// ```
#[track_caller]
pub fn per_sample_grad_norms<P: Tree, B: Tree>(
    loss: impl Fn(&P, &B) -> Tensor + Send + Sync + 'static,
    params: &P,
    batch: &B,
) -> Tensor {
    per_sample_grad_norms_with(loss, params, batch, VmapMethod::Rewrite)
}

/// [`per_sample_grad_norms`] with the per-sample gradients batched by `method`.
#[track_caller]
pub fn per_sample_grad_norms_with<P: Tree, B: Tree>(
    loss: impl Fn(&P, &B) -> Tensor + Send + Sync + 'static,
    params: &P,
    batch: &B,
    method: VmapMethod,
) -> Tensor {
    let (f, p, b) = flat(loss, params, batch);
    core_dp::per_sample_grad_norms(&f, &p, &b, method)
}

/// DP-SGD's clipped sum: `Σ_i min(1, C / (‖g_i‖ + 1e-6)) g_i` over the batch, where `g_i` is
/// sample `i`'s gradient with respect to `params` (Opacus's clipping), shaped like `params`.
/// Add noise with [`noisy_mean`](crate::dp::noisy_mean) (or use
/// [`DpSgd`](crate::dp::DpSgd), which also accounts for the privacy spent).
///
/// ```
/// use tensor::prelude::*;
/// let w = Tensor::from_vec(vec![1.0f32, 1.0], &[2]);
/// // Sample 0's gradient (3, 4) has norm 5 and is scaled to norm 1; sample 1's (0.3, 0.4)
/// // is within the bound and kept.
/// let x = Tensor::from_vec(vec![3.0f32, 4.0, 0.3, 0.4], &[2, 2]);
/// let g = tensor::dp::clipped_grad(|w: &Tensor, x: &Tensor| (w * x).sum_all(), &w, &x, 1.0);
/// let g = g.to_vec::<f32>().unwrap();
/// assert!((g[0] - 0.9).abs() < 1e-5 && (g[1] - 1.2).abs() < 1e-5);
/// ```
#[track_caller]
pub fn clipped_grad<P: Tree, B: Tree>(
    loss: impl Fn(&P, &B) -> Tensor + Send + Sync + 'static,
    params: &P,
    batch: &B,
    clip_norm: f64,
) -> P {
    clipped_grad_with(loss, params, batch, clip_norm, VmapMethod::Rewrite).0
}

/// [`clipped_grad`] with the per-sample gradients batched by `method`, returning the
/// per-sample norms before clipping too.
#[track_caller]
pub fn clipped_grad_with<P: Tree, B: Tree>(
    loss: impl Fn(&P, &B) -> Tensor + Send + Sync + 'static,
    params: &P,
    batch: &B,
    clip_norm: f64,
    method: VmapMethod,
) -> (P, Tensor) {
    let (f, p, b) = flat(loss, params, batch);
    let (sums, norms) = core_dp::clipped_grad_sum(&f, &p, &b, clip_norm, method);
    (tree_unflatten(&tree_structure(params), sums), norms)
}

/// `loss` as a function of the flat leaves of the parameters, then of the batch.
fn flat<P: Tree, B: Tree>(
    loss: impl Fn(&P, &B) -> Tensor + Send + Sync + 'static,
    params: &P,
    batch: &B,
) -> (Func, Vec<Tensor>, Vec<Tensor>) {
    let (p, b) = (tree_leaves(params), tree_leaves(batch));
    let (p_def, b_def) = (tree_structure(params), tree_structure(batch));
    let n = p.len();
    let f = Func::new(Some(n + b.len()), move |args: &[Tensor]| {
        let params: P = tree_unflatten(&p_def, args[..n].to_vec());
        let sample: B = tree_unflatten(&b_def, args[n..].to_vec());
        vec![loss(&params, &sample)]
    });
    (f, p, b)
}
