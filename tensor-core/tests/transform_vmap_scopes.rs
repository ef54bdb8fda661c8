//! Every transform composes with vmap by range (`Vmapin`/`Vmapout` scopes) as it does with vmap
//! by rewrite: gradients, pullbacks, Jacobians and Hessians of functions that contain a range
//! vmap, and rewrite vmaps of range vmaps (and back), checked with the reference interpreter
//! against the rewrite method, central finite differences and loops over the samples. The
//! pad+reduce method (windows sliding with a range, a reduce over ranges) is checked alongside.

mod transform_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use tensor_core::transform::vmap;
use tensor_core::transform::{
    Func, IntoFunc, VmapMethod, grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap_with,
};
use tensor_core::{AxisType, ReduceOp, Tensor, UOp};
use transform_common::*;

const EPS: f64 = 1e-6;
const RANGE: VmapMethod = VmapMethod::Range;
const REWRITE: VmapMethod = VmapMethod::Rewrite;
const PAD_REDUCE: VmapMethod = VmapMethod::PadReduce;
/// The loop methods under test; the rewrite method is the reference.
const LOOPED: [VmapMethod; 2] = [RANGE, PAD_REDUCE];

/// `per_sample` mapped over axis 0 of its last argument by `method` (the others unmapped), the
/// per-sample results reduced to a scalar by `total`.
fn batched_loss(
    method: VmapMethod,
    per_sample: impl Fn(&[Tensor]) -> Tensor + Send + Sync + 'static,
    total: fn(&Tensor) -> Tensor,
) -> Func {
    let per_sample = Func::new(None, move |args: &[Tensor]| vec![per_sample(args)]);
    Func::new(None, move |args: &[Tensor]| {
        let mut in_axes = vec![None; args.len()];
        in_axes[args.len() - 1] = Some(0);
        let losses = vmap_with(per_sample.clone(), in_axes, 0, method).call1(args);
        vec![total(&losses)]
    })
}

/// A small MLP loss of one sample `x`: weights `w1`, `w2` and bias `b` are unmapped.
fn mlp_loss(args: &[Tensor]) -> Tensor {
    let (w1, b, w2, x) = (&args[0], &args[1], &args[2], &args[3]);
    let hidden = (x.matmul(w1) + b).tanh();
    (hidden.matmul(w2) - 0.5).square().sum_all()
}

/// Panics unless the gradient of `loss(method)` with respect to every argument is the same by
/// both methods and matches central finite differences.
#[track_caller]
fn assert_grads_agree(what: &str, loss: impl Fn(VmapMethod) -> Func, args: &[Tensor]) {
    for argnum in 0..args.len() {
        let fd = fd_gradient(&loss(REWRITE), args, argnum, EPS);
        for method in [RANGE, PAD_REDUCE, REWRITE] {
            let g = grad(loss(method), argnum).call1(args);
            assert_eq!(g.shape(), args[argnum].shape(), "{what}: gradient shape");
            let name = format!("{what}: d/d arg {argnum} by {method:?} vs finite differences");
            assert_values_close(&name, &values(&g), &fd, 1e-6, 1e-7);
        }
    }
}

fn mlp_args() -> Vec<Tensor> {
    vec![
        randf64(&[3, 4], 1),
        randf64(&[4], 2),
        randf64(&[4, 2], 3),
        randf64(&[5, 3], 4),
    ]
}

#[test]
fn grad_of_summed_per_sample_losses_with_a_weight_inside_the_scope() {
    let loss = |m| batched_loss(m, mlp_loss, Tensor::sum_all);
    assert_grads_agree("summed mlp", loss, &mlp_args());
}

#[test]
fn grad_of_meaned_per_sample_losses() {
    let loss = |m| batched_loss(m, mlp_loss, Tensor::mean_all);
    assert_grads_agree("meaned mlp", loss, &mlp_args());
}

#[test]
fn grad_where_the_per_sample_results_are_combined_after_the_scope() {
    // The stacked losses are weighted outside the scope: the cotangent entering Vmapout
    // differs per sample.
    let weighted = |l: &Tensor| (l * l.sin()).sum_all();
    let loss = move |m| batched_loss(m, mlp_loss, weighted);
    assert_grads_agree("weighted mlp", loss, &mlp_args());
}

