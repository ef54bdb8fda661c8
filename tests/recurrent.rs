//! Recurrent layers (`nn::rnn`, `nn::gru`, `nn::lstm`) and `scan` against PyTorch.
//!
//! The expected values are PyTorch 2.15's (float64, CPU), written by
//! `tests/data/recurrent_reference.py` into `tests/data/recurrent_reference.json`; every
//! tensor there and here is filled by the same formula (`fill`). Our side runs in `f32` on
//! the compiled CPU path: values agree within 2e-5 absolute plus 2e-5 relative, gradients
//! within 1e-4.

mod common;

use common::json::Json;
use tensor::core::transform::scan;
use tensor::nn::{Recurrence, RecurrentOptions, RecurrentWeights, gru, lstm, rnn};
use tensor::prelude::*;
use tensor::typed::{self, Argnum};

fn reference() -> Json {
    Json::parse(include_str!("data/recurrent_reference.json"))
}

fn expected(key: &str) -> Vec<f64> {
    reference()
        .get(key)
        .items()
        .iter()
        .map(Json::number)
        .collect()
}

/// Element `i` (row-major) is `0.5 sin(0.7 i + seed)`, as in the Python script.
fn fill(shape: &[usize], seed: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let values = (0..n)
        .map(|i| (0.5 * (0.7 * i as f64 + seed).sin()) as f32)
        .collect();
    Tensor::from_vec(values, shape)
}

/// The weights of `layers` sets, filled as the script's `set_weights` fills PyTorch's
/// parameters (seed `seed + k` for the `k`th parameter in PyTorch's order).
fn weights(
    recurrence: Recurrence,
    input: usize,
    hidden: usize,
    bias: bool,
    opts: RecurrentOptions,
    seed: f64,
) -> Vec<RecurrentWeights> {
    let rows = recurrence.gates() * hidden;
    let per_set = if bias { 4 } else { 2 };
    let d = if opts.bidirectional { 2 } else { 1 };
    (0..opts.num_layers * d)
        .map(|set| {
            let k = (set * per_set) as f64 + seed;
            let cols = if set < d { input } else { d * hidden };
            RecurrentWeights {
                weight_ih: fill(&[rows, cols], k),
                weight_hh: fill(&[rows, hidden], k + 1.0),
                bias_ih: bias.then(|| fill(&[rows], k + 2.0)),
                bias_hh: bias.then(|| fill(&[rows], k + 3.0)),
            }
        })
        .collect()
}

#[track_caller]
fn close(what: &str, t: &Tensor, want: &[f64], tol: f64) {
    let got = common::values(t);
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, PyTorch gives {w}"
        );
    }
}

#[test]
fn gru_equals_torch() {
    let opts = RecurrentOptions::default();
    let w = weights(Recurrence::Gru, 3, 4, true, opts, 1.0);
    let (y, h) = gru(&fill(&[5, 2, 3], 0.3), None, &w, opts);
    assert_eq!(y.shape(), vec![5, 2, 4]);
    assert_eq!(h.shape(), vec![1, 2, 4]);
    close("gru output", &y, &expected("gru_output"), 2e-5);
    close("gru h_n", &h, &expected("gru_h"), 2e-5);
}

#[test]
fn bidirectional_two_layer_lstm_batch_first_equals_torch() {
    let opts = RecurrentOptions {
        num_layers: 2,
        bidirectional: true,
        batch_first: true,
    };
    let w = weights(Recurrence::Lstm, 3, 2, true, opts, 2.0);
    let (h0, c0) = (fill(&[4, 2, 2], 0.2), fill(&[4, 2, 2], 0.4));
    let (y, (h, c)) = lstm(&fill(&[2, 4, 3], 0.9), Some((&h0, &c0)), &w, opts);
    assert_eq!(y.shape(), vec![2, 4, 4]);
    close("lstm output", &y, &expected("lstm_output"), 2e-5);
    close("lstm h_n", &h, &expected("lstm_h"), 2e-5);
    close("lstm c_n", &c, &expected("lstm_c"), 2e-5);
}

