//! The Gaussian mechanism over a tree of clipped sums.

use tensor_core::dp as core_dp;
use tensor_core::transform::tree::{Tree, tree_leaves, tree_structure, tree_unflatten};

/// `(sums + N(0, (σ C)² I)) / expected_batch_size`, leaf by leaf, each leaf with its own
/// stream of `seed`: DP-SGD's noisy mean gradient, as Opacus's `DPOptimizer` forms it (the
/// mean over the *expected* batch size, as Poisson sampling needs). The seed and the numbers
/// are values bound at run time: a new seed each step replays one plan.
///
/// ```
/// use tensor::prelude::*;
/// let sums = [Tensor::zeros(&[1000], DType::F32)];
/// let g = tensor::dp::noisy_mean(&sums, 2.0, 0.5, 10, 7);
/// // Noise of standard deviation σ C / B = 0.1.
/// let v = g[0].to_vec::<f32>().unwrap();
/// let std = (v.iter().map(|x| x * x).sum::<f32>() / 1000.0).sqrt();
/// assert!((std - 0.1).abs() < 0.01, "{std}");
/// ```
#[track_caller]
pub fn noisy_mean<P: Tree>(
    sums: &P,
    noise_multiplier: f64,
    clip_norm: f64,
    expected_batch_size: usize,
    seed: u64,
) -> P {
    let noisy = core_dp::noisy_mean(
        &tree_leaves(sums),
        noise_multiplier,
        clip_norm,
        expected_batch_size,
        seed,
    );
    tree_unflatten(&tree_structure(sums), noisy)
}
