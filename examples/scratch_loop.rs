use std::time::Instant;
use tensor::prelude::*;
use tensor::runtime::realize::{realize, to_vec};
#[function]
fn loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(w1) + b1).relu();
    let logits = hidden.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}
fn main() {
    let params = [
        Tensor::randn(&[784, 128], 1) * 0.03,
        Tensor::zeros(&[128], DType::F32),
        Tensor::randn(&[128, 10], 2) * 0.1,
        Tensor::zeros(&[10], DType::F32),
    ];
    for p in &params {
        realize(&[p]).unwrap();
    }
    let single = grad!(loss, argnums = (0, 1, 2, 3));
    let xh = vec![0.5f32; 784];
    let yh = vec![0.1f32; 10];
    let (mut tb, mut tr, mut tv) = (0.0, 0.0, 0.0);
    for i in 0..300 {
        let t0 = Instant::now();
        let xi = Tensor::from_slice(&xh, &[784]);
        let yi = Tensor::from_slice(&yh, &[10]);
        let (a, b, c, d) = single(&params[0], &params[1], &params[2], &params[3], &xi, &yi);
        let t1 = Instant::now();
        realize(&[&a, &b, &c, &d]).unwrap();
        let t2 = Instant::now();
        for g in [&a, &b, &c, &d] {
            std::hint::black_box(to_vec::<f32>(g).unwrap());
        }
        let t3 = Instant::now();
        if i >= 44 {
            tb += (t1 - t0).as_secs_f64();
            tr += (t2 - t1).as_secs_f64();
            tv += (t3 - t2).as_secs_f64();
        }
    }
    println!(
        "per call (256): build {:.1}us realize {:.1}us to_vec {:.1}us",
        tb / 256.0 * 1e6,
        tr / 256.0 * 1e6,
        tv / 256.0 * 1e6
    );
}
