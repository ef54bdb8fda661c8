//! Per-sample gradients of whole models against PyTorch: every case of tests/data/models.json
//! (written by tests/data/gen_models.py with `torch.func.vmap(grad(loss))`, float64 gradients
//! from float32 parameters and inputs) is rebuilt with `tensor::nn` — a small tutorial-style CNN,
//! and a pre-LN transformer block as a sequence classifier (no mask, mean-pool) and with a
//! causal mask and a token-level loss — and `vmap(grad(loss))` is computed in float32 through
//! the compiled CPU path and compared within the file's tolerance (1e-4 relative, 1e-5
//! absolute). Each sample's gradients must also equal `grad` of that
//! sample's loss alone (1e-5 relative, 1e-6 absolute).

mod common;

use common::golden::{self, Inputs};
use common::json::Json;
use std::collections::BTreeMap;
use tensor::nn::{self, Attention, ClassLoss, Conv, Gelu, Pool, Reduction, Target};
use tensor::prelude::*;

const CASES: [&str; 3] = ["cnn_tiny", "transformer_cls", "transformer_lm_causal"];

#[test]
fn cnn_per_sample_gradients() {
    check_case("cnn_tiny");
}

#[test]
fn transformer_classifier_per_sample_gradients() {
    check_case("transformer_cls");
}

#[test]
fn causal_transformer_with_token_level_loss_per_sample_gradients() {
    check_case("transformer_lm_causal");
}

#[test]
fn every_case_of_the_file_is_checked() {
    let doc = models();
    let names: Vec<&str> = doc
        .get("cases")
        .items()
        .iter()
        .map(|c| c.get("name").string())
        .collect();
    assert_eq!(names, CASES);
}

fn models() -> Json {
    golden::load("models.json")
}

/// The case's `vmap(grad(loss))` against torch's gradients (the file's `rtol`/`atol`), and each
/// sample's slice of it against `grad` of that sample's loss alone (1e-5 relative, 1e-6
/// absolute; the samples are fresh buffers, so the loop replays one plan).
fn check_case(name: &str) {
    let doc = models();
    let (rtol, atol) = (doc.get("rtol").number(), doc.get("atol").number());
    let case = doc
        .get("cases")
        .items()
        .iter()
        .find(|c| c.get("name").string() == name)
        .unwrap_or_else(|| panic!("models.json has no case {name}"));
    let inputs = golden::inputs_of(case);
    let (per_sample, args) = per_sample_grads(case, &inputs);
    let batched: Vec<Vec<f64>> = realized(per_sample.call(&args))
        .iter()
        .map(common::values)
        .collect();
    let names = param_names(case);
    for ((param, got), expected) in names.iter().zip(&batched).zip(case.get("outputs").items()) {
        let want: Vec<f64> = expected
            .get("data")
            .items()
            .iter()
            .map(|v| v.number())
            .collect();
        assert!(
            common::allclose(got, &want, rtol, atol),
            "{name}: the per-sample gradient of {param} differs from torch's by {:.3e}",
            common::max_abs_diff(got, &want)
        );
    }
    let params = names.len();
    let single = grad(model_loss(case), (0..params).collect::<Vec<_>>());
    let (x, y) = (&inputs["x"], &inputs["y"]);
    let batch = x.shape()[0];
    for i in 0..batch {
        let mut one = args[..params].to_vec();
        one.extend([fresh_sample(x, i), fresh_sample(y, i)]);
        for ((param, all), g) in names.iter().zip(&batched).zip(realized(single.call(&one))) {
            let n = all.len() / batch;
            let (got, want) = (&all[i * n..(i + 1) * n], common::values(&g));
            assert!(
                common::allclose(got, &want, 1e-5, 1e-6),
                "{name}, sample {i}: vmap and single-sample grad of {param} differ by {:.3e}",
                common::max_abs_diff(got, &want)
            );
        }
    }
}

/// `results` computed together (one schedule; reading each alone would schedule each
/// gradient's whole graph again).
fn realized(results: Vec<Tensor>) -> Vec<Tensor> {
    tensor::runtime::realize::realize(&results.iter().collect::<Vec<_>>())
        .expect("the CPU runtime computes the gradients");
    results
}

/// Sample `i` of `t` as a buffer of its own (from host data), so every sample's graph has the
/// same structure.
fn fresh_sample(t: &Tensor, i: usize) -> Tensor {
    let shape = &t.shape()[1..];
    let n: usize = shape.iter().product();
    let values = common::values(t);
    let sample = &values[i * n..(i + 1) * n];
    match t.dtype() {
        DType::F32 => Tensor::from_vec(sample.iter().map(|&v| v as f32).collect(), shape),
        DType::I64 => Tensor::from_vec(sample.iter().map(|&v| v as i64).collect(), shape),
        other => panic!("models.json: unexpected input dtype {other}"),
    }
}

/// `vmap(grad(loss))` of the case's model over its batch, and its arguments (the parameters in
/// the case's order, then the inputs `x` and labels `y`).
fn per_sample_grads(case: &Json, inputs: &Inputs) -> (Func, Vec<Tensor>) {
    let names = param_names(case);
    let mut args: Vec<Tensor> = names.iter().map(|n| inputs[n].clone()).collect();
    args.extend([inputs["x"].clone(), inputs["y"].clone()]);
    let mut in_axes: Vec<Option<i32>> = vec![None; names.len()];
    in_axes.extend([Some(0), Some(0)]);
    let argnums: Vec<usize> = (0..names.len()).collect();
    (vmap(grad(model_loss(case), argnums), in_axes, 0), args)
}

