//! Gradients (against finite differences) and `vmap` (against a loop) of the ops of issue #19,
//! through the reference interpreter. Inputs keep away from the points where an op has no
//! derivative (ties, integers of `round`, the poles of `atan2`); values of the special points
//! are checked against NumPy and PyTorch in the facade's `tests/ops_reference.rs`.

mod ops_common;
mod transform_common;

use ops_common::{check_op, check_op_with};
use tensor_core::transform::grad;
use tensor_core::{DType, Index, PadMode, ScatterReduce, Tensor};
use transform_common::*;

const B: usize = 3;

fn ints(v: Vec<i64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape)
}

// ---- the three regressions ----

#[test]
fn pow_gradients_and_vmap_with_negative_bases_and_tensor_exponents() {
    let x = uniform_f64(&[B, 4], 1, 0.3, 2.0);
    let y = randf64(&[B, 4], 2);
    check_op(|x: &Tensor, y: &Tensor| x.pow(y), &[x, y], &[0, 1]);
    let neg = uniform_f64(&[B, 4], 3, -2.0, -0.3);
    check_op(|x: &Tensor| x.pow(3.0), std::slice::from_ref(&neg), &[0]);
    check_op(|x: &Tensor| x.pow(-2.0), &[neg], &[0]);
    check_op(
        |x: &Tensor| x.pow(0.5) + x.pow(-0.5),
        &[uniform_f64(&[B, 4], 4, 0.2, 3.0)],
        &[0],
    );
}

#[test]
fn the_gradient_of_pow_half_at_minus_infinity_is_zero_not_nan() {
    let x = Tensor::from_vec(vec![f64::NEG_INFINITY, 4.0], &[2]);
    let g = grad(|x: &Tensor| x.pow(0.5).sum_all(), 0).call(&[x]);
    assert_values_close("d sqrt", &values(&g[0]), &[0.0, 0.25], 0.0, 1e-15);
}

#[test]
fn gather_with_an_index_shorter_than_the_input_differentiates_and_batches() {
    let x = randf64(&[B, 4, 5, 6], 5);
    let idx: Vec<i64> = (0..B * 3 * 4 * 5).map(|i| (i * 7 % 4) as i64).collect();
    let idx = ints(idx, &[B, 3, 4, 5]);
    check_op(|x: &Tensor, i: &Tensor| x.gather(0, i), &[x, idx], &[0]);
}

#[test]
#[should_panic(expected = "axis 1 of the index (6) is longer than the input's (5)")]
fn gather_rejects_an_index_longer_than_the_input_on_another_axis() {
    Tensor::zeros(&[4, 5], DType::F32).gather(0, &Tensor::zeros(&[2, 6], DType::I64));
}

#[test]
fn half_precision_sums_keep_every_term() {
    // 4096 halves summed in f16 would stall at 1024 (its ulp there is 1, and 0.5 ties to even).
    let x = Tensor::full(&[4096], 0.5, DType::F16);
    let total = values(&x.sum_all());
    assert_eq!(total, vec![2048.0]);
    let g = grad(
        |x: &Tensor| x.cast(DType::F16).sum_all().cast(DType::F64),
        0,
    )
    .call(&[Tensor::full(&[3], 1.0, DType::F64)]);
    assert_values_close("d sum", &values(&g[0]), &[1.0; 3], 0.0, 0.0);
}

// ---- elementwise ----

#[test]
fn inverse_trigonometry_differentiates_and_batches() {
    let u = uniform_f64(&[B, 5], 6, -0.9, 0.9);
    check_op(|x: &Tensor| x.asin(), std::slice::from_ref(&u), &[0]);
    check_op(|x: &Tensor| x.acos(), &[u], &[0]);
    check_op(
        |x: &Tensor| x.atan(),
        &[uniform_f64(&[B, 5], 7, -6.0, 6.0)],
        &[0],
    );
    let y = uniform_f64(&[B, 5], 8, -3.0, 3.0);
    let x = uniform_f64(&[B, 5], 9, -3.0, 3.0);
    check_op(|y: &Tensor, x: &Tensor| y.atan2(x), &[y, x], &[0, 1]);
}

