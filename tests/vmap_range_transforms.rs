//! Transforms of functions that contain a vmap by range, compiled for the CPU: gradients,
//! pullbacks, Jacobians and Hessians through `Vmapin`/`Vmapout` scopes (and the cotangent sums
//! over the ranges a weight leaves behind) give the same values as the same functions built
//! with vmap by rewrite, as the reference interpreter and as a loop over the samples. The
//! macro path (`grad!` of a function using `vmap!(.., method = range)`) too.

mod common;

use common::{allclose, interpreted, max_abs_diff, values};
use tensor::core::transform::{
    Func, IntoFunc, VmapMethod, grad, hessian, jacfwd, jacrev, value_and_grad, vjp, vmap_with,
};
use tensor::prelude::*;

const RANGE: VmapMethod = VmapMethod::Range;
const REWRITE: VmapMethod = VmapMethod::Rewrite;

fn data(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| (((i * 29 + seed * 13) % 17) as f32 - 8.0) / 8.0)
            .collect(),
        shape,
    )
}

/// Sample `i` of a batch stacked on axis 0.
fn sample(x: &Tensor, i: usize) -> Tensor {
    x.slice(0, i as isize, i as isize + 1).squeeze(0)
}

/// Panics unless the compiled values of `actual` equal `expected` within `1e-4`.
#[track_caller]
fn assert_close(what: &str, actual: &Tensor, expected: &[f64]) {
    let got = values(actual);
    assert!(
        allclose(&got, expected, 1e-4, 1e-5),
        "{what}: off by {}\n got      {got:?}\n expected {expected:?}",
        max_abs_diff(&got, expected)
    );
}

/// Panics unless each result of `build(RANGE)` (and of `build(PadReduce)`) compiled equals
/// `build(REWRITE)` compiled and the interpreter's value of the same graph.
#[track_caller]
fn assert_methods_agree(what: &str, build: impl Fn(VmapMethod) -> Vec<Tensor>) {
    assert_method_matches_rewrite(what, RANGE, &build);
    assert_method_matches_rewrite(what, VmapMethod::PadReduce, &build);
}

#[track_caller]
fn assert_method_matches_rewrite(
    what: &str,
    method: VmapMethod,
    build: &impl Fn(VmapMethod) -> Vec<Tensor>,
) {
    let what = format!("{what} by {method:?}");
    let (range, rewrite) = (build(method), build(REWRITE));
    assert_eq!(range.len(), rewrite.len(), "{what}: number of results");
    for (k, (a, b)) in range.iter().zip(&rewrite).enumerate() {
        assert_eq!(a.shape(), b.shape(), "{what}: shape of result {k}");
        assert_close(&format!("{what} [{k}] vs rewrite"), a, &values(b));
        assert_close(&format!("{what} [{k}] vs interpreter"), a, &interpreted(a));
    }
}

/// The per-sample loss of a small MLP; `w1`, `b`, `w2` are unmapped weights used in the scope.
fn mlp_loss(w1: &Tensor, b: &Tensor, w2: &Tensor, x: &Tensor) -> Tensor {
    let hidden = (x.matmul(w1) + b).tanh();
    (hidden.matmul(w2) - 0.5).square().sum_all()
}

/// The mean of the per-sample MLP losses over the rows of `x`, vmapped by `method`.
fn mean_loss(method: VmapMethod) -> Func {
    let batched = vmap_with(mlp_loss, [None, None, None, Some(0)], 0, method);
    Func::new(Some(4), move |args: &[Tensor]| {
        vec![batched.call1(args).mean_all()]
    })
}

fn mlp_args() -> Vec<Tensor> {
    vec![
        data(&[3, 4], 1),
        data(&[4], 2),
        data(&[4, 2], 3),
        data(&[5, 3], 4),
    ]
}

#[test]
fn grad_of_a_mean_per_sample_loss_compiles_to_the_rewrite_values() {
    let args = mlp_args();
    assert_methods_agree("grad", |m| grad(mean_loss(m), vec![0, 1, 2, 3]).call(&args));
    assert_methods_agree("value_and_grad", |m| {
        value_and_grad(mean_loss(m), vec![0, 3]).call(&args)
    });
}

