//! Losses and layers on one sample, in torch's unbatched shapes (`conv2d` of `[C, H, W]`,
//! `cross_entropy` of `[C]` logits and a 0-d class): each equals its batched form on a batch
//! of one with the batch axis removed; a per-sample loss written this way gives, under
//! `vmap(grad(..))` by each method, the gradients a loop of batched-of-one calls gives; torch's
//! values (computed from torch's documented formulas with NumPy) are written in; and a shape
//! mistake names the function the user called, not an op inside it.

mod common;

use common::{allclose, interpreted, max_abs_diff, panic_message, ramp};
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::nn::{self, Attention, ClassLoss, Conv, ConvTranspose, Pool, Reduction, Target};
use tensor::prelude::*;

/// Fails unless `one` (a function of one sample) equals `batched` on a batch of one with its
/// batch axis removed, in shape and (within 1e-6) in value.
#[track_caller]
fn assert_one_sample(what: &str, one: &Tensor, batched: &Tensor) {
    let want = batched.squeeze(0);
    assert_eq!(one.shape(), want.shape(), "{what}: shape");
    let (got, want) = (interpreted(one), interpreted(&want));
    assert!(
        allclose(&got, &want, 1e-6, 1e-6),
        "{what}: largest difference {}",
        max_abs_diff(&got, &want)
    );
}

fn label(class: i64) -> Tensor {
    Tensor::from_vec(vec![class], &[])
}

#[test]
fn class_losses_of_one_sample_equal_a_batch_of_one() {
    let logits = ramp(&[5], 3.0);
    let probs = ramp(&[5], 1.0).softmax(0);
    let weight = Tensor::from_vec(vec![0.5f32, 1.0, 2.0, 1.5, 0.25], &[5]);
    for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
        for (weight, smoothing) in [(None, 0.0), (Some(&weight), 0.0), (Some(&weight), 0.2)] {
            let opts = ClassLoss {
                weight,
                reduction,
                label_smoothing: smoothing,
                ..ClassLoss::default()
            };
            let what = format!(
                "{reduction:?}, weight {}, eps {smoothing}",
                weight.is_some()
            );
            let one = nn::cross_entropy(&logits, Target::Indices(&label(3)), &opts);
            let batch = nn::cross_entropy(
                &logits.unsqueeze(0),
                Target::Indices(&label(3).unsqueeze(0)),
                &opts,
            );
            // A reduced loss is 0-d either way; `None` keeps one value per sample.
            let batch = if reduction == Reduction::None {
                batch
            } else {
                batch.unsqueeze(0)
            };
            assert_one_sample(&format!("cross_entropy indices {what}"), &one, &batch);
            let one = nn::cross_entropy(&logits, Target::Probs(&probs), &opts);
            let batch = nn::cross_entropy(
                &logits.unsqueeze(0),
                Target::Probs(&probs.unsqueeze(0)),
                &opts,
            );
            let batch = if reduction == Reduction::None {
                batch
            } else {
                batch.unsqueeze(0)
            };
            assert_one_sample(&format!("cross_entropy probs {what}"), &one, &batch);
            let logp = logits.log_softmax(0);
            let one = nn::nll_loss(&logp, &label(1), &opts);
            let batch = nn::nll_loss(&logp.unsqueeze(0), &label(1).unsqueeze(0), &opts);
            let batch = if reduction == Reduction::None {
                batch
            } else {
                batch.unsqueeze(0)
            };
            assert_one_sample(&format!("nll_loss {what}"), &one, &batch);
        }
    }
}

#[test]
fn a_reduction_none_loss_of_one_sample_is_0_d() {
    let opts = ClassLoss {
        reduction: Reduction::None,
        ..ClassLoss::default()
    };
    let loss = nn::cross_entropy(&ramp(&[4], 2.0), Target::Indices(&label(0)), &opts);
    assert_eq!(loss.shape(), Vec::<usize>::new());
}

#[test]
fn elementwise_losses_of_one_sample_equal_a_batch_of_one() {
    let y = ramp(&[6], 0.7).add(0.5);
    let x = ramp(&[6], 4.0);
    let r = Reduction::None;
    type Loss = Box<dyn Fn(&Tensor, &Tensor) -> Tensor>;
    let cases: Vec<(&str, Loss)> = vec![
        ("mse_loss", Box::new(move |a, b| nn::mse_loss(a, b, r))),
        ("l1_loss", Box::new(move |a, b| nn::l1_loss(a, b, r))),
        (
            "smooth_l1_loss",
            Box::new(move |a, b| nn::smooth_l1_loss(a, b, r, 0.5)),
        ),
        (
            "huber_loss",
            Box::new(move |a, b| nn::huber_loss(a, b, r, 0.5)),
        ),
        (
            "binary_cross_entropy",
            Box::new(move |a, b| nn::binary_cross_entropy(&a.sigmoid(), b, None, r)),
        ),
        (
            "binary_cross_entropy_with_logits",
            Box::new(move |a, b| nn::binary_cross_entropy_with_logits(a, b, None, None, r)),
        ),
        (
            "kl_div",
            Box::new(move |a, b| nn::kl_div(&a.log_softmax(-1), b, r, false)),
        ),
    ];
    for (name, f) in &cases {
        let one = f(&x, &y);
        let batch = f(&x.unsqueeze(0), &y.unsqueeze(0));
        assert_one_sample(name, &one, &batch);
    }
}

