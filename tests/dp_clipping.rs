//! DP-SGD's per-sample norms and clipped sums (`tensor::dp`) equal the same numbers computed
//! from each sample's own gradient (a plain `grad` per sample, no `vmap`), for a dense layer
//! (on one vector, and on a short sequence, where the norm takes the Gram form),
//! a convolution, an embedding, a layer norm, attention and a GRU, at batch sizes 1, 7 and 64,
//! by every vmap method (at 7); the per-sample gradients are never stored
//! whole (the allocator's largest buffer), and the loss is traced once per call.

// The losses take `&Vec<Tensor>`: the parameter tree's type, as `vmap(grad)` passes it.
#![allow(clippy::ptr_arg)]

mod common;

use common::{max_abs_diff, ramp, values};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tensor::nn::{self, Attention, Conv, RecurrentOptions, RecurrentWeights};
use tensor::prelude::*;
use tensor::typed::{self, Argnum, VmapMethod};

/// Norms and sums agree within this relative tolerance (f32 sums in another order).
const RTOL: f64 = 2e-4;
const CLIP: f64 = 0.5;
const METHODS: [VmapMethod; 3] = [
    VmapMethod::Rewrite,
    VmapMethod::Range,
    VmapMethod::PadReduce,
];

type Loss = fn(&Vec<Tensor>, &Tensor) -> Tensor;

/// A fixed, asymmetric readout so no gradient vanishes by symmetry.
fn readout(y: &Tensor) -> Tensor {
    let n: usize = y.shape().iter().product();
    let k = ramp(&[n], 2.0) + 0.3;
    (y.tanh().reshape(&[n]) * k).sum_all()
}

fn dense(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    readout(&nn::linear(x, &p[0], Some(&p[1])))
}

/// A dense layer over a short sequence: its per-sample norm takes the Gram form.
fn dense_sequence(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    readout(&nn::linear(x, &p[0], None))
}

fn conv(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    let y = nn::conv2d(&x.unsqueeze(0), &p[0], Some(&p[1]), &Conv::default());
    readout(&y)
}

fn embedding(p: &Vec<Tensor>, ids: &Tensor) -> Tensor {
    readout(&nn::embedding(ids, &p[0]))
}

fn layer_norm(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    readout(&nn::layer_norm(x, &[6], Some(&p[0]), Some(&p[1]), 1e-5))
}

fn attention(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    let (q, k, v) = (x.matmul(&p[0]), x.matmul(&p[1]), x.matmul(&p[2]));
    readout(&nn::scaled_dot_product_attention(
        &q,
        &k,
        &v,
        &Attention::default(),
    ))
}

fn gru(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    let w = RecurrentWeights {
        weight_ih: p[0].clone(),
        weight_hh: p[1].clone(),
        bias_ih: Some(p[2].clone()),
        bias_hh: Some(p[3].clone()),
    };
    let (out, _) = nn::gru(&x.unsqueeze(1), None, &[w], RecurrentOptions::default());
    readout(&out)
}

struct Case {
    name: &'static str,
    loss: Loss,
    params: Vec<Tensor>,
    /// One sample's input.
    sample: fn(usize) -> Tensor,
}

fn float_sample(shape: &'static [usize]) -> impl Fn(usize) -> Tensor {
    move |i| ramp(shape, 3.0) * (1.0 + 0.37 * i as f64) + (i as f64 * 0.11).sin()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "dense",
            loss: dense,
            params: vec![ramp(&[3, 4], 1.0), ramp(&[3], 0.5)],
            sample: |i| float_sample(&[4])(i),
        },
        Case {
            name: "dense over a sequence",
            loss: dense_sequence,
            params: vec![ramp(&[6, 8], 0.6)],
            sample: |i| float_sample(&[2, 8])(i),
        },
        Case {
            name: "conv",
            loss: conv,
            params: vec![ramp(&[2, 1, 3, 3], 1.0), ramp(&[2], 0.5)],
            sample: |i| float_sample(&[1, 5, 5])(i),
        },
        Case {
            name: "embedding",
            loss: embedding,
            params: vec![ramp(&[5, 4], 1.5)],
            sample: |i| Tensor::from_vec(vec![(i % 5) as i32, ((3 * i + 1) % 5) as i32, 2], &[3]),
        },
        Case {
            name: "layer_norm",
            loss: layer_norm,
            params: vec![ramp(&[6], 1.0) + 1.0, ramp(&[6], 0.5)],
            sample: |i| float_sample(&[6])(i),
        },
        Case {
            name: "attention",
            loss: attention,
            params: vec![
                ramp(&[4, 4], 1.0),
                ramp(&[4, 4], 0.8) * -1.0,
                ramp(&[4, 3], 1.2),
            ],
            sample: |i| float_sample(&[3, 4])(i),
        },
        Case {
            name: "gru",
            loss: gru,
            params: vec![
                ramp(&[9, 2], 1.0),
                ramp(&[9, 3], 0.8),
                ramp(&[9], 0.5),
                ramp(&[9], 0.3) * -1.0,
            ],
            sample: |i| float_sample(&[2, 2])(i),
        },
    ]
}