#[test]
fn grad_of_a_constant_computed_outside_the_scope_and_captured_inside() {
    // `scale` depends on `w` but is computed once, outside the scope, and captured by the body.
    let loss = |method| {
        Func::new(Some(2), move |args: &[Tensor]| {
            let scale = args[0].exp();
            let body = move |x: &Tensor| (x * &scale).sin().sum_all();
            let per_sample = vmap_with(body, 0, 0, method).call1(&args[1..]);
            vec![per_sample.square().sum_all()]
        })
    };
    assert_grads_agree(
        "captured constant",
        loss,
        &[randf64(&[3], 5), randf64(&[4, 3], 6)],
    );
}

#[test]
fn grad_of_a_reduction_inside_the_scope_over_an_unmapped_argument_only() {
    // A per-sample value that does not depend on the sample at all: its cotangent from every
    // sample still adds up into the unmapped argument.
    let loss = |method| {
        let body = |w: &Tensor, x: &Tensor| w.max(0, false).sum_all() * 2.0 + x.sum_all();
        let batched = vmap_with(body, [None, Some(0)], 0, method);
        Func::new(Some(2), move |args: &[Tensor]| {
            vec![batched.call1(args).sum_all()]
        })
    };
    assert_grads_agree(
        "unmapped only",
        loss,
        &[distinct_f64(&[3, 2], 7), randf64(&[4, 2], 8)],
    );
}

#[test]
fn grad_through_nested_range_vmaps() {
    // Two scopes: rows of `x` in the outer, their entries in the inner; `w` is used in both.
    let loss = |method| {
        let inner = vmap_with(
            |w: &Tensor, v: &Tensor| (v * w).sin().sum_all(),
            [None, Some(0)],
            0,
            method,
        );
        let outer_body = {
            let inner = inner.clone();
            move |w: &Tensor, row: &Tensor| {
                (inner.call1(&[w.clone(), row.clone()]) * w.sum_all()).sum_all()
            }
        };
        let outer = vmap_with(outer_body, [None, Some(0)], 0, method);
        Func::new(Some(2), move |args: &[Tensor]| {
            vec![outer.call1(args).square().sum_all()]
        })
    };
    assert_grads_agree("nested", loss, &[randf64(&[2], 9), randf64(&[3, 4, 2], 10)]);
}

#[test]
fn value_and_grad_with_several_argnums() {
    let args = mlp_args();
    let loss = |m| batched_loss(m, mlp_loss, Tensor::mean_all);
    let by = |m| value_and_grad(loss(m), vec![0, 2, 3]).call(&args);
    let (range, rewrite) = (by(RANGE), by(REWRITE));
    assert_eq!(range.len(), 4, "the value and three gradients");
    let pad_reduce = by(PAD_REDUCE);
    for (k, (a, b)) in pad_reduce.iter().zip(&rewrite).enumerate() {
        assert_close(
            &format!("entry {k} pad+reduce vs rewrite"),
            a,
            b,
            1e-10,
            1e-12,
        );
    }
    assert_close(
        "value",
        &range[0],
        &loss(REWRITE).call1(&args),
        1e-12,
        1e-12,
    );
    for (k, (a, b)) in range.iter().zip(&rewrite).enumerate() {
        assert_close(&format!("entry {k} range vs rewrite"), a, b, 1e-10, 1e-12);
    }
    let fd = fd_gradient(&loss(REWRITE), &args, 3, EPS);
    assert_values_close(
        "d/dx vs finite differences",
        &values(&range[3]),
        &fd,
        1e-6,
        1e-7,
    );
}

/// A batched (non-scalar) function: per-sample `tanh(x W) * |x|²`, stacked at axis `out`.
fn batched_map(method: VmapMethod, out: isize) -> Func {
    let body = |w: &Tensor, x: &Tensor| x.matmul(w).tanh() * x.square().sum_all();
    vmap_with(body, [None, Some(1)], out, method)
}

