//! Elementwise ops evaluated by the reference interpreter.

mod frontend_common;

use frontend_common::*;
use tensor_core::{DType, Tensor};

fn map(t: &[f64], f: impl Fn(f64) -> f64) -> Vec<f64> {
    t.iter().map(|&x| f(x)).collect()
}

#[test]
fn arithmetic_broadcasts_between_tensors() {
    let col = f32s(&[1.0, 2.0, 3.0], &[3, 1]);
    let row = f32s(&[10.0, 20.0], &[2]);
    assert_close(
        &(&col + &row),
        &[3, 2],
        &[11.0, 21.0, 12.0, 22.0, 13.0, 23.0],
    );
    assert_close(
        &(&col - &row),
        &[3, 2],
        &[-9.0, -19.0, -8.0, -18.0, -7.0, -17.0],
    );
    assert_close(
        &(&col * &row),
        &[3, 2],
        &[10.0, 20.0, 20.0, 40.0, 30.0, 60.0],
    );
    assert_close(
        &(&row / &col),
        &[3, 2],
        &[10.0, 20.0, 5.0, 10.0, 10.0 / 3.0, 20.0 / 3.0],
    );
    let scalar = Tensor::scalar(2.0f32);
    assert_close(&(col.clone() * scalar), &[3, 1], &[2.0, 4.0, 6.0]);
    let empty = Tensor::zeros(&[0, 1], DType::F32);
    assert_close(&(&empty + &row), &[0, 2], &[]);
}

#[test]
fn scalars_work_on_either_side_of_owned_and_borrowed_tensors() {
    let a = f32s(&[1.0, 2.0, 4.0], &[3]);
    assert_close(&(&a + 2.0), &[3], &[3.0, 4.0, 6.0]);
    assert_close(&(a.clone() + 2), &[3], &[3.0, 4.0, 6.0]);
    assert_close(&(&a * 3.0f32), &[3], &[3.0, 6.0, 12.0]);
    assert_close(&(&a - 1i64), &[3], &[0.0, 1.0, 3.0]);
    assert_close(&(&a / 2.0), &[3], &[0.5, 1.0, 2.0]);
    assert_close(&(2.0 - &a), &[3], &[1.0, 0.0, -2.0]);
    assert_close(&(1 - a.clone()), &[3], &[0.0, -1.0, -3.0]);
    assert_close(&(8.0 / &a), &[3], &[8.0, 4.0, 2.0]);
    assert_close(&(3 * &a), &[3], &[3.0, 6.0, 12.0]);
    assert_close(&(10.0 + a.clone()), &[3], &[11.0, 12.0, 14.0]);
    assert_close(&-&a, &[3], &[-1.0, -2.0, -4.0]);
    assert_close(&(-a), &[3], &[-1.0, -2.0, -4.0]);
}

#[test]
fn weak_scalars_keep_the_tensor_dtype_or_lift_ints_to_f32() {
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]);
    let lifted = &i * 0.5;
    assert_eq!(lifted.dtype(), DType::F32);
    assert_close(&lifted, &[3], &[0.5, 1.0, 1.5]);
    let u = Tensor::from_vec(vec![250u8, 5], &[2]);
    assert_ints(&(&u + 10), &[2], &[4, 15]);
    let h = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).cast(DType::F16);
    assert_eq!((&h * 1.1).dtype(), DType::F16);
    assert_close_tol(&(&h * 1.1), &[2], &[1.1, 2.2], 1e-3, 0.0);
    let b = Tensor::from_vec(vec![true, false], &[2]);
    assert_ints(&(&b + 1), &[2], &[2, 1]);
    assert_bools(&(&b + &b), &[2], &[true, false]);
    assert_bools(
        &(&b * &Tensor::from_vec(vec![true, true], &[2])),
        &[2],
        &[true, false],
    );
}

#[test]
fn integer_tensors_promote_and_divide_truly() {
    let a = Tensor::from_vec(vec![7i32, -7, 6], &[3]);
    let b = Tensor::from_vec(vec![2i8, 2, 4], &[3]);
    let q = &a / &b;
    assert_eq!(q.dtype(), DType::F32);
    assert_close(&q, &[3], &[3.5, -3.5, 1.5]);
    let sum = &a + &b;
    assert_eq!(sum.dtype(), DType::I32);
    assert_ints(&sum, &[3], &[9, -5, 10]);
    let mixed = &a + &f32s(&[0.5, 0.5, 0.5], &[3]);
    assert_close(&mixed, &[3], &[7.5, -6.5, 6.5]);
}