/// Each sample's gradient by a plain `grad` of the loss at that sample alone (one buffer per
/// sample, so every sample replays one plan), flattened over all parameters.
fn reference_grads(case: &Case, batch: usize) -> Vec<Vec<f64>> {
    let g = typed::grad(case.loss, Argnum::<0>);
    (0..batch)
        .map(|i| {
            let sample = (case.sample)(i);
            sample.realize().unwrap();
            g(&case.params, &sample).iter().flat_map(values).collect()
        })
        .collect()
}

fn stacked(case: &Case, batch: usize) -> Tensor {
    let samples: Vec<Tensor> = (0..batch).map(case.sample).collect();
    let x = Tensor::stack(&samples, 0);
    x.realize().unwrap();
    x
}

fn check(case: &Case, batch: usize, method: VmapMethod) {
    let what = format!("{} at B={batch} by {method:?}", case.name);
    let per_sample = reference_grads(case, batch);
    let norms: Vec<f64> = per_sample
        .iter()
        .map(|g| g.iter().map(|v| v * v).sum::<f64>().sqrt())
        .collect();
    let mut clipped = vec![0.0; per_sample[0].len()];
    for (g, n) in per_sample.iter().zip(&norms) {
        let factor = (CLIP / (n + 1e-6)).min(1.0);
        for (c, v) in clipped.iter_mut().zip(g) {
            *c += factor * v;
        }
    }
    let x = stacked(case, batch);
    let (sums, got_norms) =
        tensor::dp::clipped_grad_with(case.loss, &case.params, &x, CLIP, method);
    let got_norms = values(&got_norms);
    let got: Vec<f64> = sums.iter().flat_map(values).collect();
    let scale = norms.iter().cloned().fold(1e-3, f64::max);
    assert!(
        max_abs_diff(&got_norms, &norms) <= RTOL * scale,
        "{what}: norms {got_norms:?} != {norms:?}"
    );
    let scale = clipped.iter().map(|v| v.abs()).fold(1e-3, f64::max);
    assert!(
        max_abs_diff(&got, &clipped) <= RTOL * scale,
        "{what}: clipped sums differ by {}",
        max_abs_diff(&got, &clipped)
    );
    assert!(
        norms.iter().any(|&n| n > CLIP) && norms.iter().any(|&n| n > 0.0),
        "{what}: the case must clip some sample (norms {norms:?})"
    );
}

#[test]
fn norms_and_clipped_sums_equal_each_samples_own_gradient() {
    for case in cases() {
        check(&case, 1, VmapMethod::Rewrite);
        for method in METHODS {
            check(&case, 7, method);
        }
    }
}

#[test]
fn every_layer_at_batch_64() {
    for case in cases() {
        check(&case, 64, VmapMethod::Rewrite);
    }
}

/// A model whose dense weight dominates its parameters: the clipped sum's largest buffer is
/// far below one per-sample copy of that weight for the batch (`B × P` floats).
#[test]
fn no_buffer_holds_the_per_sample_gradients() {
    let (batch, inputs, outputs) = (32, 256, 64);
    let loss = |p: &Vec<Tensor>, x: &Tensor| {
        let h = nn::linear(x, &p[0], Some(&p[1])).relu();
        readout(&nn::linear(&h, &p[2], None))
    };
    let params = vec![
        ramp(&[outputs, inputs], 0.2),
        ramp(&[outputs], 0.1),
        ramp(&[2, outputs], 0.5),
    ];
    let x = ramp(&[batch, inputs], 2.0);
    realize_tree(&(params.clone(), x.clone())).unwrap();
    let device = tensor::runtime::CpuDevice::shared().unwrap();
    device.live_buffers().reset_peaks();
    let (sums, norms) = tensor::dp::clipped_grad_with(loss, &params, &x, CLIP, VmapMethod::Rewrite);
    realize_tree(&(sums, norms)).unwrap();
    let per_sample_bytes = batch * outputs * inputs * 4;
    let largest = device.live_buffers().largest_buffer();
    assert!(
        largest * 8 <= per_sample_bytes,
        "the largest buffer ({largest} bytes) is more than 1/8 of the B×P per-sample \
         gradients ({per_sample_bytes} bytes)"
    );
}

