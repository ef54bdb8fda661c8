//! [`DpSgd`]: DP-SGD's private gradient of a Poisson-sampled batch, with its accountant.

use super::accountant::RdpAccountant;
use super::sampling::{PoissonBatches, mix, poisson_batch};
use crate::dist::{Communicator, DistError, ReduceOp};
use tensor_core::Tensor;
use tensor_core::dp as core_dp;
use tensor_core::transform::VmapMethod;
use tensor_core::transform::tree::{Tree, tree_leaves, tree_structure, tree_unflatten};

/// DP-SGD's private gradient (Abadi et al. 2016) and the privacy it spends: each step draws a
/// Poisson-sampled batch, clips each sample's gradient to `clip_norm`, sums, adds
/// `N(0, (σ C)²)` noise once, divides by the expected batch size, and records the step in an
/// RDP accountant (equal to Opacus's). Pass the result to any [`tensor::optim`](crate::optim)
/// optimizer, as Opacus wraps any torch optimizer.
///
/// A batch is gathered from the dataset by its indices and padded with masked samples to a
/// multiple of [`DpSgd::padding`] (8 by default), so the varying sizes of Poisson batches share
/// a few plans instead of one plan per size; the masked samples add nothing to the sum.
///
/// ```
/// use tensor::prelude::*;
/// use tensor::dp::DpSgd;
/// use tensor::optim::{Sgd, Stepper};
///
/// // Fit y = 2x with privacy: 200 examples, about 20 per batch.
/// let x = Tensor::from_vec((0..200).map(|i| i as f32 / 200.0).collect(), &[200]);
/// let y = &x * 2.0;
/// let loss = |w: &Tensor, s: &(Tensor, Tensor)| (&s.0 * w - &s.1).square();
/// let mut w = Tensor::scalar(0.0f32);
/// let mut dp = DpSgd::new(1.0, 0.5, 200, 0.1, 42);
/// let mut opt = Stepper::new(Sgd::new(), &w, 2.0).unwrap();
/// for epoch in 0..10 {
///     for batch in dp.batches(epoch) {
///         let g = dp.private_grad(loss, &w, &(x.clone(), y.clone()), &batch);
///         opt.step(&mut w, &g).unwrap();
///     }
/// }
/// let w = w.to_vec::<f32>().unwrap()[0];
/// assert!((w - 2.0).abs() < 0.3, "{w}");
/// assert!(dp.epsilon(1e-5) > 0.0);
/// ```
#[derive(Clone, Debug)]
pub struct DpSgd {
    clip_norm: f64,
    noise_multiplier: f64,
    dataset_size: usize,
    sample_rate: f64,
    seed: u64,
    padding: usize,
    method: VmapMethod,
    steps: u64,
    accountant: RdpAccountant,
}

impl DpSgd {
    /// DP-SGD with clipping norm `clip_norm` (C), noise multiplier `noise_multiplier` (σ), a
    /// dataset of `dataset_size` examples sampled at rate `sample_rate` (the expected batch
    /// is `dataset_size · sample_rate`), and `seed` for both the batches and the noise.
    ///
    /// # Panics
    ///
    /// On a clipping norm that is not positive, a negative σ, an empty dataset, or a rate
    /// outside `(0, 1]`.
    #[track_caller]
    pub fn new(
        clip_norm: f64,
        noise_multiplier: f64,
        dataset_size: usize,
        sample_rate: f64,
        seed: u64,
    ) -> Self {
        assert!(
            clip_norm.is_finite() && clip_norm > 0.0,
            "DpSgd::new: the clipping norm must be a positive finite number, got {clip_norm}"
        );
        assert!(
            noise_multiplier.is_finite() && noise_multiplier >= 0.0,
            "DpSgd::new: the noise multiplier must be finite and >= 0, got {noise_multiplier}"
        );
        assert!(dataset_size > 0, "DpSgd::new: the dataset is empty");
        assert!(
            sample_rate > 0.0 && sample_rate <= 1.0,
            "DpSgd::new: the sample rate must lie in (0, 1], got {sample_rate}"
        );
        DpSgd {
            clip_norm,
            noise_multiplier,
            dataset_size,
            sample_rate,
            seed,
            padding: 8,
            method: VmapMethod::Rewrite,
            steps: 0,
            accountant: RdpAccountant::new(),
        }
    }

    /// Batches padded to a multiple of `multiple` (1: no padding, one plan per batch size).
    #[track_caller]
    pub fn with_padding(mut self, multiple: usize) -> Self {
        assert!(
            multiple > 0,
            "DpSgd::with_padding: the multiple must be at least 1"
        );
        self.padding = multiple;
        self
    }

    /// Per-sample gradients batched by `method` (default [`VmapMethod::Rewrite`]).
    pub fn with_method(mut self, method: VmapMethod) -> Self {
        self.method = method;
        self
    }

    /// The padding multiple of batches.
    pub fn padding(&self) -> usize {
        self.padding
    }

    /// The Poisson-sampled batches (indices into the dataset) of epoch `epoch`:
    /// `⌊1 / sample_rate⌋` of them, as Opacus's sampler.
    pub fn batches(&self, epoch: u64) -> PoissonBatches {
        PoissonBatches::epoch(self.dataset_size, self.sample_rate, self.seed, epoch)
    }

    /// The batch of step `step` alone (the same indices [`DpSgd::batches`] gives it).
    pub fn batch(&self, step: u64) -> Vec<usize> {
        poisson_batch(self.dataset_size, self.sample_rate, self.seed, step)
    }