#[test]
fn floor_division_and_remainder_follow_python() {
    let a = Tensor::from_vec(vec![7i32, -7, 7, -7, 6, 0], &[6]);
    let b = Tensor::from_vec(vec![2i32, 2, -2, -2, 3, 5], &[6]);
    assert_ints(&a.floor_div(&b), &[6], &[3, -4, -4, 3, 2, 0]);
    assert_ints(&a.remainder(&b), &[6], &[1, 1, -1, -1, 0, 0]);
    assert_ints(&(&a % &b), &[6], &[1, 1, -1, -1, 0, 0]);
    let u = Tensor::from_vec(vec![7u32, 9], &[2]);
    assert_ints(&u.floor_div(2), &[2], &[3, 4]);
    assert_ints(&(&u % 4), &[2], &[3, 1]);
    let x = f32s(&[7.5, -7.5, 7.5, -7.5], &[4]);
    let y = f32s(&[2.0, 2.0, -2.0, -2.0], &[4]);
    assert_close(&x.floor_div(&y), &[4], &[3.0, -4.0, -4.0, 3.0]);
    assert_close(&x.remainder(&y), &[4], &[1.5, 0.5, -0.5, -1.5]);
}

#[test]
fn transcendental_functions_match_std() {
    let xs = [-2.5, -1.0, -0.1, 0.0, 0.3, 1.0, 2.0, 7.5];
    let x = Tensor::from_vec(xs.iter().map(|&v| v as f32).collect(), &[8]);
    let tol = |t: &Tensor, f: fn(f64) -> f64| assert_close_tol(t, &[8], &map(&xs, f), 1e-5, 1e-6);
    tol(&x.exp(), f64::exp);
    tol(&x.exp2(), f64::exp2);
    tol(&x.sin(), f64::sin);
    tol(&x.cos(), f64::cos);
    tol(&x.tanh(), f64::tanh);
    tol(&x.sigmoid(), |v| 1.0 / (1.0 + (-v).exp()));
    tol(&x.relu(), |v| v.max(0.0));
    tol(&x.abs(), f64::abs);
    tol(&x.square(), |v| v * v);
    tol(&x.sign(), |v| {
        if v > 0.0 {
            1.0
        } else if v < 0.0 {
            -1.0
        } else {
            0.0
        }
    });
    tol(&x.floor(), f64::floor);
    tol(&x.ceil(), f64::ceil);
    tol(&x.trunc(), f64::trunc);
    tol(&x.clamp(-1.0, 1.0), |v| v.clamp(-1.0, 1.0));
    let pos = [0.25, 1.0, 2.0, 10.0];
    let p = Tensor::from_vec(pos.iter().map(|&v| v as f32).collect(), &[4]);
    let ptol = |t: &Tensor, f: fn(f64) -> f64| assert_close_tol(t, &[4], &map(&pos, f), 1e-5, 1e-6);
    ptol(&p.log(), f64::ln);
    ptol(&p.log2(), f64::log2);
    ptol(&p.sqrt(), f64::sqrt);
    ptol(&p.rsqrt(), |v| 1.0 / v.sqrt());
    ptol(&p.recip(), |v| 1.0 / v);
    ptol(&p.tan(), f64::tan);
    let ints = Tensor::from_vec(vec![1i32, 4], &[2]);
    assert_close(&ints.sqrt(), &[2], &[1.0, 2.0]);
    assert_eq!(ints.exp().dtype(), DType::F32);
    assert_close(&f32s(&[0.0], &[1]).log(), &[1], &[f64::NEG_INFINITY]);
    assert_close(&f32s(&[-100.0, 100.0], &[2]).sigmoid(), &[2], &[0.0, 1.0]);
}

