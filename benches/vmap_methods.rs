//! The three vmap methods on one per-sample function: the per-sample squared error of a
//! 256-128 linear layer over a batch of 512 (rewrite: the batch is a graph axis; range: a loop
//! through vmap scopes; pad+reduce: a loop through windows sliding with it, collapsed to
//! direct reads by the reduce-collapse rule). Samples per second, compile time excluded (the
//! program cache is warm after the first iteration).
//!
//! Run: `cargo bench --bench vmap_methods`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::prelude::*;

const BATCH: usize = 512;
const IN: usize = 256;
const OUT: usize = 128;

fn per_sample_error(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let residual = &x.matmul(w).tanh() - y;
    (&residual * &residual).sum_all()
}

fn vmap_methods(c: &mut Criterion) {
    let w = Tensor::rand(&[IN, OUT], 1);
    let xs = Tensor::rand(&[BATCH, IN], 2);
    let ys = Tensor::rand(&[BATCH, OUT], 3);
    for t in [&w, &xs, &ys] {
        t.realize().expect("the inputs realize");
    }
    let args = [w, xs, ys];
    let mut group = c.benchmark_group("vmap_per_sample_error_512x256x128");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let f = vmap_with(per_sample_error, [None, Some(0), Some(0)], 0, method);
        group.bench_function(format!("{method:?}"), |b| {
            b.iter(|| f.call1(&args).realize().map(|_| ()).expect("runs"))
        });
    }
    group.finish();
}

criterion_group!(benches, vmap_methods);
criterion_main!(benches);
