//! One check for every op of issue #19: its gradient against central finite differences
//! (and `vjp` against `jvp` by the dot-product test), and `vmap` against a loop over samples.
#![allow(dead_code)]

use crate::transform_common::*;
use tensor_core::transform::{Func, IntoFunc, jvp, vjp};
use tensor_core::{DType, Tensor};

const EPS: f64 = 1e-6;

/// Checks `f` on `batched` (every argument batched along axis 0): `vmap(f)` equals the loop
/// over samples; on sample 0, the pullback with respect to the arguments `wrt` (`f64`
/// tensors; the others, indices say, stay fixed) agrees with `jvp` and finite differences.
#[track_caller]
pub fn check_op<M>(f: impl IntoFunc<M>, batched: &[Tensor], wrt: &[usize]) {
    check_op_with(f, batched, wrt, 1e-6, 1e-7);
}

/// [`check_op`] with the gradient tolerances given.
#[track_caller]
pub fn check_op_with<M>(
    f: impl IntoFunc<M>,
    batched: &[Tensor],
    wrt: &[usize],
    rtol: f64,
    atol: f64,
) {
    let f: Func = f.into_func();
    let axes = vec![Some(0); batched.len()];
    assert_vmap_matches_loop(f.clone(), &axes, batched);
    let first: Vec<Tensor> = batched.iter().map(|b| sample(b, 0, 0)).collect();
    check_pullback(&f, &first, wrt, rtol, atol);
}

/// `f` as a function of the arguments `wrt` only, the others fixed to `args`.
fn restricted(f: &Func, args: &[Tensor], wrt: &[usize]) -> Func {
    let (f, args, wrt) = (f.clone(), args.to_vec(), wrt.to_vec());
    Func::new(None, move |free: &[Tensor]| {
        let mut all = args.clone();
        for (slot, value) in wrt.iter().zip(free) {
            all[*slot] = value.clone();
        }
        f.call(&all)
    })
}

#[track_caller]
fn check_pullback(f: &Func, args: &[Tensor], wrt: &[usize], rtol: f64, atol: f64) {
    let g = restricted(f, args, wrt);
    let primals: Vec<Tensor> = wrt.iter().map(|&i| args[i].clone()).collect();
    for p in &primals {
        assert_eq!(p.dtype(), DType::F64, "differentiate f64 arguments");
    }
    let direct = g.call(&primals);
    let (_, pullback) = vjp(&g, &primals);
    let u = random_like(&direct, 7);
    let v = random_like(&primals, 107);
    let cotangents = pullback.call(&u);
    let (_, tangents) = jvp(&g, &primals, &v);
    let (lhs, rhs) = (inner(&cotangents, &v), inner(&u, &tangents));
    assert!(
        (lhs - rhs).abs() <= 1e-9 * (1.0 + rhs.abs()),
        "<vjp(u), v> = {lhs} but <u, jvp(v)> = {rhs}"
    );
    let u2 = u.clone();
    let g2 = g.clone();
    let scalar = Func::new(None, move |x: &[Tensor]| {
        let total = g2
            .call(x)
            .iter()
            .zip(&u2)
            .map(|(y, u)| (y * u).cast(DType::F64).sum_all())
            .reduce(|a, b| a + b)
            .expect("a result");
        vec![total]
    });
    for (i, c) in cotangents.iter().enumerate() {
        let fd = fd_gradient(&scalar, &primals, i, EPS);
        assert_values_close(&format!("gradient {i}"), &values(c), &fd, rtol, atol);
    }
}