#[test]
fn pow_handles_signs_zero_and_constant_exponents() {
    let a = f32s(&[2.0, -2.0, -2.0, 0.0, 0.0, 4.0, -8.0, 9.0], &[8]);
    let b = f32s(&[3.0, 3.0, 2.0, 0.0, 2.0, 0.5, 0.5, -0.5], &[8]);
    assert_close(
        &a.pow(&b),
        &[8],
        &[8.0, -8.0, 4.0, 1.0, 0.0, 2.0, f64::NAN, 1.0 / 3.0],
    );
    let x = f32s(&[-3.0, 0.5, 4.0], &[3]);
    assert_close(&x.pow(2.0), &[3], &[9.0, 0.25, 16.0]);
    assert_close(&x.pow(3), &[3], &[-27.0, 0.125, 64.0]);
    assert_close(&x.pow(0), &[3], &[1.0, 1.0, 1.0]);
    assert_close(&x.pow(-1.0), &[3], &[-1.0 / 3.0, 2.0, 0.25]);
    assert_close(&x.abs().pow(0.5), &[3], &[3f64.sqrt(), 0.5f64.sqrt(), 2.0]);
    assert_close(
        &x.abs().pow(1.5),
        &[3],
        &[3f64.powf(1.5), 0.5f64.powf(1.5), 8.0],
    );
    let i = Tensor::from_vec(vec![-3i32, 2, 5], &[3]);
    let cubed = i.pow(3);
    assert_eq!(cubed.dtype(), DType::I32);
    assert_ints(&cubed, &[3], &[-27, 8, 125]);
    assert_ints(&i.pow(0), &[3], &[1, 1, 1]);
    let e = Tensor::from_vec(vec![2i32, 3, 0], &[3]);
    assert_ints(&i.pow(&e), &[3], &[9, 8, 1]);
    assert_close(
        &i.pow(0.5).cast(DType::F64).mul(0),
        &[3],
        &[f64::NAN, 0.0, 0.0],
    );
}

#[test]
fn maximum_and_minimum_are_exact_for_every_kind_of_dtype() {
    let a = f32s(&[1.0, -2.0, 3.0, f32::NAN], &[4]);
    let b = f32s(&[0.5, -1.0, 3.0, 1.0], &[4]);
    assert_close(&a.maximum(&b), &[4], &[1.0, -1.0, 3.0, f64::NAN]);
    assert_close(&a.minimum(&b), &[4], &[0.5, -2.0, 3.0, f64::NAN]);
    let u = Tensor::from_vec(vec![0u8, 255, 7], &[3]);
    let v = Tensor::from_vec(vec![3u8, 0, 7], &[3]);
    assert_ints(&u.minimum(&v), &[3], &[0, 0, 7]);
    assert_ints(&u.maximum(&v), &[3], &[3, 255, 7]);
    let s = Tensor::from_vec(vec![i32::MIN, i32::MAX, -1], &[3]);
    assert_ints(&s.minimum(0), &[3], &[i32::MIN as i64, 0, -1]);
    assert_ints(&s.maximum(0), &[3], &[0, i32::MAX as i64, 0]);
    let p = Tensor::from_vec(vec![true, true, false], &[3]);
    let q = Tensor::from_vec(vec![true, false, false], &[3]);
    assert_bools(&p.minimum(&q), &[3], &[true, false, false]);
    assert_bools(&p.maximum(&q), &[3], &[true, true, false]);
    assert_ints(&Tensor::from_vec(vec![-5i64, 5], &[2]).abs(), &[2], &[5, 5]);
    assert_ints(
        &Tensor::from_vec(vec![-5i64, 5], &[2]).relu(),
        &[2],
        &[0, 5],
    );
}

#[test]
fn comparisons_give_bools_and_respect_nan() {
    let a = f32s(&[1.0, 2.0, 3.0, f32::NAN], &[4]);
    let b = f32s(&[2.0, 2.0, 2.0, 2.0], &[4]);
    assert_bools(&a.lt(&b), &[4], &[true, false, false, false]);
    assert_bools(&a.le(&b), &[4], &[true, true, false, false]);
    assert_bools(&a.gt(&b), &[4], &[false, false, true, false]);
    assert_bools(&a.ge(&b), &[4], &[false, true, true, false]);
    assert_bools(&a.eq(&b), &[4], &[false, true, false, false]);
    assert_bools(&a.ne(&b), &[4], &[true, false, true, true]);
    assert_bools(&a.gt(1.5), &[4], &[false, true, true, false]);
    let i = Tensor::from_vec(vec![-1i64, 0, 1], &[3]);
    assert_bools(&i.ge(0), &[3], &[false, true, true]);
    assert_bools(&i.le(0), &[3], &[true, true, false]);
    let u = Tensor::from_vec(vec![0u64, u64::MAX], &[2]);
    assert_bools(&u.gt(1), &[2], &[false, true]);
    let col = Tensor::from_vec(vec![1i32, 2], &[2, 1]);
    assert_bools(
        &col.eq(Tensor::from_vec(vec![1i32, 2, 3], &[3])),
        &[2, 3],
        &[true, false, false, false, true, false],
    );
}

