use std::time::{Duration, Instant};
use tensor::prelude::*;
const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;
#[function]
fn loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(w1) + b1).relu();
    let logits = hidden.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}
fn main() {
    let params: Vec<Tensor> = [(IN, HIDDEN), (1, HIDDEN), (HIDDEN, OUT), (1, OUT)]
        .iter()
        .map(|&(r, c)| {
            let t = if r == 1 {
                Tensor::from_vec(vec![0.01f32; c], &[c])
            } else {
                Tensor::from_vec(
                    (0..r * c).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect(),
                    &[r, c],
                )
            };
            t.realize().unwrap();
            t
        })
        .collect();
    let x: Vec<f32> = (0..IN).map(|i| (i % 7) as f32 / 7.0).collect();
    let y: Vec<f32> = (0..OUT).map(|i| if i == 3 { 1.0 } else { 0.0 }).collect();
    let plain = grad!(loss, argnums = (0, 1, 2, 3));
    let jitted = jit!(grad!(loss, argnums = (0, 1, 2, 3)));
    for round in 0..3 {
        for which in 0..2 {
            let mut best = Duration::MAX;
            let mut tt = [Duration::ZERO; 2];
            for _ in 0..5 {
                let s = Instant::now();
                for _ in 0..256 {
                    let xi = Tensor::from_slice(&x, &[IN]);
                    let yi = Tensor::from_slice(&y, &[OUT]);
                    let s1 = Instant::now();
                    let (a, b, c, d) = if which == 0 {
                        plain(&params[0], &params[1], &params[2], &params[3], &xi, &yi)
                    } else {
                        jitted(&params[0], &params[1], &params[2], &params[3], &xi, &yi)
                    };
                    tensor::runtime::realize::realize(&[&a, &b, &c, &d]).unwrap();
                    let s2 = Instant::now();
                    for g in [&a, &b, &c, &d] {
                        std::hint::black_box(g.to_vec::<f32>().unwrap());
                    }
                    tt[0] += s2 - s1;
                    tt[1] += s2.elapsed();
                }
                best = best.min(s.elapsed());
            }
            println!(
                "round {round} {} best {:?}  (per 256, avg: call+realize {:?} to_vec {:?})",
                if which == 0 { "grad!" } else { "jit!(grad!)" },
                best,
                tt[0] / 5,
                tt[1] / 5
            );
        }
    }
}
