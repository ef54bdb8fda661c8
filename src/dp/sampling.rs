//! Poisson sampling of DP-SGD batches (Opacus's `UniformWithReplacementSampler`).
//!
//! Every example joins a batch independently with probability `sample_rate`, so the batch size
//! varies from step to step (binomial with mean `n · sample_rate`) and may be zero. The privacy
//! accountant ([`crate::dp::accountant`]) analyses exactly this sampling: its amplification by
//! subsampling does not hold for fixed-size or shuffled batches.
//!
//! Draws come from a counter-based SplitMix64 stream keyed by `(seed, step)`, so any step's batch
//! can be recomputed alone, on any machine, without replaying the steps before it.

/// The indices in `0..n`, ascending, that step `step` of a run seeded with `seed` samples: each
/// joins independently with probability `sample_rate`. The same `(n, sample_rate, seed, step)`
/// always gives the same batch; the batch may be empty.
///
/// Panics if `sample_rate` is outside `[0, 1]`.
///
/// ```
/// use tensor::dp::sampling::poisson_batch;
/// let batch = poisson_batch(1000, 0.1, 7, 0);
/// assert_eq!(batch, poisson_batch(1000, 0.1, 7, 0));
/// assert!(batch.windows(2).all(|w| w[0] < w[1]));
/// assert!(batch.len() > 50 && batch.len() < 150); // about 100, varying
/// ```
#[track_caller]
pub fn poisson_batch(n: usize, sample_rate: f64, seed: u64, step: u64) -> Vec<usize> {
    assert!(
        (0.0..=1.0).contains(&sample_rate),
        "poisson_batch: the sample rate must lie in [0, 1], got {sample_rate}"
    );
    let mut stream = SplitMix64::new(seed, step);
    (0..n)
        .filter(|_| stream.next_unit() < sample_rate)
        .collect()
}

/// The number of steps in one epoch at `sample_rate`: `⌊1 / sample_rate⌋`, as Opacus's sampler
/// counts (an epoch sees each example once in expectation, rounded down).
///
/// Panics unless `0 < sample_rate ≤ 1`.
///
/// ```
/// use tensor::dp::sampling::steps_per_epoch;
/// assert_eq!(steps_per_epoch(0.01), 100);
/// assert_eq!(steps_per_epoch(0.256), 3);
/// ```
#[track_caller]
pub fn steps_per_epoch(sample_rate: f64) -> u64 {
    assert!(
        sample_rate > 0.0 && sample_rate <= 1.0,
        "steps_per_epoch: the sample rate must lie in (0, 1], got {sample_rate}"
    );
    (1.0 / sample_rate) as u64
}

/// The Poisson batches of one epoch: [`steps_per_epoch`] batches, batch `k` of epoch `e` being
/// [`poisson_batch`] at step `e · steps_per_epoch + k`, so epochs continue one step counter and
/// never repeat each other's batches.
///
/// ```
/// use tensor::dp::sampling::{poisson_batch, PoissonBatches};
/// let batches: Vec<Vec<usize>> = PoissonBatches::epoch(100, 0.25, 3, 1).collect();
/// assert_eq!(batches.len(), 4);
/// assert_eq!(batches[0], poisson_batch(100, 0.25, 3, 4));
/// ```
#[derive(Clone, Debug)]
pub struct PoissonBatches {
    n: usize,
    sample_rate: f64,
    seed: u64,
    next_step: u64,
    end_step: u64,
}

impl PoissonBatches {
    /// The batches of epoch `epoch` (counting from 0) of a run over `n` examples.
    ///
    /// Panics unless `0 < sample_rate ≤ 1`.
    ///
    /// ```
    /// let mut epoch = tensor::dp::sampling::PoissonBatches::epoch(10, 0.5, 0, 0);
    /// assert_eq!(epoch.len(), 2);
    /// assert!(epoch.next().unwrap().len() <= 10);
    /// ```
    #[track_caller]
    pub fn epoch(n: usize, sample_rate: f64, seed: u64, epoch: u64) -> Self {
        let steps = steps_per_epoch(sample_rate);
        Self {
            n,
            sample_rate,
            seed,
            next_step: epoch * steps,
            end_step: (epoch + 1) * steps,
        }
    }
}

impl Iterator for PoissonBatches {
    type Item = Vec<usize>;

    fn next(&mut self) -> Option<Vec<usize>> {
        if self.next_step == self.end_step {
            return None;
        }
        let batch = poisson_batch(self.n, self.sample_rate, self.seed, self.next_step);
        self.next_step += 1;
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.end_step - self.next_step) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for PoissonBatches {}

/// SplitMix64 (Steele, Lea and Flood 2014) started at a state derived from `(seed, step)`.
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    fn new(seed: u64, step: u64) -> Self {
        // Mixing the seed before adding the step keeps streams of neighbouring seeds and steps
        // from being shifts of one another.
        Self {
            state: mix(mix(seed) ^ step.wrapping_mul(Self::GAMMA)),
        }
    }

    /// A uniform draw from `[0, 1)` with 53 random bits.
    fn next_unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        (mix(self.state) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// SplitMix64's output function.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
