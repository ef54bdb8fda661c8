//! Reductions and cumulative sums evaluated by the reference interpreter.

mod frontend_common;

use frontend_common::*;
use ndarray::{ArrayD, Axis};
use tensor_core::{DType, Tensor};

fn flat(a: &ArrayD<f64>) -> Vec<f64> {
    a.iter().copied().collect()
}

fn fold_axis(a: &ArrayD<f64>, axis: usize, init: f64, f: fn(f64, f64) -> f64) -> ArrayD<f64> {
    a.fold_axis(Axis(axis), init, |&acc, &v| f(acc, v))
}

#[test]
fn sum_over_axes_with_and_without_keepdim() {
    let x = ramp(&[2, 3, 4]);
    let a = ramp_array(&[2, 3, 4]);
    assert_close(&x.sum(1, false), &[2, 4], &flat(&a.sum_axis(Axis(1))));
    assert_close(&x.sum(-1, true), &[2, 3, 1], &flat(&a.sum_axis(Axis(2))));
    assert_close(
        &x.sum([0, 2], false),
        &[3],
        &flat(&a.sum_axis(Axis(2)).sum_axis(Axis(0))),
    );
    assert_close(&x.sum_all(), &[], &[a.sum()]);
    assert_close(
        &Tensor::zeros(&[0, 3], DType::F32).sum(0, false),
        &[3],
        &[0.0; 3],
    );
    assert_close(
        &Tensor::ones(&[2, 0], DType::F32).sum(1, true),
        &[2, 1],
        &[0.0; 2],
    );
}

#[test]
fn sums_of_bools_and_small_ints_count_in_wider_ints() {
    let b = Tensor::from_vec(vec![true, false, true, true], &[2, 2]);
    let s = b.sum(1, false);
    assert_eq!(s.dtype(), DType::I32);
    assert_ints(&s, &[2], &[1, 2]);
    let small = Tensor::from_vec(vec![100i8, 100, 100], &[3]);
    assert_ints(&small.sum_all(), &[], &[300]);
    let u = Tensor::from_vec(vec![200u8, 200], &[2]);
    assert_ints(&u.sum_all(), &[], &[400]);
    assert_ints(
        &Tensor::from_vec(vec![3i64, 4], &[2]).prod_all(),
        &[],
        &[12],
    );
}

#[test]
fn max_min_prod_and_mean_match_folds() {
    let x = ramp(&[3, 4]);
    let a = ramp_array(&[3, 4]);
    assert_close(
        &x.max(0, false),
        &[4],
        &flat(&fold_axis(&a, 0, f64::MIN, f64::max)),
    );
    assert_close(
        &x.min(-1, true),
        &[3, 1],
        &flat(&fold_axis(&a, 1, f64::MAX, f64::min)),
    );
    assert_close(
        &x.prod(1, false),
        &[3],
        &flat(&fold_axis(&a, 1, 1.0, |p, v| p * v)),
    );
    assert_close(
        &x.mean(0, false),
        &[4],
        &flat(&a.mean_axis(Axis(0)).unwrap()),
    );
    assert_close(&x.mean_all(), &[], &[a.mean().unwrap()]);
    assert_close(&x.max_all(), &[], &[2.5]);
    assert_close(&x.min_all(), &[], &[-3.0]);
    assert_close(
        &Tensor::zeros(&[0], DType::F32).mean_all(),
        &[],
        &[f64::NAN],
    );
    let i = Tensor::from_vec(vec![i32::MIN, 5, i32::MAX, -2], &[2, 2]);
    assert_ints(&i.min(1, false), &[2], &[i32::MIN as i64, -2]);
    assert_ints(&i.max(0, false), &[2], &[i32::MAX as i64, 5]);
    let u = Tensor::from_vec(vec![0u8, 9, 255, 3], &[4]);
    assert_ints(&u.min_all(), &[], &[0]);
    assert_ints(&u.max_all(), &[], &[255]);
    assert_close(
        &Tensor::from_vec(vec![1i32, 2], &[2]).mean_all(),
        &[],
        &[1.5],
    );
}