#[test]
fn vjp_of_a_batched_function_matches_the_dot_product_test_and_the_rewrite_method() {
    let primals = [randf64(&[3, 2], 11), randf64(&[3, 4], 12)];
    for (method, out) in [(RANGE, 0), (RANGE, 1), (PAD_REDUCE, 0), (PAD_REDUCE, 1)] {
        let (outputs, pullback) = vjp(batched_map(method, out), &primals);
        let (ref_outputs, ref_pullback) = vjp(batched_map(REWRITE, out), &primals);
        assert_close("outputs", &outputs[0], &ref_outputs[0], 1e-12, 1e-12);
        let u = random_like(&outputs, 13);
        let (cts, ref_cts) = (pullback.call(&u), ref_pullback.call(&u));
        for (k, (c, r)) in cts.iter().zip(&ref_cts).enumerate() {
            assert_close(
                &format!("cotangent {k}, out_axes {out}"),
                c,
                r,
                1e-10,
                1e-12,
            );
        }
        // <vjp(u), v> == <u, jvp(v)>
        let v = random_like(&primals, 14);
        let (_, tangents) = jvp(batched_map(method, out), &primals, &v);
        let (lhs, rhs) = (inner(&cts, &v), inner(&u, &tangents));
        assert!(
            (lhs - rhs).abs() < 1e-9 * (1.0 + rhs.abs()),
            "{lhs} != {rhs}"
        );
    }
}

/// Panics unless `jac(f)` is the same for `f` built with every method and matches the
/// Jacobian by finite differences, column by column.
#[track_caller]
fn assert_jacobians_agree(
    what: &str,
    jac: fn(Func, usize) -> Func,
    f: impl Fn(VmapMethod) -> Func,
    args: &[Tensor],
    argnum: usize,
) {
    let rewrite = jac(f(REWRITE), argnum).call1(args);
    for method in LOOPED {
        let by = jac(f(method), argnum).call1(args);
        assert_close(
            &format!("{what}: {method:?} vs rewrite"),
            &by,
            &rewrite,
            1e-9,
            1e-12,
        );
    }
    let range = jac(f(RANGE), argnum).call1(args);
    let x = &args[argnum];
    let reference = f(REWRITE);
    let out_numel = reference.call1(args).numel();
    let columns: Vec<Vec<f64>> = (0..x.numel())
        .map(|k| {
            let mut e = vec![0.0; x.numel()];
            e[k] = 1.0;
            let tangents: Vec<Tensor> = args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    if i == argnum {
                        host_tensor(&e, &a.shape(), a.dtype())
                    } else {
                        a.zeros_like()
                    }
                })
                .collect();
            fd_directional(&reference, args, &tangents, EPS).remove(0)
        })
        .collect();
    let fd: Vec<f64> = (0..out_numel)
        .flat_map(|o| columns.iter().map(move |c| c[o]).collect::<Vec<_>>())
        .collect();
    assert_values_close(
        &format!("{what}: range vs fd"),
        &values(&range),
        &fd,
        1e-6,
        1e-7,
    );
}

fn jacrev_f(f: Func, argnum: usize) -> Func {
    jacrev(f, argnum)
}

fn jacfwd_f(f: Func, argnum: usize) -> Func {
    jacfwd(f, argnum)
}

#[test]
fn jacrev_and_jacfwd_of_a_batched_function() {
    let args = [randf64(&[3, 2], 15), randf64(&[3, 4], 16)];
    for argnum in [0, 1] {
        let f = |m| batched_map(m, 0);
        assert_jacobians_agree("jacrev", jacrev_f, f, &args, argnum);
        assert_jacobians_agree("jacfwd", jacfwd_f, f, &args, argnum);
    }
}

#[test]
fn hessian_of_a_loss_with_a_range_vmap_inside() {
    // Hessian = jacfwd(jacrev): the rewrite vmap and jvp both run over the backward graph of
    // the scopes.
    let loss = |method| {
        let body = |w: &Tensor, x: &Tensor| (x * w).tanh().sum_all().square();
        let batched = vmap_with(body, [None, Some(0)], 0, method);
        Func::new(Some(2), move |args: &[Tensor]| {
            vec![batched.call1(args).sum_all()]
        })
    };
    let args = [randf64(&[3], 17), randf64(&[4, 3], 18)];
    let gradient = |m| grad(loss(m), 0);
    for argnum in [0, 1] {
        let h = |m| hessian(loss(m), argnum).call1(&args);
        let rewrite = h(REWRITE);
        for method in LOOPED {
            let what = format!("hessian {argnum}: {method:?} vs rewrite");
            assert_close(&what, &h(method), &rewrite, 1e-9, 1e-12);
        }
    }
    // d/dw of the gradient, by finite differences of the gradient.
    let range = hessian(loss(RANGE), 0).call1(&args);
    let fd: Vec<f64> = (0..3)
        .flat_map(|k| {
            let mut e = vec![0.0; 3];
            e[k] = 1.0;
            let tangents = [host_tensor(&e, &[3], args[0].dtype()), args[1].zeros_like()];
            fd_directional(&gradient(REWRITE), &args, &tangents, 1e-5).remove(0)
        })
        .collect();
    // fd gives column k = d grad / d w_k; the Hessian is symmetric.
    assert_values_close("hessian vs fd of grad", &values(&range), &fd, 1e-5, 1e-6);
}

