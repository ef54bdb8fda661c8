//! Shared helpers of the front-end tests: evaluate a tensor with the reference interpreter and
//! compare it with values computed independently.
#![allow(dead_code)]

use ndarray::ArrayD;
use tensor_core::interp::evaluate;
use tensor_core::{DType, Tensor};

/// The tensor's elements in row-major order, as f64 (bools are 0 and 1).
pub fn values(t: &Tensor) -> Vec<f64> {
    let out = evaluate(&t.uop());
    assert_eq!(
        out.shape,
        t.shape(),
        "interpreter shape differs from the front end's"
    );
    assert_eq!(
        out.dtype,
        t.dtype(),
        "interpreter dtype differs from the front end's"
    );
    out.data.iter().map(|s| s.as_f64()).collect()
}

/// The tensor's elements as i64 (exact for integer tensors).
pub fn ints(t: &Tensor) -> Vec<i64> {
    let out = evaluate(&t.uop());
    assert_eq!(out.shape, t.shape());
    out.data.iter().map(|s| s.as_i64()).collect()
}

/// The tensor's elements as bools (panics unless it is a bool tensor).
pub fn bools(t: &Tensor) -> Vec<bool> {
    assert_eq!(t.dtype(), DType::Bool);
    let out = evaluate(&t.uop());
    out.data.iter().map(|s| s.as_bool()).collect()
}

/// The tensor as an f64 ndarray of its shape.
pub fn array(t: &Tensor) -> ArrayD<f64> {
    ArrayD::from_shape_vec(t.shape(), values(t)).expect("values fill the shape")
}

/// True when `a` and `b` agree within `atol + rtol * |b|` (NaNs agree with NaNs, infinities
/// with equal infinities).
pub fn close(a: f64, b: f64, rtol: f64, atol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= atol + rtol * b.abs()
}

/// Asserts the tensor has `shape` and elements close to `expected` (f32 tolerances).
#[track_caller]
pub fn assert_close(t: &Tensor, shape: &[usize], expected: &[f64]) {
    assert_close_tol(t, shape, expected, 1e-5, 1e-6);
}

/// Asserts the tensor has `shape` and elements within the given tolerances of `expected`.
#[track_caller]
pub fn assert_close_tol(t: &Tensor, shape: &[usize], expected: &[f64], rtol: f64, atol: f64) {
    assert_eq!(t.shape(), shape, "shape");
    let got = values(t);
    assert_eq!(got.len(), expected.len(), "element count");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            close(*g, *e, rtol, atol),
            "element {i}: got {g}, expected {e}\n got: {got:?}\nwant: {expected:?}"
        );
    }
}

/// Asserts the tensor has `shape` and exactly the integer elements `expected`.
#[track_caller]
pub fn assert_ints(t: &Tensor, shape: &[usize], expected: &[i64]) {
    assert_eq!(t.shape(), shape, "shape");
    assert_eq!(ints(t), expected);
}

/// Asserts the tensor is a bool tensor of `shape` with elements `expected`.
#[track_caller]
pub fn assert_bools(t: &Tensor, shape: &[usize], expected: &[bool]) {
    assert_eq!(t.shape(), shape, "shape");
    assert_eq!(bools(t), expected);
}

/// An f32 tensor of `shape` holding `data`.
pub fn f32s(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape)
}

/// An f32 tensor of `shape` with the values `0.5 * i - 3` (distinct, mixed signs).
pub fn ramp(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| 0.5 * i as f32 - 3.0).collect();
    Tensor::from_vec(data, shape)
}

/// The same values as [`ramp`] as an ndarray.
pub fn ramp_array(shape: &[usize]) -> ArrayD<f64> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        shape.to_vec(),
        (0..n).map(|i| 0.5 * i as f64 - 3.0).collect(),
    )
    .unwrap()
}