    /// The noisy mean gradient of `loss` (written for one example) over the examples `batch`
    /// of `data` (a tree whose leaves have the examples on axis 0), shaped like `params`;
    /// records one step in the accountant.
    ///
    /// # Panics
    ///
    /// On an index outside the dataset, or data leaves of different lengths.
    #[track_caller]
    pub fn private_grad<P: Tree, D: Tree>(
        &mut self,
        loss: impl Fn(&P, &D) -> Tensor + Send + Sync + 'static,
        params: &P,
        data: &D,
        batch: &[usize],
    ) -> P {
        let sums = self.clipped_sums(loss, params, data, batch);
        self.noisy_step(&sums, params)
    }

    /// [`DpSgd::private_grad`] with the batch's examples shared among the ranks of `comm`:
    /// every rank passes the same `batch` (the same `DpSgd` seed gives it), clips the
    /// gradients of its shard ([`Communicator::shard`]), and the clipped sums are all-reduced
    /// before the noise. The noise is drawn from the step's seed, the same on every rank, and
    /// added once to the global sum, so every rank returns the same gradient, the one
    /// [`DpSgd::private_grad`] returns for the whole batch in one process (to rounding); the
    /// accountant records the global batch's sampling rate.
    ///
    /// # Panics
    ///
    /// As [`DpSgd::private_grad`].
    #[track_caller]
    pub fn private_grad_distributed<P: Tree, D: Tree>(
        &mut self,
        comm: &Communicator,
        loss: impl Fn(&P, &D) -> Tensor + Send + Sync + 'static,
        params: &P,
        data: &D,
        batch: &[usize],
    ) -> Result<P, DistError> {
        let shard = &batch[comm.shard(batch.len())];
        let sums = self.clipped_sums(loss, params, data, shard);
        let sums = comm.all_reduce(&sums, ReduceOp::Sum)?;
        Ok(self.noisy_step(&sums, params))
    }

    /// The sum of the clipped per-sample gradients of the examples `batch`, one per leaf.
    #[track_caller]
    fn clipped_sums<P: Tree, D: Tree>(
        &self,
        loss: impl Fn(&P, &D) -> Tensor + Send + Sync + 'static,
        params: &P,
        data: &D,
        batch: &[usize],
    ) -> Vec<Tensor> {
        let (examples, mask) = self.gather(data, batch);
        let (grads, p, _) = super::clip::flat(loss, params, data, self.method);
        grads
            .clipped_sum(&p, &examples, self.clip_norm, Some(&mask))
            .0
    }

    /// The noisy mean of `sums` shaped like `params`; records the step in the accountant.
    fn noisy_step<P: Tree>(&mut self, sums: &[Tensor], params: &P) -> P {
        let expected = ((self.dataset_size as f64 * self.sample_rate).round() as usize).max(1);
        let noise_seed = step_seed(self.seed, self.steps);
        let noisy = core_dp::noisy_mean(
            sums,
            self.noise_multiplier,
            self.clip_norm,
            expected,
            noise_seed,
        );
        self.accountant
            .step(self.noise_multiplier, self.sample_rate);
        self.steps += 1;
        tree_unflatten(&tree_structure(params), noisy)
    }

    /// ε spent so far for `delta`.
    pub fn epsilon(&self, delta: f64) -> f64 {
        self.accountant.epsilon(delta)
    }

    /// The accountant with every step taken.
    pub fn accountant(&self) -> &RdpAccountant {
        &self.accountant
    }

    /// The steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The examples `batch` of `data`, padded with copies of one example to a multiple of the
    /// padding, and the mask that keeps only the real ones.
    #[track_caller]
    fn gather<D: Tree>(&self, data: &D, batch: &[usize]) -> (Vec<Tensor>, Tensor) {
        let leaves = tree_leaves(data);
        let len = leaves
            .first()
            .map(|l| l.shape().first().copied().unwrap_or(0));
        if leaves.iter().any(|l| l.shape().first().copied() != len) {
            let shapes: Vec<Vec<usize>> = leaves.iter().map(|l| l.shape().to_vec()).collect();
            panic!(
                "DpSgd::private_grad: every data leaf needs the examples on axis 0 with one \
                 length; got shapes {shapes:?}"
            );
        }
        let len = len.unwrap_or(0);
        if let Some(&bad) = batch.iter().find(|&&i| i >= len) {
            panic!("DpSgd::private_grad: index {bad} is outside the dataset of {len} examples");
        }
        let padded = batch.len().div_ceil(self.padding).max(1) * self.padding;
        let mut indices: Vec<i64> = batch.iter().map(|&i| i as i64).collect();
        let mut mask = vec![1.0f32; batch.len()];
        indices.resize(padded, batch.first().copied().unwrap_or(0) as i64);
        mask.resize(padded, 0.0);
        let indices = Tensor::from_vec(indices, &[padded]);
        let examples = leaves.iter().map(|l| l.take(&indices, 0)).collect();
        (examples, Tensor::from_vec(mask, &[padded]))
    }
}

/// The noise seed of step `step`: SplitMix64's finalizer over both, so steps draw unrelated
/// noise.
fn step_seed(seed: u64, step: u64) -> u64 {
    mix(seed ^ step.wrapping_add(1).wrapping_mul(0xd1b5_4a32_d192_ed03))
}