#[test]
fn any_and_all_reduce_truth_values() {
    let x = Tensor::from_vec(vec![0i32, 0, 1, 2, 0, 3], &[2, 3]);
    assert_bools(&x.any(1, false), &[2], &[true, true]);
    assert_bools(&x.all(1, false), &[2], &[false, false]);
    assert_bools(&x.all(0, false), &[3], &[false, false, true]);
    assert_bools(&x.any(0, true), &[1, 3], &[true, false, true]);
    let b = Tensor::from_vec(vec![true, false], &[2]);
    assert_bools(&b.max_all(), &[], &[true]);
    assert_bools(&b.min_all(), &[], &[false]);
}

#[test]
fn argmax_and_argmin_find_the_first_extreme() {
    let x = f32s(&[1.0, 5.0, 5.0, 2.0, 0.0, -1.0, 0.0, -1.0], &[2, 4]);
    assert_ints(&x.argmax(1, false), &[2], &[1, 0]);
    assert_ints(&x.argmin(-1, false), &[2], &[0, 1]);
    assert_ints(&x.argmax(0, true), &[1, 4], &[0, 0, 0, 0]);
    assert_ints(&x.argmin(0, false), &[4], &[1, 1, 1, 1]);
    assert_ints(&x.argmax_all(), &[], &[1]);
    assert_ints(&x.argmin_all(), &[], &[5]);
    let i = Tensor::from_vec(vec![3i64, -7, 9, 9], &[4]);
    assert_ints(&i.argmax(0, false), &[], &[2]);
    assert_ints(&i.argmin(0, false), &[], &[1]);
    let u = Tensor::from_vec(vec![3u8, 0, 255], &[3]);
    assert_ints(&u.argmin_all(), &[], &[1]);
    assert_ints(&u.argmax_all(), &[], &[2]);
    assert_ints(
        &Tensor::from_vec(vec![4.0f32], &[1]).argmax(0, false),
        &[],
        &[0],
    );
}

#[test]
fn cumsum_is_the_running_sum_along_any_axis() {
    let x = ramp(&[3, 4]);
    let a = ramp_array(&[3, 4]);
    let mut along0 = a.clone();
    along0.accumulate_axis_inplace(Axis(0), |&prev, cur| *cur += prev);
    let mut along1 = a.clone();
    along1.accumulate_axis_inplace(Axis(1), |&prev, cur| *cur += prev);
    assert_close(&x.cumsum(0), &[3, 4], &flat(&along0));
    assert_close(&x.cumsum(-1), &[3, 4], &flat(&along1));
    assert_close(&f32s(&[2.0], &[1]).cumsum(0), &[1], &[2.0]);
    assert_close(&Tensor::zeros(&[0, 2], DType::F32).cumsum(0), &[0, 2], &[]);
    let b = Tensor::from_vec(vec![true, false, true, true], &[4]);
    assert_ints(&b.cumsum(0), &[4], &[1, 1, 2, 3]);
    let long: Vec<f32> = (1..=50).map(|v| v as f32).collect();
    let want: Vec<f64> = (1..=50).map(|v| (v * (v + 1) / 2) as f64).collect();
    assert_close(&Tensor::from_vec(long, &[50]).cumsum(0), &[50], &want);
}

#[test]
fn variance_and_standard_deviation_are_the_population_ones() {
    let x = ramp(&[3, 4]);
    let a = ramp_array(&[3, 4]);
    let var1 = a.var_axis(Axis(1), 0.0);
    assert_close(&x.var(1, false), &[3], &flat(&var1));
    assert_close(&x.std(-1, true), &[3, 1], &flat(&var1.mapv(f64::sqrt)));
    assert_close(&x.var([0, 1], false), &[], &[a.var(0.0)]);
    let i = Tensor::from_vec(vec![1i32, 3], &[2]);
    assert_close(&i.var(0, false), &[], &[1.0]);
}

#[test]
fn argmax_and_argmin_point_at_the_first_nan_as_numpy_does() {
    let x = f32s(&[1.0, f32::NAN, 3.0, f32::NAN], &[4]);
    assert_ints(&x.argmax(0, false), &[], &[1]);
    assert_ints(&x.argmin(0, false), &[], &[1]);
}
