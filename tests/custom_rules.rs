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

#[test]
fn reverse_mode_transposes_a_custom_jvp_rule() {
    // the body is x^2 * y; the rule deliberately says 2·(2xy)·tx + 3·(x^2)·ty, so every
    // reverse-mode transform that uses it (instead of the body) shows the factors 2 and 3
    let f = custom_jvp(
        |x: &Tensor, y: &Tensor| x * x * y,
        |p: &[Tensor], t: &[Tensor]| {
            let (x, y) = (&p[0], &p[1]);
            vec![&t[0] * x * y * 4.0 + &t[1] * x * x * 3.0]
        },
    );
    let (x, y) = (t(&[1.0, 2.0, -3.0]), t(&[0.5, -1.0, 2.0]));
    let want_x = [2.0f32, -8.0, -24.0]; // 4xy
    let want_y = [3.0f32, 12.0, 27.0]; // 3x^2
    let f1 = f.clone();
    let sum = move |x: &Tensor, y: &Tensor| f1.call1(&[x.clone(), y.clone()]).sum_all();
    let gx = grad(sum.clone(), 0).call1(&[x.clone(), y.clone()]);
    close(&values(&gx), &want_x);
    let gy = grad(sum, 1).call1(&[x.clone(), y.clone()]);
    close(&values(&gy), &want_y);
    // vjp with a non-trivial cotangent
    let (_, pullback) = vjp(f.clone(), &[x.clone(), y.clone()]);
    let ct = t(&[1.0, 10.0, -2.0]);
    let cts = pullback.call(std::slice::from_ref(&ct));
    let scaled = |w: &[f32]| -> Vec<f32> {
        w.iter()
            .zip([1.0, 10.0, -2.0])
            .map(|(a, c)| a * c)
            .collect()
    };
    close(&values(&cts[0]), &scaled(&want_x));
    close(&values(&cts[1]), &scaled(&want_y));
    // jacrev equals jacfwd (which runs the rule forward)
    let fwd = values(&jacfwd(f.clone(), 0).call1(&[x.clone(), y.clone()]));
    let rev = values(&jacrev(f, 0).call1(&[x, y]));
    close(&rev, &fwd);
    close(&rev, &[2.0, 0.0, 0.0, 0.0, -8.0, 0.0, 0.0, 0.0, -24.0]);
    // the stable log1pexp rule now also fixes grad (the body's derivative is NaN at 100)
    let g = grad(
        |x: &Tensor| stable_log1pexp().call1(std::slice::from_ref(x)).sum_all(),
        0,
    )
    .call1(&[t(&[0.0, 100.0])]);
    close(&values(&g), &[0.5, 1.0]);
}

#[test]
fn nested_vmap_applies_the_vmap_rule_once_over_both_batches() {
    // the rule records its batch size and flags and adds the batch size to each result, so
    // the values show which level ran it: the outer vmap runs it over 2 x 4 = 8 samples
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let f = custom_vmap(
        |x: &Tensor, w: &Tensor| (x * w).sum_all(),
        move |size: usize, args: &[Tensor], batched: &[bool]| {
            record.lock().unwrap().push((size, batched.to_vec()));
            vec![(&args[0] * &args[1]).sum(1, false) + size as f32]
        },
    );
    let xv: Vec<f32> = (0..24).map(|i| 0.1 * i as f32 - 1.0).collect();
    let wv = [0.5f32, -1.0, 2.0, 1.5, 0.25, -0.5];
    let xs = Tensor::from_vec(xv.clone(), &[2, 4, 3]);
    let ws = Tensor::from_vec(wv.to_vec(), &[2, 3]);
    // inner: x batched, w not; outer: both batched
    let inner = vmap(f, [Some(0), None], 0);
    let got = values(&vmap(inner, 0, 0).call1(&[xs, ws]));
    let want: Vec<f32> = (0..8)
        .map(|s| {
            let (i, j) = (s / 4, s % 4);
            (0..3)
                .map(|k| xv[i * 12 + j * 3 + k] * wv[i * 3 + k])
                .sum::<f32>()
                + 8.0
        })
        .collect();
    close(&got, &want);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.last(), Some(&(8, vec![true, true])), "{seen:?}");
}

#[test]
fn nested_vmap_keeps_a_custom_vjp() {
    // vmap(vmap(f)) of the clipped-gradient cube: values are the body's, and grad of their
    // sum is the clipped rule per element (the batched node keeps the rule at both levels)
    let f = custom_vjp(
        |x: &Tensor| x * x * x,
        |p: &[Tensor]| vec![&p[0] * &p[0] * 3.0],
        |res: &[Tensor], ct: &[Tensor]| vec![&ct[0] * res[0].clamp(-1.0, 1.0)],
    );
    let xv = [0.1f32, 0.5, 2.0, -3.0, 0.2, 0.0, 1.5, -0.4];
    let xs = Tensor::from_vec(xv.to_vec(), &[2, 2, 2]);
    let twice = vmap(vmap(f, 0, 0), 0, 0);
    let cubes: Vec<f32> = xv.iter().map(|v| v * v * v).collect();
    close(&values(&twice.call1(std::slice::from_ref(&xs))), &cubes);
    let g = grad(
        move |x: &Tensor| twice.call1(std::slice::from_ref(x)).sum_all(),
        0,
    );
    let want: Vec<f32> = xv.iter().map(|v| (3.0 * v * v).clamp(-1.0, 1.0)).collect();
    close(&values(&g.call1(&[xs])), &want);
}
