//! The golden cases of tests/data/transforms.json written with the macros (`vmap!`, `jvp!`,
//! `grad!`, `jacfwd!`, ... and `#[function]` items), compared with JAX's results within the
//! file's tolerances. tests/golden_transforms.rs builds the same cases with the plain API, so
//! the two suites agreeing with one file is the macros agreeing with the plain API.

mod common;

use common::golden::{self, Inputs};
use common::values;
use tensor::prelude::*;

#[function]
fn mlp_loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let h = (x.matmul(w1) + b1).relu();
    let logits = h.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

#[function]
fn softmax(x: &Tensor) -> Tensor {
    x.softmax(-1)
}

/// A plain fn (no `#[function]`): the macros take any fn of tensors.
fn sin_times_flip(x: &Tensor) -> Tensor {
    x.sin() * x.flip(0)
}

/// The case's function, built with the macros, applied to its inputs.
fn run_case(name: &str, i: &Inputs) -> Vec<Tensor> {
    let arg = |k: &str| i[k].clone();
    match name {
        "vmap_affine" => vec![vmap!(|x| x * 2.0 + 1.0)(&arg("x"))],
        "vmap_matvec" => vec![vmap!(|w, x| w.matmul(x), in_axes = (None, 0))(
            &arg("W"),
            &arg("x"),
        )],
        "vmap_in_axis1_sum" => vec![vmap!(|x| x.sum_all(), in_axes = 1)(&arg("x"))],
        "vmap_out_axis1" => vec![vmap!(|x| x * x + x, out_axes = 1)(&arg("x"))],
        "vmap_unbatched_output" => {
            vec![vmap!(|_x, y| y * 3.0, in_axes = (0, None))(
                &arg("x"),
                &arg("y"),
            )]
        }
        "vmap_softmax" => vec![vmap!(softmax)(&arg("x"))],
        "vmap_movement" => vec![vmap!(|x| {
            x.reshape(&[2, 3])
                .transpose(0, 1)
                .flip(0)
                .pad(&[(1, 0), (0, 1)])
                .shrink(&[(1, 4), (0, 2)])
        })(&arg("x"))],
        "vmap_sub_max" => vec![vmap!(|x| x - x.max(1, true))(&arg("x"))],
        "vmap_nested_dot" => {
            let dot = vmap!(
                vmap!(|x, y| (x * y).sum_all(), in_axes = (0, 0)),
                in_axes = (0, None)
            );
            vec![dot(&arg("x"), &arg("y"))]
        }
        "vmap_stack_reindex" => vec![vmap!(|x| {
            let halves =
                Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0);
            halves.take(&Tensor::from_vec(vec![1i32, 0], &[2]), 0)
        })(&arg("x"))],
        "vmap_gather" => {
            vec![vmap!(|t, idx| t.take(idx, 0), in_axes = (None, 0))(
                &arg("table"),
                &arg("idx"),
            )]
        }
        "vmap_cat" => vec![vmap!(
            |x, y| Tensor::cat(&[x.clone(), y.clone()], 0),
            in_axes = (0, None)
        )(&arg("x"), &arg("y"))],
        "vmap_matmul_both" => vec![vmap!(|a, b| a.matmul(b))(&arg("a"), &arg("b"))],
        "jvp_sin_exp" => pair(jvp!(|x| x.sin() * x.exp(), (arg("x"),), (arg("t_x"),))),
        "jvp_tanh_matvec" => pair(jvp!(
            |w, x| w.matmul(x).tanh(),
            (arg("W"), arg("x")),
            (arg("t_W"), arg("t_x"))
        )),
        "jvp_softmax" => pair(jvp!(softmax, (arg("x"),), (arg("t_x"),))),
        "jvp_div_sqrt_log" => pair(jvp!(
            |x, y| x.sqrt() / y + x.log(),
            (arg("x"), arg("y")),
            (arg("t_x"), arg("t_y"))
        )),
        "grad_sum_sq" => vec![grad!(|x| x.pow(2.0).sum_all())(&arg("x"))],
        "grad_logsumexp" => vec![grad!(|x| x.exp().sum_all().log(), argnums = 0)(&arg("x"))],
        "grad_mlp_loss" => {
            let [w1, b1, w2, b2, x, y] = mlp_args(i);
            let (g1, gb1, g2, gb2) =
                grad!(mlp_loss, argnums = (0, 1, 2, 3))(&w1, &b1, &w2, &b2, &x, &y);
            vec![g1, gb1, g2, gb2]
        }
        "per_sample_grads_mlp" => {
            let [w1, b1, w2, b2, x, y] = mlp_args(i);
            let per_sample = vmap!(
                grad!(mlp_loss, argnums = (0, 1, 2, 3)),
                in_axes = (None, None, None, None, 0, 0)
            );
            let (g1, gb1, g2, gb2) = per_sample(&w1, &b1, &w2, &b2, &x, &y);
            vec![g1, gb1, g2, gb2]
        }
        "jacfwd_tanh_matvec" => {
            let w = arg("W");
            vec![jacfwd!(move |x| w.matmul(x).tanh())(&arg("x"))]
        }
        "jacrev_softmax" => vec![jacrev!(softmax, argnums = 0)(&arg("x"))],
        "hessian_quartic" => vec![hessian!(|x| {
            x.pow(4.0).sum_all() + (x.slice(0, 0, 1) * x.slice(0, 1, 2)).reshape(&[0usize; 0])
        })(&arg("x"))],
        "vmap_of_jvp_columns" => {
            let x = arg("x");
            let column = vmap!(move |t| jvp!(sin_times_flip, (&x,), (t,)).1);
            vec![column(&arg("basis"))]
        }
        other => panic!("no builder for golden case {other}: add one to tests/golden_macros.rs"),
    }
}

fn pair((value, tangent): (Tensor, Tensor)) -> Vec<Tensor> {
    vec![value, tangent]
}

fn mlp_args(i: &Inputs) -> [Tensor; 6] {
    ["W1", "b1", "W2", "b2", "x", "y"].map(|k| i[k].clone())
}

#[test]
fn every_golden_case_written_with_the_macros_matches_jax() {
    golden::check_all_cases("(macros)", run_case);
}

#[test]
fn transforms_of_a_function_item_trace_its_body_once_per_signature() {
    #[function]
    fn row_softmax(x: &Tensor) -> Tensor {
        x.softmax(-1)
    }
    let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.25, 1.5, -0.5], &[2, 3]);
    let batched = vmap!(row_softmax);
    let first = batched(&x);
    let _ = jacrev!(row_softmax)(&x.slice(0, 0, 1).reshape(&[3]));
    let again = batched(&x);
    // vmap traces row_softmax on a [3] row, jacrev on a [3] vector: one signature, one trace.
    assert_eq!(row_softmax::trace_count(), 1);
    assert_eq!(values(&first), values(&again));
    assert_eq!(values(&first), values(&x.softmax(-1)));
}
