//! Transforms composed with each other: Jacobians from both modes agree, Hessians are
//! symmetric second derivatives, and `vmap` commutes with `grad`, `jvp` and itself.

mod transform_common;

use tensor_core::transform::{
    Func, IntoFunc, grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vmap,
};
use tensor_core::{DType, Tensor};
use transform_common::*;

/// The Jacobian of result 0 of `f` with respect to `argnum` by central differences, shaped
/// `out_shape ++ in_shape`.
fn fd_jacobian(f: &Func, args: &[Tensor], argnum: usize) -> Tensor {
    let x = &args[argnum];
    let n = x.numel();
    let out_shape = f.call(args)[0].shape();
    let m: usize = out_shape.iter().product();
    let mut jac = vec![0.0; m * n];
    for k in 0..n {
        let mut e = vec![0.0; n];
        e[k] = 1.0;
        let tangents: Vec<Tensor> = args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let v = if i == argnum {
                    e.clone()
                } else {
                    vec![0.0; a.numel()]
                };
                host_tensor(&v, &a.shape(), a.dtype())
            })
            .collect();
        let column = &fd_directional(f, args, &tangents, 1e-6)[0];
        for (r, c) in column.iter().enumerate() {
            jac[r * n + k] = *c;
        }
    }
    Tensor::from_vec(jac, &[out_shape, x.shape()].concat())
}

#[track_caller]
fn check_jacobians<M>(f: impl IntoFunc<M>, args: &[Tensor], argnum: usize) {
    let f = f.into_func();
    let fwd = jacfwd(f.clone(), argnum).call1(args);
    let rev = jacrev(f.clone(), argnum).call1(args);
    let out_shape = f.call(args)[0].shape();
    assert_eq!(
        fwd.shape(),
        [out_shape, args[argnum].shape()].concat(),
        "jacfwd shape"
    );
    assert_close("jacfwd vs jacrev", &fwd, &rev, 1e-12, 1e-12);
    assert_close(
        "jacfwd vs finite differences",
        &fwd,
        &fd_jacobian(&f, args, argnum),
        1e-6,
        1e-7,
    );
}

#[test]
fn jacfwd_equals_jacrev_for_a_wide_function() {
    let w = randf64(&[2, 4], 1);
    check_jacobians(move |x: &Tensor| w.matmul(x).tanh(), &[randf64(&[4], 2)], 0);
}

#[test]
fn jacfwd_equals_jacrev_for_a_tall_function() {
    check_jacobians(
        |x: &Tensor| Tensor::cat(&[x.sin(), x.exp(), (x * x).sum(0, true)], 0),
        &[randf64(&[2], 3)],
        0,
    );
}

#[test]
fn jacfwd_equals_jacrev_for_matrix_inputs_and_outputs() {
    check_jacobians(
        |x: &Tensor| x.softmax(-1).transpose(0, 1),
        &[randf64(&[2, 3], 4)],
        0,
    );
}

#[test]
fn jacfwd_equals_jacrev_with_respect_to_a_later_argument() {
    check_jacobians(
        |a: &Tensor, x: &Tensor| a.matmul(x).sigmoid() * x.sum_all(),
        &[randf64(&[3, 2], 5), randf64(&[2], 6)],
        1,
    );
}

#[test]
fn jacrev_returns_one_jacobian_per_result() {
    let f = |x: &Tensor| (x.sin(), x.sum_all());
    let x = randf64(&[3], 7);
    let jacs = jacrev(f, 0).call(std::slice::from_ref(&x));
    let fwd = jacfwd(f, 0).call(std::slice::from_ref(&x));
    assert_eq!(jacs.len(), 2);
    assert_eq!(jacs[0].shape(), vec![3, 3]);
    assert_eq!(jacs[1].shape(), vec![3]);
    assert_close("first Jacobian", &jacs[0], &fwd[0], 1e-12, 1e-12);
    assert_close("second Jacobian", &jacs[1], &fwd[1], 1e-12, 1e-12);
}

#[test]
fn hessian_of_a_quadratic_form_is_a_plus_a_transpose() {
    let a = randf64(&[3, 3], 8);
    let a2 = a.clone();
    let h = hessian(move |x: &Tensor| x.matmul(&a2.matmul(x)), 0).call1(&[randf64(&[3], 9)]);
    let expected = &a + a.transpose(0, 1);
    assert_close("hessian of x^T A x", &h, &expected, 1e-12, 1e-12);
}

