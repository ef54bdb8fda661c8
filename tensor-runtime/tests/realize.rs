//! Whole graphs scheduled, generated, compiled and run on the CPU device, checked against the
//! reference interpreter.

mod common;

use common::{TempDir, device};
use tensor_core::codegen::lower_kernel;
use tensor_core::interp::{HostArray, evaluate};
use tensor_core::schedule::create_schedule;
use tensor_core::{DType, Tensor};
use tensor_runtime::realize::{codegen_options, read_buffer, run_schedule, to_vec};
use tensor_runtime::{CpuDevice, RuntimeError};

/// Runs `tensor` on `device` and returns its values as the interpreter's array type.
fn run_on(device: &CpuDevice, tensor: &Tensor) -> HostArray {
    let schedule = create_schedule(&[tensor.uop()]);
    run_schedule(device, &schedule, &codegen_options(device)).unwrap();
    let bytes = read_buffer(device, &schedule.outputs[0]).unwrap();
    let values = tensor_core::uop::dtype::decode_scalars(&bytes, tensor.dtype());
    HostArray::new(tensor.dtype(), &tensor.shape(), values)
}

fn assert_matches_interpreter(device: &CpuDevice, tensor: &Tensor) {
    let expected = evaluate(&tensor.uop());
    run_on(device, tensor).assert_close(&expected, 1e-6, 1e-6);
}

fn data(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * scale)
        .collect()
}

#[test]
fn elementwise_chain_matches_the_interpreter() {
    let cache = TempDir::new("realize-elementwise");
    let device = device("cc", Some(cache.path()), 2);
    let a = Tensor::from_vec(data(24, 0.5), &[4, 6]);
    let b = Tensor::from_vec(data(24, -0.25), &[4, 6]);
    let y = a.add(&b).mul(&a).relu().add(1.0f32).sqrt();
    assert_matches_interpreter(&device, &y);
}

#[test]
fn reductions_and_matmul_match_the_interpreter() {
    let device = device("cc", None, 2);
    let x = Tensor::from_vec(data(30, 0.1), &[5, 6]);
    let w = Tensor::from_vec(data(18, 0.3), &[6, 3]);
    assert_matches_interpreter(&device, &x.sum(1, false));
    assert_matches_interpreter(&device, &x.max(0, true));
    assert_matches_interpreter(&device, &x.matmul(&w));
    assert_matches_interpreter(&device, &x.softmax(-1));
}

#[test]
fn to_vec_computes_on_the_shared_device_and_checks_the_element_type() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let y = x.mul(&x).sum(0, false);
    let err = to_vec::<i32>(&y).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::WrongElementType {
                expected: DType::I32,
                found: DType::F32
            }
        ),
        "{err}"
    );
    assert_eq!(to_vec::<f32>(&y).unwrap(), vec![10.0, 20.0]);
    // The tensor is now its result buffer: scheduling it again needs no kernel.
    assert!(create_schedule(&[y.uop()]).items.is_empty());
    assert_eq!(to_vec::<f32>(&y).unwrap(), vec![10.0, 20.0]);
}

#[test]
fn kernel_split_across_threads_matches_the_interpreter() {
    let device = device("cc", None, 2);
    let (rows, cols) = (1024, 300);
    let x = Tensor::from_vec(data(rows * cols, 0.01), &[rows, cols]);
    let y = x.mul(&x).add(0.5f32).sum(1, false);
    let schedule = create_schedule(&[y.uop()]);
    let threaded = schedule.items.iter().any(|item| {
        let sizes = item.buffer_sizes();
        lower_kernel(&item.ast, &sizes, &codegen_options(&device))
            .program
            .threads
            > 1
    });
    assert!(threaded, "the heuristics should thread a kernel this large");
    assert_matches_interpreter(&device, &y);
}

#[test]
fn the_plan_cache_keeps_at_most_its_capacity_and_rebuilds_what_it_dropped() {
    use std::sync::Arc;
    use tensor_core::schedule::placeholders::abstract_buffers;
    use tensor_runtime::plan::PlanCache;
    let device = device("cc", None, 1);
    let plans: PlanCache<CpuDevice> = PlanCache::new(2);
    let options = codegen_options(&device);
    let x = Tensor::from_vec(data(8, 1.0), &[8]);
    // Constants as code: each is its own structure, its own plan.
    let graphs: Vec<Tensor> = (1..=3).map(|k| x.add(Tensor::constant(k as f32))).collect();
    let plan_of = |g: &Tensor| {
        let roots = abstract_buffers(&[g.uop()]).roots;
        plans.get_or_build(&device, &roots, &options).unwrap()
    };
    let built: Vec<_> = graphs.iter().map(plan_of).collect();
    assert_eq!(plans.len(), 2, "the least recently used plan was dropped");
    assert!(
        Arc::ptr_eq(&plan_of(&graphs[2]), &built[2]),
        "a kept plan is reused"
    );
    let rebuilt = plan_of(&graphs[0]);
    assert!(
        !Arc::ptr_eq(&rebuilt, &built[0]),
        "a dropped plan is built again"
    );
    let first = abstract_buffers(&[graphs[0].uop()]);
    let out = rebuilt.run(&device, &first.inputs).unwrap();
    let bytes = read_buffer(&device, &out[0]).unwrap();
    let values = tensor_core::uop::dtype::decode_scalars(&bytes, DType::F32);
    let want: Vec<f64> = data(8, 1.0).iter().map(|v| *v as f64 + 1.0).collect();
    let got: Vec<f64> = values.iter().map(|v| v.as_f64()).collect();
    assert_eq!(got, want);
}

#[test]
fn intermediates_with_disjoint_lifetimes_share_memory_and_are_kept_between_runs() {
    use tensor_core::schedule::placeholders::abstract_buffers;
    use tensor_runtime::plan::Plan;
    let device = device("cc", None, 1);
    let x = Tensor::from_vec(data(64, 1.0), &[64]);
    let t0 = x.add(1.0f32).contiguous();
    let t1 = t0.mul(Tensor::constant(2.0f32)).contiguous();
    let t2 = t1.add(Tensor::constant(3.0f32)).contiguous();
    let out = t2.sum(0, false);
    let abstracted = abstract_buffers(&[out.uop()]);
    let plan: Plan<CpuDevice> =
        Plan::build(&device, &abstracted.roots, &codegen_options(&device)).unwrap();
    assert_eq!(plan.temporaries(), 4, "three intermediates and the output");
    assert_eq!(
        plan.intermediate_buffers(),
        2,
        "the first and third share a buffer"
    );
    let want: f64 = data(64, 1.0)
        .iter()
        .map(|v| (*v as f64 + 1.0) * 2.0 + 3.0)
        .sum();
    let run = || {
        let out = plan.run(&device, &abstracted.inputs).unwrap();
        let bytes = read_buffer(&device, &out[0]).unwrap();
        f32::from_le_bytes(bytes[..4].try_into().unwrap()) as f64
    };
    let before = device.live_buffers().count();
    assert_eq!(run(), want);
    let kept = device.live_buffers().count();
    assert_eq!(
        kept,
        before + 2,
        "the two intermediate buffers the plan keeps (the input is read in place)"
    );
    for _ in 0..10 {
        assert_eq!(run(), want);
    }
    assert_eq!(
        device.live_buffers().count(),
        kept,
        "replays reuse them and allocate nothing more"
    );
}
