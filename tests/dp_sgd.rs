//! `tensor::dp::DpSgd`: the private gradient of a Poisson batch is the clipped sum of its
//! examples' gradients plus noise of standard deviation `σ C`, over the expected batch size;
//! padded batches of every size up to the padding share one plan; the accountant records one
//! step per call.

mod common;

use common::{max_abs_diff, ramp, values};
use tensor::dp::DpSgd;
use tensor::dp::accountant::RdpAccountant;
use tensor::prelude::*;
use tensor::runtime::thread_pipeline_counts;

const N: usize = 40;
const CLIP: f64 = 0.7;

fn loss(w: &Tensor, s: &(Tensor, Tensor)) -> Tensor {
    ((&s.0 * w).sum_all() - &s.1).square()
}

fn data() -> (Tensor, Tensor) {
    let x = ramp(&[N, 3], 4.0) + 0.1;
    let y = ramp(&[N], 2.0);
    realize_tree(&(x.clone(), y.clone())).unwrap();
    (x, y)
}

#[test]
fn without_noise_the_private_gradient_is_the_clipped_mean_of_the_batch() {
    let (x, y) = data();
    let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]);
    let batch = [3usize, 7, 8, 21, 39];
    let mut dp = DpSgd::new(CLIP, 0.0, N, 0.25, 1);
    let got = values(&dp.private_grad(loss, &w, &(x.clone(), y.clone()), &batch));
    let (xs, ys) = (values(&x), values(&y));
    let wv = values(&w);
    let mut expected = [0.0f64; 3];
    for &i in &batch {
        let residual: f64 = (0..3).map(|k| xs[i * 3 + k] * wv[k]).sum::<f64>() - ys[i];
        let g: Vec<f64> = (0..3).map(|k| 2.0 * residual * xs[i * 3 + k]).collect();
        let norm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
        let factor = (CLIP / (norm + 1e-6)).min(1.0);
        for k in 0..3 {
            expected[k] += factor * g[k] / 10.0; // expected batch: 40 × 0.25
        }
    }
    assert!(
        max_abs_diff(&got, &expected) < 1e-5,
        "{got:?} != {expected:?}"
    );
}

#[test]
fn noise_has_the_mechanisms_scale_and_is_fresh_each_step() {
    let x = Tensor::zeros(&[N, 500], DType::F32);
    let y = Tensor::zeros(&[N], DType::F32);
    let w = Tensor::zeros(&[500], DType::F32);
    let (sigma, rate) = (1.5, 0.5);
    let mut dp = DpSgd::new(CLIP, sigma, N, rate, 9);
    let batch = dp.batch(0);
    let first = values(&dp.private_grad(loss, &w, &(x.clone(), y.clone()), &batch));
    let second = values(&dp.private_grad(loss, &w, &(x, y), &batch));
    // Zero gradients: only the noise, N(0, (σ C / (N q))²) per coordinate.
    let expected_std = sigma * CLIP / (N as f64 * rate);
    let std = (first.iter().map(|v| v * v).sum::<f64>() / 500.0).sqrt();
    assert!(
        (std / expected_std - 1.0).abs() < 0.15,
        "std {std} vs {expected_std}"
    );
    assert!(
        max_abs_diff(&first, &second) > expected_std,
        "the second step reused the noise"
    );
}

#[test]
fn batches_up_to_the_padding_share_one_plan() {
    let (x, y) = data();
    let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]);
    let mut dp = DpSgd::new(CLIP, 1.0, N, 0.1, 3).with_padding(8);
    let data = (x, y);
    realize_tree(&dp.private_grad(loss, &w, &data, &[0, 1, 2])).unwrap();
    let before = thread_pipeline_counts().plans_made();
    for size in [1usize, 5, 8, 0, 7] {
        let batch: Vec<usize> = (0..size).map(|i| (i * 5 + size) % N).collect();
        realize_tree(&dp.private_grad(loss, &w, &data, &batch)).unwrap();
    }
    assert_eq!(
        thread_pipeline_counts().plans_made(),
        before,
        "a batch size within the padding built a plan"
    );
    let mut accountant = RdpAccountant::new();
    for _ in 0..6 {
        accountant.step(1.0, 0.1);
    }
    assert_eq!(dp.steps(), 6);
    assert_eq!(dp.epsilon(1e-5), accountant.epsilon(1e-5));
}

#[test]
fn an_index_outside_the_dataset_names_the_function() {
    let (x, y) = data();
    let w = Tensor::zeros(&[3], DType::F32);
    let mut dp = DpSgd::new(CLIP, 1.0, N, 0.1, 3);
    let message = common::panic_message(|| dp.private_grad(loss, &w, &(x, y), &[1, N]));
    assert!(
        message.contains("DpSgd::private_grad: index 40 is outside"),
        "{message}"
    );
}
