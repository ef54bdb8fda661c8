//! Per-sample gradient norms and the sum of clipped per-sample gradients of a loss over flat
//! lists of tensors (the facade's `tensor::dp` types them for trees).

use super::norm_rules::factored_sum_sq;
use crate::tensor::Tensor;
use crate::transform::func::{Func, transform_error};
use crate::transform::function::traced_once;
use crate::transform::trace::inline_functions;
use crate::transform::vjp::grad;
use crate::transform::vmap::{VmapMethod, vmap_with};
use crate::uop::DType;

/// Opacus's guard in `C / (‖g‖ + ε)`: a zero gradient gets the factor 1, never a division by
/// zero.
pub const NORM_EPSILON: f64 = 1e-6;

/// The per-sample gradients of a loss, `vmap(grad(loss))` over the first `n_params`
/// arguments with the batch on axis 0 of the others, and the clipped sum built on them, each
/// traced once per signature and kept: build it once and call it every step (a new one
/// traces again). A kept call only builds a `Function` node over its arguments; the inlining
/// and the norm rules run once per signature.
#[derive(Clone)]
pub struct PerSampleGrads {
    f: Func,
    clipped: Func,
    n_params: usize,
}

impl PerSampleGrads {
    /// The per-sample gradients of `loss` (parameters first, then one sample of each of the
    /// `n_batch` batch tensors; a 0-d result), batched by `method`.
    pub fn new(loss: &Func, n_params: usize, n_batch: usize, method: VmapMethod) -> Self {
        let argnums: Vec<usize> = (0..n_params).collect();
        let in_axes: Vec<Option<isize>> = std::iter::repeat_n(None, n_params)
            .chain(std::iter::repeat_n(Some(0), n_batch))
            .collect();
        let f = vmap_with(grad(loss.clone(), argnums), in_axes, 0, method);
        let inner = f.clone();
        // Arguments: the parameters, the batch, the clipping norm (0-d) and the mask ([B]).
        let body = Func::new(Some(n_params + n_batch + 2), move |args: &[Tensor]| {
            let (params, rest) = args.split_at(n_params);
            let (batch, extra) = rest.split_at(n_batch);
            let grads = inlined(&inner, params, batch);
            let (mut out, norms) = clipped(&grads, params, &extra[0], &extra[1]);
            out.push(norms);
            out
        });
        let clipped = traced_once("dp clipped sum", body);
        PerSampleGrads {
            f,
            clipped,
            n_params,
        }
    }

    /// Each parameter's per-sample gradients, the batch leading (the traced function
    /// inlined, so the norms and the clipped sum read the same nodes).
    #[track_caller]
    pub fn call(&self, params: &[Tensor], batch: &[Tensor]) -> Vec<Tensor> {
        check_arguments("per_sample_grads", &self.f, self.n_params, params, batch);
        inlined(&self.f, params, batch)
    }

    /// The norm of each sample's gradient over all parameters, `[B]`.
    #[track_caller]
    pub fn norms(&self, params: &[Tensor], batch: &[Tensor]) -> Tensor {
        norms_of(&self.call(params, batch))
    }

    /// `Σ_i m_i min(1, C / (‖g_i‖ + 1e-6)) g_i` per parameter (`m_i` = `mask[i]`, else 1),
    /// and the norms before clipping. `clip_norm` is a value bound at run time.
    #[track_caller]
    pub fn clipped_sum(
        &self,
        params: &[Tensor],
        batch: &[Tensor],
        clip_norm: f64,
        mask: Option<&Tensor>,
    ) -> (Vec<Tensor>, Tensor) {
        check_arguments("clipped_grad_sum", &self.f, self.n_params, params, batch);
        if !(clip_norm.is_finite() && clip_norm > 0.0) {
            transform_error(&format!(
                "clipped_grad_sum: the clipping norm must be a positive finite number, got \
                 {clip_norm}"
            ));
        }
        let size = batch[0].shape()[0];
        let mask = match mask {
            Some(mask) if mask.shape() != [size] => transform_error(&format!(
                "clipped_grad_sum: the mask must have one entry per sample, shape \
                 [{size}], got {:?}",
                mask.shape()
            )),
            Some(mask) => mask.cast(DType::F32),
            None => Tensor::from_vec(vec![1.0f32; size], &[size]),
        };
        let clip = Tensor::from_vec(vec![clip_norm], &[]);
        let args: Vec<Tensor> = params
            .iter()
            .chain(batch)
            .cloned()
            .chain([clip, mask])
            .collect();
        let mut out = self.clipped.call(&args);
        let norms = out.pop().expect("the clipped sum returns the norms last");
        (out, norms)
    }
}

/// `f`'s per-sample gradients with its traced function inlined.
fn inlined(f: &Func, params: &[Tensor], batch: &[Tensor]) -> Vec<Tensor> {
    let args: Vec<Tensor> = params.iter().chain(batch).cloned().collect();
    f.call(&args)
        .iter()
        .map(|g| Tensor::from_uop(inline_functions(&g.uop())))
        .collect()
}

