//! Per-sample gradient norms and clipped gradient sums of a loss over trees: the parameters
//! are any [`Tree`] (a `#[derive(Tree)]` struct), the batch any tree whose leaves have the
//! batch as axis 0, and the loss is written for one sample, as `vmap(grad(loss))` takes it.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use tensor_core::Tensor;
use tensor_core::dp::PerSampleGrads;
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
    let (grads, p, b) = flat(loss, params, batch, method);
    grads.norms(&p, &b)
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
    let (grads, p, b) = flat(loss, params, batch, method);
    let (sums, norms) = grads.clipped_sum(&p, &b, clip_norm, None);
    (tree_unflatten(&tree_structure(params), sums), norms)
}

/// The per-sample gradients of `loss` over the flat leaves of the parameters, then of the
/// batch, and those leaves. A loss with no captured state (a `fn` or a closure that captures
/// nothing: its type is its behaviour) is traced once per signature for the whole program,
/// as `jax.jit` keeps a function's traces; a capturing closure is traced at every call.
pub(crate) fn flat<P: Tree, B: Tree, F>(
    loss: F,
    params: &P,
    batch: &B,
    method: VmapMethod,
) -> (PerSampleGrads, Vec<Tensor>, Vec<Tensor>)
where
    F: Fn(&P, &B) -> Tensor + Send + Sync + 'static,
{
    let (p, b) = (tree_leaves(params), tree_leaves(batch));
    let (p_def, b_def) = (tree_structure(params), tree_structure(batch));
    let key = (std::mem::size_of::<F>() == 0).then(|| {
        let defs = format!("{p_def:?} {b_def:?} {method:?}");
        (TypeId::of::<(F, P, B)>(), defs)
    });
    if let Some(found) = key.as_ref().and_then(|k| KEPT.lock().ok()?.get(k).cloned()) {
        return (found, p, b);
    }
    let n = p.len();
    let f = Func::new(Some(n + b.len()), move |args: &[Tensor]| {
        let params: P = tree_unflatten(&p_def, args[..n].to_vec());
        let sample: B = tree_unflatten(&b_def, args[n..].to_vec());
        vec![loss(&params, &sample)]
    });
    let grads = PerSampleGrads::new(&f, n, b.len(), method);
    if let (Some(key), Ok(mut kept)) = (key, KEPT.lock()) {
        if kept.len() >= KEPT_LOSSES {
            kept.clear();
        }
        kept.insert(key, grads.clone());
    }
    (grads, p, b)
}

/// How many stateless losses' traces are kept before they are all dropped.
const KEPT_LOSSES: usize = 64;

type Kept = HashMap<(TypeId, String), PerSampleGrads>;

static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(|| Mutex::new(HashMap::new()));
