//! An external host function inside a loss: the principal branch of Lambert's W (the `w` with
//! `w e^w = z`), solved per element by Newton's method until it converges, a loop with a
//! data-dependent trip count that tensor ops cannot express. It runs under `vmap(grad(..))`,
//! `jacfwd` and `jacrev` with each batching strategy; per strategy the example prints how many
//! times each endpoint ran and the shapes it saw, and checks the results against a loop of
//! single-sample calls.
//!
//! `cargo run --release --example external_call` (`DEBUG=2` lists the host calls among the
//! kernels).

use ndarray::{ArrayD, IxDyn, Zip};
use tensor::external::{
    BatchStrategy, Dims, Endpoint, ExtArg, External, HostArray, HostCall, InputSpec, OutputSpec,
};
use tensor::prelude::*;
use tensor::runtime::realize::to_vec;

/// W(z) for z > -1/e by Newton's method on `w e^w - z`, to `tol`.
fn lambert_w(z: f64, tol: f64) -> f64 {
    let mut w = if z < 1.0 { z } else { z.ln() };
    for _ in 0..100 {
        let e = w.exp();
        let step = (w * e - z) / (e * (w + 1.0));
        w -= step;
        if step.abs() < tol {
            break;
        }
    }
    w
}

/// dW/dz = 1 / (e^W (1 + W)).
fn lambert_w_prime(w: f64) -> f64 {
    1.0 / (w.exp() * (1.0 + w))
}

fn f32s(a: &HostArray) -> ArrayD<f32> {
    a.to_array::<f32>()
}

/// `a` and `b` broadcast to their common shape (the endpoints see leading batch axes, of size
/// 1 where a strategy gave an unbatched argument a leading 1).
fn common(a: &ArrayD<f32>, b: &ArrayD<f32>) -> (ArrayD<f32>, ArrayD<f32>) {
    let rank = a.ndim().max(b.ndim());
    let dim =
        |x: &ArrayD<f32>, i: usize| (i + x.ndim()).checked_sub(rank).map_or(1, |k| x.shape()[k]);
    let shape: Vec<usize> = (0..rank).map(|i| dim(a, i).max(dim(b, i))).collect();
    let up = |x: &ArrayD<f32>| x.broadcast(IxDyn(&shape)).expect("broadcasts").to_owned();
    (up(a), up(b))
}

/// `W(a * x)`: `W` per element, and `W'` for the derivative endpoints.
fn w_of_product(c: &HostCall) -> (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
    let (x, a) = common(&f32s(c.array(0)), &f32s(c.array(1)));
    let tol = c.static_f64(2);
    let mut w = x.clone();
    let mut dw = x.clone();
    Zip::from(&mut w)
        .and(&mut dw)
        .and(&x)
        .and(&a)
        .for_each(|w, dw, &x, &a| {
            let v = lambert_w(x as f64 * a as f64, tol);
            *w = v as f32;
            *dw = lambert_w_prime(v) as f32;
        });
    (x, a, w, dw)
}

fn lambert_external(method: BatchStrategy) -> External {
    External::builder("lambert_w")
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .input(InputSpec::static_value())
        .output(OutputSpec::new(DType::F32, |s| s[0].clone()))
        .apply(|c| vec![HostArray::from_array(w_of_product(c).2)])
        .jvp(|c| {
            let (x, a, _, dw) = w_of_product(c);
            let (tx, ta) = (f32s(&c.tangents()[0]), f32s(&c.tangents()[1]));
            let t = (&tx * &a + &ta * &x) * &dw;
            vec![HostArray::from_array(t)]
        })
        .vjp(|c| {
            let (x, a, _, dw) = w_of_product(c);
            let ct = f32s(&c.cotangents()[0]) * &dw;
            let (dx, da) = (&ct * &a, &ct * &x);
            let (dx, da) = common(&dx, &da);
            vec![HostArray::from_array(dx), HostArray::from_array(da)]
        })
        .vmap_method(method)
        .build()
}

fn values(t: &Tensor) -> Vec<f32> {
    to_vec::<f32>(t).expect("realize")
}

fn largest_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn describe(ext: &External, endpoint: Endpoint) -> String {
    let shapes = ext.shapes(endpoint);
    let mut distinct: Vec<Vec<Vec<usize>>> = Vec::new();
    for s in &shapes {
        if !distinct.contains(s) {
            distinct.push(s.clone());
        }
    }
    format!("{} x {endpoint:?} {distinct:?}", shapes.len())
}

fn main() {
    let n = 8;
    let xs: Vec<f32> = (0..n * 3).map(|i| 0.1 + 0.23 * i as f32).collect();
    let xs = Tensor::from_vec(xs, &[n, 3]);
    let a = Tensor::from_vec(vec![0.5f32, 1.0, 2.0], &[3]);
    let x0 = Tensor::from_vec(vec![0.3f32, 1.2, 2.5], &[3]);
    let tol = 1e-12;
    let mut worst = 0.0f32;
    println!("W(a * x) by Newton's method on the host, batch {n}, inputs [..., 3]");
    for method in [
        BatchStrategy::Sequential,
        BatchStrategy::ExpandDims,
        BatchStrategy::BroadcastAll,
        BatchStrategy::Auto,
    ] {
        let ext = lambert_external(method);
        let e = ext.clone();
        let aa = a.clone();
        let g = move |x: &Tensor| {
            let w = e
                .call(&[x.into(), (&aa).into(), ExtArg::from(tol)])
                .remove(0);
            w.clone()
        };
        let loss = {
            let g = g.clone();
            move |x: &Tensor| g(x).square().sum_all()
        };
        println!("{method:?}:");

        let per_sample = vmap(grad(loss.clone(), 0), 0, 0).call1(std::slice::from_ref(&xs));
        let batched = values(&per_sample);
        let counts = format!(
            "{}; {}",
            describe(&ext, Endpoint::Apply),
            describe(&ext, Endpoint::Vjp)
        );
        let looped: Vec<f32> = (0..n)
            .flat_map(|i| {
                let x = xs.shrink(&[(i, i + 1), (0, 3)]).reshape(&[3]);
                values(&grad(loss.clone(), 0).call1(&[x]))
            })
            .collect();
        let d = largest_difference(&batched, &looped);
        worst = worst.max(d);
        println!("  vmap(grad(loss)):  {counts}  vs loop: {d:.2e}");

        for (name, jac) in [
            ("jacfwd", jacfwd(g.clone(), 0)),
            ("jacrev", jacrev(g.clone(), 0)),
        ] {
            ext.reset_calls();
            let j = values(&jac.call1(std::slice::from_ref(&x0)));
            let endpoint = if name == "jacfwd" {
                Endpoint::Jvp
            } else {
                Endpoint::Vjp
            };
            let counts = describe(&ext, endpoint);
            // the loop: one jvp per basis vector, as columns of the Jacobian
            let mut columns = vec![0.0f32; 9];
            for k in 0..3 {
                let mut basis = vec![0.0f32; 3];
                basis[k] = 1.0;
                let t = Tensor::from_vec(basis, &[3]);
                let col = values(&jvp(g.clone(), std::slice::from_ref(&x0), &[t]).1[0]);
                for (r, v) in col.into_iter().enumerate() {
                    columns[r * 3 + k] = v;
                }
            }
            let d = largest_difference(&j, &columns);
            worst = worst.max(d);
            println!("  {name}(W):         {counts}  vs loop: {d:.2e}");
        }
    }
    assert!(
        worst <= 1e-5,
        "the strategies disagree with the loop by {worst}"
    );
    println!("all strategies agree with the loops (largest difference {worst:.2e})");
}