#[test]
fn sign_rounding_and_remainders_differentiate_and_batch() {
    let a = uniform_f64(&[B, 6], 10, -5.0, 5.0);
    let b = uniform_f64(&[B, 6], 11, -2.0, 2.0);
    check_op(
        |a: &Tensor, b: &Tensor| a.copysign(b),
        &[a.clone(), b.clone()],
        &[0, 1],
    );
    check_op(
        |a: &Tensor, b: &Tensor| a.fmod(b),
        &[a.clone(), b.clone()],
        &[0, 1],
    );
    check_op(
        |a: &Tensor, b: &Tensor| a.logaddexp(b),
        &[a.clone(), b],
        &[0, 1],
    );
    check_op(
        |a: &Tensor| a.round() + a.round_decimals(1) * a,
        std::slice::from_ref(&a),
        &[0],
    );
    check_op(|a: &Tensor| a.signbit().where_(a, a * 2.0), &[a], &[0]);
}

#[test]
fn classifications_shifts_and_bitcasts_batch() {
    let x = Tensor::from_vec(vec![0.0, -0.0, f64::INFINITY, f64::NAN, 1.5, -2.0], &[B, 2]);
    let y = Tensor::from_vec(vec![0.0, 0.0, f64::INFINITY, f64::NAN, 1.5, -2.1], &[B, 2]);
    let classes = |x: &Tensor| {
        let all = [x.isnan(), x.isinf(), x.isfinite(), x.signbit()];
        Tensor::stack(&all, 0)
    };
    assert_vmap_matches_loop(classes, &[Some(0)], std::slice::from_ref(&x));
    let close = |x: &Tensor, y: &Tensor| x.isclose(y, 1e-5, 1e-8, true);
    assert_vmap_matches_loop(close, &[Some(0), Some(0)], &[x.clone(), y.clone()]);
    let all = |x: &Tensor, y: &Tensor| x.allclose(y, 1e-5, 1e-8, true);
    assert_vmap_matches_loop(all, &[Some(0), Some(0)], &[x.clone(), y]);
    let n = ints(vec![-8, 5, 1, -1, 100, 7], &[B, 2]);
    let s = ints(vec![1, 70, 3, 63, 2, -1], &[B, 2]);
    let shifts = |n: &Tensor, s: &Tensor| Tensor::stack(&[n << s, n >> s], 0);
    assert_vmap_matches_loop(shifts, &[Some(0), Some(0)], &[n, s]);
    assert_vmap_matches_loop(|x: &Tensor| x.bitcast(DType::I64), &[Some(0)], &[x]);
}

#[test]
fn corrected_variances_and_one_hot_differentiate_and_batch() {
    let x = randf64(&[B, 4, 5], 12);
    check_op(
        |x: &Tensor| x.var_with(1, 1.0, false),
        std::slice::from_ref(&x),
        &[0],
    );
    check_op(|x: &Tensor| x.std_with([0, 1], 2.0, true), &[x], &[0]);
    let labels = ints(vec![0, 3, 1, 2, -1, 9], &[B, 2]);
    assert_vmap_matches_loop(
        |l: &Tensor| l.one_hot(4),
        &[Some(0)],
        std::slice::from_ref(&labels),
    );
    let w = randf64(&[B, 2, 4], 13);
    check_op_with(
        |l: &Tensor, w: &Tensor| l.one_hot_as(4, DType::F64) * w,
        &[labels, w],
        &[1],
        1e-6,
        1e-7,
    );
}

// ---- scans ----

#[test]
fn cumprod_gradients_are_exact_with_zeros_in_the_input() {
    let mut v = uniform_values(&[B, 6], 14, 0.5, 1.5);
    v[1] = 0.0; // one zero in sample 0
    v[8] = 0.0; // two zeros in sample 1
    v[10] = 0.0;
    let x = Tensor::from_vec(v, &[B, 6]);
    check_op(|x: &Tensor| x.cumprod(0), std::slice::from_ref(&x), &[0]);
    check_op(
        |x: &Tensor| x.prod(0, false),
        &[x.reshape(&[B, 2, 3])],
        &[0],
    );
    // Samples 1 and 2 (two zeros, no zero) on their own as well.
    for s in 1..B {
        let xs = sample(&x, 0, s).unsqueeze(0);
        check_op(|x: &Tensor| x.cumprod(-1), &[xs], &[0]);
    }
}

