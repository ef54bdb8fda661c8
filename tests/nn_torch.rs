//! `tensor::nn` against PyTorch: every case of tests/data/nn.json (written by
//! tests/data/gen_nn.py with torch, expected values in float64 from float32 inputs) is built with
//! the `nn` functions, computed in float32 on the CPU, and compared within the file's
//! `rtol`/`atol` (1e-4 relative, 2e-5 absolute). Integer outputs (pooling indices) are exact.

mod common;

use common::golden::{Inputs, check_cases_with_options};
use common::json::Json;
use tensor::nn::{
    self, ClassLoss, Conv, ConvTranspose, Gelu, Mode, Pool, Reduction, Spatial, Target,
};
use tensor::prelude::*;

#[test]
fn nn_functions_match_pytorch() {
    check_cases_with_options("nn.json", "torch", build);
}

fn build(case: &Json, i: &Inputs) -> Vec<Tensor> {
    let o = case.get("opts");
    let t = |name: &str| i.get(name).unwrap_or_else(|| panic!("input {name}"));
    let opt_t = |name: &str| i.get(name);
    match case.get("fn").string() {
        f @ ("conv1d" | "conv2d" | "conv3d") => {
            let mut opts = Conv::default()
                .stride(spatial(o.get("stride")))
                .dilation(spatial(o.get("dilation")))
                .groups(o.get("groups").number() as usize);
            opts = match o.get("padding") {
                Json::String(s) => opts.padding(s.as_str()),
                p => opts.padding(spatial(p)),
            };
            let f = match f {
                "conv1d" => nn::conv1d,
                "conv2d" => nn::conv2d,
                _ => nn::conv3d,
            };
            vec![f(t("x"), t("w"), Some(t("b")), &opts)]
        }
        f @ ("conv_transpose1d" | "conv_transpose2d" | "conv_transpose3d") => {
            let opts = ConvTranspose::default()
                .stride(spatial(o.get("stride")))
                .padding(spatial(o.get("padding")))
                .output_padding(spatial(o.get("output_padding")))
                .dilation(spatial(o.get("dilation")))
                .groups(o.get("groups").number() as usize);
            let f = match f {
                "conv_transpose1d" => nn::conv_transpose1d,
                "conv_transpose2d" => nn::conv_transpose2d,
                _ => nn::conv_transpose3d,
            };
            vec![f(t("x"), t("w"), Some(t("b")), &opts)]
        }
        "unfold" => vec![nn::unfold(
            t("x"),
            spatial(o.get("kernel_size")),
            spatial(o.get("dilation")),
            spatial(o.get("padding")),
            spatial(o.get("stride")),
        )],
        f @ ("max_pool1d" | "max_pool2d" | "max_pool3d") => {
            let dims = f.as_bytes()[8] as usize - b'0' as usize;
            let opts = pool(o).dilation(spatial(o.get("dilation")));
            let plain = match dims {
                1 => nn::max_pool1d(t("x"), &opts),
                2 => nn::max_pool2d(t("x"), &opts),
                _ => nn::max_pool3d(t("x"), &opts),
            };
            let (values, indices) = nn::max_pool_with_indices(t("x"), dims, &opts);
            assert_eq!(plain.shape(), values.shape());
            let same: Vec<f64> = common::values(&plain.sub(&values).abs().max_all());
            assert_eq!(same, vec![0.0], "max_pool and max_pool_with_indices agree");
            vec![values, indices]
        }
        f @ ("avg_pool1d" | "avg_pool2d" | "avg_pool3d") => {
            let opts = pool(o).count_include_pad(o.get("count_include_pad") == &Json::Bool(true));
            vec![match f {
                "avg_pool1d" => nn::avg_pool1d(t("x"), &opts),
                "avg_pool2d" => nn::avg_pool2d(t("x"), &opts),
                _ => nn::avg_pool3d(t("x"), &opts),
            }]
        }
        "max_unpool2d" => vec![nn::max_unpool2d(t("x"), t("indices"), &pool(o), None)],
        "adaptive_avg_pool2d" => {
            let s = sizes(o.get("size"));
            vec![nn::adaptive_avg_pool2d(t("x"), [s[0], s[1]])]
        }
        "adaptive_avg_pool1d" => vec![nn::adaptive_avg_pool1d(t("x"), sizes(o.get("size"))[0])],
        "interpolate" => {
            let mode = match o.get("mode").string() {
                "nearest" => Mode::Nearest,
                "nearest-exact" => Mode::NearestExact,
                _ => Mode::Linear,
            };
            let align = o.get("align_corners") == &Json::Bool(true);
            vec![nn::interpolate(t("x"), &sizes(o.get("size")), mode, align)]
        }
        "layer_norm" => vec![nn::layer_norm(
            t("x"),
            &sizes(o.get("shape")),
            Some(t("w")),
            Some(t("b")),
            o.get("eps").number(),
        )],
        "rms_norm" => vec![nn::rms_norm(
            t("x"),
            &sizes(o.get("shape")),
            Some(t("w")),
            Some(o.get("eps").number()),
        )],
        "group_norm" => vec![nn::group_norm(
            t("x"),
            o.get("groups").number() as usize,
            Some(t("w")),
            Some(t("b")),
            o.get("eps").number(),
        )],
        "batch_norm" => {
            let training = o.get("training") == &Json::Bool(true);
            let out = nn::batch_norm(
                t("x"),
                Some(t("rm")),
                Some(t("rv")),
                Some(t("w")),
                Some(t("b")),
                training,
                o.get("momentum").number(),
                o.get("eps").number(),
            );
            let mut got = vec![out.output];
            got.extend(out.running_mean);
            got.extend(out.running_var);
            got
        }
        "cross_entropy" | "cross_entropy_probs" | "nll_loss" => {
            let opts = ClassLoss {
                weight: opt_t("weight"),
                reduction: reduction(o),
                label_smoothing: match o.members().get("label_smoothing") {
                    Some(v) => v.number(),
                    None => 0.0,
                },
                ..ClassLoss::default()
            };
            vec![match case.get("fn").string() {
                "cross_entropy" => {
                    nn::cross_entropy(t("input"), Target::Indices(t("target")), &opts)
                }
                "cross_entropy_probs" => {
                    nn::cross_entropy(t("input"), Target::Probs(t("target")), &opts)
                }
                _ => nn::nll_loss(t("input"), t("target"), &opts),
            }]
        }
        "binary_cross_entropy" => vec![nn::binary_cross_entropy(
            t("input"),
            t("target"),
            None,
            reduction(o),
        )],
        "binary_cross_entropy_with_logits" => vec![nn::binary_cross_entropy_with_logits(
            t("input"),
            t("target"),
            None,
            opt_t("pos_weight"),
            reduction(o),
        )],
        "mse_loss" => vec![nn::mse_loss(t("input"), t("target"), reduction(o))],
        "l1_loss" => vec![nn::l1_loss(t("input"), t("target"), reduction(o))],
        "smooth_l1_loss" => vec![nn::smooth_l1_loss(
            t("input"),
            t("target"),
            reduction(o),
            o.get("beta").number(),
        )],
        "huber_loss" => vec![nn::huber_loss(
            t("input"),
            t("target"),
            reduction(o),
            o.get("delta").number(),
        )],
        "kl_div" => vec![nn::kl_div(
            t("input"),
            t("target"),
            reduction(o),
            o.get("log_target") == &Json::Bool(true),
        )],
        "linear" => vec![nn::linear(t("x"), t("w"), Some(t("b")))],
        "embedding" => vec![nn::embedding(t("indices"), t("table"))],
        "sdpa" => {
            let opts = nn::Attention {
                mask: opt_t("mask"),
                causal: o.get("causal") == &Json::Bool(true),
                scale: o.members().get("scale").map(Json::number),
            };
            vec![nn::scaled_dot_product_attention(
                t("q"),
                t("k"),
                t("v"),
                &opts,
            )]
        }
        activation => vec![activate(activation, o, t("x"))],
    }
}

