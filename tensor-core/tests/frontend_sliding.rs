//! Windows that slide with a loop `Range` and reductions over ranges (the ops of vmap by
//! pad+reduce): their shapes, their values under the reference interpreter, and the panics
//! for windows that do not fit.

use tensor_core::interp::evaluate;
use tensor_core::transform::vmap::looped::batch_range;
use tensor_core::uop::spec;
use tensor_core::{Op, ReduceOp, Tensor, UOp};

fn matrix(rows: usize, cols: usize) -> Tensor {
    Tensor::from_vec((0..rows * cols).map(|i| i as f32).collect(), &[rows, cols])
}

fn values(t: &Tensor) -> Vec<f64> {
    evaluate(&t.uop()).to_f64_vec()
}

#[test]
fn a_sliding_window_keeps_its_size_for_every_value_of_the_range() {
    let r = batch_range(3);
    let window = matrix(5, 2).shrink_at(0, &r, 2);
    assert_eq!(window.shape(), vec![2, 2]);
    assert!(spec::check(&window.uop()).is_ok());
    // Σ_r rows r..r+2: row k is counted once per window that covers it (1, 2, 3, 2, 1 times).
    let summed = window.sum_over_ranges(std::slice::from_ref(&r));
    let expected: Vec<f64> = vec![
        0.0 + 2.0 + 4.0,
        1.0 + 3.0 + 5.0,
        2.0 + 4.0 + 6.0,
        3.0 + 5.0 + 7.0,
    ];
    assert_eq!(values(&summed), expected);
}

#[test]
fn padding_at_the_range_and_summing_over_it_stacks_the_samples() {
    let r = batch_range(4);
    let x = matrix(4, 3);
    let sample = x.shrink_at(0, &r, 1).mul(10.0);
    let placed = sample.pad_at(0, &r, 4);
    assert_eq!(placed.shape(), vec![4, 3]);
    let stacked = placed.sum_over_ranges(std::slice::from_ref(&r));
    assert_eq!(values(&stacked), values(&x.mul(10.0)));
}

#[test]
fn a_range_of_one_iteration_places_its_sample_at_a_constant_offset() {
    // Found by the property tests (vmap by pad+reduce of a batch of one, rank-0 sample):
    // `pad_at(0, r, 1)` with `r` in 0..1 had no shape (`r + (0 - r)` simplified to `r`).
    let r = batch_range(1);
    let x = matrix(1, 3);
    let sample = x.shrink_at(0, &r, 1).squeeze(0).sum_all().neg();
    let placed = sample.unsqueeze(0).pad_at(0, &r, 1);
    assert_eq!(placed.shape(), vec![1]);
    let stacked = placed.sum_over_ranges(std::slice::from_ref(&r));
    assert_eq!(values(&stacked), vec![-3.0]);
}

#[test]
fn other_reductions_over_a_range_combine_with_their_op() {
    let r = batch_range(3);
    let row = matrix(3, 2).shrink_at(0, &r, 1);
    assert_eq!(
        values(&row.reduce_over_ranges(ReduceOp::Max, std::slice::from_ref(&r))),
        vec![4.0, 5.0]
    );
    assert_eq!(
        values(
            &row.add(1.0)
                .reduce_over_ranges(ReduceOp::Mul, std::slice::from_ref(&r))
        ),
        vec![1.0 * 3.0 * 5.0, 2.0 * 4.0 * 6.0]
    );
}

#[test]
fn a_window_whose_size_varies_with_the_range_is_rejected_by_the_spec() {
    let r = batch_range(3);
    let x = matrix(6, 2).uop();
    let double_r = UOp::alu(Op::Add, vec![r.clone(), r.clone()]);
    let bad = x.window(
        Op::Shrink,
        vec![r.clone(), UOp::index(0)],
        vec![double_r, UOp::index(2)],
    );
    assert_eq!(bad.shape(), None);
    let err = spec::check(&bad).unwrap_err().to_string();
    assert!(err.contains("size varies with the range"), "{err}");
}

#[test]
#[should_panic(
    expected = "shrink_at: the window [start, start + 2) with start in [0, 3] leaves axis 0 of shape [4, 2]"
)]
fn a_window_sliding_past_the_end_panics() {
    matrix(4, 2).shrink_at(0, &batch_range(4), 2);
}

#[test]
#[should_panic(
    expected = "pad_at: axis 0 of shape [2, 2] placed at offset [0, 2] does not fit in size 3"
)]
fn a_pad_that_does_not_fit_panics() {
    matrix(2, 2).pad_at(0, &batch_range(3), 3);
}

#[test]
#[should_panic(expected = "reduce_over_ranges: every operand must be a Range, got Const")]
fn a_reduce_over_something_else_than_a_range_panics() {
    matrix(2, 2).sum_over_ranges(&[UOp::index(0)]);
}