/// The clipped sums of per-sample `grads` (cast back to each parameter's dtype) and their
/// norms, for a 0-d clipping norm and a `[B]` mask.
fn clipped(
    grads: &[Tensor],
    params: &[Tensor],
    clip: &Tensor,
    mask: &Tensor,
) -> (Vec<Tensor>, Tensor) {
    let norms = norms_of(grads);
    let factor = (&(&norms + NORM_EPSILON).recip() * &clip.cast(norms.dtype())).minimum(1.0)
        * &mask.cast(norms.dtype());
    let sums = grads
        .iter()
        .zip(params)
        .map(|(g, p)| weighted_batch_sum(g, &factor).cast(p.dtype()))
        .collect();
    (sums, norms)
}

/// The per-sample gradients of `loss` with respect to its first `params.len()` arguments,
/// each with the batch as its leading axis. `loss` takes the parameters, then one sample of
/// each `batch` tensor (the batch axis is axis 0 of every batch tensor), and returns a 0-d
/// loss. (Traces anew at every call; keep a [`PerSampleGrads`] across steps.)
#[track_caller]
pub fn per_sample_grads(
    loss: &Func,
    params: &[Tensor],
    batch: &[Tensor],
    method: VmapMethod,
) -> Vec<Tensor> {
    PerSampleGrads::new(loss, params.len(), batch.len(), method).call(params, batch)
}

/// The norm of each sample's gradient over all parameters, `[B]`: `‖∇_θ loss(θ, x_i)‖₂`
/// (Opacus's `per_sample_norms`), computed without storing the `B × P` gradients.
#[track_caller]
pub fn per_sample_grad_norms(
    loss: &Func,
    params: &[Tensor],
    batch: &[Tensor],
    method: VmapMethod,
) -> Tensor {
    PerSampleGrads::new(loss, params.len(), batch.len(), method).norms(params, batch)
}

/// The sum over the batch of each sample's gradient clipped to norm `clip_norm`, one tensor
/// per parameter, and the per-sample norms before clipping: `Σ_i min(1, C / (‖g_i‖ + 1e-6))
/// g_i`, as Opacus clips (DP-SGD's `Σ_i clip(g_i)` before noise).
#[track_caller]
pub fn clipped_grad_sum(
    loss: &Func,
    params: &[Tensor],
    batch: &[Tensor],
    clip_norm: f64,
    method: VmapMethod,
) -> (Vec<Tensor>, Tensor) {
    PerSampleGrads::new(loss, params.len(), batch.len(), method)
        .clipped_sum(params, batch, clip_norm, None)
}

/// `sqrt(Σ_leaves Σ_{non-batch axes} g²)` of per-sample gradients with a leading batch axis,
/// each leaf's sum of squares factored by [`norm_rules`](super::norm_rules).
fn norms_of(grads: &[Tensor]) -> Tensor {
    grads
        .iter()
        .map(|g| {
            let g = g.cast(DType::promote(DType::F32, g.dtype()));
            let batch = g.shape()[0];
            Tensor::from_uop(factored_sum_sq(&g.uop())).reshape(&[batch])
        })
        .reduce(|a, b| &a + &b)
        .unwrap_or_else(|| transform_error("per_sample_grad_norms: the loss has no parameters"))
        .sqrt()
}

/// `Σ_i w_i g_i` over the leading axis of `g`.
fn weighted_batch_sum(g: &Tensor, weights: &Tensor) -> Tensor {
    let mut shape = vec![weights.shape()[0]];
    shape.extend(std::iter::repeat_n(1, g.shape().len() - 1));
    (g * &weights.reshape(&shape[..])).sum(0, false)
}

#[track_caller]
fn check_arguments(op: &str, f: &Func, n_params: usize, params: &[Tensor], batch: &[Tensor]) {
    if params.len() != n_params
        || f.arity()
            .is_some_and(|arity| arity != params.len() + batch.len())
    {
        transform_error(&format!(
            "{op}: the loss takes {} parameters and {} batch tensors, but {} parameters and {} \
             batch tensors were given; the loss takes the parameters first, then one sample of \
             each batch tensor",
            n_params,
            f.arity().map_or(0, |a| a.saturating_sub(n_params)),
            params.len(),
            batch.len()
        ));
    }
    if batch.is_empty() {
        transform_error(&format!(
            "{op}: no batch tensors; give at least one tensor whose axis 0 is the batch"
        ));
    }
    let sizes: Vec<usize> = batch
        .iter()
        .map(|b| b.shape().first().copied().unwrap_or(0))
        .collect();
    if batch.iter().any(|b| b.shape().is_empty()) || sizes.windows(2).any(|w| w[0] != w[1]) {
        let shapes: Vec<Vec<usize>> = batch.iter().map(|b| b.shape().to_vec()).collect();
        transform_error(&format!(
            "{op}: every batch tensor needs the batch as axis 0 with one size; got shapes \
             {shapes:?}"
        ));
    }
}