#[test]
fn running_maxima_minima_and_logcumsumexp_differentiate_and_batch() {
    let x = distinct_f64(&[B, 2, 5], 15);
    check_op(|x: &Tensor| x.cummax(1).0, std::slice::from_ref(&x), &[0]);
    check_op(|x: &Tensor| x.cummin(0).0, std::slice::from_ref(&x), &[0]);
    let indices = |x: &Tensor| {
        let (_, a) = x.cummax(1);
        let (_, b) = x.cummin(1);
        Tensor::stack(&[a, b], 0)
    };
    assert_vmap_matches_loop(indices, &[Some(0)], std::slice::from_ref(&x));
    check_op(
        |x: &Tensor| x.logcumsumexp(1),
        &[randf64(&[B, 3, 6], 16) * 20.0],
        &[0],
    );
}

// ---- padding ----

#[test]
fn every_pad_mode_differentiates_and_batches() {
    let x = randf64(&[B, 4, 5], 17);
    for mode in [
        PadMode::Reflect,
        PadMode::Replicate,
        PadMode::Circular,
        PadMode::Constant(2.5.into()),
    ] {
        let f = move |x: &Tensor| x.pad_mode(&[(2, 1), (-1, 3)], mode);
        check_op(f, std::slice::from_ref(&x), &[0]);
    }
    let interior = |x: &Tensor| x.pad_interior(&[(1, -1, 2), (0, 2, 1)], -1.0);
    check_op(interior, std::slice::from_ref(&x), &[0]);
}

#[test]
#[should_panic(expected = "pad_mode: Reflect pads (4, 0) do not fit axis 0 of shape [4]")]
fn reflect_pads_must_be_shorter_than_the_axis() {
    Tensor::zeros(&[4], DType::F32).pad_mode(&[(4, 0)], PadMode::Reflect);
}

// ---- sorting ----

#[test]
fn sorting_follows_the_permutation_in_gradients_and_batches() {
    let x = distinct_f64(&[B, 3, 6], 18);
    check_op(
        |x: &Tensor| x.sort(1, false).0,
        std::slice::from_ref(&x),
        &[0],
    );
    check_op(
        |x: &Tensor| x.sort(0, true).0,
        std::slice::from_ref(&x),
        &[0],
    );
    check_op(
        |x: &Tensor| x.topk(2, 1, true).0,
        std::slice::from_ref(&x),
        &[0],
    );
    check_op(
        |x: &Tensor| x.kthvalue(2, 0).0,
        std::slice::from_ref(&x),
        &[0],
    );
    check_op(|x: &Tensor| x.msort(), std::slice::from_ref(&x), &[0]);
    let orders = |x: &Tensor| {
        let all = [
            x.argsort(1, false),
            x.argsort(1, true),
            x.topk(3, 1, false).1,
        ];
        Tensor::cat(&all, 1)
    };
    assert_vmap_matches_loop(orders, &[Some(0)], &[x]);
}

// ---- updates ----

#[test]
fn scatters_differentiate_and_batch() {
    let x = distinct_f64(&[B, 5, 3], 19);
    let src = distinct_f64(&[B, 4, 3], 20) * 0.5;
    let idx: Vec<i64> = (0..B * 4 * 3).map(|i| [0, 2, -1, 2, 4, 1][i % 6]).collect();
    let idx = ints(idx, &[B, 4, 3]);
    let args = [x, idx, src];
    check_op(
        |x: &Tensor, i: &Tensor, s: &Tensor| x.scatter(0, i, s),
        &args,
        &[0, 2],
    );
    for how in [
        ScatterReduce::Sum,
        ScatterReduce::Prod,
        ScatterReduce::Mean,
        ScatterReduce::Amax,
        ScatterReduce::Amin,
    ] {
        for include in [true, false] {
            let f =
                move |x: &Tensor, i: &Tensor, s: &Tensor| x.scatter_reduce(0, i, s, how, include);
            check_op(f, &args, &[0, 2]);
        }
    }
}