/// An embedding's per-sample norms take the Gram form of its one-hot selection
/// (`Σ_ts [tok_t = tok_s] ⟨δ_t, δ_s⟩`), so the clipped sum stores no buffer of the
/// `B × V × D` per-sample gradients of the table (the norm and the weighted sum would both
/// read it), and the norms equal each sample's own gradient's.
#[test]
fn an_embeddings_norms_store_no_per_sample_table_gradients() {
    let (batch, vocab, dim, tokens) = (16, 400, 32, 6);
    let table = ramp(&[vocab, dim], 0.7);
    let ids: Vec<i32> = (0..batch * tokens)
        .map(|i| ((i * 37 + i / 3) % vocab) as i32)
        .collect();
    let ids = Tensor::from_vec(ids, &[batch, tokens]);
    realize_tree(&(table.clone(), ids.clone())).unwrap();
    let params = vec![table];
    let device = tensor::runtime::CpuDevice::shared().unwrap();
    device.live_buffers().reset_peaks();
    let (sums, norms) =
        tensor::dp::clipped_grad_with(embedding, &params, &ids, CLIP, VmapMethod::Rewrite);
    realize_tree(&(sums, norms.clone())).unwrap();
    let per_sample_bytes = batch * vocab * dim * 4;
    let largest = device.live_buffers().largest_buffer();
    assert!(
        largest * 8 <= per_sample_bytes,
        "the largest buffer ({largest} bytes) is more than 1/8 of the per-sample table \
         gradients ({per_sample_bytes} bytes)"
    );
    let g = typed::grad(embedding, Argnum::<0>);
    let got = values(&norms);
    for (i, norm) in got.iter().enumerate() {
        let sample = ids.narrow(0, i as isize, 1).reshape(&[tokens]);
        let own: f64 = g(&params, &sample)
            .iter()
            .flat_map(values)
            .map(|v| v * v)
            .sum();
        let want = own.sqrt();
        assert!(
            (norm - want).abs() <= 1e-4 * want.max(1.0),
            "sample {i}: {norm} vs {want}"
        );
    }
}

/// One trace of the loss per call: the norms and the clipped sum read one backward pass.
#[test]
fn the_loss_is_traced_once() {
    let traces = Arc::new(AtomicUsize::new(0));
    let counter = traces.clone();
    let loss = move |p: &Vec<Tensor>, x: &Tensor| {
        counter.fetch_add(1, Ordering::Relaxed);
        dense(p, x)
    };
    let case = &cases()[0];
    let x = stacked(case, 5);
    let (sums, norms) =
        tensor::dp::clipped_grad_with(loss, &case.params, &x, CLIP, VmapMethod::Rewrite);
    realize_tree(&(sums, norms)).unwrap();
    assert_eq!(traces.load(Ordering::Relaxed), 1);
}

#[test]
fn a_new_clipping_norm_replays_the_plan() {
    let case = &cases()[0];
    let x = stacked(case, 7);
    let run = |clip: f64| {
        let g = tensor::dp::clipped_grad(case.loss, &case.params, &x, clip);
        realize_tree(&g).unwrap();
    };
    run(0.5);
    let before = tensor::runtime::thread_pipeline_counts().plans_made();
    run(0.25);
    run(2.0);
    assert_eq!(
        tensor::runtime::thread_pipeline_counts().plans_made(),
        before
    );
}

#[test]
fn bad_arguments_name_the_function() {
    let case = &cases()[0];
    let x = stacked(case, 3);
    let message =
        common::panic_message(|| tensor::dp::clipped_grad(case.loss, &case.params, &x, 0.0));
    assert!(
        message.contains("clipping norm must be a positive"),
        "{message}"
    );
    let uneven = (ramp(&[3, 4], 1.0), ramp(&[2, 4], 1.0));
    let loss = |p: &Vec<Tensor>, b: &(Tensor, Tensor)| dense(p, &b.0) + dense(p, &b.1);
    let message =
        common::panic_message(|| tensor::dp::per_sample_grad_norms(loss, &case.params, &uneven));
    assert!(
        message.contains("batch as axis 0 with one size"),
        "{message}"
    );
}

static STATELESS_TRACES: AtomicUsize = AtomicUsize::new(0);

fn counted_dense(p: &Vec<Tensor>, x: &Tensor) -> Tensor {
    STATELESS_TRACES.fetch_add(1, Ordering::Relaxed);
    dense(p, x)
}

/// A loss without captured state is traced once per signature for the whole program, as
/// `jax.jit` keeps traces: a training loop calling `clipped_grad` every step does not retrace.
#[test]
fn a_stateless_loss_is_traced_once_across_calls() {
    let case = &cases()[0];
    for step in 0..3 {
        let x = stacked(case, 5) * (1.0 + step as f64);
        let g = tensor::dp::clipped_grad(counted_dense, &case.params, &x, CLIP);
        realize_tree(&g).unwrap();
    }
    assert_eq!(STATELESS_TRACES.load(Ordering::Relaxed), 1);
    let g = tensor::dp::clipped_grad(counted_dense, &case.params, &stacked(case, 6), CLIP);
    realize_tree(&g).unwrap();
    // The loss is traced on one sample: a new batch size is no new signature for it.
    assert_eq!(STATELESS_TRACES.load(Ordering::Relaxed), 1);
}