#[test]
fn the_weight_gradient_is_the_sum_of_the_per_sample_gradients() {
    // The oracle without any vmap: a loop over the samples, each differentiated alone.
    let args = mlp_args();
    let per_sample = |i: usize| {
        let mut a = args.clone();
        a[3] = sample(&args[3], i);
        values(&grad(mlp_loss, 0).call1(&a))
    };
    let n = args[3].shape()[0];
    let expected: Vec<f64> = (0..n).map(per_sample).fold(vec![0.0; 12], |acc, g| {
        acc.iter().zip(g).map(|(a, g)| a + g / n as f64).collect()
    });
    let by_range = grad(mean_loss(RANGE), 0).call1(&args);
    assert_close("d/dw1 by range vs loop", &by_range, &expected);
}

/// Per-sample `tanh(x W) * |x|²`, the batch stacked at axis 0.
fn batched_map(method: VmapMethod) -> Func {
    let body = |w: &Tensor, x: &Tensor| x.matmul(w).tanh() * x.square().sum_all();
    vmap_with(body, [None, Some(0)], 0, method)
}

#[test]
fn vjp_jacrev_and_jacfwd_of_a_batched_function() {
    let args = [data(&[3, 2], 5), data(&[4, 3], 6)];
    let ct = data(&[4, 2], 7);
    assert_methods_agree("vjp", |m| {
        let (_, pullback) = vjp(batched_map(m), &args);
        pullback.call(std::slice::from_ref(&ct))
    });
    for argnum in [0, 1] {
        assert_methods_agree("jacrev", |m| jacrev(batched_map(m), argnum).call(&args));
        assert_methods_agree("jacfwd", |m| jacfwd(batched_map(m), argnum).call(&args));
    }
}

#[test]
fn hessian_through_a_range_vmap() {
    let loss = |method| {
        let body = |w: &Tensor, x: &Tensor| (x * w).tanh().sum_all().square();
        let batched = vmap_with(body, [None, Some(0)], 0, method);
        Func::new(Some(2), move |args: &[Tensor]| {
            vec![batched.call1(args).sum_all()]
        })
    };
    let args = [data(&[3], 8), data(&[4, 3], 9)];
    for argnum in [0, 1] {
        assert_methods_agree("hessian", |m| hessian(loss(m), argnum).call(&args));
    }
}

#[test]
fn per_sample_gradients_by_range() {
    let per_sample = |w: &Tensor, x: &Tensor| (x.matmul(w).tanh() - 0.25).square().sum_all();
    let args = [data(&[3, 2], 10), data(&[5, 3], 11)];
    let expected: Vec<f64> = (0..5)
        .flat_map(|i| values(&grad(per_sample, 0).call1(&[args[0].clone(), sample(&args[1], i)])))
        .collect();
    for method in [RANGE, REWRITE] {
        let g = vmap_with(grad(per_sample, 0), [None, Some(0)], 0, method).call1(&args);
        assert_eq!(g.shape(), vec![5, 3, 2]);
        assert_close(&format!("per-sample grads by {method:?}"), &g, &expected);
    }
}

#[test]
fn grad_through_nested_and_mixed_vmaps() {
    let loss = |outer: VmapMethod, inner: VmapMethod| {
        let body = vmap_with(
            |w: &Tensor, v: &Tensor| v.matmul(w).sin().sum_all(),
            [None, Some(0)],
            0,
            inner,
        );
        let batched = vmap_with(body, [None, Some(0)], 0, outer);
        Func::new(Some(2), move |args: &[Tensor]| {
            vec![batched.call1(args).square().sum_all()]
        })
    };
    let args = [data(&[3, 2], 12), data(&[2, 4, 3], 13)];
    let reference = grad(loss(REWRITE, REWRITE), vec![0, 1]).call(&args);
    for (outer, inner) in [(RANGE, RANGE), (REWRITE, RANGE), (RANGE, REWRITE)] {
        let g = grad(loss(outer, inner), vec![0, 1]).call(&args);
        for (k, (a, b)) in g.iter().zip(&reference).enumerate() {
            assert_close(&format!("grad {k}, {outer:?} of {inner:?}"), a, &values(b));
        }
    }
}

