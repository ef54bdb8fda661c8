//! Property test: random per-sample functions (elementwise, movement, reduce, matmul ops,
//! unmapped constants, realized intermediates) vmapped by every method, compiled and run on
//! the CPU, equal the reference interpreter's loop over the samples, and gradients through
//! them agree across the methods. The generator is seeded, so a failure names a seed that
//! reproduces it.

mod common;

use common::random_graph::{Rng, data, random_shape, step};
use common::{allclose, interpreted, values};
use tensor::core::schedule::create_schedule;
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::core::{Arg, AxisType, Op};
use tensor::prelude::*;

/// Prime and larger than any axis of a sample, so a loop of this size is a loop over the batch.
const BATCH: usize = 7;

/// The per-sample input shape of seed `seed`, and a random function of one sample (the same
/// graph at every call, so tracing it more than once is harmless).
fn random_function(seed: u64) -> (Vec<usize>, impl Fn(&Tensor) -> Tensor + Clone + 'static) {
    let shape = random_shape(&mut Rng(seed));
    let body = move |x: &Tensor| {
        let mut rng = Rng(seed.wrapping_mul(7919) + 1);
        let mut y = x.clone();
        for _ in 0..2 + rng.below(5) {
            y = step(y, &mut rng);
        }
        y
    };
    (shape, body)
}

/// True when some kernel of `t`'s schedule has a reduce loop over the batch: pad+reduce that
/// the reduce-collapse rule did not turn into one read per sample (an O(batch²) kernel).
fn reduces_over_the_batch(t: &Tensor) -> bool {
    create_schedule(&[t.uop()]).items.iter().any(|item| {
        item.ast.toposort().iter().any(|u| {
            u.op() == Op::Range
                && matches!(
                    u.arg(),
                    Arg::Range {
                        axis_type: AxisType::Reduce,
                        ..
                    }
                )
                && u.vmax().as_i64() + 1 == BATCH as i64
        })
    })
}

#[test]
fn random_functions_vmapped_by_every_method_equal_a_loop_over_samples() {
    for seed in 0..30 {
        let (shape, f) = random_function(seed);
        let x = data(
            &[&[BATCH], shape.as_slice()].concat(),
            &mut Rng(seed + 1000),
        );
        let samples: Vec<Tensor> = (0..BATCH as isize)
            .map(|i| f(&x.slice(0, i, i + 1).squeeze(0)))
            .collect();
        let expected = interpreted(&Tensor::stack(&samples, 0));
        for method in [
            VmapMethod::Rewrite,
            VmapMethod::Range,
            VmapMethod::PadReduce,
        ] {
            let batched = vmap_with(f.clone(), 0, 0, method).call1(std::slice::from_ref(&x));
            assert!(
                !reduces_over_the_batch(&batched),
                "seed {seed}, vmap by {method:?}: a kernel sums over the batch"
            );
            let got = values(&batched);
            assert!(
                allclose(&got, &expected, 1e-4, 1e-4),
                "seed {seed}, vmap by {method:?}: compiled {got:?} but the loop gives {expected:?}"
            );
        }
    }
}

#[test]
fn gradients_through_random_vmapped_functions_agree_across_methods() {
    for seed in 0..30 {
        let (shape, f) = random_function(seed);
        let x = data(
            &[&[BATCH], shape.as_slice()].concat(),
            &mut Rng(seed + 2000),
        );
        let gradient = |method| {
            let f = f.clone();
            let loss = move |x: &Tensor| {
                let per_sample = vmap_with(f.clone(), 0, 0, method).call1(std::slice::from_ref(x));
                (&per_sample * &per_sample).sum_all()
            };
            grad(loss, 0).call1(std::slice::from_ref(&x))
        };
        let by_rewrite = gradient(VmapMethod::Rewrite);
        let expected = interpreted(&by_rewrite);
        assert!(
            allclose(&values(&by_rewrite), &expected, 1e-4, 1e-4),
            "seed {seed}: the compiled rewrite gradient differs from the interpreter"
        );
        for method in [VmapMethod::Range, VmapMethod::PadReduce] {
            let gradient = gradient(method);
            assert!(
                !reduces_over_the_batch(&gradient),
                "seed {seed}, grad through vmap by {method:?}: a kernel sums over the batch"
            );
            let got = values(&gradient);
            assert!(
                allclose(&got, &expected, 1e-4, 1e-4),
                "seed {seed}, grad through vmap by {method:?}: {got:?} but the rewrite method gives {expected:?}"
            );
        }
    }
}
