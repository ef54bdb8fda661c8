//! A `cat` or `stack` of thousands of small tensors (issue 36): joined as one sum of padded
//! parts, every element of the result read every part, gated, so the kernels' work and `cc`'s
//! time grew with (parts) × (result size): 5,000 parts of 3 elements were 125 kernels over the
//! whole result with 40 gated loads each, a minute of `cc`. Many parts are now joined in
//! stored groups of 16, then the groups likewise. The tests count work (loads per result
//! element, loads per kernel, rendered bytes per part, compiler runs), never time, and compare
//! the values with the reference interpreter exactly.

mod common;

use common::{interpreted, kernel_sources, values};
use tensor::core::schedule::{Schedule, create_schedule};
use tensor::core::{Op, UOp};
use tensor::prelude::*;
use tensor::runtime::plan::PlanCache;
use tensor::runtime::realize::{read_buffer, realize_on};
use tensor::runtime::{CpuConfig, CpuDevice};

/// The most parts one kernel joins (the library's group size).
const FANOUT: usize = 16;

/// The loads in a kernel's AST.
fn loads(ast: &UOp) -> usize {
    ast.toposort().iter().filter(|u| u.op() == Op::Load).count()
}

/// Σ over the kernels of (elements stored) × (loads per element), per element of `out`: what
/// the kernels read to build each element of the result.
fn loads_per_result_element(schedule: &Schedule, out: &Tensor) -> f64 {
    let work: usize = schedule
        .items
        .iter()
        .map(|item| item.buffer_sizes()[0] * loads(&item.ast))
        .sum();
    work as f64 / out.numel() as f64
}

/// Fails unless the kernels of `joined`, a join of `parts` parts, do work and have code linear
/// in the parts: few loads per result element, at most [`FANOUT`] loads in any kernel, about
/// one kernel per `FANOUT - 1` parts, and at most `bytes_per_part` bytes of C per part.
#[track_caller]
fn assert_linear_in_parts(joined: &Tensor, parts: usize, bytes_per_part: usize) {
    let schedule = create_schedule(&[joined.uop()]);
    let levels = (parts as f64).log(FANOUT as f64).ceil();
    let per_element = loads_per_result_element(&schedule, joined);
    // Each level of groups reads every element once, through at most FANOUT gated loads.
    assert!(
        per_element <= FANOUT as f64 * levels,
        "{per_element} loads per result element over {levels} levels"
    );
    let widest = schedule.items.iter().map(|i| loads(&i.ast)).max();
    assert!(widest <= Some(FANOUT), "a kernel with {widest:?} loads");
    let kernels = schedule.items.len();
    assert!(
        kernels <= parts / (FANOUT - 1) + levels as usize,
        "{kernels} kernels for {parts} parts"
    );
    let bytes: usize = kernel_sources(joined).iter().map(String::len).sum();
    assert!(
        bytes <= bytes_per_part * parts,
        "{bytes} bytes of C for {parts} parts"
    );
}

/// The values of `t` computed on a fresh CPU device with no disk cache, and the compiler runs
/// that took.
fn computed_cold(t: &Tensor) -> (Vec<f64>, u64) {
    let device = CpuDevice::with_config(CpuConfig::default());
    realize_on(&device, &PlanCache::new(1), &[t]).expect("the CPU computes the join");
    let bytes = read_buffer(&device, &t.uop()).expect("the join is realized");
    let values = tensor::core::uop::dtype::decode_scalars(&bytes, t.dtype())
        .iter()
        .map(|v| v.as_f64())
        .collect();
    (values, device.compile_counts().compiler_invocations)
}

/// `n` parts of shape `[3]`: `[i, i + 0.5, -i]`.
fn small_parts(n: usize) -> Vec<Tensor> {
    (0..n)
        .map(|i| Tensor::from_vec(vec![i as f32, i as f32 + 0.5, -(i as f32)], &[3]))
        .collect()
}

#[test]
fn a_cat_of_5000_small_tensors_is_linear_in_its_parts() {
    let n = 5000;
    let joined = Tensor::cat(&small_parts(n), 0);
    assert_linear_in_parts(&joined, n, 256);
    let (computed, compiler_runs) = computed_cold(&joined);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    // The runtime builds a cold schedule in at most 4 runs per core, whatever its size.
    assert!(compiler_runs <= 4 * cores as u64, "{compiler_runs} cc runs");
    let expected: Vec<f64> = (0..n)
        .flat_map(|i| [i as f64, i as f64 + 0.5, -(i as f64)])
        .collect();
    assert_eq!(computed, expected);
    assert_eq!(interpreted(&joined), expected);
}