#[test]
fn per_sample_gradients_by_either_method_over_either_method() {
    // vmap(grad(loss)) with the loss itself containing no vmap, and grad inside a range scope:
    // the range is open around the differentiated function and must not be summed over.
    let per_sample = |w: &Tensor, x: &Tensor| (x.matmul(w).tanh() - 0.25).square().sum_all();
    let args = [randf64(&[3, 2], 19), randf64(&[5, 3], 20)];
    let expected = loop_stack(5, |i| {
        grad(per_sample, 0).call1(&[args[0].clone(), sample(&args[1], 0, i)])
    });
    for method in [RANGE, PAD_REDUCE, REWRITE] {
        let g = vmap_with(grad(per_sample, 0), [None, Some(0)], 0, method).call1(&args);
        assert_close(
            &format!("per-sample grads by {method:?}"),
            &g,
            &expected,
            1e-10,
            1e-12,
        );
    }
}

#[test]
fn vmapped_pullback_with_the_cotangent_mapped_by_range() {
    // The cotangent enters the pullback from an enclosing range scope: every cotangent varies
    // with that range, which the backward pass must leave open.
    let f = |m| batched_map(m, 0);
    let primals = [randf64(&[3, 2], 21), randf64(&[3, 4], 22)];
    let (outputs, pullback) = vjp(f(RANGE), &primals);
    let cts = randf64(&[[2].as_slice(), &outputs[0].shape()].concat(), 23);
    let expected = loop_stack(2, |i| pullback.call(&[sample(&cts, 0, i)])[0].clone());
    for method in [RANGE, PAD_REDUCE, REWRITE] {
        let batched = vmap_with(pullback.clone(), 0, 0, method).call(std::slice::from_ref(&cts));
        assert_close(
            &format!("vmapped pullback by {method:?}"),
            &batched[0],
            &expected,
            1e-10,
            1e-12,
        );
    }
}

/// `f` vmapped over axis 0 of every argument, once per method of `methods` (outermost
/// first), compared with the nested loop over the samples.
#[track_caller]
fn assert_nested_matches_loop<M>(f: impl IntoFunc<M>, methods: &[VmapMethod], args: &[Tensor]) {
    let f: Func = f.into_func();
    let nargs = args.len();
    let batched = methods
        .iter()
        .rev()
        .fold(f.clone(), |g, &m| vmap_with(g, vec![Some(0); nargs], 0, m));
    let levels = vec![vec![Some(0); nargs]; methods.len()];
    let expected = nested_loop(&f, &levels, args);
    let got = batched.call(args);
    assert_close(&format!("{methods:?}"), &got[0], &expected[0], 1e-12, 1e-12);
}

#[test]
fn rewrite_vmaps_of_range_vmaps_and_back_match_loops() {
    let f = |x: &Tensor, y: &Tensor| x.matmul(y).relu().sum(0, false) + x.max(1, false).sum_all();
    let args = |batch: &[usize]| {
        let x = randf64(&[batch, &[2, 4]].concat(), 24);
        let y = randf64(&[batch, &[4, 2]].concat(), 25);
        [x, y]
    };
    for methods in [
        [REWRITE, RANGE],
        [RANGE, REWRITE],
        [REWRITE, PAD_REDUCE],
        [PAD_REDUCE, RANGE],
        [RANGE, PAD_REDUCE],
    ] {
        assert_nested_matches_loop(f, &methods, &args(&[2, 3]));
    }
    for methods in [
        [REWRITE, RANGE, REWRITE],
        [RANGE, REWRITE, RANGE],
        [REWRITE, REWRITE, RANGE],
        [RANGE, RANGE, REWRITE],
        [PAD_REDUCE, REWRITE, RANGE],
        [REWRITE, PAD_REDUCE, PAD_REDUCE],
    ] {
        assert_nested_matches_loop(f, &methods, &args(&[2, 3, 2]));
    }
}

