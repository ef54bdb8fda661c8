//! Custom rules for traced functions (issue 15, item 4): `custom_jvp`, `custom_vjp` and
//! `custom_vmap` change what the transforms give in ways a test can see, and compose with
//! `jit`, `vmap` and `grad`. Floats within 1e-5 absolute plus 1e-5 relative.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tensor::core::transform::{Custom, custom_jvp, custom_vjp, custom_vmap};
use tensor::prelude::*;
use tensor::runtime::realize::to_vec;

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 + 1e-5 * y.abs(), "{a:?} vs {b:?}");
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    to_vec::<f32>(t).expect("realize")
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

/// log(1 + e^x), written naively: its autodiff derivative e^x / (1 + e^x) is NaN for large x
/// (inf / inf), while the custom rule's sigmoid is 1.
fn log1pexp(x: &Tensor) -> Tensor {
    (x.exp() + 1.0).log()
}

fn stable_log1pexp() -> Func {
    custom_jvp(log1pexp, |p: &[Tensor], t: &[Tensor]| {
        vec![&t[0] * p[0].sigmoid()]
    })
}

#[test]
fn custom_jvp_replaces_the_derivative_of_the_body() {
    let x = t(&[0.0, 2.0, 100.0]);
    let plain = grad(|x: &Tensor| log1pexp(x).sum_all(), 0).call1(std::slice::from_ref(&x));
    assert!(values(&plain)[2].is_nan(), "the naive derivative overflows");
    let f = stable_log1pexp();
    let (_, tangent) = jvp(f.clone(), std::slice::from_ref(&x), &[t(&[1.0, 1.0, 1.0])]);
    let sig = |v: f32| 1.0 / (1.0 + (-v).exp());
    let want = [sig(0.0), sig(2.0), 1.0];
    close(&values(&tangent[0]), &want);
    // vmap of the jvp: the rule runs on the batch
    let f2 = f.clone();
    let batched = vmap(
        move |x: &Tensor| jvp(f2.clone(), std::slice::from_ref(x), &[x.ones_like()]).1[0].clone(),
        0,
        0,
    );
    let xs = Tensor::from_vec(vec![0.0f32, 2.0, 100.0, -1.0, 50.0, 3.0], &[2, 3]);
    let got = values(&batched.call1(std::slice::from_ref(&xs)));
    let want: Vec<f32> = [0.0f32, 2.0, 100.0, -1.0, 50.0, 3.0]
        .iter()
        .map(|&v| if v > 40.0 { 1.0 } else { sig(v) })
        .collect();
    close(&got, &want);
    // jit of the jvp
    let jitted = tensor::jit(move |x: &Tensor| {
        jvp(f.clone(), std::slice::from_ref(x), &[x.ones_like()]).1[0].clone()
    });
    close(&values(&jitted.call1(&[x])), &[sig(0.0), sig(2.0), 1.0]);
}

#[test]
fn custom_vjp_replaces_the_gradient_of_the_body() {
    // the body is x^3; the rule (clipped gradient) says 3x^2 clipped to [-1, 1]
    let fwd_runs = Arc::new(AtomicUsize::new(0));
    let runs = fwd_runs.clone();
    let f = custom_vjp(
        |x: &Tensor| x * x * x,
        move |p: &[Tensor]| {
            runs.fetch_add(1, Ordering::Relaxed);
            vec![&p[0] * &p[0] * 3.0]
        },
        |res: &[Tensor], ct: &[Tensor]| vec![&ct[0] * res[0].clamp(-1.0, 1.0)],
    );
    let x = t(&[0.1, 0.5, 2.0]);
    let value = f.call1(std::slice::from_ref(&x));
    close(&values(&value), &[0.001, 0.125, 8.0]);
    let f1 = f.clone();
    let g = grad(
        move |x: &Tensor| f1.call1(std::slice::from_ref(x)).sum_all(),
        0,
    )
    .call1(std::slice::from_ref(&x));
    close(&values(&g), &[0.03, 0.75, 1.0]);
    assert_eq!(fwd_runs.load(Ordering::Relaxed), 1);
    // vmap(grad): the rule runs inside, per sample
    let f2 = f.clone();
    let per_sample = vmap(
        grad(
            move |x: &Tensor| f2.call1(std::slice::from_ref(x)).sum_all(),
            0,
        ),
        0,
        0,
    );
    let xs = Tensor::from_vec(vec![0.1f32, 0.5, 2.0, -3.0, 0.2, 0.0], &[2, 3]);
    close(
        &values(&per_sample.call1(std::slice::from_ref(&xs))),
        &[0.03, 0.75, 1.0, 1.0, 0.12, 0.0],
    );
    // grad(vmap): the batched node keeps the custom vjp (clipping visible at 2.0 and -3.0)
    let f3 = f.clone();
    let summed = grad(
        move |xs: &Tensor| {
            vmap(f3.clone(), 0, 0)
                .call1(std::slice::from_ref(xs))
                .sum_all()
        },
        0,
    );
    close(
        &values(&summed.call1(std::slice::from_ref(&xs))),
        &[0.03, 0.75, 1.0, 1.0, 0.12, 0.0],
    );
    // jit(grad)
    let f4 = f.clone();
    let jitted = tensor::jit(grad(
        move |x: &Tensor| f4.call1(std::slice::from_ref(x)).sum_all(),
        0,
    ));
    close(&values(&jitted.call1(&[x])), &[0.03, 0.75, 1.0]);
}