#[test]
fn where_selects_broadcasts_and_treats_non_bool_conditions_as_non_zero() {
    let cond = Tensor::from_vec(vec![true, false, true], &[3]);
    let a = f32s(&[1.0, 2.0, 3.0], &[3]);
    assert_close(&cond.where_(&a, -1.0), &[3], &[1.0, -1.0, 3.0]);
    assert_close(&cond.where_(0, &a), &[3], &[0.0, 2.0, 0.0]);
    let col = Tensor::from_vec(vec![true, false], &[2, 1]);
    assert_close(
        &col.where_(&a, 0.0),
        &[2, 3],
        &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0],
    );
    let ints = Tensor::from_vec(vec![0i32, 5, -1], &[3]);
    assert_close(&ints.where_(1.0, 0.0), &[3], &[0.0, 1.0, 1.0]);
    let mixed = cond.where_(Tensor::from_vec(vec![1i32, 2, 3], &[3]), 0.5);
    assert_eq!(mixed.dtype(), DType::F32);
    assert_close(&mixed, &[3], &[1.0, 0.5, 3.0]);
}

#[test]
fn bitwise_and_logical_ops() {
    let a = Tensor::from_vec(vec![0b1100i32, 0b1010, -1], &[3]);
    let b = Tensor::from_vec(vec![0b1010i32, 0b0110, 5], &[3]);
    assert_ints(&(&a & &b), &[3], &[0b1000, 0b0010, 5]);
    assert_ints(&(&a | &b), &[3], &[0b1110, 0b1110, -1]);
    assert_ints(&(&a ^ &b), &[3], &[0b0110, 0b1100, -6]);
    assert_ints(&!&a, &[3], &[!0b1100, !0b1010, 0]);
    let u = Tensor::from_vec(vec![0u8, 15], &[2]);
    assert_ints(&!u, &[2], &[255, 240]);
    let p = Tensor::from_vec(vec![true, false], &[2]);
    assert_bools(&!&p, &[2], &[false, true]);
    assert_bools(&(&p ^ true), &[2], &[false, true]);
    assert_bools(
        &Tensor::from_vec(vec![0.0f32, 2.0], &[2]).logical_not(),
        &[2],
        &[true, false],
    );
    let x = Tensor::from_vec(vec![0i32, 3, 0, 4], &[4]);
    let y = Tensor::from_vec(vec![0i32, 0, 1, 1], &[4]);
    assert_bools(&x.logical_and(&y), &[4], &[false, false, false, true]);
    assert_bools(&x.logical_or(&y), &[4], &[false, true, true, true]);
}

#[test]
fn casts_convert_like_c() {
    let x = f32s(&[-2.7, 2.7, 0.0, 300.0], &[4]);
    assert_ints(&x.cast(DType::I32), &[4], &[-2, 2, 0, 300]);
    assert_ints(&x.cast(DType::U8).cast(DType::I32), &[4], &[254, 2, 0, 44]);
    assert_bools(&x.cast(DType::Bool), &[4], &[true, true, false, true]);
    assert_close(
        &Tensor::from_vec(vec![true, false], &[2]).cast(DType::F32),
        &[2],
        &[1.0, 0.0],
    );
    assert_eq!(x.cast(DType::F32).uop(), x.uop());
}

#[test]
fn arithmetic_comparisons_and_reductions_work_in_every_numeric_dtype() {
    for dtype in DType::ALL_VALUE_TYPES {
        if dtype == DType::Bool {
            continue;
        }
        let x = Tensor::arange(4).cast(dtype);
        assert_eq!((&x + &x).dtype(), dtype);
        assert_close(&(&x + &x), &[4], &[0.0, 2.0, 4.0, 6.0]);
        assert_close(&(&x * &x), &[4], &[0.0, 1.0, 4.0, 9.0]);
        if !dtype.is_unsigned_int() {
            assert_close(&(&x - 1), &[4], &[-1.0, 0.0, 1.0, 2.0]);
        }
        assert_close(&x.maximum(2), &[4], &[2.0, 2.0, 2.0, 3.0]);
        assert_close(&x.minimum(2), &[4], &[0.0, 1.0, 2.0, 2.0]);
        assert_bools(&x.lt(2), &[4], &[true, true, false, false]);
        assert_bools(&x.ge(2), &[4], &[false, false, true, true]);
        assert_bools(&x.eq(1), &[4], &[false, true, false, false]);
        assert_close(&x.sum_all(), &[], &[6.0]);
        assert_close(&x.max_all(), &[], &[3.0]);
        assert_close(&x.min_all(), &[], &[0.0]);
        assert_ints(&x.argmax_all(), &[], &[3]);
        assert_close(&x.flip(0), &[4], &[3.0, 2.0, 1.0, 0.0]);
        assert_close(&x.pad(&[(1, 0)]), &[5], &[0.0, 0.0, 1.0, 2.0, 3.0]);
    }
}
