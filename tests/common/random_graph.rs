//! The random graphs of the property tests: a seeded generator and one random op at a time.

use tensor::prelude::*;

/// A small deterministic generator (64-bit LCG), enough to pick ops and sizes.
pub struct Rng(pub u64);

impl Rng {
    /// The next 31 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A tensor of `shape` with small random values.
pub fn data(shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| (rng.below(41) as f32 - 20.0) / 8.0)
        .collect();
    Tensor::from_vec(values, shape)
}

/// A random shape of rank 1 to 3 with axes of size 1 to 4.
pub fn random_shape(rng: &mut Rng) -> Vec<usize> {
    (0..1 + rng.below(3)).map(|_| 1 + rng.below(4)).collect()
}

/// One random op applied to `x` (keeping values bounded so every op stays finite).
pub fn step(x: Tensor, rng: &mut Rng) -> Tensor {
    let shape = x.shape();
    let rank = shape.len();
    let axis = rng.below(rank.max(1)) as isize;
    match rng.below(14) {
        0 => x.sin(),
        1 => x.tanh() * 2.0,
        2 => (x.abs() + 0.5).sqrt(),
        3 => x.relu() - 0.25,
        4 => &x + &data(&shape, rng),
        5 => x.maximum(data(&shape, rng)),
        6 => &x * &data(&shape[rank.saturating_sub(1)..], rng),
        7 if rank > 0 => x.sum(axis, rng.below(2) == 0),
        8 if rank > 0 => x.max(axis, true),
        9 if rank > 0 => x.flip(axis),
        10 => {
            let mut order: Vec<usize> = (0..rank).collect();
            order.rotate_left(1);
            x.permute(&order)
        }
        11 if rank > 0 => x.pad(
            &shape
                .iter()
                .map(|_| (rng.below(2), rng.below(2)))
                .collect::<Vec<_>>(),
        ),
        12 if rank > 0 && shape[rank - 1] > 1 => x.slice(-1, 1, shape[rank - 1] as isize),
        13 if rank == 2 => x.matmul(&data(&[shape[1], 1 + rng.below(3)], rng)),
        _ => x.reshape(&[x.numel()]).contiguous(),
    }
}
