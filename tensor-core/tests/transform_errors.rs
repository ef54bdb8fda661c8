//! Misuse of the transforms panics with JAX's diagnosis (which argument, which axis, which
//! size) and names the line of the user's call.

mod transform_common;

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use tensor_core::transform::{Func, grad, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap};
use tensor_core::{DType, Tensor};
use transform_common::*;

thread_local! {
    static EXPECTING_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// The message of the panic `f` raises. The expected panic is not reported on stderr; any
/// other panic (a failing assertion) still is.
fn panic_message(f: impl FnOnce()) -> String {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let report = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !EXPECTING_PANIC.get() {
                report(info)
            }
        }))
    });
    EXPECTING_PANIC.set(true);
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    EXPECTING_PANIC.set(false);
    let payload = outcome.expect_err("the call should panic");
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast::<&'static str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

/// Panics unless `message` contains every one of `parts` and names `line` of this file.
#[track_caller]
fn assert_names(message: &str, parts: &[&str], line: u32) {
    for part in parts {
        assert!(message.contains(part), "missing {part:?} in:\n{message}");
    }
    let site = format!("(called at {}:{line}:", file!());
    assert!(
        message.contains(&site),
        "missing the call site {site:?} in:\n{message}"
    );
}

fn f64s(shape: &[usize]) -> Tensor {
    randf64(shape, 1)
}

fn add(x: &Tensor, y: &Tensor) -> Tensor {
    x + y
}

// ---- vmap ----

#[test]
fn vmap_with_disagreeing_batch_sizes_names_each_argument_its_axis_and_size() {
    let f = vmap(add, [0, 1], 0);
    let args = [f64s(&[3, 4]), f64s(&[4, 2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &[
            "vmap: inconsistent sizes for the mapped axes",
            "argument 0 has size 3 along axis 0",
            "argument 1 has size 2 along axis 1",
        ],
        line,
    );
}

#[test]
#[should_panic(expected = "vmap: inconsistent sizes for the mapped axes: argument 0 has size 2")]
fn vmap_rejects_batch_sizes_that_disagree() {
    vmap(add, 0, 0).call(&[f64s(&[2, 3]), f64s(&[3, 3])]);
}

#[test]
fn vmap_with_an_axis_beyond_the_rank_names_the_argument_axis_and_rank() {
    let f = vmap(add, [Some(0), Some(2)], 0);
    let args = [f64s(&[3, 2]), f64s(&[2, 3])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &["vmap: in_axes asks to map argument 1 along axis 2, but it has rank 2 (shape [2, 3])"],
        line,
    );
}

#[test]
#[should_panic(expected = "map argument 0 along axis -3, but it has rank 2")]
fn vmap_rejects_a_negative_axis_beyond_the_rank() {
    vmap(|x: &Tensor| x * 2.0, -3, 0).call(&[f64s(&[2, 3])]);
}

#[test]
fn vmap_with_in_axes_of_the_wrong_length_says_how_many_it_got() {
    let f = vmap(add, [0, 0, 0], 0);
    let args = [f64s(&[2]), f64s(&[2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &["vmap: in_axes", "got 3 entries for 2 arguments"],
        line,
    );
}

#[test]
fn vmap_of_a_0d_argument_says_it_cannot_be_mapped() {
    let f = vmap(add, 0, 0);
    let args = [f64s(&[2]), Tensor::scalar(1.0f64)];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &["vmap: argument 1 is 0-d (a scalar) and cannot be mapped over"],
        line,
    );
}

#[test]
#[should_panic(expected = "vmap: at least one argument must be mapped")]
fn vmap_with_no_mapped_argument_is_rejected() {
    vmap(add, [None::<i32>, None], 0).call(&[f64s(&[2]), f64s(&[2])]);
}

#[test]
#[should_panic(expected = "vmap: out_axes 3 is out of range for result 0 of rank 3")]
fn vmap_with_an_out_axis_beyond_the_rank_is_rejected() {
    vmap(|x: &Tensor| x * 2.0, 0, 3).call(&[f64s(&[2, 3, 4])]);
}

#[test]
#[should_panic(
    expected = "vmap: out_axes is None for result 0, but that result depends on the mapped arguments"
)]
fn vmap_rejects_an_unmapped_out_axis_for_a_batched_result() {
    vmap(|x: &Tensor| x * 2.0, 0, None::<i32>).call(&[f64s(&[2, 3])]);
}

#[test]
#[should_panic(
    expected = "vmap: out_axes must be an int, None, or one entry per result, but got 1 entries for 2 results"
)]
fn vmap_rejects_out_axes_of_the_wrong_length() {
    vmap(|x: &Tensor| (x * 2.0, x * 3.0), 0, [0]).call(&[f64s(&[2, 3])]);
}

#[test]
#[should_panic(expected = "function takes 2 arguments but was called with 1")]
fn a_transformed_function_checks_its_arity() {
    vmap(add, 0, 0).call(&[f64s(&[2])]);
}

