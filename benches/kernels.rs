//! Throughput of compiled kernels: a 6-op elementwise chain over 16M floats (bytes moved per
//! second) and a 1024x1024 f32 matmul (floating-point operations per second).
//!
//! Run: `cargo bench --bench kernels`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tensor::prelude::*;

const CHAIN_LEN: usize = 16 * 1024 * 1024;
const MATMUL_N: usize = 1024;

/// Six elementwise ops that fuse into one kernel: one read and one write per element.
fn chain(x: &Tensor) -> Tensor {
    ((x * 2.0 + 1.0).sqrt() - x).maximum(0.0) * 0.5 + 3.0
}

fn elementwise_chain(c: &mut Criterion) {
    let x = Tensor::rand(&[CHAIN_LEN], 1);
    x.realize().expect("the input realizes");
    let mut group = c.benchmark_group("elementwise_chain_16M_f32");
    group.throughput(Throughput::Bytes((CHAIN_LEN * 4 * 2) as u64));
    group.sample_size(10);
    group.bench_function("six_ops_fused", |b| {
        b.iter(|| chain(&x).realize().map(|_| ()).expect("runs"))
    });
    group.finish();
}

fn matmul(c: &mut Criterion) {
    let a = Tensor::rand(&[MATMUL_N, MATMUL_N], 2);
    let w = Tensor::rand(&[MATMUL_N, MATMUL_N], 3);
    a.realize().expect("realizes");
    w.realize().expect("realizes");
    let mut group = c.benchmark_group("matmul_1024_f32");
    // Criterion reports elements per second; with 2*N^3 elements that is FLOP/s.
    group.throughput(Throughput::Elements(
        (2 * MATMUL_N * MATMUL_N * MATMUL_N) as u64,
    ));
    group.sample_size(10);
    group.bench_function("matmul", |b| {
        b.iter(|| a.matmul(&w).realize().map(|_| ()).expect("runs"))
    });
    group.finish();
}

criterion_group!(benches, elementwise_chain, matmul);
criterion_main!(benches);