#[test]
fn grad_of_mixed_nested_vmaps() {
    // A rewrite vmap around a range vmap and the other way round, under grad.
    let loss = |outer: VmapMethod, inner: VmapMethod| {
        let body = vmap_with(
            |w: &Tensor, v: &Tensor| (v.matmul(w)).sin().sum_all(),
            [None, Some(0)],
            0,
            inner,
        );
        let batched = vmap_with(body, [None, Some(0)], 0, outer);
        Func::new(Some(2), move |args: &[Tensor]| {
            vec![batched.call1(args).square().sum_all()]
        })
    };
    let args = [randf64(&[3, 2], 26), randf64(&[2, 4, 3], 27)];
    for argnum in [0, 1] {
        let fd = fd_gradient(&loss(REWRITE, REWRITE), &args, argnum, EPS);
        for (outer, inner) in [
            (REWRITE, RANGE),
            (RANGE, REWRITE),
            (RANGE, RANGE),
            (REWRITE, PAD_REDUCE),
            (PAD_REDUCE, RANGE),
            (RANGE, PAD_REDUCE),
        ] {
            let g = grad(loss(outer, inner), argnum).call1(&args);
            let what = format!("d/d arg {argnum}, {outer:?} of {inner:?}");
            assert_values_close(&what, &values(&g), &fd, 1e-6, 1e-7);
        }
    }
}

/// A fresh loop range of `size` (ids far from the ones vmap and the scheduler hand out).
fn fresh_range(size: usize) -> UOp {
    static NEXT: AtomicUsize = AtomicUsize::new(1 << 35);
    UOp::range(size, NEXT.fetch_add(1, Ordering::Relaxed), AxisType::Loop)
}

/// `g` applied to every row of `x` in a scope over a fresh range, reduced with `op` over that
/// range (`reduce_over`): what `op`-reducing `g(x)` over axis 0 computes, without leaving the
/// scope through `Vmapout`.
fn reduced_over_rows(op: ReduceOp, g: fn(&Tensor) -> Tensor) -> Func {
    Func::new(Some(1), move |args: &[Tensor]| {
        let x = &args[0];
        let r = fresh_range(x.shape()[0]);
        let row = x.vmapin(&[r.clone(), UOp::index(0)]);
        vec![g(&row).reduce_over_ranges(op, &[r])]
    })
}

fn reduced_over_axis(op: ReduceOp, g: fn(&Tensor) -> Tensor) -> Func {
    Func::new(Some(1), move |args: &[Tensor]| {
        let mapped = g(&args[0]);
        vec![match op {
            ReduceOp::Add => mapped.sum(0, false),
            ReduceOp::Max => mapped.max(0, false),
            ReduceOp::Mul => mapped.prod(0, false),
        }]
    })
}

#[test]
fn reduce_over_ranges_has_the_derivatives_of_the_reduce_over_the_axis() {
    let g: fn(&Tensor) -> Tensor = |v| v.sin() * 2.0 + v;
    let x = distinct_f64(&[4, 3], 28);
    let v = randf64(&[4, 3], 29);
    let u = randf64(&[3], 30);
    for op in [ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul] {
        let (by_ranges, by_axis) = (reduced_over_rows(op, g), reduced_over_axis(op, g));
        assert_close(
            &format!("{op:?} value"),
            &by_ranges.call1(std::slice::from_ref(&x)),
            &by_axis.call1(std::slice::from_ref(&x)),
            1e-12,
            1e-12,
        );
        let tangent = |f: &Func| {
            jvp(f, std::slice::from_ref(&x), std::slice::from_ref(&v))
                .1
                .remove(0)
        };
        assert_close(
            &format!("{op:?} jvp"),
            &tangent(&by_ranges),
            &tangent(&by_axis),
            1e-10,
            1e-12,
        );
        let cotangent = |f: &Func| {
            vjp(f, std::slice::from_ref(&x))
                .1
                .call(std::slice::from_ref(&u))
                .remove(0)
        };
        assert_close(
            &format!("{op:?} vjp"),
            &cotangent(&by_ranges),
            &cotangent(&by_axis),
            1e-10,
            1e-12,
        );
        // A rewrite vmap of the reduce over ranges (and of its gradient) over a stack of xs.
        let xs = distinct_f64(&[2, 4, 3], 31);
        assert_vmap_matches_loop(by_ranges.clone(), &[Some(0)], std::slice::from_ref(&xs));
        let summed = Func::new(Some(1), {
            let by_ranges = by_ranges.clone();
            move |a: &[Tensor]| vec![by_ranges.call1(a).sum_all()]
        });
        assert_vmap_matches_loop(grad(summed, 0), &[Some(0)], std::slice::from_ref(&xs));
    }
}