#[test]
fn an_error_deep_inside_nested_transforms_names_the_outermost_call() {
    // The bad vmap runs inside grad; the reported line is the user's call of grad's result.
    let inner = vmap(add, [0, 1], 0);
    let f = grad(
        move |x: &Tensor| inner.call1(&[x.clone(), x.clone()]).sum_all(),
        0,
    );
    let args = [f64s(&[2, 3])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(&msg, &["argument 1 has size 3 along axis 1"], line);
}

// ---- grad, jacobians ----

#[test]
fn grad_with_argnums_out_of_range_names_the_argnum_and_the_arity() {
    let f = grad(|x: &Tensor, y: &Tensor| (x * y).sum_all(), [0, 2]);
    let args = [f64s(&[2]), f64s(&[2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &["grad: argnums 2 is out of range: the function was called with 2 arguments"],
        line,
    );
}

#[test]
#[should_panic(expected = "grad: argnums is empty")]
fn grad_with_no_argnums_is_rejected() {
    grad(|x: &Tensor| x.sum_all(), Vec::<usize>::new()).call(&[f64s(&[2])]);
}

#[test]
#[should_panic(
    expected = "grad: argnums 1 is out of range: the function was called with 1 argument"
)]
fn jacfwd_with_an_argnum_out_of_range_is_rejected() {
    jacfwd(|x: &Tensor| x * 2.0, 1).call(&[f64s(&[2])]);
}

#[test]
#[should_panic(expected = "grad: argnums 3 is out of range")]
fn jacrev_with_an_argnum_out_of_range_is_rejected() {
    jacrev(|x: &Tensor| x * 2.0, 3).call(&[f64s(&[2])]);
}

#[test]
fn grad_of_a_non_scalar_output_names_its_shape() {
    let f = grad(|x: &Tensor| x * 2.0, 0);
    let args = [f64s(&[3])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &["grad: the function must return one scalar (shape []), but it returned shapes [[3]]"],
        line,
    );
}

#[test]
#[should_panic(
    expected = "grad: the function must return one scalar (shape []), but it returned shapes [[], []]"
)]
fn value_and_grad_of_several_outputs_is_rejected() {
    value_and_grad(|x: &Tensor| (x.sum_all(), x.sum_all()), 0).call(&[f64s(&[3])]);
}

#[test]
#[should_panic(
    expected = "jacobian: the differentiated value must be a float tensor, but it is i32"
)]
fn jacfwd_of_an_integer_argument_is_rejected() {
    jacfwd(|x: &Tensor| x * 2, 0).call(&[Tensor::from_vec(vec![1i32, 2], &[2])]);
}

// ---- jvp, vjp ----

#[test]
fn jvp_with_a_missing_tangent_names_both_counts_and_the_call() {
    let primals = [f64s(&[2]), f64s(&[2])];
    let tangents = [f64s(&[2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(jvp(add, &primals, &tangents)));
    assert_names(&msg, &["jvp: got 2 primals but 1 tangents"], line);
}

#[test]
fn jvp_with_a_tangent_of_the_wrong_shape_names_both_shapes_and_the_call() {
    let primals = [f64s(&[2, 3])];
    let tangents = [f64s(&[3, 2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(jvp(|x: &Tensor| x.sin(), &primals, &tangents)));
    assert_names(
        &msg,
        &["jvp: primal 0 is f64[2, 3] but its tangent is f64[3, 2]"],
        line,
    );
}

#[test]
#[should_panic(expected = "jvp: primal 0 is f64[2] but its tangent is f32[2]")]
fn jvp_with_a_tangent_of_the_wrong_dtype_is_rejected() {
    jvp(|x: &Tensor| x.sin(), &[f64s(&[2])], &[randf32(&[2], 1)]);
}

#[test]
fn vjp_pullback_with_a_cotangent_of_the_wrong_shape_names_both_shapes_and_the_call() {
    let (_, pullback) = vjp(|x: &Tensor| x.sum(0, false), &[f64s(&[2, 3])]);
    let cotangents = [f64s(&[2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(pullback.call(&cotangents)));
    assert_names(
        &msg,
        &["vjp: cotangent 0 has shape [2] but result 0 has shape [3]"],
        line,
    );
}

#[test]
#[should_panic(expected = "function takes 2 arguments but was called with 1")]
fn vjp_pullback_takes_one_cotangent_per_result() {
    let (_, pullback) = vjp(|x: &Tensor| (x * 2.0, x * 3.0), &[f64s(&[2])]);
    pullback.call(&[f64s(&[2])]);
}

#[test]
#[should_panic(expected = "call1: the function returned 2 results, expected exactly one")]
fn call1_of_a_function_with_two_results_is_rejected() {
    let f: Func = vmap(|x: &Tensor| (x * 2.0, x * 3.0), 0, 0);
    f.call1(&[Tensor::zeros(&[2, 2], DType::F64)]);
}

#[test]
fn grad_with_respect_to_an_integer_argument_names_it_and_the_call() {
    let f = grad(|x: &Tensor| x.cast(DType::F64).sum_all(), 0);
    let args = [Tensor::from_vec(vec![1i32, 2], &[2])];
    let line = line!() + 1;
    let msg = panic_message(|| drop(f.call(&args)));
    assert_names(
        &msg,
        &[
            "grad: argument 0 is i32[2], but gradients are taken with respect to float arguments only",
        ],
        line,
    );
}
