//! The main patterns: a #[function] item, transform macros on it and on closures, nested
//! transforms, and the results typed like the functions.
use tensor::core::interp::evaluate;
use tensor::prelude::*;

fn values(t: &Tensor) -> Vec<f64> {
    evaluate(&t.uop()).to_f64_vec()
}

#[function]
fn loss(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let r = x.matmul(w) - y;
    (&r * &r).sum_all()
}

#[function]
fn split(x: &Tensor) -> (Tensor, Tensor) {
    (x * 2.0, x.exp())
}

#[function(precompile)]
fn by_value(x: Tensor, y: Tensor) -> Tensor {
    x * y
}

fn assert_close(a: &Tensor, b: &Tensor) {
    let (a, b) = (values(a), values(b));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{a:?} != {b:?}");
    }
}

fn main() {
    let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]);
    let xs = Tensor::from_vec((0..12).map(|i| i as f32 * 0.1).collect(), &[4, 3]);
    let ys = Tensor::from_vec(vec![1.0f32, 0.0, -1.0, 2.0], &[4]);

    // Per-sample gradients read as in JAX.
    let per_sample: Tensor = vmap!(grad!(loss, argnums = 0), in_axes = (None, 0, 0))(&w, &xs, &ys);
    let by_range: Tensor =
        vmap!(grad!(loss, argnums = 0), in_axes = (None, 0, 0), method = range)(&w, &xs, &ys);
    assert_eq!(by_range.to_vec::<f32>().unwrap(), per_sample.to_vec::<f32>().unwrap());
    let by_pad_reduce: Tensor =
        vmap!(grad!(loss, argnums = 0), in_axes = (None, 0, 0), method = pad_reduce)(&w, &xs, &ys);
    assert_close(&by_pad_reduce, &per_sample);
    assert_eq!(per_sample.shape(), vec![4, 3]);

    // grad with several argnums returns a tuple; value_and_grad a (value, grads) pair.
    let (gw, gx): (Tensor, Tensor) = grad!(loss, argnums = (0, 1))(&w, &xs, &ys);
    assert_eq!((gw.shape(), gx.shape()), (vec![3], vec![4, 3]));
    let (value, gw2): (Tensor, Tensor) = value_and_grad!(loss)(&w, &xs, &ys);
    assert_eq!(value.shape(), Vec::<usize>::new());
    assert_eq!(values(&gw2), values(&gw));

    // A function of two results keeps its tuple through vmap and jvp.
    let (doubled, exps): (Tensor, Tensor) = vmap!(split)(&xs);
    assert_eq!(values(&doubled), values(&(&xs * 2.0)));
    assert_eq!(values(&exps), values(&xs.exp()));
    let ((a, b), (ta, tb)) = jvp!(split, (&w,), (&w,));
    assert_eq!(values(&ta), values(&(&w * 2.0)));
    assert_close(&tb, &(w.exp() * &w));
    assert_eq!(values(&a), values(&(&w * 2.0)));
    assert_eq!(values(&b), values(&w.exp()));

    // vjp's pullback takes a cotangent shaped like the result.
    let (out, pullback) = vjp!(|x, y| x * y, (&w, &w));
    let (cx, cy) = pullback(&out.ones_like());
    assert_eq!(values(&cx), values(&w));
    assert_eq!(values(&cy), values(&w));

    // Jacobians and Hessians of closures and of #[function] items.
    let jac = jacfwd!(|x| x.sin())(&w);
    assert_eq!(jac.shape(), vec![3, 3]);
    let jac_rev = jacrev!(|x| x.sin())(&w);
    assert_close(&jac, &jac_rev);
    let h = hessian!(loss, argnums = 0)(&w, &xs, &ys);
    assert_eq!(h.shape(), vec![3, 3]);

    // Functions taking tensors by value, precompiled.
    let p = by_value(w.clone(), w.clone());
    assert_eq!(values(&p), values(&(&w * &w)));
    let batched = vmap!(by_value, in_axes = (0, None))(&xs, &w);
    assert_eq!(batched.shape(), vec![4, 3]);
    assert_eq!(by_value::ARITY, 2);
    assert_eq!(split::RESULTS, 2);
}