/// `f` vmapped over axis 0 of its arguments once per method (outermost first), compiled,
/// against the samples looped on the host.
#[track_caller]
fn assert_nested_matches_loop<M>(f: impl IntoFunc<M>, methods: &[VmapMethod], args: &[Tensor]) {
    let f: Func = f.into_func();
    let n = args.len();
    let batched = methods
        .iter()
        .rev()
        .fold(f.clone(), |g, &m| vmap_with(g, vec![Some(0); n], 0, m));
    let got = batched.call1(args);
    assert_close(
        &format!("{methods:?}"),
        &got,
        &looped(&f, methods.len(), args),
    );
}

/// The values of `f` applied to every sample of the first `depth` axes, in row-major order.
fn looped(f: &Func, depth: usize, args: &[Tensor]) -> Vec<f64> {
    if depth == 0 {
        return values(&f.call1(args));
    }
    (0..args[0].shape()[0])
        .flat_map(|i| {
            let sliced: Vec<Tensor> = args.iter().map(|a| sample(a, i)).collect();
            looped(f, depth - 1, &sliced)
        })
        .collect()
}

#[test]
fn rewrite_vmaps_of_range_vmaps_and_back_compile() {
    let f = |x: &Tensor, y: &Tensor| x.matmul(y).relu().sum(0, false) + x.max_all();
    let args = |batch: &[usize]| {
        [
            data(&[batch, &[2, 4]].concat(), 14),
            data(&[batch, &[4, 2]].concat(), 15),
        ]
    };
    for methods in [[REWRITE, RANGE], [RANGE, REWRITE], [RANGE, RANGE]] {
        assert_nested_matches_loop(f, &methods, &args(&[2, 3]));
    }
    for methods in [
        [REWRITE, RANGE, REWRITE],
        [RANGE, REWRITE, RANGE],
        [RANGE, RANGE, REWRITE],
    ] {
        assert_nested_matches_loop(f, &methods, &args(&[2, 3, 2]));
    }
}

fn macro_loss(w: &Tensor, xs: &Tensor) -> Tensor {
    vmap!(
        |w, x| (x.matmul(w) - 1.0).square().sum_all(),
        in_axes = (None, 0),
        method = range
    )(w, xs)
    .sum_all()
}

fn macro_loss_by_rewrite(w: &Tensor, xs: &Tensor) -> Tensor {
    vmap!(
        |w, x| (x.matmul(w) - 1.0).square().sum_all(),
        in_axes = (None, 0)
    )(w, xs)
    .sum_all()
}

#[test]
fn grad_macro_of_a_function_using_vmap_by_range() {
    let (w, xs) = (data(&[3, 2], 16), data(&[4, 3], 17));
    let (gw, gx): (Tensor, Tensor) = grad!(macro_loss, argnums = (0, 1))(&w, &xs);
    let (rw, rx): (Tensor, Tensor) = grad!(macro_loss_by_rewrite, argnums = (0, 1))(&w, &xs);
    assert_close("grad! d/dw", &gw, &values(&rw));
    assert_close("grad! d/dxs", &gx, &values(&rx));
    // d/dw of Σ_i |x_i W - 1|² is Σ_i 2 x_iᵀ (x_i W - 1), by hand on the host.
    let (wv, xv) = (values(&w), values(&xs));
    let mut expected = vec![0.0; 6];
    for i in 0..4 {
        let x = &xv[3 * i..3 * i + 3];
        for j in 0..2 {
            let r = (0..3).map(|k| x[k] * wv[2 * k + j]).sum::<f64>() - 1.0;
            for k in 0..3 {
                expected[2 * k + j] += 2.0 * x[k] * r;
            }
        }
    }
    assert_close("grad! d/dw by hand", &gw, &expected);
}
