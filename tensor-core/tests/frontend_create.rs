//! Constructors evaluated by the reference interpreter.

mod frontend_common;

use frontend_common::*;
use ndarray::{Array2, ArrayD, Axis, IxDyn, s};
use tensor_core::{DType, Tensor};

#[test]
fn from_array_reads_any_layout_in_logical_order() {
    let a = Array2::from_shape_fn((2, 3), |(i, j)| (10 * i + j) as f32);
    assert_close(
        &Tensor::from_array(&a),
        &[2, 3],
        &[0.0, 1.0, 2.0, 10.0, 11.0, 12.0],
    );
    let transposed = a.t();
    assert_close(
        &Tensor::from_array(&transposed),
        &[3, 2],
        &[0.0, 10.0, 1.0, 11.0, 2.0, 12.0],
    );
    let strided = a.slice(s![.., ..;2]);
    assert_close(
        &Tensor::from_array(&strided),
        &[2, 2],
        &[0.0, 2.0, 10.0, 12.0],
    );
    let reversed = a.slice(s![..;-1, ..]);
    assert_close(
        &Tensor::from_array(&reversed),
        &[2, 3],
        &[10.0, 11.0, 12.0, 0.0, 1.0, 2.0],
    );
    let dynamic: ArrayD<i64> = ArrayD::from_shape_vec(IxDyn(&[2, 1, 2]), vec![1, 2, 3, 4]).unwrap();
    let t = Tensor::from_array(&dynamic.view().permuted_axes(IxDyn(&[2, 1, 0])));
    assert_eq!(t.dtype(), DType::I64);
    assert_ints(&t, &[2, 1, 2], &[1, 3, 2, 4]);
    let column = a.index_axis(Axis(1), 1);
    assert_close(&Tensor::from_array(&column), &[2], &[1.0, 11.0]);
}

#[test]
fn full_zeros_ones_and_scalar_hold_their_value_in_every_dtype() {
    for dtype in DType::ALL_VALUE_TYPES {
        let ones = Tensor::ones(&[2, 3], dtype);
        assert_eq!(ones.dtype(), dtype);
        assert_close(&ones, &[2, 3], &[1.0; 6]);
        assert_close(&Tensor::zeros(&[3], dtype), &[3], &[0.0; 3]);
    }
    assert_close(&Tensor::full(&[2, 2], 2.5, DType::F16), &[2, 2], &[2.5; 4]);
    assert_ints(&Tensor::full(&[3], 300, DType::U8), &[3], &[44; 3]);
    assert_close(&Tensor::full(&[0, 3], 1.0, DType::F32), &[0, 3], &[]);
    assert_close(&Tensor::scalar(1.5f64), &[], &[1.5]);
    assert_ints(&Tensor::scalar(-7i32), &[], &[-7]);
    let x = Tensor::from_vec(vec![1i16, 2, 3], &[3]);
    assert_ints(&x.full_like(9), &[3], &[9, 9, 9]);
    assert_eq!(x.zeros_like().dtype(), DType::I16);
}

#[test]
fn arange_counts_from_zero_for_every_length() {
    for n in [
        0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 24, 25, 26, 99, 100, 1000, 4099,
    ] {
        let expected: Vec<i64> = (0..n as i64).collect();
        assert_ints(&Tensor::arange(n), &[n], &expected);
    }
}

#[test]
fn arange_with_start_and_step_matches_numpy() {
    assert_ints(&Tensor::arange((0, 10, 3)), &[4], &[0, 3, 6, 9]);
    assert_ints(&Tensor::arange((5, 0, -2)), &[3], &[5, 3, 1]);
    assert_ints(&Tensor::arange((-3, 2, 1)), &[5], &[-3, -2, -1, 0, 1]);
    assert_ints(&Tensor::arange((3, 3, 1)), &[0], &[]);
    assert_close(
        &Tensor::arange((0.0f32, 1.0, 0.25)),
        &[4],
        &[0.0, 0.25, 0.5, 0.75],
    );
    assert_close(
        &Tensor::arange((1.0, 2.0, 0.3)),
        &[4],
        &[1.0, 1.3, 1.6, 1.9],
    );
}

#[test]
fn eye_is_the_identity() {
    assert_close(
        &Tensor::eye(3, DType::F32),
        &[3, 3],
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    );
    assert_close(&Tensor::eye(1, DType::F32), &[1, 1], &[1.0]);
    assert_close(&Tensor::eye(0, DType::F32), &[0, 0], &[]);
}

#[test]
fn rand_is_uniform_in_the_unit_interval_and_determined_by_the_seed() {
    let a = values(&Tensor::rand(&[64, 64], 7));
    assert!(a.iter().all(|&v| (0.0..1.0).contains(&v)));
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
    let below_quarter = a.iter().filter(|&&v| v < 0.25).count() as f64 / a.len() as f64;
    assert!(
        (below_quarter - 0.25).abs() < 0.02,
        "P(x < 1/4) = {below_quarter}"
    );
    assert_eq!(a, values(&Tensor::rand(&[64, 64], 7)));
    assert_ne!(a, values(&Tensor::rand(&[64, 64], 8)));
    let distinct: std::collections::HashSet<u64> = a.iter().map(|v| v.to_bits()).collect();
    assert!(distinct.len() > a.len() * 99 / 100);
    assert_eq!(Tensor::rand(&[0], 1).numel(), 0);
}

#[test]
fn randn_has_zero_mean_and_unit_variance() {
    let x = values(&Tensor::randn(&[8192], 3));
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    assert!(mean.abs() < 0.05, "mean {mean}");
    assert!((var - 1.0).abs() < 0.06, "variance {var}");
    let within_one = x.iter().filter(|v| v.abs() < 1.0).count() as f64 / n;
    assert!(
        (within_one - 0.6827).abs() < 0.03,
        "P(|x| < 1) = {within_one}"
    );
    assert!(x.iter().all(|v| v.is_finite()));
    assert_eq!(Tensor::randn(&[2, 3], 1).shape(), vec![2, 3]);
}

#[test]
fn randn_with_a_key_tensor_draws_what_randn_draws_with_that_seed() {
    let keyed = values(&Tensor::randn_with_key(&[4, 256], &Tensor::scalar(9u64)));
    assert_eq!(keyed, values(&Tensor::randn(&[4, 256], 9)));
    let other = values(&Tensor::randn_with_key(&[4, 256], &Tensor::scalar(10u64)));
    assert_ne!(keyed, other);
}

#[test]
#[should_panic(expected = "randn_with_key: the key must be a 0-d u64 tensor")]
fn randn_with_key_rejects_a_key_that_is_not_a_u64_scalar() {
    Tensor::randn_with_key(&[3], &Tensor::scalar(1.0f32));
}