fn activate(name: &str, o: &Json, x: &Tensor) -> Tensor {
    let n = |k: &str| o.get(k).number();
    match name {
        "relu6" => nn::relu6(x),
        "leaky_relu" => nn::leaky_relu(x, n("slope")),
        "elu" => nn::elu(x, n("alpha")),
        "selu" => nn::selu(x),
        "celu" => nn::celu(x, n("alpha")),
        "gelu" => nn::gelu(x, Gelu::Exact),
        "gelu_tanh" => nn::gelu(x, Gelu::Tanh),
        "silu" => nn::silu(x),
        "mish" => nn::mish(x),
        "softplus" => nn::softplus(x, n("beta"), n("threshold")),
        "softsign" => nn::softsign(x),
        "hardtanh" => nn::hardtanh(x, n("min"), n("max")),
        "hardsigmoid" => nn::hardsigmoid(x),
        "hardswish" => nn::hardswish(x),
        "logsigmoid" => nn::logsigmoid(x),
        "erf" => nn::erf(x),
        "erfc" => nn::erfc(x),
        other => panic!("nn.json names an unknown function {other}"),
    }
}

fn sizes(v: &Json) -> Vec<usize> {
    v.items().iter().map(|d| d.number() as usize).collect()
}

fn spatial(v: &Json) -> Spatial {
    match v {
        Json::Number(n) => Spatial::All(*n as usize),
        list => Spatial::Each(sizes(list)),
    }
}

fn pool(o: &Json) -> Pool {
    let mut p = Pool::new(spatial(o.get("kernel_size")))
        .stride(spatial(o.get("stride")))
        .padding(spatial(o.get("padding")));
    if let Some(c) = o.members().get("ceil_mode") {
        p = p.ceil_mode(c == &Json::Bool(true));
    }
    p
}

fn reduction(o: &Json) -> Reduction {
    match o.get("reduction").string() {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "batchmean" => Reduction::BatchMean,
        _ => Reduction::None,
    }
}