#[test]
fn custom_vmap_replaces_the_batching_of_the_body() {
    // the body is a per-sample sum; the rule computes the batch's sums its own way and
    // marks it by adding 1000 (so the test sees the rule was used)
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let f = custom_vmap(
        |x: &Tensor| x.sum_all(),
        move |size: usize, args: &[Tensor], batched: &[bool]| {
            seen.fetch_add(1, Ordering::Relaxed);
            assert_eq!(batched, &[true]);
            assert_eq!(args[0].shape()[0], size);
            vec![args[0].sum(1, false) + 1000.0]
        },
    );
    let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    close(&values(&f.call1(&[t(&[1.0, 2.0, 3.0])])), &[6.0]);
    let batched = vmap(f.clone(), 0, 0).call1(std::slice::from_ref(&xs));
    close(&values(&batched), &[1006.0, 1015.0]);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    // grad(vmap(f)): differentiates the rule's graph (sum + 1000 has gradient 1)
    let f2 = f.clone();
    let g = grad(
        move |xs: &Tensor| {
            vmap(f2.clone(), 0, 0)
                .call1(std::slice::from_ref(xs))
                .sum_all()
        },
        0,
    );
    close(&values(&g.call1(std::slice::from_ref(&xs))), &[1.0; 6]);
    // jit(vmap(f))
    let jitted = tensor::jit(vmap(f, 0, 0));
    close(&values(&jitted.call1(&[xs])), &[1006.0, 1015.0]);
}

#[test]
fn rules_combine_on_one_function() {
    let f = Custom::new("square", |x: &Tensor| x * x)
        .jvp(|p: &[Tensor], t: &[Tensor]| vec![&t[0] * &p[0] * 10.0])
        .vjp(
            |p: &[Tensor]| vec![p[0].clone()],
            |r: &[Tensor], c: &[Tensor]| vec![&c[0] * &r[0] * 20.0],
        )
        .into_func();
    let x = t(&[1.0, 2.0]);
    let (_, tan) = jvp(f.clone(), std::slice::from_ref(&x), &[t(&[1.0, 1.0])]);
    close(&values(&tan[0]), &[10.0, 20.0]);
    let f1 = f.clone();
    let g = grad(
        move |x: &Tensor| f1.call1(std::slice::from_ref(x)).sum_all(),
        0,
    )
    .call1(std::slice::from_ref(&x));
    close(&values(&g), &[20.0, 40.0]);
    // jacfwd (vmap of jvp) and jacrev (vmap of the pullback) use the rules
    let j = jacfwd(f.clone(), 0).call1(std::slice::from_ref(&x));
    close(&values(&j), &[10.0, 0.0, 0.0, 20.0]);
    let j = jacrev(f, 0).call1(&[x]);
    close(&values(&j), &[20.0, 0.0, 0.0, 40.0]);
}

#[function]
fn cube(x: &Tensor) -> Tensor {
    x * x * x
}

#[test]
fn a_function_takes_custom_rules() {
    let f = Custom::new("cube", cube)
        .vjp(
            |p: &[Tensor]| vec![p[0].clone()],
            |r: &[Tensor], c: &[Tensor]| vec![&c[0] * &r[0]],
        )
        .into_func();
    let x = t(&[1.0, 2.0, 3.0]);
    close(
        &values(&f.call1(std::slice::from_ref(&x))),
        &[1.0, 8.0, 27.0],
    );
    let g = grad(
        move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all(),
        0,
    )
    .call1(&[x]);
    close(&values(&g), &[1.0, 2.0, 3.0]);
}