#[test]
fn layers_of_one_sample_equal_a_batch_of_one() {
    let conv = Conv::default().stride(2).padding(1);
    let same = Conv::default().groups(2).padding("same");
    let transposed = ConvTranspose::default()
        .stride(2)
        .padding(1)
        .output_padding(1);
    let pool = Pool::new(2).stride(1).padding(1);
    let causal = Attention {
        causal: true,
        ..Attention::default()
    };
    let (x1, x2, x3) = (
        ramp(&[4, 9], 2.0),
        ramp(&[4, 6, 5], 2.0),
        ramp(&[2, 4, 3, 5], 2.0),
    );
    let (w1, w2, w2g, w3) = (
        ramp(&[3, 4, 3], 1.0),
        ramp(&[3, 4, 3, 2], 1.0),
        ramp(&[4, 2, 3, 3], 1.0),
        ramp(&[3, 2, 2, 2, 2], 1.0),
    );
    let bias = ramp(&[3], 0.5);
    type Layer<'a> = Box<dyn Fn(&Tensor) -> Tensor + 'a>;
    let one_row = x1.narrow(0, 0, 1).squeeze(0);
    let cases: Vec<(&str, &Tensor, Layer)> = vec![
        (
            "conv1d",
            &x1,
            Box::new(|x| nn::conv1d(x, &w1, Some(&bias), &conv)),
        ),
        (
            "conv2d",
            &x2,
            Box::new(|x| nn::conv2d(x, &w2, Some(&bias), &conv)),
        ),
        (
            "conv2d groups same",
            &x2,
            Box::new(|x| nn::conv2d(x, &w2g, None, &same)),
        ),
        (
            "conv3d",
            &x3,
            Box::new(|x| nn::conv3d(x, &w3, None, &Conv::default())),
        ),
        (
            "conv_transpose1d",
            &x1,
            Box::new(|x| nn::conv_transpose1d(x, &w1.transpose(0, 1), None, &transposed)),
        ),
        (
            "conv_transpose2d",
            &x2,
            Box::new(|x| nn::conv_transpose2d(x, &w2.transpose(0, 1), None, &transposed)),
        ),
        (
            "conv_transpose3d",
            &x3,
            Box::new(|x| {
                nn::conv_transpose3d(x, &w3.transpose(0, 1), None, &ConvTranspose::default())
            }),
        ),
        ("max_pool1d", &x1, Box::new(|x| nn::max_pool1d(x, &pool))),
        ("avg_pool1d", &x1, Box::new(|x| nn::avg_pool1d(x, &pool))),
        (
            "avg_pool3d",
            &x3,
            Box::new(|x| nn::avg_pool3d(x, &Pool::new(2))),
        ),
        (
            "adaptive_avg_pool1d",
            &x1,
            Box::new(|x| nn::adaptive_avg_pool1d(x, 4)),
        ),
        (
            "adaptive_avg_pool3d",
            &x3,
            Box::new(|x| nn::adaptive_avg_pool3d(x, [2, 2, 3])),
        ),
        (
            "scaled_dot_product_attention",
            &x1,
            Box::new(|x| nn::scaled_dot_product_attention(x, x, x, &causal)),
        ),
        ("max_pool2d", &x2, Box::new(|x| nn::max_pool2d(x, &pool))),
        ("avg_pool2d", &x2, Box::new(|x| nn::avg_pool2d(x, &pool))),
        (
            "max_pool3d",
            &x3,
            Box::new(|x| nn::max_pool3d(x, &Pool::new(2))),
        ),
        (
            "adaptive_avg_pool2d",
            &x2,
            Box::new(|x| nn::adaptive_avg_pool2d(x, [4, 2])),
        ),
        (
            "max_pool_with_indices",
            &x2,
            Box::new(|x| nn::max_pool_with_indices(x, 2, &Pool::new(2)).1),
        ),
        (
            "layer_norm",
            &x2,
            Box::new(|x| nn::layer_norm(x, &[6, 5], None, None, 1e-5)),
        ),
        (
            "rms_norm",
            &x2,
            Box::new(|x| nn::rms_norm(x, &[5], None, None)),
        ),
        (
            "linear",
            &one_row,
            Box::new(|x| nn::linear(x, &ramp(&[3, 9], 1.0), Some(&bias))),
        ),
    ];
    for (name, x, layer) in &cases {
        assert_one_sample(name, &layer(x), &layer(&x.unsqueeze(0)));
    }
    let table = ramp(&[5, 3], 1.0);
    let index = Tensor::from_vec(vec![4i64], &[]);
    assert_one_sample(
        "embedding of a 0-d index",
        &nn::embedding(&index, &table),
        &nn::embedding(&index.unsqueeze(0), &table),
    );
    let (values, indices) = nn::max_pool_with_indices(&x2, 2, &Pool::new(2));
    let (bv, bi) = (values.unsqueeze(0), indices.unsqueeze(0));
    assert_one_sample(
        "max_unpool2d",
        &nn::max_unpool2d(&values, &indices, &Pool::new(2), None),
        &nn::max_unpool2d(&bv, &bi, &Pool::new(2), None),
    );
}