#[test]
fn rewrite_vmap_keeps_the_batch_through_a_scope_of_a_batched_value() {
    // The batched image of Vmapin keeps the rewrite batch in front; Vmapout puts it back in
    // front of the range's axis: vmap(f) of a range-vmapped f places both axes as a loop would.
    let f = vmap_with(|v: &Tensor| v.exp().sum_all() * v, 0, 0, RANGE);
    let xs = randf64(&[2, 3, 4], 32);
    let got = vmap(f.clone(), 0, 0).call1(std::slice::from_ref(&xs));
    assert_eq!(got.shape(), vec![2, 3, 4]);
    assert_close(
        "rewrite of range",
        &got,
        &loop_stack(2, |i| f.call1(&[sample(&xs, 0, i)])),
        1e-12,
        1e-12,
    );
    // Mapped along axis 1 of the outer argument and out at axis 2.
    let got = vmap(f.clone(), 1, 2).call1(std::slice::from_ref(&xs));
    let looped = loop_stack(3, |i| f.call1(&[sample(&xs, 1, i)]));
    assert_close(
        "in_axes 1, out_axes 2",
        &got,
        &batch_axis_to(&looped, 2),
        1e-12,
        1e-12,
    );
}

// ---- the sliding-window rows of the rule tables, directly ----

/// `Σ_r (x[r : r + 2] * c(r)).sum()` over the 3 positions of a window sliding down the 4 rows
/// of `x`, weighted by `c(r) = r + 1`, padded back into place and squared: a function whose
/// every op is a sliding window, a reduce over the range, or ordinary arithmetic.
fn sliding_function(x: &Tensor) -> Tensor {
    let r = tensor_core::transform::vmap::looped::batch_range(3);
    let weight = Tensor::from_uop(UOp::alu(
        tensor_core::Op::Add,
        vec![r.clone(), UOp::index(1)],
    ))
    .cast(x.dtype());
    let window = x.shrink_at(0, &r, 2) * weight;
    let placed = window.pad_at(0, &r, 4);
    placed.sum_over_ranges(std::slice::from_ref(&r)).square()
}

#[test]
fn sliding_windows_have_gradients_and_tangents_that_match_finite_differences() {
    let x = randf64(&[4, 2], 71);
    let loss = (|x: &Tensor| sliding_function(x).sum_all()).into_func();
    let fd = fd_gradient(&loss, std::slice::from_ref(&x), 0, EPS);
    let g = grad(loss.clone(), 0).call1(std::slice::from_ref(&x));
    assert_values_close("grad of sliding windows", &values(&g), &fd, 1e-6, 1e-7);
    let t = randf64(&[4, 2], 72);
    let f = (|x: &Tensor| sliding_function(x)).into_func();
    let (_, tangent) = jvp(
        f.clone(),
        std::slice::from_ref(&x),
        std::slice::from_ref(&t),
    );
    let fd = fd_directional(&f, std::slice::from_ref(&x), std::slice::from_ref(&t), EPS);
    assert_values_close(
        "jvp of sliding windows",
        &values(&tangent[0]),
        &fd[0],
        1e-6,
        1e-7,
    );
}

#[test]
fn sliding_windows_batch_by_rewrite_like_a_loop_over_samples() {
    let xs = randf64(&[5, 4, 2], 73);
    assert_vmap_matches_loop(sliding_function, &[Some(0)], std::slice::from_ref(&xs));
    let xs = randf64(&[4, 5, 2], 74);
    assert_vmap_matches_loop(sliding_function, &[Some(1)], std::slice::from_ref(&xs));
}
