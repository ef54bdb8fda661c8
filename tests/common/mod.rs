//! Shared helpers of the facade's integration tests.
#![allow(dead_code)]

pub mod cuda;
pub mod golden;
pub mod json;
pub mod random_graph;
pub mod tolerance;

use tensor::core::uop::dtype::decode_scalars;
use tensor::prelude::*;

/// The message of the panic `f` raises; fails the test if `f` returns.
pub fn panic_message<R>(f: impl FnOnce() -> R) -> String {
    let payload = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(_) => panic!("the call must panic"),
        Err(payload) => payload,
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The values of `t`, computed on the selected device (the CPU unless `DEVICE` or
/// `set_device` says otherwise) through the compiled path.
pub fn values(t: &Tensor) -> Vec<f64> {
    let bytes =
        tensor::runtime::realize::read_bytes(t).expect("the selected device computes the tensor");
    decode_scalars(&bytes, t.dtype())
        .iter()
        .map(|v| v.as_f64())
        .collect()
}

/// The values of `t` from the reference interpreter.
pub fn interpreted(t: &Tensor) -> Vec<f64> {
    tensor::core::interp::evaluate(&t.uop()).to_f64_vec()
}

/// Fails unless the compiled values of `t` equal the interpreter's within 1e-5 (relative and
/// absolute).
#[track_caller]
pub fn assert_matches_interpreter(what: &str, t: &Tensor) {
    let expected = interpreted(t);
    let actual = values(t);
    assert!(
        allclose(&actual, &expected, 1e-5, 1e-5),
        "{what}: largest difference {}",
        max_abs_diff(&actual, &expected)
    );
}

/// A deterministic `f32` tensor of `shape` with values in `[-scale / 2, scale / 2)`.
pub fn ramp(shape: &[usize], scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let values = (0..n)
        .map(|i| ((i * 7919 % 97) as f32 / 97.0 - 0.5) * scale)
        .collect();
    Tensor::from_vec(values, shape)
}

/// The per-sample gradients `[dw, db]` of a softmax regression (`w` 8x5, `b` 5) over a batch
/// of 4 samples: `vmap(grad(loss))`, lazy, for tests to compute on a device.
pub fn softmax_regression_per_sample_grads() -> Vec<Tensor> {
    fn loss(w: &Tensor, b: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
        let logits = x.matmul(w) + b;
        -(y * logits.log_softmax(-1)).sum_all()
    }
    let (w, b) = (ramp(&[8, 5], 1.0), ramp(&[5], 0.5));
    let (x, y) = (
        ramp(&[4, 8], 2.0),
        Tensor::eye(5, DType::F32).shrink(&[(0, 4), (0, 5)]),
    );
    let per_sample = vmap(
        grad(loss, vec![0usize, 1]),
        [None, None, Some(0), Some(0)],
        0,
    );
    per_sample.call(&[w, b, x, y])
}

/// True when `actual` is within `atol + rtol * |expected|` of `expected`, elementwise.
pub fn allclose(actual: &[f64], expected: &[f64], rtol: f64, atol: f64) -> bool {
    actual.len() == expected.len()
        && actual
            .iter()
            .zip(expected)
            .all(|(a, e)| (a - e).abs() <= atol + rtol * e.abs() || (a.is_nan() && e.is_nan()))
}

/// The largest elementwise difference, for failure messages.
pub fn max_abs_diff(actual: &[f64], expected: &[f64]) -> f64 {
    actual
        .iter()
        .zip(expected)
        .map(|(a, e)| (a - e).abs())
        .fold(0.0, f64::max)
}

/// The C sources of the kernels that compute `t`, optimized as the runtime does for two cores
/// with 8-lane (AVX2) vectors, whatever this machine's vectors are: the register tiles, and so
/// the shapes that tests assert, depend on the vector width.
pub fn kernel_sources(t: &Tensor) -> Vec<String> {
    let options = tensor::core::codegen::CodegenOptions {
        optimize: true,
        threads: 2,
        vector_lanes: tensor::core::codegen::heuristic::DEFAULT_VECTOR_LANES,
    };
    let schedule = tensor::core::schedule::create_schedule(&[t.uop()]);
    tensor::runtime::plan::generate_kernels(&schedule, &options)
        .into_iter()
        .map(|k| k.source)
        .collect()
}