#[test]
fn a_stack_of_2000_integer_tensors_is_linear_and_exact() {
    let n = 2000;
    let parts: Vec<Tensor> = (0..n as i32)
        .map(|i| Tensor::from_vec(vec![i, -i, 7 * i, i % 5], &[2, 2]))
        .collect();
    let stacked = Tensor::stack(&parts, 1);
    assert_eq!(stacked.shape(), vec![2, n, 2]);
    assert_linear_in_parts(&stacked, n, 256);
    assert_eq!(values(&stacked), interpreted(&stacked));
    assert_eq!(values(&stacked)[2 * 1999..2 * 1999 + 2], [1999.0, -1999.0]);
}

#[test]
fn parts_of_different_lengths_and_dtypes_join_exactly() {
    // 300 parts of lengths 1..=7 along axis 1, i32 and f32 mixed (promoted to f32).
    let parts: Vec<Tensor> = (0..300)
        .map(|i| {
            let len = i % 7 + 1;
            let v: Vec<i32> = (0..2 * len as i32).map(|k| k * 3 - i as i32).collect();
            let t = Tensor::from_vec(v, &[2, len]);
            if i % 2 == 0 { t } else { t.cast(DType::F32) }
        })
        .collect();
    let joined = Tensor::cat(&parts, 1);
    assert_eq!(joined.dtype(), DType::F32);
    assert_eq!(values(&joined), interpreted(&joined));
}

#[test]
fn a_cat_of_few_parts_still_fuses_into_its_consumer() {
    for n in [2, 8, FANOUT] {
        let joined = Tensor::cat(&small_parts(n), 0);
        let y = &(&joined * 2.0) + 1.0;
        assert_eq!(create_schedule(&[y.uop()]).items.len(), 1, "{n} parts");
        assert_eq!(values(&y), interpreted(&y));
    }
    // One part more: one group kernel, and the join of it and the last part fused.
    let y = &(&Tensor::cat(&small_parts(FANOUT + 1), 0) * 2.0) + 1.0;
    assert_eq!(create_schedule(&[y.uop()]).items.len(), 2);
    assert_eq!(values(&y), interpreted(&y));
}

/// `x·1, x·2, ..., x·n` joined along axis 0.
fn scaled_copies(x: &Tensor, n: usize) -> Tensor {
    let parts: Vec<Tensor> = (1..=n).map(|k| x * k as f32).collect();
    Tensor::cat(&parts, 0)
}

#[test]
fn vmap_and_grad_go_through_a_cat_of_many_parts() {
    let n = 40;
    let batch = Tensor::from_vec(vec![1.0f32, -2.0, 0.5, 3.0, 0.25, -1.5], &[3, 2]);
    let mapped = vmap!(move |x| scaled_copies(x, n))(&batch);
    assert_eq!(mapped.shape(), vec![3, 2 * n]);
    let expected: Vec<f64> = (0..3)
        .flat_map(|b| {
            let row = [interpreted(&batch)[2 * b], interpreted(&batch)[2 * b + 1]];
            (1..=n).flat_map(move |k| row.map(|v| v * k as f64))
        })
        .collect();
    assert_eq!(interpreted(&mapped), expected);
    assert_eq!(values(&mapped), expected);

    // d/dx Σ_k (k·x)² = 2·x·Σ_k k².
    let x = Tensor::from_vec(vec![0.5f32, -2.0], &[2]);
    let dx = grad!(move |x| scaled_copies(x, n).square().sum_all())(&x);
    let squares: f64 = (1..=n).map(|k| (k * k) as f64).sum();
    let expected = vec![2.0 * 0.5 * squares, 2.0 * -2.0 * squares];
    assert_eq!(interpreted(&dx), expected);
    assert_eq!(values(&dx), expected);
}

#[test]
fn taps_of_one_value_are_joined_without_stored_groups() {
    // The 49 taps of a 7 x 7 window, and 25 shifted rows of one matrix: views of one value,
    // which a reduce over the tap axis reads in place (storing groups would copy it per tap).
    let x = common::ramp(&[1, 12, 12], 2.0);
    let taps = tensor::core::nn::windows(&x, &[7, 7], &[1, 1], &[1, 1]);
    let graph = taps.uop().toposort();
    assert!(graph.iter().all(|u| u.op() != Op::Contiguous));
    let m = common::ramp(&[40, 8], 1.0);
    let rows: Vec<Tensor> = (0..25).map(|k| m.narrow(0, k, 16)).collect();
    let summed = Tensor::stack(&rows, 0).sum(0, false);
    assert_eq!(create_schedule(&[summed.uop()]).items.len(), 1);
    common::assert_matches_interpreter("25 stacked views, summed", &summed);
}

#[test]
fn copies_of_one_tensor_are_joined_in_groups() {
    let x = Tensor::from_vec(vec![1.5f32, -2.0, 4.0], &[3]);
    let joined = Tensor::cat(&vec![x; 200], 0);
    assert_linear_in_parts(&joined, 200, 256);
    assert_eq!(values(&joined), [1.5, -2.0, 4.0].repeat(200));
}
