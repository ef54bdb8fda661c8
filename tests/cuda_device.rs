//! `realize` on a real GPU (`CUDA:0`), whatever `DEVICE` says: each test selects it through
//! `set_device` and, where this machine has no CUDA driver or no GPU, prints `skipped: <test>:
//! <why>` and returns (CI has no GPU; these run wherever one is present). Values are compared
//! with the reference interpreter. What they hold down was found on the first runs on an H100:
//! a device used from threads that never touched it, NaN payloads through `f16`, launches
//! queued without a wait, and the 8x4-tiled matmul. The device selection is process-wide, so
//! the tests run one at a time.

mod common;

use common::{
    allclose, assert_matches_interpreter, interpreted, max_abs_diff, ramp,
    softmax_regression_per_sample_grads, values,
};
use std::sync::{Mutex, MutexGuard};
use tensor::prelude::*;
use tensor::runtime::realize::{set_device, synchronize};

/// Selects the GPU for the duration of one test, the tests one at a time; `None` (after
/// printing why) where there is none.
fn on_gpu(test: &str) -> Option<MutexGuard<'static, ()>> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    match set_device(Some("CUDA")) {
        Ok(()) => Some(guard),
        Err(why) => {
            println!("skipped: {test}: {why}");
            None
        }
    }
}

#[test]
fn elementwise_reductions_and_matmuls_equal_the_interpreter() {
    let Some(_gpu) = on_gpu("elementwise_reductions_and_matmuls_equal_the_interpreter") else {
        return;
    };
    let x = ramp(&[300, 70], 3.0);
    assert_matches_interpreter("exp2 chain", &(((&x * 2.0 + 1.0).exp2() * &x).abs().sqrt()));
    assert_matches_interpreter("row sums", &x.sum(1, false));
    assert_matches_interpreter(
        "softmax of 5000-long rows",
        &ramp(&[3, 5000], 2.0).softmax(-1),
    );
    let (a, b) = (ramp(&[12, 20], 1.0), ramp(&[20, 16], 1.0));
    assert_matches_interpreter("small matmul", &a.matmul(&b).relu());
    // 4M outputs: the heuristic gives each thread 8 rows by 4 columns.
    let (a, b) = (ramp(&[2048, 32], 1.0), ramp(&[32, 2048], 1.0));
    assert_matches_interpreter("8x4-tiled matmul", &a.matmul(&b));
}

#[test]
fn per_sample_gradients_equal_the_interpreter() {
    let Some(_gpu) = on_gpu("per_sample_gradients_equal_the_interpreter") else {
        return;
    };
    let grads = softmax_regression_per_sample_grads();
    for (g, what) in grads.iter().zip(["dw", "db"]) {
        assert_matches_interpreter(what, g);
    }
}

#[test]
fn threads_that_never_used_the_gpu_compute_on_it() {
    let Some(_gpu) = on_gpu("threads_that_never_used_the_gpu_compute_on_it") else {
        return;
    };
    let workers: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                let x = ramp(&[1000], k as f32 + 1.0);
                let y = (&x * 3.0).exp() + 1.0;
                (interpreted(&y), values(&y))
            })
        })
        .collect();
    for worker in workers {
        let (expected, actual) = worker.join().expect("the thread computes on the GPU");
        assert!(allclose(&actual, &expected, 1e-5, 1e-5));
    }
}

#[test]
fn a_nan_keeps_its_sign_and_payload_through_half_precision() {
    let Some(_gpu) = on_gpu("a_nan_keeps_its_sign_and_payload_through_half_precision") else {
        return;
    };
    let x = Tensor::from_vec(
        vec![
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7fa0_0000),
            1.5,
            f32::INFINITY,
        ],
        &[5],
    );
    let bits = x.cast(DType::F16).bitcast(DType::I16);
    let expected: Vec<i64> = vec![0x7e00, 0xfe00 - 0x10000, 0x7f00, 0x3e00, 0x7c00];
    let actual: Vec<i64> = values(&bits).iter().map(|v| *v as i64).collect();
    assert_eq!(actual, expected, "f16 bits as the CPU gives them");
    let back = x.cast(DType::F16).cast(DType::F32).bitcast(DType::I32);
    let widened: Vec<u32> = values(&back).iter().map(|v| *v as i64 as u32).collect();
    assert_eq!(widened[0], 0x7fc0_0000);
    assert_eq!(widened[1], 0xffc0_0000);
    assert_eq!(widened[2], 0x7fe0_0000, "the payload's top bits survive");
}

#[test]
fn queued_launches_are_finished_before_a_read_or_a_synchronize_returns() {
    let Some(_gpu) = on_gpu("queued_launches_are_finished_before_a_read_or_a_synchronize_returns")
    else {
        return;
    };
    // Forty dependent kernels, none waited for until the read.
    let start = ramp(&[1 << 20], 1.0);
    let mut expected: Vec<f32> = values(&start).iter().map(|v| *v as f32).collect();
    let mut x = start;
    for step in 0..40 {
        x = (&x * 0.5 + step as f64).contiguous();
        x.realize().expect("the step is queued");
        for v in &mut expected {
            *v = *v * 0.5 + step as f32;
        }
    }
    synchronize().expect("every queued kernel finishes without error");
    let expected: Vec<f64> = expected.iter().map(|v| *v as f64).collect();
    let actual = values(&x);
    assert!(
        allclose(&actual, &expected, 1e-6, 1e-6),
        "forty queued steps: largest difference {}",
        max_abs_diff(&actual, &expected)
    );
}