#[test]
fn unbatched_relu_rnn_without_bias_equals_torch() {
    let opts = RecurrentOptions::default();
    let w = weights(Recurrence::RnnRelu, 3, 3, false, opts, 3.0);
    let h0 = fill(&[1, 3], 0.5);
    let (y, h) = rnn(&fill(&[6, 3], 1.7), Some(&h0), &w, true, opts);
    assert_eq!(y.shape(), vec![6, 3]);
    assert_eq!(h.shape(), vec![1, 3]);
    close("rnn output", &y, &expected("rnn_output"), 2e-5);
    close("rnn h_n", &h, &expected("rnn_h"), 2e-5);
}

/// Per-sample gradients of `sum(output²)` of a GRU over its weights (a tree), each sample
/// an unbatched `[T, I]` sequence, by every vmap method, equal PyTorch's per-sample
/// gradients.
#[test]
fn per_sample_gru_gradients_equal_torch_by_every_method() {
    let opts = RecurrentOptions::default();
    let w = weights(Recurrence::Gru, 3, 4, true, opts, 1.0).remove(0);
    // The script's input is [T, N, I], its first 3 steps; a sample is one column.
    let xs = fill(&[5, 2, 3], 0.3).narrow(0, 0, 3).transpose(0, 1);
    let loss = move |w: &RecurrentWeights, x: &Tensor| {
        let (y, _) = gru(
            x,
            None,
            std::slice::from_ref(w),
            RecurrentOptions::default(),
        );
        y.square().sum_all()
    };
    for method in [
        typed::VmapMethod::Rewrite,
        typed::VmapMethod::Range,
        typed::VmapMethod::PadReduce,
    ] {
        let g: RecurrentWeights =
            typed::vmap_with(typed::grad(loss, Argnum::<0>), (None, 0), 0, method)(&w, &xs);
        let what = |name: &str| format!("{method:?} d/d{name}");
        close(
            &what("weight_ih"),
            &g.weight_ih,
            &expected("gru_grad_weight_ih_l0"),
            1e-4,
        );
        close(
            &what("weight_hh"),
            &g.weight_hh,
            &expected("gru_grad_weight_hh_l0"),
            1e-4,
        );
        let (bi, bh) = (g.bias_ih.unwrap(), g.bias_hh.unwrap());
        close(
            &what("bias_ih"),
            &bi,
            &expected("gru_grad_bias_ih_l0"),
            1e-4,
        );
        close(
            &what("bias_hh"),
            &bh,
            &expected("gru_grad_bias_hh_l0"),
            1e-4,
        );
    }
}

/// The LSTM's gradient with respect to its input equals central finite differences (f64).
#[test]
fn lstm_input_gradient_equals_finite_differences() {
    let opts = RecurrentOptions {
        num_layers: 2,
        bidirectional: true,
        batch_first: false,
    };
    let w: Vec<RecurrentWeights> = weights(Recurrence::Lstm, 2, 3, true, opts, 0.5)
        .into_iter()
        .map(|set| tree_map(&set, |t| t.cast(DType::F64)))
        .collect();
    let f = {
        let w = w.clone();
        move |x: &Tensor| lstm(x, None, &w, opts).0.tanh().sum_all()
    };
    let x = fill(&[3, 1, 2], 0.1).cast(DType::F64);
    let g = common::values(&grad!(f.clone())(&x));
    let x0 = common::values(&x);
    let eps = 1e-6;
    for i in 0..x0.len() {
        let at = |d: f64| {
            let mut v = x0.clone();
            v[i] += d;
            common::values(&f(&Tensor::from_vec(v, &[3, 1, 2])))[0]
        };
        let fd = (at(eps) - at(-eps)) / (2.0 * eps);
        assert!((g[i] - fd).abs() < 1e-6, "d/dx[{i}]: {} vs {fd}", g[i]);
    }
}

/// `h' = tanh(h W + x_t)` over `steps` steps of `xs`: the last state and every state.
fn recurrence(steps: usize) -> (Tensor, Tensor, Tensor) {
    let w = fill(&[4, 4], 0.7);
    let xs = fill(&[steps, 4], 0.2);
    let (h, hs) = scan(
        |h: Tensor, x: Tensor| {
            let h = h.matmul(&w).add(&x).tanh();
            (h.clone(), h)
        },
        Tensor::zeros(&[4], DType::F32),
        &xs,
    );
    (h, hs, xs)
}