#[test]
fn hessian_equals_every_nesting_of_the_two_jacobians() {
    let f = |x: &Tensor| (x.sin() * x.flip(0)).sum_all() + x.pow(3.0).sum_all() * x.sum_all();
    let x = randf64(&[3], 10);
    let args = std::slice::from_ref(&x);
    let h = hessian(f, 0).call1(args);
    assert_eq!(h.shape(), vec![3, 3]);
    let fwd_rev = jacfwd(jacrev(f, 0), 0).call1(args);
    let rev_rev = jacrev(jacrev(f, 0), 0).call1(args);
    let rev_fwd = jacrev(jacfwd(f, 0), 0).call1(args);
    let fwd_fwd = jacfwd(jacfwd(f, 0), 0).call1(args);
    assert_close("jacfwd(jacrev)", &fwd_rev, &h, 1e-12, 1e-12);
    assert_close("jacrev(jacrev)", &rev_rev, &h, 1e-12, 1e-12);
    assert_close("jacrev(jacfwd)", &rev_fwd, &h, 1e-12, 1e-12);
    assert_close("jacfwd(jacfwd)", &fwd_fwd, &h, 1e-12, 1e-12);
    // And against finite differences of the gradient.
    let g = grad(f, 0);
    assert_close(
        "hessian vs differences of grad",
        &h,
        &fd_jacobian(&g, args, 0),
        1e-6,
        1e-7,
    );
    assert_close("hessian is symmetric", &h, &h.transpose(0, 1), 1e-12, 1e-12);
}

#[test]
fn grad_of_grad_is_the_second_derivative() {
    let d2 = grad(
        |x: &Tensor| {
            grad(|x: &Tensor| x.sin().sum_all(), 0)
                .call1(std::slice::from_ref(x))
                .sum_all()
        },
        0,
    )
    .call1(&[randf64(&[3], 11)]);
    let x = randf64(&[3], 11);
    assert_close("d2 sin = -sin", &d2, &(-x.sin()), 1e-12, 1e-12);
}

fn loss(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let pred = x.matmul(w).tanh();
    ((&pred - y) * (&pred - y)).sum_all()
}

#[test]
fn vmap_of_grad_equals_the_loop_of_per_sample_grads() {
    let w = randf64(&[3, 2], 12);
    let xs = randf64(&[4, 3], 13);
    let ys = randf64(&[4, 2], 14);
    let per_sample = vmap(grad(loss, 0), [None, Some(0), Some(0)], 0).call1(&[
        w.clone(),
        xs.clone(),
        ys.clone(),
    ]);
    let expected = loop_stack(4, |i| {
        grad(loss, 0).call1(&[w.clone(), sample(&xs, 0, i), sample(&ys, 0, i)])
    });
    assert_close("per-sample grads", &per_sample, &expected, 1e-12, 1e-12);
}

#[test]
fn grad_of_a_vmapped_sum_equals_the_sum_of_per_sample_grads() {
    let w = randf64(&[3, 2], 15);
    let xs = randf64(&[4, 3], 16);
    let ys = randf64(&[4, 2], 17);
    let (xs2, ys2) = (xs.clone(), ys.clone());
    let total = move |w: &Tensor| {
        vmap(loss, [None, Some(0), Some(0)], 0)
            .call1(&[w.clone(), xs2.clone(), ys2.clone()])
            .sum_all()
    };
    let g = grad(total, 0).call1(std::slice::from_ref(&w));
    let sum = (0..4)
        .map(|i| grad(loss, 0).call1(&[w.clone(), sample(&xs, 0, i), sample(&ys, 0, i)]))
        .map(|g| values(&g))
        .reduce(|a, b| a.iter().zip(&b).map(|(a, b)| a + b).collect())
        .expect("four samples");
    assert_values_close("grad of the batch loss", &values(&g), &sum, 1e-12, 1e-12);
}

#[test]
fn vmap_of_value_and_grad_batches_both_the_values_and_the_grads() {
    let w = randf64(&[3, 2], 18);
    let xs = randf64(&[3, 3], 19);
    let ys = randf64(&[3, 2], 20);
    let out = vmap(value_and_grad(loss, 0), [None, Some(0), Some(0)], 0).call(&[
        w.clone(),
        xs.clone(),
        ys.clone(),
    ]);
    let per =
        |i: usize| value_and_grad(loss, 0).call(&[w.clone(), sample(&xs, 0, i), sample(&ys, 0, i)]);
    assert_close(
        "values",
        &out[0],
        &loop_stack(3, |i| per(i)[0].clone()),
        1e-12,
        1e-12,
    );
    assert_close(
        "grads",
        &out[1],
        &loop_stack(3, |i| per(i)[1].clone()),
        1e-12,
        1e-12,
    );
}

#[test]
fn vmap_of_jvp_equals_the_loop_of_jvps() {
    let x = randf64(&[3], 21);
    let tangents = randf64(&[4, 3], 22);
    let f = |x: &Tensor| x.sin() * x.exp().sum_all();
    let x2 = x.clone();
    let push = move |t: &Tensor| {
        jvp(f, std::slice::from_ref(&x2), std::slice::from_ref(t))
            .1
            .remove(0)
    };
    let batched = vmap(push, 0, 0).call1(std::slice::from_ref(&tangents));
    let expected = loop_stack(4, |i| {
        jvp(f, std::slice::from_ref(&x), &[sample(&tangents, 0, i)])
            .1
            .remove(0)
    });
    assert_close("vmap of jvp", &batched, &expected, 1e-12, 1e-12);
}

