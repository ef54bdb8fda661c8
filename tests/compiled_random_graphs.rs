//! Property test: random well-typed graphs of elementwise, movement, reduce and matmul ops,
//! compiled and run on the CPU, equal the reference interpreter (within 1e-4 relative).
//! The generator is seeded, so a failure names a seed that reproduces it.

mod common;

use common::{interpreted, values};
use tensor::prelude::*;

/// A small deterministic generator (64-bit LCG), enough to pick ops and sizes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn data(shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| (rng.below(41) as f32 - 20.0) / 8.0)
        .collect();
    Tensor::from_vec(values, shape)
}

fn random_shape(rng: &mut Rng) -> Vec<usize> {
    (0..1 + rng.below(3)).map(|_| 1 + rng.below(4)).collect()
}

/// One random op applied to `x` (keeping values bounded so every op stays finite).
fn step(x: Tensor, rng: &mut Rng) -> Tensor {
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

fn random_graph(seed: u64) -> Tensor {
    let mut rng = Rng(seed);
    let mut x = data(&random_shape(&mut rng), &mut rng);
    for _ in 0..2 + rng.below(5) {
        x = step(x, &mut rng);
    }
    x
}

#[test]
fn random_graphs_compiled_equal_the_interpreter() {
    for seed in 0..40 {
        let graph = random_graph(seed);
        let expected = interpreted(&graph);
        let got = values(&graph);
        let close = got.len() == expected.len()
            && got
                .iter()
                .zip(&expected)
                .all(|(g, e)| (g - e).abs() <= 1e-4 * (1.0 + e.abs()));
        assert!(
            close,
            "seed {seed}: compiled {got:?} but the interpreter gives {expected:?} for {graph:?}"
        );
    }
}