#[test]
fn a_scan_equals_the_loop_it_unrolls() {
    let (h, hs, xs) = recurrence(12);
    assert_eq!(hs.shape(), vec![12, 4]);
    let w = fill(&[4, 4], 0.7);
    let mut expected = Tensor::zeros(&[4], DType::F32);
    for t in 0..12 {
        expected = expected
            .matmul(&w)
            .add(xs.narrow(0, t, 1).squeeze(0))
            .tanh();
    }
    let (got, want) = (common::values(&h), common::values(&expected));
    assert!(
        common::allclose(&got, &want, 1e-6, 1e-6),
        "{got:?} vs {want:?}"
    );
    common::assert_matches_interpreter("scan outputs", &hs);
}

#[test]
fn wrong_weights_name_the_layer_and_the_shapes() {
    let opts = RecurrentOptions::default();
    let w = weights(Recurrence::Gru, 5, 4, true, opts, 1.0);
    let message = common::panic_message(|| gru(&fill(&[5, 2, 3], 0.3), None, &w, opts));
    assert!(message.starts_with("gru: weights of shapes"), "{message}");
    assert!(message.contains("[12, 3]"), "{message}");
    let message = common::panic_message(|| gru(&fill(&[5], 0.3), None, &w, opts));
    assert!(message.starts_with("gru: input of shape [5]"), "{message}");
    let two_layers = RecurrentOptions {
        num_layers: 2,
        ..opts
    };
    let message = common::panic_message(|| gru(&fill(&[5, 2, 5], 0.3), None, &w, two_layers));
    assert!(message.contains("1 weight sets for 2 layers"), "{message}");
}

#[test]
fn init_layers_gives_pytorch_shapes() {
    let opts = RecurrentOptions {
        num_layers: 2,
        bidirectional: true,
        batch_first: false,
    };
    let w = RecurrentWeights::init_layers(Recurrence::Lstm, 3, 5, true, opts, 7);
    assert_eq!(w.len(), 4);
    assert_eq!(w[0].weight_ih.shape(), vec![20, 3]);
    assert_eq!(w[2].weight_ih.shape(), vec![20, 10]);
    assert_eq!(w[3].weight_hh.shape(), vec![20, 5]);
    let bound = 1.0 / 5f64.sqrt();
    assert!(
        common::values(&w[1].bias_hh.clone().unwrap())
            .iter()
            .all(|v| v.abs() <= bound)
    );
}

/// `scan` composes with the transforms: the gradient of a scanned recurrence equals central
/// finite differences (f64), and `vmap` of it by every method equals a loop over samples.
#[test]
fn scan_is_differentiable_and_vmappable() {
    let w = fill(&[3, 3], 0.4).cast(DType::F64);
    let run = {
        let w = w.clone();
        move |xs: &Tensor| {
            let (h, hs) = scan(
                |h: Tensor, x: Tensor| {
                    let h = h.matmul(&w).add(&x).tanh();
                    (h.clone(), h)
                },
                Tensor::zeros(&[3], DType::F64),
                xs,
            );
            h.sum_all() + hs.square().sum_all()
        }
    };
    let xs = fill(&[5, 3], 0.9).cast(DType::F64);
    let g = common::values(&grad!(run.clone())(&xs));
    let x0 = common::values(&xs);
    let eps = 1e-6;
    for i in 0..x0.len() {
        let at = |d: f64| {
            let mut v = x0.clone();
            v[i] += d;
            common::values(&run(&Tensor::from_vec(v, &[5, 3])))[0]
        };
        let fd = (at(eps) - at(-eps)) / (2.0 * eps);
        assert!((g[i] - fd).abs() < 1e-6, "d/dxs[{i}]: {} vs {fd}", g[i]);
    }
    let batch = fill(&[4, 5, 3], 1.3).cast(DType::F64);
    let looped: Vec<Tensor> = (0..4)
        .map(|b| run(&batch.narrow(0, b, 1).squeeze(0)))
        .collect();
    let want = common::values(&Tensor::stack(&looped, 0));
    for method in [
        typed::VmapMethod::Rewrite,
        typed::VmapMethod::Range,
        typed::VmapMethod::PadReduce,
    ] {
        let got = common::values(&typed::vmap_with(run.clone(), 0, 0, method)(&batch));
        assert!(
            common::allclose(&got, &want, 1e-12, 1e-12),
            "{method:?}: {got:?} vs {want:?}"
        );
    }
}
