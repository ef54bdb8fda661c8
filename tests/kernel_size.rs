//! Kernel size: rendering is linear in a kernel's size, and the scheduler cuts fused chains
//! at `schedule::kernel_size::CHAIN_BUDGET` so that no kernel is too large for the C
//! compiler (issue 36, item 11). Each case took minutes, gigabytes or the 120 s compile limit
//! before: a 20,000-op chain rendered in 11 s and 7 GB, a 1,000-op chain of `sin` and `+ 1`
//! and a `cat` of 200 tensors were each one kernel that `cc` compiled for minutes.

mod common;

use common::{assert_matches_interpreter, values};
use tensor::core::codegen::heuristic::{UNROLL_CODE_LIMIT, code_size, hand_coded_optimizations};
use tensor::core::codegen::{CodegenOptions, Opt, lower_kernel};
use tensor::core::render::c::{MAX_INLINE_CHARS, render_kernel};
use tensor::core::schedule::create_schedule;
use tensor::core::schedule::kernel_size::{CHAIN_BUDGET, PAD_COST, code_cost};
use tensor::core::{Arg, AxisType, DType, Op, UOp};
use tensor::prelude::*;

/// One kernel computing `x[i] * x[i] + 1`, then `v * x[i] + 1` `steps - 1` more times, over
/// 4 elements (built as a kernel AST, past the scheduler's cut).
fn chain_kernel(steps: usize) -> UOp {
    let range = UOp::range(4, 0, AxisType::Loop);
    let address = |slot: i64| {
        let global = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(slot));
        UOp::new(
            Op::Address,
            DType::F32,
            vec![global, range.clone()],
            Arg::None,
        )
    };
    let x = UOp::new(Op::Load, DType::F32, vec![address(1)], Arg::None);
    let one = UOp::constant(1.0, DType::F32);
    let mut v = x.clone();
    for _ in 0..steps {
        let product = UOp::alu(Op::Mul, vec![v, x.clone()]);
        v = UOp::alu(Op::Add, vec![product, one.clone()]);
    }
    let store = UOp::new(Op::Store, DType::Void, vec![address(0), v], Arg::None);
    UOp::sink(vec![store])
}

/// The C source of [`chain_kernel`] of `steps` steps.
fn rendered_chain(steps: usize) -> String {
    let ast = chain_kernel(steps);
    render_kernel(&lower_kernel(&ast, &[4, 4], &CodegenOptions::default())).source
}

#[test]
fn rendering_a_long_chain_is_linear_in_its_length() {
    // 20,000 and 40,000 ops in one kernel: quadratic rendering copied every prefix of the
    // nested expression (7 GB at 20,000 ops).
    let (short, long) = (rendered_chain(10_000), rendered_chain(20_000));
    let ratio = long.len() as f64 / short.len() as f64;
    assert!(
        (1.9..=2.1).contains(&ratio),
        "twice the ops gave {ratio:.3} times the source ({} and {} bytes)",
        short.len(),
        long.len()
    );
    // No expression nests deeper than one named value's worth of text.
    let widest = long.lines().map(str::len).max().unwrap_or(0);
    assert!(
        widest <= 2 * MAX_INLINE_CHARS + 64,
        "a line of {widest} characters"
    );
}

#[test]
fn a_long_kernel_is_not_unrolled() {
    let long = chain_kernel(2_000);
    assert!(code_size(&long) > UNROLL_CODE_LIMIT);
    let opts = hand_coded_optimizations(&long, 1, 8);
    assert!(
        opts.iter()
            .all(|o| !matches!(o, Opt::Split { target, .. } if *target != AxisType::Thread)),
        "{opts:?}"
    );
    // A short one still is (the 4-wide upcast of a tiny kernel).
    let short = chain_kernel(4);
    assert!(!hand_coded_optimizations(&short, 1, 8).is_empty());
}

/// `x`, then `sin` and `+ 1` alternately, `pairs` times each.
fn sin_chain(pairs: usize) -> Tensor {
    let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 30.0], &[4]);
    (0..pairs).fold(x, |y, _| &y.sin() + 1.0)
}

#[test]
fn a_sin_chain_is_cut_where_its_path_reaches_the_budget() {
    // A kernel's path: one load, then 141 ops per pair (the sin's decomposition and the add).
    let pair = code_cost(Op::Sin, DType::F32) + 1;
    let per_kernel = ((CHAIN_BUDGET - 1) / pair) as usize;
    assert_eq!(per_kernel, 14);
    let kernels = |pairs| create_schedule(&[sin_chain(pairs).uop()]).items.len();
    assert_eq!(
        kernels(per_kernel),
        1,
        "a chain within the budget stays one kernel"
    );
    assert_eq!(kernels(per_kernel + 1), 2);
    // The 1,000 ops: 500 pairs in kernels of 14.
    assert_eq!(kernels(500), 500_usize.div_ceil(per_kernel));
}

#[test]
fn a_cut_sin_chain_computes_what_the_interpreter_does() {
    // 36 kernels, compiled in seconds (one kernel took `cc` past the 120 s limit).
    assert_matches_interpreter("500 x (sin, + 1)", &sin_chain(500));
}

#[test]
fn a_cat_of_many_tensors_is_cut_into_kernels_of_few_gated_loads() {
    let n = 400;
    let parts: Vec<Tensor> = (0..n)
        .map(|i| Tensor::from_vec(vec![i as f32, -(i as f32)], &[2]))
        .collect();
    let joined = Tensor::cat(&parts, 0);
    let schedule = create_schedule(&[joined.uop()]);
    // A cat of many parts is joined in stored groups of 16 (`tensor::indexing`), well inside
    // the bound a kernel-size cut of one padded sum gives (a padded load and an add per step).
    let per_kernel = (CHAIN_BUDGET / (PAD_COST + 2)) as usize;
    assert!(
        schedule.items.len() >= n / per_kernel,
        "{}",
        schedule.items.len()
    );
    for item in &schedule.items {
        assert!(
            item.buffers.len() <= per_kernel + 3,
            "a kernel reads {} buffers",
            item.buffers.len() - 1
        );
    }
    let expected: Vec<f64> = (0..n).flat_map(|i| [i as f64, -(i as f64)]).collect();
    assert_eq!(values(&joined), expected);
}

#[test]
fn nested_diamonds_are_not_counted_once_per_path() {
    // y ← y·y / (y + 1), 30 times: as a tree 2^30 leaves, as a graph 90 ops in one kernel.
    let x = Tensor::from_vec(vec![0.5f32, 1.0, 2.0, 8.0], &[4]);
    let y = (0..30).fold(x, |y, _| &(&y * &y) / &(&y + 1.0));
    assert_eq!(create_schedule(&[y.uop()]).items.len(), 1);
    assert_matches_interpreter("30 nested diamonds", &y);
}