#[test]
fn at_updates_and_dynamic_slices_differentiate_and_batch() {
    let x = distinct_f64(&[B, 6, 2], 21);
    let v = distinct_f64(&[B, 3, 2], 22) * 0.3;
    let idx = ints(vec![4, -1, 0, 1, 1, 3, 5, 2, 9], &[B, 3]);
    let args = [x.clone(), idx, v];
    check_op(
        |x: &Tensor, i: &Tensor, v: &Tensor| x.at(i).set(v),
        &args,
        &[0, 2],
    );
    check_op(
        |x: &Tensor, i: &Tensor, v: &Tensor| x.at(i).add(v),
        &args,
        &[0, 2],
    );
    check_op(
        |x: &Tensor, i: &Tensor, v: &Tensor| x.at(i).mul(v),
        &args,
        &[0, 2],
    );
    check_op(
        |x: &Tensor, i: &Tensor, v: &Tensor| x.at(i).max(v),
        &args,
        &[0, 2],
    );
    check_op(
        |x: &Tensor, i: &Tensor, _: &Tensor| x.at(i).get(),
        &args,
        &[0],
    );
    let starts = ints(vec![1, 0, 5, 1, -2, 0], &[B, 2]);
    let window = |x: &Tensor, s: &Tensor| x.dynamic_slice(s, &[3, 1]);
    check_op(window, &[x.clone(), starts.clone()], &[0]);
    let u = randf64(&[B, 2, 2], 23);
    let write = |x: &Tensor, u: &Tensor, s: &Tensor| x.dynamic_update_slice(u, s);
    check_op(write, &[x, u, starts], &[0, 1]);
}

// ---- indexing ----

#[test]
fn advanced_indexing_and_strided_slices_differentiate_and_batch() {
    let x = randf64(&[B, 4, 5, 6], 24);
    let i0: Vec<i64> = (0..B * 2 * 2).map(|k| [0, -1, 2, 3, 1][k % 5]).collect();
    let i0 = ints(i0, &[B, 2, 2]);
    let i1 = ints(vec![1, 5, 0, 2, 3, 4], &[B, 2]);
    let adjacent = |x: &Tensor, a: &Tensor, b: &Tensor| {
        x.index(&[
            Index::Full,
            Index::Array(a.clone()),
            Index::Array(b.clone()),
        ])
    };
    check_op(adjacent, &[x.clone(), i0.clone(), i1.clone()], &[0]);
    let separated = |x: &Tensor, a: &Tensor, b: &Tensor| {
        x.index(&[
            Index::Array(a.clone()),
            Index::Slice(None, None, -2),
            Index::Array(b.clone()),
        ])
    };
    check_op(separated, &[x.clone(), i0, i1], &[0]);
    let strided = |x: &Tensor| {
        x.index(&[Index::At(-1), Index::Slice(Some(4), Some(0), -3)])
            .slice_step(1, Some(1), None, 2)
    };
    check_op(strided, std::slice::from_ref(&x), &[0]);
    check_op(
        |x: &Tensor| x.diagonal(1, 2, 1),
        std::slice::from_ref(&x),
        &[0],
    );
    check_op(|x: &Tensor| x.diagonal(-2, 0, 2), &[x], &[0]);
}

#[test]
fn static_size_selections_differentiate_and_batch() {
    let x = randf64(&[B, 3, 4], 25);
    let mask = x.gt(0.0);
    let select = |x: &Tensor, m: &Tensor| x.masked_select(m, 5, -7.0);
    check_op(select, &[x.clone(), mask], &[0]);
    let positions = |x: &Tensor| {
        let cols = x.nonzero(4, -1);
        Tensor::cat(&[x.argwhere(6, 9).reshape(&[-1]), Tensor::cat(&cols, 0)], 0)
    };
    assert_vmap_matches_loop(positions, &[Some(0)], &[x.gt(0.2)]);
}