/// torch.nn.functional.cross_entropy(z, torch.tensor(2), ...) for z = [1.5, -0.3, 0.8, 2.1]
/// (unbatched), from torch's formulas: `(1 - ε) nll + ε/C · smooth`, with `smooth = -Σ_c w_c
/// log p_c` and, for `mean`, both terms divided by `w[target]`; for probabilities `-Σ_c w_c
/// log p_c ((1 - ε) t_c + ε/C)`.
#[test]
fn cross_entropy_of_one_sample_matches_torch() {
    let z = Tensor::from_vec(vec![1.5f64, -0.3, 0.8, 2.1], &[4]);
    let w = Tensor::from_vec(vec![0.5f64, 1.0, 2.0, 1.5], &[4]);
    let t = label(2);
    let opts = |weight, label_smoothing, reduction| ClassLoss {
        weight,
        label_smoothing,
        reduction,
        ..ClassLoss::default()
    };
    let cases = [
        (opts(None, 0.0, Reduction::Mean), 1.948_181_917_888_711_9),
        (opts(None, 0.1, Reduction::Mean), 1.925_681_917_888_712),
        (
            opts(Some(&w), 0.0, Reduction::Mean),
            1.948_181_917_888_711_9,
        ),
        (
            opts(Some(&w), 0.1, Reduction::Mean),
            1.860_125_095_967_885_2,
        ),
        (opts(Some(&w), 0.1, Reduction::Sum), 3.720_250_191_935_770_4),
        (
            opts(Some(&w), 0.1, Reduction::None),
            3.720_250_191_935_770_4,
        ),
    ];
    for (o, want) in &cases {
        let got = interpreted(&nn::cross_entropy(&z, Target::Indices(&t), o));
        assert!(
            (got[0] - want).abs() < 1e-12,
            "{:?} eps {}: {} vs torch {want}",
            o.reduction,
            o.label_smoothing,
            got[0]
        );
    }
    let p = Tensor::from_vec(vec![0.1f64, 0.2, 0.6, 0.1], &[4]);
    let got = interpreted(&nn::cross_entropy(
        &z,
        Target::Probs(&p),
        &opts(Some(&w), 0.1, Reduction::Mean),
    ));
    assert!((got[0] - 3.009_904_701_495_834).abs() < 1e-12, "{got:?}");
}

/// A softmax classifier's loss on one sample, written as torch writes a per-sample loss.
fn classifier_loss(w: &Tensor, b: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let weight = Tensor::from_vec(vec![1.0f32, 2.0, 0.5], &[3]);
    let opts = ClassLoss {
        weight: Some(&weight),
        label_smoothing: 0.1,
        ..ClassLoss::default()
    };
    nn::cross_entropy(&nn::linear(x, w, Some(b)), Target::Indices(y), &opts)
}

/// A convolutional loss on one image `[C, H, W]`: conv, max pool, mean squared error.
fn conv_loss(w: &Tensor, b: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let h = nn::conv2d(x, w, Some(b), &Conv::default().padding(1)).relu();
    let pooled = nn::max_pool2d(&h, &Pool::new(2));
    nn::mse_loss(&pooled, y, Reduction::Mean)
}

