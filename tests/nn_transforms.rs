//! Every `tensor::nn` function under the transforms, with no rule of its own: its gradient
//! against central finite differences (in f64, along random directions), and its `vmap` by
//! each of the three methods against a loop over samples.
//!
//! Gradients: for `L(args) = Σ f(args) · r` (a fixed random `r`) and random directions `v`,
//! `Σ_k <∂L/∂args_k, v_k>` must equal `(L(args + h v) - L(args - h v)) / 2h` (h = 1e-5) within
//! 1e-6 relative to the terms' magnitude. Values come from the reference interpreter (no C
//! compiler: the graphs are small). vmap: a batch of 3 along axis 0 of the first argument,
//! the others shared, compiled on the CPU, within 1e-5.

mod common;

use std::sync::Arc;
use tensor::core::schedule::realize::Rule;
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::nn::{
    self, Attention, ClassLoss, Conv, ConvTranspose, Gelu, Mode, Pool, Reduction, Target,
};
use tensor::prelude::*;

type NnFn = Arc<dyn Fn(&[Tensor]) -> Tensor + Send + Sync>;

/// A function under test and the shapes of its float arguments.
struct Case {
    name: &'static str,
    shapes: Vec<Vec<usize>>,
    f: NnFn,
}

fn case(
    name: &'static str,
    shapes: &[&[usize]],
    f: impl Fn(&[Tensor]) -> Tensor + Send + Sync + 'static,
) -> Case {
    Case {
        name,
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        f: Arc::new(f),
    }
}

