//! Every batching rule of `vmap`, checked against its meaning: the stack of the per-sample
//! results computed without `vmap`, evaluated by the reference interpreter.

mod transform_common;

use std::sync::Arc;
use tensor_core::transform::{Func, IntoFunc, vmap};
use tensor_core::{DType, Tensor};
use transform_common::*;

const B: usize = 3;

/// A named op of one tensor, of two tensors, and a reduction closing over its options.
type Unary = (&'static str, fn(&Tensor) -> Tensor);
type Binary = (&'static str, fn(&Tensor, &Tensor) -> Tensor);
type Reduction = (&'static str, Arc<dyn Fn(&Tensor) -> Tensor + Send + Sync>);

fn m0() -> Vec<Option<isize>> {
    vec![Some(0)]
}

fn both0() -> Vec<Option<isize>> {
    vec![Some(0), Some(0)]
}

fn idx(v: Vec<i32>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape)
}

// ---- elementwise: unary ----

#[test]
fn vmap_of_each_unary_op_equals_the_loop() {
    let x = uniform_f64(&[B, 4], 1, 0.2, 1.8);
    let unary: Vec<Unary> = vec![
        ("neg", |x| -x),
        ("exp", |x| x.exp()),
        ("exp2", |x| x.exp2()),
        ("log", |x| x.log()),
        ("log2", |x| x.log2()),
        ("sin", |x| x.sin()),
        ("cos", |x| x.cos()),
        ("sqrt", |x| x.sqrt()),
        ("recip", |x| x.recip()),
        ("tanh", |x| x.tanh()),
        ("sigmoid", |x| x.sigmoid()),
        ("relu", |x| (x - 1.0).relu()),
        ("abs", |x| (x - 1.0).abs()),
        ("trunc", |x| (x * 3.0).trunc()),
        ("square", |x| x.square()),
    ];
    for (name, op) in unary {
        let f = move |x: &Tensor| op(x);
        let batched = vmap(f, 0, 0).call1(std::slice::from_ref(&x));
        let expected = loop_stack(B, |i| op(&sample(&x, 0, i)));
        assert_close(name, &batched, &expected, 1e-12, 1e-12);
    }
}

#[test]
fn vmap_of_cast_equals_the_loop() {
    let x = uniform_f64(&[B, 4], 2, -3.0, 3.0);
    let to_f32 = vmap(|x: &Tensor| x.cast(DType::F32), 0, 0).call1(std::slice::from_ref(&x));
    assert_eq!(to_f32.dtype(), DType::F32);
    assert_close(
        "cast f64 -> f32",
        &to_f32,
        &loop_stack(B, |i| sample(&x, 0, i).cast(DType::F32)),
        0.0,
        0.0,
    );
    let to_i32 = vmap(|x: &Tensor| x.cast(DType::I32), 0, 0).call1(std::slice::from_ref(&x));
    assert_eq!(to_i32.dtype(), DType::I32);
    assert_close(
        "cast f64 -> i32",
        &to_i32,
        &loop_stack(B, |i| sample(&x, 0, i).cast(DType::I32)),
        0.0,
        0.0,
    );
}

// ---- elementwise: binary, batched and unbatched mixes ----

fn binary_ops() -> Vec<Binary> {
    vec![
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("maximum", |a, b| a.maximum(b)),
        ("minimum", |a, b| a.minimum(b)),
        ("pow", |a, b| a.pow(b)),
        ("lt", |a, b| a.lt(b).cast(DType::F64)),
        ("eq", |a, b| a.eq(b).cast(DType::F64)),
    ]
}

fn check_binary(in_axes: Vec<Option<isize>>, a: Tensor, b: Tensor) {
    for (name, op) in binary_ops() {
        let f = move |a: &Tensor, b: &Tensor| op(a, b);
        let args = [a.clone(), b.clone()];
        let batched = vmap(f, in_axes.clone(), 0).call1(&args);
        let expected = nested_loop(&f.into_func(), std::slice::from_ref(&in_axes), &args).remove(0);
        assert_close(
            &format!("{name} with in_axes {in_axes:?}"),
            &batched,
            &expected,
            1e-12,
            1e-12,
        );
    }
}

#[test]
fn vmap_of_binary_ops_with_both_operands_batched_equals_the_loop() {
    check_binary(
        both0(),
        uniform_f64(&[B, 4], 3, 0.5, 2.0),
        uniform_f64(&[B, 4], 4, 0.5, 2.0),
    );
}

#[test]
fn vmap_of_binary_ops_with_only_the_left_batched_equals_the_loop() {
    check_binary(
        vec![Some(0), None],
        uniform_f64(&[B, 4], 5, 0.5, 2.0),
        uniform_f64(&[4], 6, 0.5, 2.0),
    );
}

#[test]
fn vmap_of_binary_ops_with_only_the_right_batched_equals_the_loop() {
    check_binary(
        vec![None, Some(0)],
        uniform_f64(&[4], 7, 0.5, 2.0),
        uniform_f64(&[B, 4], 8, 0.5, 2.0),
    );
}

#[test]
fn vmap_of_binary_ops_that_broadcast_inside_the_function_equals_the_loop() {
    // Per sample: [4] op [2, 4] broadcasts the left operand over the rows.
    check_binary(
        both0(),
        uniform_f64(&[B, 4], 9, 0.5, 2.0),
        uniform_f64(&[B, 2, 4], 10, 0.5, 2.0),
    );
    check_binary(
        vec![None, Some(0)],
        uniform_f64(&[2, 1], 11, 0.5, 2.0),
        uniform_f64(&[B, 2, 4], 12, 0.5, 2.0),
    );
}

#[test]
fn vmap_of_a_binary_op_with_a_scalar_constant_equals_the_loop() {
    let x = randf64(&[B, 4], 13);
    assert_vmap_matches_loop(|x: &Tensor| x * 2.5 - 1.0, &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(|x: &Tensor| 2.0 - x, &m0(), &[x]);
}

#[test]
fn vmap_of_a_binary_op_on_an_int_tensor_equals_the_loop() {
    let x = idx(vec![1, -2, 3, 4, 5, -6], &[B, 2]);
    let y = idx(vec![7, 8], &[2]);
    assert_vmap_matches_loop(
        |x: &Tensor, y: &Tensor| x * y + 1,
        &[Some(0), None],
        &[x, y],
    );
}

// ---- elementwise: where ----

#[test]
fn vmap_of_where_equals_the_loop_for_every_mix_of_batched_operands() {
    let c = randf64(&[B, 4], 14);
    let a = randf64(&[B, 4], 15);
    let b = randf64(&[B, 4], 16);
    let f = |c: &Tensor, a: &Tensor, b: &Tensor| c.gt(0.0).where_(a, b);
    for mask in 1..8u32 {
        let axes: Vec<Option<isize>> = (0..3)
            .map(|k| (mask & (1 << k) != 0).then_some(0))
            .collect();
        let args: Vec<Tensor> = [&c, &a, &b]
            .iter()
            .zip(&axes)
            .map(|(t, ax)| match ax {
                Some(_) => (*t).clone(),
                None => sample(t, 0, 1),
            })
            .collect();
        assert_vmap_matches_loop(f, &axes, &args);
    }
}

// ---- movement ----

#[test]
fn vmap_of_reshape_equals_the_loop() {
    assert_vmap_matches_loop(
        |x: &Tensor| x.reshape(&[3, 2]),
        &m0(),
        &[randf64(&[B, 2, 3], 17)],
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.reshape(&[6]),
        &m0(),
        &[randf64(&[B, 2, 3], 18)],
    );
}

#[test]
fn vmap_of_permute_and_transpose_equals_the_loop() {
    assert_vmap_matches_loop(
        |x: &Tensor| x.permute(&[2, 0, 1]),
        &m0(),
        &[randf64(&[B, 2, 3, 4], 19)],
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.transpose(0, 1),
        &m0(),
        &[randf64(&[B, 2, 3], 20)],
    );
}

#[test]
fn vmap_of_expand_equals_the_loop() {
    assert_vmap_matches_loop(
        |x: &Tensor| x.expand(&[2, 3, 4]),
        &m0(),
        &[randf64(&[B, 3, 1], 21)],
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.expand(&[2, 4]),
        &m0(),
        &[randf64(&[B, 4], 22)],
    );
}

#[test]
fn vmap_of_pad_equals_the_loop() {
    assert_vmap_matches_loop(
        |x: &Tensor| x.pad(&[(1, 0), (2, 1)]),
        &m0(),
        &[randf64(&[B, 2, 3], 23)],
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.pad_value(&[(0, 2)], 7.0),
        &m0(),
        &[randf64(&[B, 3], 24)],
    );
}

#[test]
fn vmap_of_shrink_equals_the_loop() {
    assert_vmap_matches_loop(
        |x: &Tensor| x.shrink(&[(1, 2), (0, 2)]),
        &m0(),
        &[randf64(&[B, 3, 4], 25)],
    );
}

#[test]
fn vmap_of_flip_equals_the_loop() {
    assert_vmap_matches_loop(|x: &Tensor| x.flip(1), &m0(), &[randf64(&[B, 2, 3], 26)]);
    assert_vmap_matches_loop(
        |x: &Tensor| x.flip([0, 1]),
        &m0(),
        &[randf64(&[B, 2, 3], 27)],
    );
}

#[test]
fn vmap_of_slicing_squeeze_and_unsqueeze_equals_the_loop() {
    let x = randf64(&[B, 5, 2], 28);
    assert_vmap_matches_loop(
        |x: &Tensor| x.slice(0, 1, -1),
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.narrow(1, 1, 1).squeeze(1),
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(|x: &Tensor| x.unsqueeze(1), &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(|x: &Tensor| x.flatten(0, 1), &m0(), &[x]);
}

#[test]
fn vmap_of_stack_equals_the_loop_for_batched_and_unbatched_parts() {
    let (a, b) = (randf64(&[B, 3], 29), randf64(&[B, 3], 30));
    let f = |a: &Tensor, b: &Tensor| Tensor::stack(&[a.clone(), b.clone(), a * b], 1);
    assert_vmap_matches_loop(f, &both0(), &[a.clone(), b.clone()]);
    assert_vmap_matches_loop(f, &[Some(0), None], &[a, sample(&b, 0, 0)]);
}

#[test]
fn vmap_of_cat_equals_the_loop_for_batched_and_unbatched_parts() {
    let (a, b) = (randf64(&[B, 2, 3], 31), randf64(&[B, 2, 1], 32));
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a.clone(), b.clone()], 1);
    assert_vmap_matches_loop(f, &both0(), &[a.clone(), b.clone()]);
    assert_vmap_matches_loop(f, &[None, Some(0)], &[sample(&a, 0, 2), b]);
}

// ---- reductions ----

#[test]
fn vmap_of_each_reduction_equals_the_loop_with_and_without_keepdim() {
    let x = uniform_f64(&[B, 2, 3], 33, 0.5, 1.5);
    for keepdim in [false, true] {
        let reductions: Vec<Reduction> = vec![
            ("sum", Arc::new(move |x: &Tensor| x.sum(1, keepdim))),
            (
                "sum both",
                Arc::new(move |x: &Tensor| x.sum([0, 1], keepdim)),
            ),
            ("max", Arc::new(move |x: &Tensor| x.max(0, keepdim))),
            ("min", Arc::new(move |x: &Tensor| x.min(1, keepdim))),
            ("prod", Arc::new(move |x: &Tensor| x.prod(1, keepdim))),
            ("mean", Arc::new(move |x: &Tensor| x.mean(0, keepdim))),
        ];
        for (name, op) in reductions {
            let op2 = op.clone();
            let batched = vmap(move |x: &Tensor| op(x), 0, 0).call1(std::slice::from_ref(&x));
            let expected = loop_stack(B, |i| op2(&sample(&x, 0, i)));
            assert_close(
                &format!("{name} keepdim={keepdim}"),
                &batched,
                &expected,
                1e-12,
                1e-12,
            );
        }
    }
}

#[test]
fn vmap_of_a_full_reduction_gives_one_value_per_sample() {
    let x = randf64(&[B, 2, 3], 34);
    assert_vmap_matches_loop(|x: &Tensor| x.sum_all(), &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(|x: &Tensor| x.max_all(), &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(|x: &Tensor| x.prod_all(), &m0(), &[x]);
}

// ---- matmul ----

#[test]
fn vmap_of_matmul_with_the_left_operand_batched_equals_the_loop() {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b);
    assert_vmap_matches_loop(
        f,
        &[Some(0), None],
        &[randf64(&[B, 2, 3], 35), randf64(&[3, 4], 36)],
    );
}

#[test]
fn vmap_of_matmul_with_the_right_operand_batched_equals_the_loop() {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b);
    assert_vmap_matches_loop(
        f,
        &[None, Some(0)],
        &[randf64(&[2, 3], 37), randf64(&[B, 3, 4], 38)],
    );
}

#[test]
fn vmap_of_matmul_with_both_operands_batched_equals_the_loop() {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b);
    assert_vmap_matches_loop(
        f,
        &both0(),
        &[randf64(&[B, 2, 3], 39), randf64(&[B, 3, 4], 40)],
    );
}

#[test]
fn vmap_of_matrix_vector_and_vector_dot_products_equals_the_loop() {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b);
    assert_vmap_matches_loop(
        f,
        &[None, Some(0)],
        &[randf64(&[2, 3], 41), randf64(&[B, 3], 42)],
    );
    assert_vmap_matches_loop(f, &both0(), &[randf64(&[B, 3], 43), randf64(&[B, 3], 44)]);
}

// ---- gather / take ----

#[test]
fn vmap_of_take_with_a_batched_table_equals_the_loop() {
    let f = |t: &Tensor, i: &Tensor| t.take(i, 0);
    let indices = idx(vec![2, 0, 3, 3], &[4]);
    assert_vmap_matches_loop(f, &[Some(0), None], &[randf64(&[B, 4, 2], 45), indices]);
}

#[test]
fn vmap_of_take_with_batched_indices_equals_the_loop() {
    let f = |t: &Tensor, i: &Tensor| t.take(i, 1);
    let indices = idx(vec![1, 0, 2, 2, 1, 0], &[B, 2]);
    assert_vmap_matches_loop(f, &[None, Some(0)], &[randf64(&[2, 3], 46), indices]);
}

#[test]
fn vmap_of_take_with_table_and_indices_batched_equals_the_loop() {
    let f = |t: &Tensor, i: &Tensor| t.take(i, 0);
    let indices = idx(vec![1, 0, 2, -1, 0, 0], &[B, 2]);
    assert_vmap_matches_loop(f, &both0(), &[randf64(&[B, 3], 47), indices]);
}

#[test]
fn vmap_of_gather_along_an_axis_equals_the_loop() {
    let f = |t: &Tensor, i: &Tensor| t.gather(1, i);
    let indices = idx(vec![0, 2, 1, 1, 2, 0, 0, 0, 1, 2, 2, 1], &[B, 2, 2]);
    assert_vmap_matches_loop(f, &both0(), &[randf64(&[B, 2, 3], 48), indices.clone()]);
    assert_vmap_matches_loop(f, &[None, Some(0)], &[randf64(&[2, 3], 49), indices]);
}

// ---- cumulative, argmax, normalizations, markers ----

#[test]
fn vmap_of_cumsum_equals_the_loop_on_every_axis() {
    let x = randf64(&[B, 3, 4], 50);
    assert_vmap_matches_loop(|x: &Tensor| x.cumsum(1), &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(|x: &Tensor| x.cumsum(0), &m0(), &[x]);
}

#[test]
fn vmap_of_argmax_and_argmin_equals_the_loop() {
    let x = distinct_f64(&[B, 3, 4], 51);
    let batched = vmap(|x: &Tensor| x.argmax(1, false), 0, 0).call1(std::slice::from_ref(&x));
    assert_eq!(batched.dtype(), DType::I64);
    assert_vmap_matches_loop(
        |x: &Tensor| x.argmax(1, false),
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.argmax(0, true),
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(
        |x: &Tensor| x.argmin(-1, false),
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(|x: &Tensor| x.argmax_all(), &m0(), &[x]);
}

#[test]
fn vmap_of_softmax_log_softmax_and_logsumexp_equals_the_loop() {
    let x = randf64(&[B, 2, 4], 52);
    assert_vmap_matches_loop(|x: &Tensor| x.softmax(-1), &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(|x: &Tensor| x.softmax(0), &m0(), std::slice::from_ref(&x));
    assert_vmap_matches_loop(
        |x: &Tensor| x.log_softmax(1),
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(|x: &Tensor| x.logsumexp(1, false), &m0(), &[x]);
}

#[test]
fn vmap_of_contiguous_and_detach_equals_the_loop() {
    let x = randf64(&[B, 2, 3], 53);
    assert_vmap_matches_loop(
        |x: &Tensor| (x * 2.0).contiguous() + 1.0,
        &m0(),
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(|x: &Tensor| x.detach() * x, &m0(), &[x]);
}

// ---- in_axes and out_axes ----

#[test]
fn vmap_maps_over_a_positive_in_axis_other_than_zero() {
    let x = randf64(&[2, B, 4], 54);
    assert_vmap_matches_loop(
        |x: &Tensor| x.sum(0, false) * x.max(0, false),
        &[Some(1)],
        std::slice::from_ref(&x),
    );
    assert_vmap_matches_loop(|x: &Tensor| x.exp(), &[Some(2)], &[x]);
}

#[test]
fn vmap_maps_over_negative_in_axes() {
    let x = randf64(&[2, 4, B], 55);
    let y = randf64(&[B, 4], 56);
    let f = |x: &Tensor, y: &Tensor| x.matmul(y) + 1.0;
    assert_vmap_matches_loop(f, &[Some(-1), Some(-2)], &[x, y]);
}

#[test]
fn vmap_takes_a_different_in_axis_per_argument() {
    let x = randf64(&[2, B], 57);
    let y = randf64(&[B, 2], 58);
    let z = randf64(&[2], 59);
    let f = |x: &Tensor, y: &Tensor, z: &Tensor| x * y + z;
    assert_vmap_matches_loop(f, &[Some(1), Some(0), None], &[x, y, z]);
}

#[test]
fn vmap_places_the_batch_at_a_positive_out_axis() {
    let x = randf64(&[B, 2, 4], 60);
    let f = |x: &Tensor| x.exp();
    let expected = loop_stack(B, |i| f(&sample(&x, 0, i)));
    for to in [1usize, 2] {
        let out = vmap(f, 0, to as i32).call1(std::slice::from_ref(&x));
        assert_close(
            &format!("out_axes {to}"),
            &out,
            &batch_axis_to(&expected, to),
            0.0,
            0.0,
        );
    }
}

#[test]
fn vmap_places_the_batch_at_a_negative_out_axis() {
    let x = randf64(&[B, 2, 4], 61);
    let f = |x: &Tensor| x.sin();
    let expected = loop_stack(B, |i| f(&sample(&x, 0, i)));
    let out = vmap(f, 0, -1).call1(std::slice::from_ref(&x));
    assert_close("out_axes -1", &out, &batch_axis_to(&expected, 2), 0.0, 0.0);
    let out = vmap(f, 0, -2).call1(std::slice::from_ref(&x));
    assert_close("out_axes -2", &out, &batch_axis_to(&expected, 1), 0.0, 0.0);
}

#[test]
fn vmap_takes_one_out_axis_per_result() {
    let x = randf64(&[B, 2], 62);
    let f = |x: &Tensor| (x * 2.0, x.reshape(&[2, 1]) * x);
    let out = vmap(f, 0, [Some(1), Some(-1)]).call(std::slice::from_ref(&x));
    let first = loop_stack(B, |i| sample(&x, 0, i) * 2.0);
    let second = loop_stack(B, |i| {
        let s = sample(&x, 0, i);
        s.reshape(&[2, 1]) * s
    });
    assert_close(
        "result 0 at axis 1",
        &out[0],
        &batch_axis_to(&first, 1),
        0.0,
        0.0,
    );
    assert_close(
        "result 1 at axis -1",
        &out[1],
        &batch_axis_to(&second, 2),
        0.0,
        0.0,
    );
}

#[test]
fn vmap_repeats_an_unbatched_result_along_the_batch() {
    // JAX: a result that does not depend on the mapped arguments is broadcast to the batch.
    let x = randf64(&[B, 2], 63);
    let y = randf64(&[2, 2], 64);
    let f = |x: &Tensor, y: &Tensor| (x * 3.0, y.exp(), Tensor::ones(&[2], DType::F64));
    let out = vmap(f, [Some(0), None], 0).call(&[x.clone(), y.clone()]);
    assert_close(
        "batched result",
        &out[0],
        &loop_stack(B, |i| sample(&x, 0, i) * 3.0),
        0.0,
        0.0,
    );
    assert_close(
        "unbatched argument",
        &out[1],
        &loop_stack(B, |_| y.exp()),
        0.0,
        0.0,
    );
    assert_close(
        "constant",
        &out[2],
        &loop_stack(B, |_| Tensor::ones(&[2], DType::F64)),
        0.0,
        0.0,
    );
    let at_end = vmap(f, [Some(0), None], 1).call(&[x, y.clone()]);
    assert_close(
        "unbatched result at out_axes 1",
        &at_end[1],
        &batch_axis_to(&loop_stack(B, |_| y.exp()), 1),
        0.0,
        0.0,
    );
}

#[test]
fn vmap_keeps_an_unbatched_result_as_it_is_when_its_out_axis_is_none() {
    let x = randf64(&[B, 2], 65);
    let y = randf64(&[2], 66);
    let f = |x: &Tensor, y: &Tensor| (x + y, y * 2.0);
    let out = vmap(f, [Some(0), None], [Some(0), None]).call(&[x, y.clone()]);
    assert_close("unmapped result", &out[1], &(&y * 2.0), 0.0, 0.0);
}

// ---- nesting ----

#[test]
fn vmap_nested_four_deep_with_different_in_axes_equals_four_loops() {
    let f = |x: &Tensor, y: &Tensor| (x * y).sum_all() + x.max_all();
    // Innermost first: each level maps both arguments along its own axes.
    let l1 = vmap(f, [Some(0), None], 0);
    let l2 = vmap(l1, [Some(1), Some(0)], 0);
    let l3 = vmap(l2, [Some(-1), Some(1)], 0);
    let l4 = vmap(l3, [Some(0), None], 0);
    // The shapes left after each level takes its axis, outermost first:
    let x = randf64(&[2, 2, 3, 4, 2], 67); // l4: 0 -> [2,3,4,2]; l3: -1 -> [2,3,4]; l2: 1 -> [2,4]; l1: 0 -> [4]
    let y = randf64(&[3, 2, 4], 68); // l4: None; l3: 1 -> [3,4]; l2: 0 -> [4]; l1: None
    let out = l4.call1(&[x.clone(), y.clone()]);
    let levels = vec![
        vec![Some(0), None],
        vec![Some(-1), Some(1)],
        vec![Some(1), Some(0)],
        vec![Some(0), None],
    ];
    let expected = nested_loop(&f.into_func(), &levels, &[x, y]).remove(0);
    assert_eq!(out.shape(), vec![2, 2, 3, 2]);
    assert_close("vmap^4", &out, &expected, 1e-12, 1e-12);
}

#[test]
fn vmap_of_a_func_built_from_a_slice_closure_equals_the_loop() {
    let f: Func = (|args: &[Tensor]| &args[0] * &args[1]).into_func();
    assert_vmap_matches_loop(f, &both0(), &[randf64(&[B, 2], 69), randf64(&[B, 2], 70)]);
}

// ---- primitives the front end decomposes, built directly ----

mod primitives {
    use super::*;
    use tensor_core::Op;

    #[test]
    fn vmap_of_the_neg_sub_div_pow_and_mulacc_primitives_equals_the_loop() {
        let (x, y, z) = (
            uniform_f64(&[B, 4], 80, 0.5, 2.0),
            uniform_f64(&[B, 4], 81, 0.5, 2.0),
            randf64(&[4], 82),
        );
        assert_vmap_matches_loop(
            |x: &Tensor| prim(Op::Neg, &[x]),
            &m0(),
            std::slice::from_ref(&x),
        );
        for op in [Op::Sub, Op::Div, Op::Pow, Op::Max] {
            let f = move |x: &Tensor, y: &Tensor| prim(op, &[x, y]);
            assert_vmap_matches_loop(f, &both0(), &[x.clone(), y.clone()]);
            assert_vmap_matches_loop(f, &[None, Some(0)], &[z.clone(), y.clone()]);
        }
        assert_vmap_matches_loop(
            |x: &Tensor, y: &Tensor, z: &Tensor| prim(Op::Mulacc, &[x, y, z]),
            &[Some(0), Some(0), None],
            &[x, y, z],
        );
    }

    #[test]
    fn vmap_of_the_stack_primitive_equals_the_loop() {
        let (a, b) = (randf64(&[B, 2, 3], 83), randf64(&[2, 3], 84));
        assert_vmap_matches_loop(
            |a: &Tensor, b: &Tensor| prim_stack(&[a, b, &(a * b)]),
            &[Some(0), None],
            &[a.clone(), b],
        );
        assert_vmap_matches_loop(
            |a: &Tensor, b: &Tensor| prim_stack(&[b, a]),
            &[Some(1), Some(2)],
            &[randf64(&[2, B, 3], 85), randf64(&[2, 3, B], 86)],
        );
    }

    #[test]
    fn vmap_of_contiguous_backward_equals_the_loop() {
        assert_vmap_matches_loop(
            |x: &Tensor| prim_marker(Op::ContiguousBackward, x) * 2.0,
            &m0(),
            &[randf64(&[B, 2], 87)],
        );
    }
}

// ---- edge cases ----

#[test]
fn vmap_of_the_identity_moves_the_mapped_axis_to_the_out_axis() {
    let x = randf64(&[2, B, 4], 88);
    let out = vmap(|x: &Tensor| x.clone(), 1, 0).call1(std::slice::from_ref(&x));
    assert_close(
        "identity",
        &out,
        &loop_stack(B, |i| sample(&x, 1, i)),
        0.0,
        0.0,
    );
    let out = vmap(|x: &Tensor| x.clone(), 1, 2).call1(std::slice::from_ref(&x));
    let expected = batch_axis_to(&loop_stack(B, |i| sample(&x, 1, i)), 2);
    assert_close("identity to axis 2", &out, &expected, 0.0, 0.0);
}

#[test]
fn vmap_over_a_batch_of_one_equals_the_loop() {
    assert_vmap_matches_loop(
        |x: &Tensor, y: &Tensor| x.matmul(y).softmax(-1).sum(0, false),
        &[Some(0), None],
        &[randf64(&[1, 2, 3], 89), randf64(&[3, 2], 90)],
    );
}

#[test]
fn vmap_of_a_function_returning_a_constant_scalar_repeats_it() {
    let out = vmap(|_x: &Tensor| Tensor::scalar(4.0f64), 0, 0).call1(&[randf64(&[B, 2], 91)]);
    assert_close(
        "constant",
        &out,
        &Tensor::full(&[B], 4.0, DType::F64),
        0.0,
        0.0,
    );
}

#[test]
fn vmap_of_a_closure_over_a_batched_value_equals_the_loop() {
    // The inner transform closes over `x`, which the outer vmap batches.
    let w = randf64(&[3], 92);
    let w2 = w.clone();
    let per_sample = move |x: &Tensor| {
        let x = x.clone();
        tensor_core::transform::grad(move |w: &Tensor| (w * &x).sin().sum_all(), 0)
            .call1(std::slice::from_ref(&w2))
    };
    let xs = randf64(&[B, 3], 93);
    let out = vmap(per_sample.clone(), 0, 0).call1(std::slice::from_ref(&xs));
    let expected = loop_stack(B, |i| per_sample(&sample(&xs, 0, i)));
    assert_close(
        "grad closing over a batched x",
        &out,
        &expected,
        1e-12,
        1e-12,
    );
}

#[test]
fn vmap_with_an_inner_out_axis_inside_an_outer_vmap_equals_the_loop() {
    let inner = vmap(|x: &Tensor| x.exp().sum(0, false), 0, 1);
    let outer = vmap(inner.clone(), 0, 0);
    let x = randf64(&[2, B, 2, 4], 94);
    let expected = loop_stack(2, |i| inner.call1(&[sample(&x, 0, i)]));
    assert_close(
        "inner out_axes 1",
        &outer.call1(std::slice::from_ref(&x)),
        &expected,
        1e-12,
        1e-12,
    );
}

#[test]
fn vmap_accepts_an_unmapped_0d_argument() {
    assert_vmap_matches_loop(
        |x: &Tensor, s: &Tensor| x * s,
        &[Some(0), None],
        &[randf64(&[B, 2], 95), Tensor::scalar(3.0f64)],
    );
}

#[test]
fn vmap_of_scatter_add_equals_the_loop_for_each_batched_operand() {
    let f = |base: &Tensor, i: &Tensor, src: &Tensor| base.scatter_add(1, i, src);
    let base = randf64(&[B, 2, 3], 96);
    let index = idx(vec![0, 2, 2, 1, 1, 1, 0, 0, 2, 2, 0, 1], &[B, 2, 2]);
    let src = randf64(&[B, 2, 2], 97);
    assert_vmap_matches_loop(
        f,
        &[Some(0), Some(0), Some(0)],
        &[base.clone(), index.clone(), src.clone()],
    );
    assert_vmap_matches_loop(
        f,
        &[None, Some(0), None],
        &[sample(&base, 0, 0), index.clone(), sample(&src, 0, 1)],
    );
    assert_vmap_matches_loop(
        f,
        &[Some(0), None, Some(0)],
        &[base, sample(&index, 0, 2), src],
    );
}
