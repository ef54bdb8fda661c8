//! The builders of the golden transform cases (tests/data/transforms.json): each case's
//! function written with this crate's API, applied to its inputs. Shared by the tests that
//! run the cases on the CPU and on the emulated GPU.

use super::common::golden::Inputs;
use std::cell::Cell;
use tensor::core::transform::{InAxes, IntoFunc, OutAxes, VmapMethod, vmap_with};
use tensor::prelude::{Func, Tensor, grad, hessian, jacfwd, jacrev, jvp};

thread_local! {
    /// The vmap method the cases are built with: every case runs under both.
    pub static METHOD: Cell<VmapMethod> = const { Cell::new(VmapMethod::Rewrite) };
}

/// `vmap` by the method under test.
fn vmap<M>(f: impl IntoFunc<M>, in_axes: impl Into<InAxes>, out_axes: impl Into<OutAxes>) -> Func {
    vmap_with(f, in_axes, out_axes, METHOD.get())
}

fn mlp_loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let h = (x.matmul(w1) + b1).relu();
    let logits = h.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

fn softmax(x: &Tensor) -> Tensor {
    x.softmax(-1)
}

/// The case's function, built with this crate's API, applied to its inputs.
pub fn run_case(name: &str, i: &Inputs) -> Vec<Tensor> {
    let arg = |k: &str| i[k].clone();
    match name {
        "vmap_affine" => vmap(|x: &Tensor| x * 2.0 + 1.0, 0, 0).call(&[arg("x")]),
        "vmap_matvec" => vmap(|w: &Tensor, x: &Tensor| w.matmul(x), [None, Some(0)], 0)
            .call(&[arg("W"), arg("x")]),
        "vmap_in_axis1_sum" => vmap(|x: &Tensor| x.sum_all(), 1, 0).call(&[arg("x")]),
        "vmap_out_axis1" => vmap(|x: &Tensor| x * x + x, 0, 1).call(&[arg("x")]),
        "vmap_unbatched_output" => {
            vmap(|_x: &Tensor, y: &Tensor| y * 3.0, [Some(0), None], 0).call(&[arg("x"), arg("y")])
        }
        "vmap_softmax" => vmap(softmax, 0, 0).call(&[arg("x")]),
        "vmap_movement" => vmap(
            |x: &Tensor| {
                x.reshape(&[2, 3])
                    .transpose(0, 1)
                    .flip(0)
                    .pad(&[(1, 0), (0, 1)])
                    .shrink(&[(1, 4), (0, 2)])
            },
            0,
            0,
        )
        .call(&[arg("x")]),
        "vmap_sub_max" => vmap(|x: &Tensor| x - x.max(1, true), 0, 0).call(&[arg("x")]),
        "vmap_nested_dot" => {
            let dot = vmap(|x: &Tensor, y: &Tensor| (x * y).sum_all(), [0, 0], 0);
            vmap(dot, [Some(0), None], 0).call(&[arg("x"), arg("y")])
        }
        "vmap_stack_reindex" => vmap(
            |x: &Tensor| {
                let halves =
                    Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0);
                halves.take(&Tensor::from_vec(vec![1i32, 0], &[2]), 0)
            },
            0,
            0,
        )
        .call(&[arg("x")]),
        "vmap_gather" => vmap(
            |t: &Tensor, idx: &Tensor| t.take(idx, 0),
            [None, Some(0)],
            0,
        )
        .call(&[arg("table"), arg("idx")]),
        "vmap_cat" => vmap(
            |x: &Tensor, y: &Tensor| Tensor::cat(&[x.clone(), y.clone()], 0),
            [Some(0), None],
            0,
        )
        .call(&[arg("x"), arg("y")]),
        "vmap_matmul_both" => {
            vmap(|a: &Tensor, b: &Tensor| a.matmul(b), 0, 0).call(&[arg("a"), arg("b")])
        }
        "jvp_sin_exp" => both(jvp(
            |x: &Tensor| x.sin() * x.exp(),
            &[arg("x")],
            &[arg("t_x")],
        )),
        "jvp_tanh_matvec" => both(jvp(
            |w: &Tensor, x: &Tensor| w.matmul(x).tanh(),
            &[arg("W"), arg("x")],
            &[arg("t_W"), arg("t_x")],
        )),
        "jvp_softmax" => both(jvp(softmax, &[arg("x")], &[arg("t_x")])),
        "jvp_div_sqrt_log" => both(jvp(
            |x: &Tensor, y: &Tensor| x.sqrt() / y + x.log(),
            &[arg("x"), arg("y")],
            &[arg("t_x"), arg("t_y")],
        )),
        "grad_sum_sq" => grad(|x: &Tensor| x.pow(2.0).sum_all(), 0).call(&[arg("x")]),
        "grad_logsumexp" => grad(|x: &Tensor| x.exp().sum_all().log(), 0).call(&[arg("x")]),
        "grad_mlp_loss" => grad(mlp_loss, [0, 1, 2, 3]).call(&mlp_args(i)),
        "per_sample_grads_mlp" => {
            let in_axes = [None, None, None, None, Some(0), Some(0)];
            vmap(grad(mlp_loss, [0, 1, 2, 3]), in_axes, 0).call(&mlp_args(i))
        }
        "jacfwd_tanh_matvec" => {
            let w = arg("W");
            jacfwd(move |x: &Tensor| w.matmul(x).tanh(), 0).call(&[arg("x")])
        }
        "jacrev_softmax" => jacrev(softmax, 0).call(&[arg("x")]),
        "hessian_quartic" => hessian(
            |x: &Tensor| {
                x.pow(4.0).sum_all() + (x.slice(0, 0, 1) * x.slice(0, 1, 2)).reshape(&[0usize; 0])
            },
            0,
        )
        .call(&[arg("x")]),
        "vmap_of_jvp_columns" => {
            let x = arg("x");
            let column = move |t: &Tensor| {
                jvp(
                    |x: &Tensor| x.sin() * x.flip(0),
                    std::slice::from_ref(&x),
                    std::slice::from_ref(t),
                )
                .1
            };
            vmap(column, 0, 0).call(&[arg("basis")])
        }
        other => {
            panic!("no builder for golden case {other}: add one to tests/common/golden_cases.rs")
        }
    }
}

fn both((outputs, tangents): (Vec<Tensor>, Vec<Tensor>)) -> Vec<Tensor> {
    outputs.into_iter().chain(tangents).collect()
}

fn mlp_args(i: &Inputs) -> Vec<Tensor> {
    ["W1", "b1", "W2", "b2", "x", "y"]
        .iter()
        .map(|k| i[*k].clone())
        .collect()
}
