//! Matrix products evaluated by the reference interpreter, compared with explicit loops.

mod frontend_common;

use frontend_common::*;
use tensor_core::{DType, Tensor};

/// `a[.., m, k] @ b[.., k, n]` for row-major batches that are already the same size.
fn batched_matmul(a: &[f64], b: &[f64], batch: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * n];
    for z in 0..batch {
        for i in 0..m {
            for j in 0..n {
                out[z * m * n + i * n + j] = (0..k)
                    .map(|p| a[z * m * k + i * k + p] * b[z * k * n + p * n + j])
                    .sum();
            }
        }
    }
    out
}

fn ramp_values(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 * i as f64 - 3.0).collect()
}

#[test]
fn matrix_times_matrix() {
    let c = ramp(&[2, 3]).matmul(&ramp(&[3, 4]));
    assert_close(
        &c,
        &[2, 4],
        &batched_matmul(&ramp_values(6), &ramp_values(12), 1, 2, 3, 4),
    );
}

#[test]
fn vectors_gain_and_lose_an_axis() {
    let v = ramp(&[3]);
    let m = ramp(&[3, 2]);
    assert_close(
        &v.matmul(&m),
        &[2],
        &batched_matmul(&ramp_values(3), &ramp_values(6), 1, 1, 3, 2),
    );
    let mt = ramp(&[2, 3]);
    assert_close(
        &mt.matmul(&v),
        &[2],
        &batched_matmul(&ramp_values(6), &ramp_values(3), 1, 2, 3, 1),
    );
    let dot: f64 = ramp_values(3).iter().map(|x| x * x).sum();
    assert_close(&v.matmul(&v), &[], &[dot]);
    assert_close(&v.dot(&v), &[], &[dot]);
}

#[test]
fn batch_axes_broadcast() {
    let a = ramp(&[2, 1, 2, 3]);
    let b = ramp(&[3, 3, 2]);
    let c = a.matmul(&b);
    assert_eq!(c.shape(), vec![2, 3, 2, 2]);
    let av = ramp_values(12);
    let bv = ramp_values(18);
    let mut want = Vec::new();
    for i in 0..2 {
        for j in 0..3 {
            want.extend(batched_matmul(
                &av[i * 6..i * 6 + 6],
                &bv[j * 6..j * 6 + 6],
                1,
                2,
                3,
                2,
            ));
        }
    }
    assert_close(&c, &[2, 3, 2, 2], &want);
    let shared = ramp(&[3, 2]);
    let batched = ramp(&[4, 2, 3]).matmul(&shared);
    let mut want = Vec::new();
    for z in 0..4 {
        want.extend(batched_matmul(
            &ramp_values(24)[z * 6..z * 6 + 6],
            &ramp_values(6),
            1,
            2,
            3,
            2,
        ));
    }
    assert_close(&batched, &[4, 2, 2], &want);
}

#[test]
fn empty_inner_axis_gives_zeros() {
    let c = Tensor::zeros(&[2, 0], DType::F32).matmul(&Tensor::zeros(&[0, 3], DType::F32));
    assert_close(&c, &[2, 3], &[0.0; 6]);
}

#[test]
fn integer_and_bool_products_keep_their_kind() {
    let a = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]);
    let b = Tensor::from_vec(vec![5i8, 6, 7, 8], &[2, 2]);
    let c = a.matmul(&b);
    assert_eq!(c.dtype(), DType::I32);
    assert_ints(&c, &[2, 2], &[19, 22, 43, 50]);
    let p = Tensor::from_vec(vec![true, false, false, false], &[2, 2]);
    let q = Tensor::from_vec(vec![false, true, true, false], &[2, 2]);
    assert_bools(&p.matmul(&q), &[2, 2], &[false, true, false, false]);
}
