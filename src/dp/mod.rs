//! Differentially private training (DP-SGD, Abadi et al. 2016): the sum of per-sample
//! gradients each clipped to a norm, Gaussian noise added once per step, Poisson-sampled
//! batches, and a privacy accountant that turns the steps taken into an (ε, δ) guarantee.
//!
//! The clipped sum is found by composing transforms, not written per layer: the per-sample
//! gradients of `vmap(grad(loss))` are reduced to their norms and to their weighted sum
//! inside the kernels that compute them (see `tensor_core::dp`).

pub mod accountant;
pub mod clip;
pub mod engine;
pub mod noise;
pub mod sampling;

pub use clip::{
    clipped_grad, clipped_grad_with, per_sample_grad_norms, per_sample_grad_norms_with,
};
pub use engine::DpSgd;
pub use noise::noisy_mean;