fn cases() -> Vec<Case> {
    let conv = Conv::default().stride(2).padding(1);
    let grouped = Conv::default().groups(2).dilation([1, 2]).padding("same");
    let transposed = ConvTranspose::default()
        .stride(2)
        .padding(1)
        .output_padding(1);
    let pool = Pool::new(3).stride(2).padding(1).ceil_mode(true);
    let avg = Pool::new(2).stride(1).padding(1).count_include_pad(false);
    let classes = Tensor::from_vec(vec![2i64, 0, 1], &[3]);
    let indices = Tensor::from_vec(vec![4i64, 0, 4, 2], &[2, 2]);
    vec![
        case("conv1d", &[&[2, 3, 7], &[4, 3, 3], &[4]], move |a| {
            nn::conv1d(&a[0], &a[1], Some(&a[2]), &conv)
        }),
        case(
            "conv2d_groups_same",
            &[&[1, 4, 5, 5], &[2, 2, 3, 2]],
            move |a| nn::conv2d(&a[0], &a[1], None, &grouped),
        ),
        case(
            "conv_transpose2d",
            &[&[1, 2, 3, 3], &[2, 3, 3, 3]],
            move |a| nn::conv_transpose2d(&a[0], &a[1], None, &transposed),
        ),
        case("unfold", &[&[1, 2, 4, 5]], |a| {
            nn::unfold(&a[0], 2, 1, 1, [1, 2])
        }),
        case("max_pool2d", &[&[1, 2, 6, 5]], move |a| {
            nn::max_pool2d(&a[0], &pool)
        }),
        case("avg_pool2d", &[&[1, 2, 4, 5]], move |a| {
            nn::avg_pool2d(&a[0], &avg)
        }),
        case("adaptive_avg_pool2d", &[&[1, 2, 5, 7]], |a| {
            nn::adaptive_avg_pool2d(&a[0], [2, 3])
        }),
        case("interpolate", &[&[1, 2, 3, 4]], |a| {
            nn::interpolate(&a[0], &[5, 3], Mode::Linear, false)
        }),
        case("layer_norm", &[&[3, 4], &[4], &[4]], |a| {
            nn::layer_norm(&a[0], &[4], Some(&a[1]), Some(&a[2]), 1e-5)
        }),
        case("rms_norm", &[&[3, 4], &[4]], |a| {
            nn::rms_norm(&a[0], &[4], Some(&a[1]), None)
        }),
        case("group_norm", &[&[2, 4, 3], &[4], &[4]], |a| {
            nn::group_norm(&a[0], 2, Some(&a[1]), Some(&a[2]), 1e-5)
        }),
        case("batch_norm", &[&[4, 3, 2], &[3], &[3]], |a| {
            nn::batch_norm(&a[0], None, None, Some(&a[1]), Some(&a[2]), true, 0.1, 1e-5).output
        }),
        case("gelu", &[&[7]], |a| nn::gelu(&a[0], Gelu::Exact)),
        case("gelu_tanh", &[&[7]], |a| nn::gelu(&a[0], Gelu::Tanh)),
        case("erf", &[&[7]], |a| nn::erf(&a[0])),
        case("erfc", &[&[7]], |a| nn::erfc(&a[0])),
        case("mish", &[&[7]], |a| nn::mish(&a[0])),
        case("softplus", &[&[7]], |a| nn::softplus(&a[0], 2.0, 20.0)),
        case("elu", &[&[7]], |a| nn::elu(&a[0], 0.7)),
        case("selu", &[&[7]], |a| nn::selu(&a[0])),
        case("celu", &[&[7]], |a| nn::celu(&a[0], 1.3)),
        case("silu", &[&[7]], |a| nn::silu(&a[0])),
        case("softsign", &[&[7]], |a| nn::softsign(&a[0])),
        case("logsigmoid", &[&[7]], |a| nn::logsigmoid(&a[0])),
        case("leaky_relu", &[&[7]], |a| nn::leaky_relu(&a[0], 0.1)),
        case("hardswish", &[&[7]], |a| nn::hardswish(&a[0])),
        case("cross_entropy", &[&[3, 4], &[4]], move |a| {
            let w = a[1].square().add(0.5);
            let opts = ClassLoss {
                weight: Some(&w),
                label_smoothing: 0.1,
                ..ClassLoss::default()
            };
            nn::cross_entropy(&a[0], Target::Indices(&classes), &opts)
        }),
        case("cross_entropy_probs", &[&[3, 4], &[3, 4]], |a| {
            let p = a[1].softmax(-1);
            nn::cross_entropy(&a[0], Target::Probs(&p), &ClassLoss::default())
        }),
        case("bce_with_logits", &[&[5], &[5]], |a| {
            let y = a[1].sigmoid();
            nn::binary_cross_entropy_with_logits(&a[0], &y, None, None, Reduction::Mean)
        }),
        case("binary_cross_entropy", &[&[5], &[5]], |a| {
            nn::binary_cross_entropy(&a[0].sigmoid(), &a[1].sigmoid(), None, Reduction::Sum)
        }),
        case("smooth_l1", &[&[6], &[6]], |a| {
            nn::smooth_l1_loss(&a[0], &a[1], Reduction::Mean, 0.5)
        }),
        case("huber", &[&[6], &[6]], |a| {
            nn::huber_loss(&a[0], &a[1], Reduction::Sum, 0.8)
        }),
        case("kl_div", &[&[2, 4], &[2, 4]], |a| {
            nn::kl_div(
                &a[0].log_softmax(-1),
                &a[1].softmax(-1),
                Reduction::BatchMean,
                false,
            )
        }),
        case("mse", &[&[6], &[6]], |a| {
            nn::mse_loss(&a[0], &a[1], Reduction::Mean)
        }),
        case("linear", &[&[3, 4], &[2, 4], &[2]], |a| {
            nn::linear(&a[0], &a[1], Some(&a[2]))
        }),
        case("embedding", &[&[5, 3]], move |a| {
            nn::embedding(&indices, &a[0])
        }),
        case("attention_causal", &[&[4, 3], &[4, 3], &[4, 2]], |a| {
            let opts = Attention {
                causal: true,
                ..Attention::default()
            };
            nn::scaled_dot_product_attention(&a[0], &a[1], &a[2], &opts)
        }),
    ]
}

/// Deterministic standard-normal-ish draws.
fn draws(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            let mut u = 0.0;
            for _ in 0..4 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                u += (s >> 11) as f64 / (1u64 << 53) as f64;
            }
            (u - 2.0) * 1.7
        })
        .collect()
}

