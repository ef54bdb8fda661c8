//! Movement ops evaluated by the reference interpreter, compared with ndarray.

mod frontend_common;

use frontend_common::*;
use ndarray::{ArrayD, Axis, IxDyn, Slice};
use tensor_core::{DType, Tensor};

fn flat(a: &ArrayD<f64>) -> Vec<f64> {
    a.iter().copied().collect()
}

#[test]
fn reshape_keeps_row_major_order_and_infers_one_size() {
    let x = ramp(&[2, 3, 4]);
    let want = flat(&ramp_array(&[2, 3, 4]));
    assert_close(&x.reshape(&[4, -1]), &[4, 6], &want);
    assert_close(&x.reshape(&[24]), &[24], &want);
    assert_close(&x.reshape(&[-1, 1, 2]), &[12, 1, 2], &want);
    assert_close(
        &Tensor::zeros(&[0, 3], DType::F32).reshape(&[3, 0]),
        &[3, 0],
        &[],
    );
    assert_close(&Tensor::scalar(5.0f32).reshape(&[1, 1]), &[1, 1], &[5.0]);
}

#[test]
fn permute_and_transpose_match_ndarray() {
    let x = ramp(&[2, 3, 4]);
    let a = ramp_array(&[2, 3, 4]);
    let p = a.clone().permuted_axes(IxDyn(&[2, 0, 1]));
    assert_close(&x.permute(&[2, 0, 1]), &[4, 2, 3], &flat(&p));
    assert_close(&x.permute(&[-1, 0, -2]), &[4, 2, 3], &flat(&p));
    let mut swapped = a.clone();
    swapped.swap_axes(0, 2);
    assert_close(&x.transpose(0, -1), &[4, 3, 2], &flat(&swapped));
}

#[test]
fn expand_broadcasts_and_adds_leading_axes() {
    let col = f32s(&[1.0, 2.0], &[2, 1]);
    assert_close(
        &col.expand(&[2, 3]),
        &[2, 3],
        &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
    );
    assert_close(
        &col.expand(&[2, -1, 2]),
        &[2, 2, 2],
        &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0],
    );
    assert_close(&col.expand(&[2, 0]), &[2, 0], &[]);
    assert_close(&Tensor::scalar(3.0f32).expand(&[2]), &[2], &[3.0, 3.0]);
}

#[test]
fn pad_adds_zeros_or_a_value() {
    let x = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_close(
        &x.pad(&[(1, 0), (0, 1)]),
        &[3, 3],
        &[0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0],
    );
    assert_close(
        &x.pad_value(&[(0, 0), (1, 1)], -1.0),
        &[2, 4],
        &[-1.0, 1.0, 2.0, -1.0, -1.0, 3.0, 4.0, -1.0],
    );
    let b = Tensor::from_vec(vec![true], &[1]);
    assert_bools(&b.pad(&[(1, 1)]), &[3], &[false, true, false]);
    assert_ints(
        &Tensor::from_vec(vec![5i32], &[1]).pad_value(&[(2, 0)], 7),
        &[3],
        &[7, 7, 5],
    );
}

#[test]
fn shrink_slice_and_narrow_match_ndarray_slicing() {
    let x = ramp(&[4, 5]);
    let a = ramp_array(&[4, 5]);
    let want = |axis: usize, s: Slice| flat(&a.slice_axis(Axis(axis), s).to_owned());
    assert_close(
        &x.shrink(&[(1, 3), (0, 5)]),
        &[2, 5],
        &want(0, Slice::from(1..3)),
    );
    assert_close(&x.slice(1, 1, -1), &[4, 3], &want(1, Slice::from(1..4)));
    assert_close(&x.slice(-1, -2, 100), &[4, 2], &want(1, Slice::from(3..5)));
    assert_close(&x.slice(0, 3, 1), &[0, 5], &[]);
    assert_close(&x.slice(0, -100, 1), &[1, 5], &want(0, Slice::from(0..1)));
    assert_close(&x.narrow(1, -3, 2), &[4, 2], &want(1, Slice::from(2..4)));
    assert_close(&x.narrow(0, 4, 0), &[0, 5], &[]);
}

#[test]
fn flip_reverses_the_chosen_axes() {
    let x = ramp(&[2, 3]);
    let a = ramp_array(&[2, 3]);
    let rev =
        |ax: usize, arr: &ArrayD<f64>| arr.slice_axis(Axis(ax), Slice::new(0, None, -1)).to_owned();
    assert_close(&x.flip(0), &[2, 3], &flat(&rev(0, &a)));
    assert_close(&x.flip(-1), &[2, 3], &flat(&rev(1, &a)));
    assert_close(&x.flip([0, 1]), &[2, 3], &flat(&rev(0, &rev(1, &a))));
}

#[test]
fn squeeze_unsqueeze_and_flatten_keep_the_elements() {
    let x = ramp(&[2, 1, 3]);
    let want = flat(&ramp_array(&[2, 1, 3]));
    assert_close(&x.squeeze(1), &[2, 3], &want);
    assert_close(&x.squeeze(-2).unsqueeze(-1), &[2, 3, 1], &want);
    assert_close(&x.unsqueeze(3), &[2, 1, 3, 1], &want);
    assert_close(&x.flatten(0, 1), &[2, 3], &want);
    assert_close(&x.flatten(1, 2), &[2, 3], &want);
    assert_close(&x.ravel(), &[6], &want);
}

#[test]
fn markers_keep_the_value() {
    let x = ramp(&[3]);
    let want = flat(&ramp_array(&[3]));
    assert_close(&x.contiguous(), &[3], &want);
    assert_close(&x.detach(), &[3], &want);
}
