//! DP-SGD's gradient as a composition of transforms (Abadi et al. 2016): each sample's
//! gradient clipped to a norm `C`, summed, with Gaussian noise of scale `σ C` added once.
//!
//! The clipped sum is written lazily and the scheduler decides what to store:
//!
//! ```text
//! g_i   = vmap(grad(loss))(params, batch)[i]        per-sample gradients, never stored whole
//! n_i   = sqrt(Σ_leaves Σ_elements g_i²)            a reduction fused into g_i's kernels
//! c_i   = min(1, C / (n_i + 1e-6))                  Opacus's clipping factor
//! Σ_i c_i g_i                                       one reduction over the batch per leaf
//! ```
//!
//! Both reductions read the same lazy `g_i`, so the per-sample backward pass is traced once and
//! every `B × P` per-sample tensor stays inside the kernels that reduce it (the sum of
//! `c_i a_i ⊗ δ_i` of a dense layer is one contraction over the batch: the book-keeping
//! algorithm of Bu et al. 2023, found by fusion rather than written per layer). The clipping
//! norm is a value bound at run time: a new `C` replays the plan.

pub mod clip;
pub mod noise;
pub mod norm_rules;

pub use clip::{PerSampleGrads, clipped_grad_sum, per_sample_grad_norms};
pub use noise::noisy_mean;
