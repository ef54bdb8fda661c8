//! `realize` on a GPU device, checked without a GPU: every test of this binary selects the
//! emulated GPU (`DEVICE=EMU`, through `set_device`), so kernels are lowered for the GPU
//! (grid indices, group reductions in shared memory), rendered as CUDA C and run by the
//! emulator, through the same plans, memory planning and copies as on a GPU. Values are
//! compared with the reference interpreter. The device selection is process-wide, so the
//! tests run one at a time.

mod common;

use common::{assert_matches_interpreter, ramp, softmax_regression_per_sample_grads, values};
use std::sync::{Mutex, MutexGuard};
use tensor::prelude::*;
use tensor::runtime::realize::{SelectedDevice, selected_device, set_device};
use tensor::runtime::{Jit, pipeline_counts};

/// Selects `device` for the duration of one test, the tests one at a time.
fn on(device: &str) -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    set_device(Some(device)).expect("a device this build knows");
    guard
}

#[test]
fn the_emulated_gpu_is_selected_by_name() {
    let _on = on("emu");
    assert_eq!(selected_device().unwrap(), SelectedDevice::Emulated);
}

#[test]
fn elementwise_movement_and_reductions_equal_the_interpreter() {
    let _on = on("EMU");
    let x = ramp(&[6, 10], 3.0);
    let cases = [
        ("affine exp", (&x * 2.0 + 1.0).exp()),
        ("row sums", x.sum(1, false)),
        ("column max", x.max(0, true)),
        ("softmax rows", x.softmax(-1)),
        ("log_softmax columns", x.log_softmax(0)),
        (
            "pad flip shrink",
            x.pad(&[(1, 2), (0, 3)]).flip(1).shrink(&[(0, 5), (2, 9)]),
        ),
        ("transpose then cumsum", x.transpose(0, 1).cumsum(1)),
        (
            "where and compare",
            x.lt(x.mean(1, true)).where_(&x, &(&x * -1.0)),
        ),
    ];
    for (what, t) in &cases {
        assert_matches_interpreter(what, t);
    }
}

#[test]
fn long_reductions_run_as_group_reductions_in_shared_memory() {
    let _on = on("EMU");
    let long = ramp(&[4096], 1.0);
    assert_matches_interpreter("sum of 4096", &long.sum_all());
    assert_matches_interpreter("max of 4096", &long.max_all());
    let rows = ramp(&[3, 2048], 2.0);
    assert_matches_interpreter("softmax of 2048-long rows", &rows.softmax(-1));
}

#[test]
fn a_matmul_with_bias_and_relu_equals_the_interpreter() {
    let _on = on("EMU");
    let (a, b, bias) = (ramp(&[12, 20], 1.0), ramp(&[20, 16], 1.0), ramp(&[16], 1.0));
    assert_matches_interpreter("relu(a @ b + bias)", &(a.matmul(&b) + &bias).relu());
}

#[test]
fn per_sample_gradients_equal_the_interpreter() {
    let _on = on("EMU");
    let grads = softmax_regression_per_sample_grads();
    assert_eq!(grads[0].shape(), vec![4, 8, 5]);
    for (g, what) in grads.iter().zip(["dw", "db"]) {
        assert_matches_interpreter(what, g);
    }
}

#[test]
fn a_second_realize_of_the_same_structure_replays_the_plan() {
    let _on = on("EMU");
    let graph = |x: &Tensor| (x * 3.0 - 1.0).sum(0, false);
    let first = graph(&ramp(&[5, 4], 1.0));
    first.realize().unwrap();
    let before = pipeline_counts();
    let second = graph(&ramp(&[5, 4], -2.0));
    assert_matches_interpreter("replayed", &second);
    let after = pipeline_counts();
    assert_eq!(after.schedules, before.schedules, "no new schedule");
    assert_eq!(
        after.kernels_generated, before.kernels_generated,
        "no new kernel"
    );
}

#[test]
fn a_jitted_function_traces_once_and_replays_its_plan_on_the_emulated_gpu() {
    let _on = on("EMU");
    let jitted = Jit::new(Func::new(Some(1), |args: &[Tensor]| {
        vec![(&args[0] * &args[0]).sum(1, false)]
    }));
    let x = ramp(&[3, 4], 1.0);
    x.realize().unwrap();
    let out = jitted.call(std::slice::from_ref(&x)).unwrap().remove(0);
    assert_matches_interpreter("jit, first call", &out);
    let before = pipeline_counts();
    let y = ramp(&[3, 4], -3.0);
    y.realize().unwrap();
    let out = jitted.call(std::slice::from_ref(&y)).unwrap().remove(0);
    assert_matches_interpreter("jit, replayed", &out);
    assert_eq!(jitted.trace_count(), 1, "one signature, one trace");
    assert_eq!(
        pipeline_counts().schedules,
        before.schedules,
        "the plan is replayed"
    );
}

#[test]
fn values_move_between_the_cpu_and_the_emulated_gpu_through_the_host() {
    let on_cpu = on("CPU");
    let x = ramp(&[4, 4], 1.0) + 1.0;
    x.realize().unwrap();
    set_device(Some("EMU")).unwrap();
    let y = &x * 2.0;
    assert_matches_interpreter("CPU result used on the emulated GPU", &y);
    set_device(Some("CPU")).unwrap();
    let z = &y - 1.0;
    assert_matches_interpreter("emulated result used on the CPU", &z);
    assert_eq!(z.to_vec::<f32>().unwrap().len(), 16);
    drop(on_cpu);
}

#[path = "common/golden_cases.rs"]
mod golden_cases;

#[test]
fn every_golden_transform_case_matches_jax_on_the_emulated_gpu() {
    let _on = on("EMU");
    common::golden::check_all_cases("(emulated GPU)", golden_cases::run_case);
}

#[test]
fn outputs_reuse_memory_freed_by_an_earlier_step() {
    let _on = on("EMU");
    let gpu = tensor::runtime::emulated::EmulatedGpu::shared().unwrap();
    let step = |scale: f32| {
        let out = ramp(&[64, 33], scale) * 2.0 + 1.0;
        out.realize().unwrap();
        values(&out)
    };
    let first = step(1.0);
    let reused_before = gpu.pool().reused();
    let second = step(1.0);
    assert!(
        gpu.pool().reused() > reused_before,
        "the second step's buffers come from the pool"
    );
    assert_eq!(first, second, "reused memory holds the new values");
}