#[test]
fn jvp_of_a_vmapped_function_equals_the_vmap_of_its_jvp() {
    let xs = randf64(&[3, 2], 23);
    let vs = randf64(&[3, 2], 24);
    let f = |x: &Tensor| x.tanh() * x.sum_all();
    let (_, t) = jvp(
        vmap(f, 0, 0),
        std::slice::from_ref(&xs),
        std::slice::from_ref(&vs),
    );
    let expected = loop_stack(3, |i| {
        jvp(f, &[sample(&xs, 0, i)], &[sample(&vs, 0, i)])
            .1
            .remove(0)
    });
    assert_close("jvp of vmap", &t[0], &expected, 1e-12, 1e-12);
}

#[test]
fn vmap_of_vmap_equals_a_double_loop() {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b).relu() + a.sum_all();
    let inner = vmap(f, [Some(0), None], 0);
    let outer = vmap(inner, [Some(2), Some(0)], 0);
    let a = randf64(&[2, 2, 3, 4], 25); // outer takes axis 2 (size 3), inner axis 0 (size 2)
    let b = randf64(&[3, 4, 3], 26); // outer takes axis 0; inner leaves it unmapped
    let out = outer.call1(&[a.clone(), b.clone()]);
    let expected = loop_stack(3, |i| {
        loop_stack(2, |j| {
            let ai = sample(&sample(&a, 2, i), 0, j);
            f(&ai, &sample(&b, 0, i))
        })
    });
    assert_close("vmap(vmap)", &out, &expected, 1e-12, 1e-12);
}

#[test]
fn vmap_of_jacrev_gives_a_jacobian_per_sample() {
    let xs = randf64(&[3, 2], 27);
    let f = |x: &Tensor| x.exp() * x.sum_all();
    let batched = vmap(jacrev(f, 0), 0, 0).call1(std::slice::from_ref(&xs));
    let expected = loop_stack(3, |i| jacfwd(f, 0).call1(&[sample(&xs, 0, i)]));
    assert_close("per-sample Jacobians", &batched, &expected, 1e-12, 1e-12);
}

#[test]
fn grad_through_an_f32_section_of_an_f64_function_is_f64() {
    let x = randf64(&[3], 28);
    let g = grad(
        |x: &Tensor| x.cast(DType::F32).exp().cast(DType::F64).sum_all(),
        0,
    )
    .call1(std::slice::from_ref(&x));
    assert_eq!(g.dtype(), DType::F64);
    assert_close("exp through f32", &g, &x.exp(), 1e-6, 1e-6);
}

#[test]
fn hessian_of_a_matrix_argument_has_the_argument_shape_twice() {
    let f = |x: &Tensor| x.matmul(x).sum_all() * x.sum_all();
    let x = randf64(&[2, 2], 29);
    let h = hessian(f, 0).call1(std::slice::from_ref(&x));
    assert_eq!(h.shape(), vec![2, 2, 2, 2]);
    let rev_rev = jacrev(jacrev(f, 0), 0).call1(std::slice::from_ref(&x));
    assert_close("hessian vs jacrev(jacrev)", &h, &rev_rev, 1e-12, 1e-12);
    let fd = fd_jacobian(&grad(f, 0), std::slice::from_ref(&x), 0);
    assert_close("hessian vs differences of grad", &h, &fd, 1e-6, 1e-7);
}

#[test]
fn jacobians_of_scalar_inputs_and_outputs_have_the_jax_shapes() {
    let x = Tensor::scalar(0.5f64);
    let f = |x: &Tensor| x.sin() * Tensor::ones(&[3], DType::F64);
    let fwd = jacfwd(f, 0).call1(std::slice::from_ref(&x));
    let rev = jacrev(f, 0).call1(std::slice::from_ref(&x));
    assert_eq!(fwd.shape(), vec![3], "scalar input: the output shape");
    assert_close(
        "d sin",
        &fwd,
        &Tensor::full(&[3], 0.5f64.cos(), DType::F64),
        1e-12,
        0.0,
    );
    assert_close("jacrev of scalar input", &rev, &fwd, 1e-12, 0.0);
    let y = randf64(&[3], 30);
    let g = jacrev(|y: &Tensor| (y * y).sum_all(), 0).call1(std::slice::from_ref(&y));
    assert_eq!(g.shape(), vec![3], "scalar output: the input shape");
    assert_close("2y", &g, &(&y * 2.0), 1e-12, 0.0);
}
