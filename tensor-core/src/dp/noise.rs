//! The Gaussian mechanism of DP-SGD: noise of standard deviation `σ C` added once to each
//! clipped gradient sum, then the mean over the expected batch size.

use crate::tensor::Tensor;
use crate::transform::func::transform_error;

/// `(Σ_i clip(g_i) + N(0, (σ C)² I)) / expected_batch_size` for each clipped sum, as Opacus's
/// `DPOptimizer` adds noise and scales: with Poisson sampling the batch size varies, and the
/// mean divides by its expectation (`sample_rate × dataset size`) so that the sensitivity of
/// the mean stays `C / expected_batch_size`. Each leaf draws from its own stream of `seed`;
/// the seed, `σ`, `C` and the batch size are values bound at run time, so a step with a new
/// seed replays the same plan.
///
/// # Panics
///
/// On a negative or non-finite `noise_multiplier`, a `clip_norm` that is not positive, or an
/// `expected_batch_size` of 0.
#[track_caller]
pub fn noisy_mean(
    sums: &[Tensor],
    noise_multiplier: f64,
    clip_norm: f64,
    expected_batch_size: usize,
    seed: u64,
) -> Vec<Tensor> {
    if !(noise_multiplier.is_finite() && noise_multiplier >= 0.0) {
        transform_error(&format!(
            "noisy_mean: the noise multiplier must be finite and >= 0, got {noise_multiplier}"
        ));
    }
    if !(clip_norm.is_finite() && clip_norm > 0.0) {
        transform_error(&format!(
            "noisy_mean: the clipping norm must be a positive finite number, got {clip_norm}"
        ));
    }
    if expected_batch_size == 0 {
        transform_error("noisy_mean: the expected batch size must be at least 1");
    }
    let std = noise_multiplier * clip_norm;
    sums.iter()
        .enumerate()
        .map(|(k, sum)| {
            let noise = Tensor::randn(&sum.shape()[..], leaf_seed(seed, k)).cast(sum.dtype());
            (sum + &(noise * std)) * (1.0 / expected_batch_size as f64)
        })
        .collect()
}

/// A seed for leaf `k` of a step seeded `seed`: SplitMix64's finalizer of both, so that no two
/// (step, leaf) pairs of a run share a stream.
fn leaf_seed(seed: u64, k: usize) -> u64 {
    let mut z = seed
        ^ (k as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