/// `vmap(grad(loss))` over samples against a loop of `grad` of the loss of a batch of one.
fn assert_per_sample_grads(
    name: &str,
    loss: fn(&Tensor, &Tensor, &Tensor, &Tensor) -> Tensor,
    batched: fn(&Tensor, &Tensor, &Tensor, &Tensor) -> Tensor,
    params: [Tensor; 2],
    xs: &Tensor,
    ys: &Tensor,
) {
    let samples = xs.shape()[0];
    let mut expected: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    for s in 0..samples {
        let x = xs.narrow(0, s as isize, 1);
        let y = ys.narrow(0, s as isize, 1);
        let g = grad(batched, vec![0usize, 1]).call(&[params[0].clone(), params[1].clone(), x, y]);
        for (e, g) in expected.iter_mut().zip(&g) {
            e.extend(common::values(g));
        }
    }
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let per_sample = vmap_with(
            grad(loss, vec![0usize, 1]),
            [None, None, Some(0), Some(0)],
            0,
            method,
        );
        let got = per_sample.call(&[params[0].clone(), params[1].clone(), xs.clone(), ys.clone()]);
        for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
            let g = common::values(g);
            assert!(
                allclose(&g, e, 1e-5, 1e-6),
                "{name} {method:?} gradient {k}: largest difference {}",
                max_abs_diff(&g, e)
            );
        }
    }
}

#[test]
fn per_sample_gradients_of_unbatched_losses_equal_a_loop_of_batches_of_one() {
    fn classifier_of_batch(w: &Tensor, b: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
        let weight = Tensor::from_vec(vec![1.0f32, 2.0, 0.5], &[3]);
        let opts = ClassLoss {
            weight: Some(&weight),
            label_smoothing: 0.1,
            ..ClassLoss::default()
        };
        nn::cross_entropy(&nn::linear(x, w, Some(b)), Target::Indices(y), &opts)
    }
    let labels = Tensor::from_vec(vec![2i64, 0, 1, 2], &[4]);
    assert_per_sample_grads(
        "cross_entropy of linear",
        classifier_loss,
        classifier_of_batch,
        [ramp(&[3, 5], 1.0), ramp(&[3], 0.5)],
        &ramp(&[4, 5], 2.0),
        &labels,
    );
    assert_per_sample_grads(
        "conv2d, max_pool2d, mse_loss",
        conv_loss,
        conv_loss,
        [ramp(&[3, 2, 3, 3], 1.0), ramp(&[3], 0.5)],
        &ramp(&[3, 2, 4, 4], 2.0),
        &ramp(&[3, 3, 2, 2], 1.0),
    );
}

#[test]
fn shape_errors_name_the_function_called() {
    let logits = ramp(&[2], 1.0);
    let two_labels = Tensor::from_vec(vec![0i64, 1], &[2]);
    let opts = ClassLoss::default();
    type Call<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, Call)> = vec![
        (
            "cross_entropy:",
            Box::new(|| {
                nn::cross_entropy(&logits, Target::Indices(&two_labels), &opts);
            }),
        ),
        (
            "cross_entropy:",
            Box::new(|| {
                nn::cross_entropy(&ramp(&[3, 4], 1.0), Target::Indices(&label(1)), &opts);
            }),
        ),
        (
            "nll_loss:",
            Box::new(|| {
                nn::nll_loss(&ramp(&[], 1.0), &label(0), &opts);
            }),
        ),
        (
            "conv2d:",
            Box::new(|| {
                nn::conv2d(
                    &ramp(&[6, 5], 1.0),
                    &ramp(&[3, 4, 3, 3], 1.0),
                    None,
                    &Conv::default(),
                );
            }),
        ),
        (
            "conv2d:",
            Box::new(|| {
                nn::conv2d(
                    &ramp(&[2, 6, 5], 1.0),
                    &ramp(&[3, 4, 3, 3], 1.0),
                    None,
                    &Conv::default(),
                );
            }),
        ),
        (
            "linear:",
            Box::new(|| {
                nn::linear(&ramp(&[4], 1.0), &ramp(&[3, 5], 1.0), None);
            }),
        ),
        (
            "max_pool2d:",
            Box::new(|| {
                nn::max_pool2d(&ramp(&[4], 1.0), &Pool::new(2));
            }),
        ),
        (
            // The mismatch is found by the `matmul` inside.
            "scaled_dot_product_attention:",
            Box::new(|| {
                let q = ramp(&[3, 4], 1.0);
                nn::scaled_dot_product_attention(&q, &q, &ramp(&[2, 4], 1.0), &Default::default());
            }),
        ),
        (
            "layer_norm:",
            Box::new(|| {
                nn::layer_norm(
                    &ramp(&[2, 3], 1.0),
                    &[3],
                    Some(&ramp(&[2], 1.0)),
                    None,
                    1e-5,
                );
            }),
        ),
    ];
    for (name, f) in &cases {
        let message = panic_message(f);
        assert!(
            message.starts_with(name),
            "expected a message naming {name}, got: {message}"
        );
    }
}