fn param_names(case: &Json) -> Vec<String> {
    case.get("params")
        .items()
        .iter()
        .map(|n| n.string().to_string())
        .collect()
}

/// The loss of one sample as a function of the parameters (in the case's order), the sample's
/// input and its label.
fn model_loss(case: &Json) -> Func {
    let names = param_names(case);
    let n = names.len();
    let model = case.get("model").string().to_string();
    let opts = Block::from_opts(case.get("opts"));
    Func::new(Some(n + 2), move |a: &[Tensor]| {
        let p: BTreeMap<&str, &Tensor> = names.iter().map(|s| s.as_str()).zip(a).collect();
        vec![match model.as_str() {
            "cnn" => cnn_loss(&p, &a[n], &a[n + 1]),
            "transformer" => opts
                .as_ref()
                .expect("transformer options")
                .loss(&p, &a[n], &a[n + 1]),
            other => panic!("models.json: unknown model {other}"),
        }]
    })
}

type Params<'a> = BTreeMap<&'a str, &'a Tensor>;

/// Conv 3×3, ReLU, conv 3×3, ReLU, max-pool 2, flatten, linear, ReLU, linear, log-softmax and
/// the summed NLL, for one image `x` `[1, H, W]` and a 0-d label.
fn cnn_loss(p: &Params, x: &Tensor, y: &Tensor) -> Tensor {
    let h = nn::conv2d(&x.unsqueeze(0), p["w1"], Some(p["b1"]), &Conv::default()).relu();
    let h = nn::conv2d(&h, p["w2"], Some(p["b2"]), &Conv::default()).relu();
    let h = nn::max_pool2d(&h, &Pool::new(2)).flatten(1, -1);
    let h = nn::linear(&h, p["w3"], Some(p["b3"])).relu();
    let z = nn::linear(&h, p["w4"], Some(p["b4"]));
    let sum = ClassLoss {
        reduction: Reduction::Sum,
        ..ClassLoss::default()
    };
    nn::nll_loss(&z.log_softmax(-1), &y.reshape(&[1]), &sum)
}

/// A pre-LN transformer block's sizes and head.
#[derive(Clone)]
struct Block {
    seq: usize,
    dim: usize,
    heads: usize,
    causal: bool,
    /// Token-level cross-entropy over every position ("lm"), else mean-pool and one label.
    per_token: bool,
}

impl Block {
    fn from_opts(o: &Json) -> Option<Block> {
        if !o.members().contains_key("seq") {
            return None;
        }
        Some(Block {
            seq: o.get("seq").number() as usize,
            dim: o.get("dim").number() as usize,
            heads: o.get("heads").number() as usize,
            causal: o.get("causal") == &Json::Bool(true),
            per_token: o.get("head").string() == "lm",
        })
    }

    /// The final layer norm's output `[S, D]` for tokens `t` `[S]`.
    fn forward(&self, p: &Params, t: &Tensor) -> Tensor {
        let (s, d, h) = (self.seq, self.dim, self.heads);
        let ln =
            |x: &Tensor, g: &str, b: &str| nn::layer_norm(x, &[d], Some(p[g]), Some(p[b]), 1e-5);
        let x = nn::embedding(t, p["tok_emb"]) + p["pos_emb"];
        let qkv = nn::linear(&ln(&x, "ln1_g", "ln1_b"), p["w_qkv"], Some(p["b_qkv"]));
        let [q, k, v] = [0, 1, 2].map(|i| {
            qkv.narrow(1, (i * d) as isize, d)
                .reshape(&[s, h, d / h])
                .transpose(0, 1)
        });
        let opts = Attention {
            causal: self.causal,
            ..Attention::default()
        };
        let o = nn::scaled_dot_product_attention(&q, &k, &v, &opts)
            .transpose(0, 1)
            .reshape(&[s, d]);
        let x = &x + nn::linear(&o, p["w_o"], Some(p["b_o"]));
        let m = nn::linear(&ln(&x, "ln2_g", "ln2_b"), p["w_fc1"], Some(p["b_fc1"]));
        let x = &x + nn::linear(&nn::gelu(&m, Gelu::Exact), p["w_fc2"], Some(p["b_fc2"]));
        ln(&x, "lnf_g", "lnf_b")
    }

    /// Cross-entropy (mean over the labels) of tokens `t` `[S]` against `y`: one label (0-d)
    /// after mean-pooling, or one per position (`[S]`).
    fn loss(&self, p: &Params, t: &Tensor, y: &Tensor) -> Tensor {
        let u = self.forward(p, t);
        let (u, y) = if self.per_token {
            (u, y.clone())
        } else {
            (u.mean(0, true), y.reshape(&[1]))
        };
        let z = nn::linear(&u, p["w_head"], Some(p["b_head"]));
        nn::cross_entropy(&z, Target::Indices(&y), &ClassLoss::default())
    }
}
