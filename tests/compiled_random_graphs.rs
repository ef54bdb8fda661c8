//! Property test: random well-typed graphs of elementwise, movement, reduce and matmul ops,
//! compiled and run on the CPU, equal the reference interpreter (within the tolerance of
//! `common::tolerance`: integers exactly, floats within 1e-4).
//! The generator is seeded, so a failure names a seed that reproduces it.

mod common;

use common::random_graph::{Rng, data, random_shape, step};
use common::tolerance::agree;
use common::{interpreted, values};
use tensor::prelude::*;

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
        assert!(
            agree(&got, &expected, graph.dtype().is_float(), 1.0),
            "seed {seed}: compiled {got:?} but the interpreter gives {expected:?} for {graph:?}"
        );
    }
}