fn f64_tensor(data: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(data, shape)
}

fn interpreted(t: &Tensor) -> Vec<f64> {
    common::interpreted(t)
}

#[test]
fn nn_gradients_match_finite_differences() {
    let mut failures = Vec::new();
    for (k, c) in cases().into_iter().enumerate() {
        let args: Vec<Vec<f64>> = c
            .shapes
            .iter()
            .enumerate()
            .map(|(j, s)| draws(s.iter().product(), (k * 31 + j) as u64))
            .collect();
        let tensors = |shift: f64, dirs: &[Vec<f64>]| -> Vec<Tensor> {
            args.iter()
                .zip(dirs)
                .zip(&c.shapes)
                .map(|((a, d), s)| {
                    f64_tensor(a.iter().zip(d).map(|(a, d)| a + shift * d).collect(), s)
                })
                .collect()
        };
        let out_shape = (c.f)(&tensors(0.0, &args)).shape();
        let r = f64_tensor(
            draws(out_shape.iter().product(), 977 + k as u64),
            &out_shape,
        );
        let f = c.f.clone();
        let loss = move |a: &[Tensor]| vec![f(a).mul(&r).sum_all()];
        let arity = c.shapes.len();
        let loss = Func::new(Some(arity), loss);
        let gradients = grad(loss.clone(), (0..arity).collect::<Vec<usize>>());
        let dirs: Vec<Vec<f64>> = c
            .shapes
            .iter()
            .enumerate()
            .map(|(j, s)| draws(s.iter().product(), 5000 + (k * 7 + j) as u64))
            .collect();
        let g = gradients.call(&tensors(0.0, &args));
        let analytic: f64 = g
            .iter()
            .zip(&dirs)
            .map(|(g, d)| {
                interpreted(g)
                    .iter()
                    .zip(d)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum();
        let h = 1e-5;
        let up = interpreted(&loss.call1(&tensors(h, &dirs)))[0];
        let down = interpreted(&loss.call1(&tensors(-h, &dirs)))[0];
        let numeric = (up - down) / (2.0 * h);
        let scale = analytic.abs().max(numeric.abs()).max(1.0);
        let ok = (analytic - numeric).abs() <= 1e-6 * scale;
        println!(
            "grad {}: analytic {analytic:.9} numeric {numeric:.9} {}",
            c.name,
            if ok { "ok" } else { "FAILED" }
        );
        if !ok {
            failures.push(c.name);
        }
    }
    assert!(failures.is_empty(), "gradients differ: {failures:?}");
}

#[test]
fn nn_vmap_by_each_method_matches_a_loop() {
    const BATCH: usize = 3;
    let mut failures = Vec::new();
    for (k, c) in cases().into_iter().enumerate() {
        let mut batched_shape = vec![BATCH];
        batched_shape.extend(&c.shapes[0]);
        let xs = Tensor::from_vec(
            draws(batched_shape.iter().product(), 300 + k as u64)
                .into_iter()
                .map(|v| v as f32)
                .collect(),
            &batched_shape,
        );
        let rest: Vec<Tensor> = c.shapes[1..]
            .iter()
            .enumerate()
            .map(|(j, s)| {
                let d = draws(s.iter().product(), 700 + (k * 5 + j) as u64);
                Tensor::from_vec(d.into_iter().map(|v| v as f32).collect(), s)
            })
            .collect();
        let looped: Vec<Tensor> = (0..BATCH)
            .map(|b| {
                let mut args = vec![xs.narrow(0, b as isize, 1).squeeze(0)];
                args.extend(rest.iter().cloned());
                (c.f)(&args)
            })
            .collect();
        let expected = common::values(&Tensor::stack(&looped, 0));
        let mut in_axes = vec![Some(0i32)];
        in_axes.extend(std::iter::repeat_n(None, rest.len()));
        for method in [
            VmapMethod::Rewrite,
            VmapMethod::Range,
            VmapMethod::PadReduce,
        ] {
            let f = c.f.clone();
            let func = Func::new(Some(c.shapes.len()), move |a: &[Tensor]| vec![f(a)]);
            let mut args = vec![xs.clone()];
            args.extend(rest.iter().cloned());
            let got = vmap_with(func, in_axes.clone(), 0, method).call1(&args);
            let ok = common::allclose(&common::values(&got), &expected, 1e-5, 1e-5);
            println!(
                "vmap {} {method:?}: {}",
                c.name,
                if ok { "ok" } else { "FAILED" }
            );
            if !ok {
                failures.push(format!("{} {method:?}", c.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "vmap differs from the loop: {failures:?}"
    );
}

#[test]
fn dropout_draws_its_mask_from_the_key_and_vmap_batches_keys() {
    let x = Tensor::full(&[4096], 1.0, DType::F32);
    let key = |k: u64| Tensor::from_vec(vec![k], &[]);
    let kept = |t: &Tensor| common::values(t).iter().filter(|&&v| v != 0.0).count();
    let a = nn::dropout(&x, 0.25, &key(7), true);
    let b = nn::dropout(&x, 0.25, &key(7), true);
    let c = nn::dropout(&x, 0.25, &key(8), true);
    assert_eq!(
        common::values(&a),
        common::values(&b),
        "same key, same mask"
    );
    assert_ne!(
        common::values(&a),
        common::values(&c),
        "another key, another mask"
    );
    let survivors = kept(&a);
    assert!(
        (2900..3250).contains(&survivors),
        "{survivors} of 4096 kept at p = 0.25"
    );
    let scaled = common::values(&a).into_iter().find(|&v| v != 0.0).unwrap();
    assert!(
        (scaled - 1.0 / 0.75).abs() < 1e-6,
        "kept values are scaled by 1/(1-p)"
    );
    assert_eq!(
        common::values(&nn::dropout(&x, 0.25, &key(7), false)),
        common::values(&x)
    );

    let f = |x: &Tensor, k: &Tensor| nn::dropout(x, 0.5, k, true);
    let xs = Tensor::full(&[2, 64], 1.0, DType::F32);
    let keys = Tensor::from_vec(vec![1u64, 2], &[2]);
    let different = common::values(&vmap(f, [Some(0), Some(0)], 0).call1(&[xs.clone(), keys]));
    assert_ne!(
        different[..64],
        different[64..],
        "a batch of keys: a mask per sample"
    );
    let same = common::values(&vmap(f, [Some(0), None], 0).call1(&[xs, key(3)]));
    assert_eq!(
        same[..64],
        same[64..],
        "one key: the same mask for every sample"
    );
    assert_eq!(
        same[..64],
        common::values(&nn::dropout(
            &Tensor::full(&[64], 1.0, DType::F32),
            0.5,
            &key(3),
            true
        ))[..]
    );
}

#[test]
fn conv_bias_relu_is_im2col_then_one_fused_kernel() {
    let x = Tensor::from_vec(
        draws(2 * 3 * 8 * 8, 1)
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        &[2, 3, 8, 8],
    );
    let w = Tensor::from_vec(
        draws(4 * 3 * 3 * 3, 2)
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        &[4, 3, 3, 3],
    );
    let b = Tensor::from_vec(vec![0.1f32, -0.2, 0.3, 0.0], &[4]);
    let y = nn::conv2d(&x, &w, Some(&b), &Conv::default().padding(1)).relu();
    let schedule = tensor::core::schedule::create_schedule(&[y.uop()]);
    // The 4 output channels would recompute each window: the windows are realized once, as
    // im2col columns with the 9 taps ahead of the 8x8 positions (each tap's row contiguous) ...
    let realized: Vec<_> = schedule
        .decisions
        .iter()
        .filter(|d| d.rule == Rule::RepeatedValue)
        .map(|d| d.node.shape().map(|s| s.to_vec()))
        .collect();
    assert_eq!(realized, vec![Some(vec![2, 3, 9, 8, 8])]);
    // ... and the products, the sum, the bias and the relu are one kernel after it.
    assert_eq!(
        schedule.items.len(),
        2,
        "im2col columns, then products, sum, bias and relu fused"
    );
}
