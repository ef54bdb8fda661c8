//! Compiling, loading and launching hand-written C kernels on the CPU device.

mod common;

use common::CompileTestKernel;
use tensor_core::render::Launch;

use common::{TempDir, add_kernel, device, host_sum, ramp, split_kernel};
use tensor_core::DType;
use tensor_runtime::{CpuDevice, Device, RuntimeError};

fn run_add(device: &CpuDevice, a: &[f32], b: &[f32], threads: usize) -> Vec<f32> {
    let n = a.len();
    let program = device
        .compile_test_kernel(&add_kernel(n), "add_entry")
        .unwrap();
    let [out, in_a, in_b] = [0; 3].map(|_| device.allocate(n * 4).unwrap());
    device.copy_in_elements(&in_a, a).unwrap();
    device.copy_in_elements(&in_b, b).unwrap();
    // SAFETY: `add_kernel(n)` reads and writes `n` floats of each of three distinct buffers of
    // `n` floats; it ignores `core_id`, so any part count runs it whole per part, and the
    // tests that split it into several parts read the same output values either way.
    unsafe { device.launch_unchecked(&program, &[&out, &in_a, &in_b], Launch::Cores(threads)) }
        .unwrap();
    device.copy_out_elements::<f32>(&out, DType::F32).unwrap()
}

#[test]
fn compiled_kernel_adds_two_buffers() {
    let cache = TempDir::new("add");
    let device = device("cc", Some(cache.path()), 1);
    let (a, b) = (ramp(37, 0.25), ramp(37, -1.5));
    assert_eq!(run_add(&device, &a, &b, 1), host_sum(&a, &b));
}

fn run_split(device: &CpuDevice, threads: usize) -> (Vec<f32>, Vec<i32>) {
    let (rows, cols) = (10, 7);
    let program = device
        .compile_test_kernel(&split_kernel(rows, cols, threads), "scale_rows_entry")
        .unwrap();
    let out = device.allocate(rows * cols * 4).unwrap();
    let owner = device.allocate(rows * 4).unwrap();
    let x = device.allocate(rows * cols * 4).unwrap();
    device
        .copy_in_elements(&x, &ramp(rows * cols, 0.5))
        .unwrap();
    // SAFETY: `split_kernel` was written for `threads` parts over `rows x cols` floats (out, x)
    // and `rows` ints (owner), which is what the buffers hold.
    unsafe { device.launch_unchecked(&program, &[&out, &owner, &x], Launch::Cores(threads)) }
        .unwrap();
    (
        device.copy_out_elements(&out, DType::F32).unwrap(),
        device.copy_out_elements(&owner, DType::I32).unwrap(),
    )
}

#[test]
fn outer_loop_split_by_core_id_gives_the_same_result_on_one_and_many_threads() {
    // Two pool threads (the caller and one worker) share the four parts between them.
    let device = device("cc", None, 2);
    let (single, single_owners) = run_split(&device, 1);
    let (parallel, parallel_owners) = run_split(&device, 4);
    assert_eq!(single, parallel);
    assert_eq!(single_owners, vec![1; 10]);
    // Every core id in 0..4 ran and took its own contiguous block of rows.
    assert_eq!(parallel_owners, vec![1, 1, 2, 2, 2, 3, 3, 4, 4, 4]);
    let expected: Vec<f32> = ramp(70, 0.5)
        .iter()
        .enumerate()
        .map(|(i, x)| x * 2.0 + (i / 7) as f32)
        .collect();
    assert_eq!(single, expected);
}

#[test]
fn compiling_the_same_source_twice_reuses_the_loaded_program() {
    let device = device("cc", None, 1);
    device
        .compile_test_kernel(&add_kernel(5), "add_entry")
        .unwrap();
    device
        .compile_test_kernel(&add_kernel(5), "add_entry")
        .unwrap();
    let counts = device.compile_counts();
    assert_eq!(counts.compiler_invocations, 1);
    assert_eq!(counts.memory_cache_hits, 1);
}

#[test]
fn memory_stays_flat_over_many_allocations_and_launches() {
    let device = device("cc", None, 2);
    let start = (device.live_buffers().count(), device.live_buffers().bytes());
    let (a, b) = (ramp(64, 1.0), ramp(64, 2.0));
    for _ in 0..200 {
        assert_eq!(run_add(&device, &a, &b, 2), host_sum(&a, &b));
    }
    assert_eq!(
        (device.live_buffers().count(), device.live_buffers().bytes()),
        start
    );
    assert_eq!(device.compile_counts().compiler_invocations, 1);
}

#[test]
fn buffer_passed_in_two_slots_is_read_through_one_pointer() {
    let device = device("cc", None, 1);
    let program = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap();
    let out = device.allocate(16).unwrap();
    let x = device.allocate(16).unwrap();
    device
        .copy_in_elements(&x, &[1.0f32, 2.0, 3.0, 4.0])
        .unwrap();
    // SAFETY: four floats in each slot; only `out`, bound once, is written.
    unsafe { device.launch_unchecked(&program, &[&out, &x, &x], Launch::Cores(1)) }.unwrap();
    let doubled: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
    assert_eq!(doubled, vec![2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn concurrent_launches_over_shared_buffers_finish() {
    let device = device("cc", None, 1);
    let program = device
        .compile_test_kernel(&add_kernel(256), "add_entry")
        .unwrap();
    let [a, b] = [0; 2].map(|_| device.allocate(256 * 4).unwrap());
    let [out_ab, out_ba] = [0; 2].map(|_| device.allocate(256 * 4).unwrap());
    device.copy_in_elements(&a, &ramp(256, 1.0)).unwrap();
    device.copy_in_elements(&b, &ramp(256, 3.0)).unwrap();
    // Opposite argument orders on two threads: locking must not deadlock.
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..100 {
                // SAFETY: 256 floats in each of three distinct buffers, as the kernel reads.
                unsafe { device.launch_unchecked(&program, &[&out_ab, &a, &b], Launch::Cores(1)) }
                    .unwrap();
            }
        });
        for _ in 0..100 {
            // SAFETY: as above.
            unsafe { device.launch_unchecked(&program, &[&out_ba, &b, &a], Launch::Cores(1)) }
                .unwrap();
        }
    });
    let ab: Vec<f32> = device.copy_out_elements(&out_ab, DType::F32).unwrap();
    let ba: Vec<f32> = device.copy_out_elements(&out_ba, DType::F32).unwrap();
    assert_eq!(ab, host_sum(&ramp(256, 1.0), &ramp(256, 3.0)));
    assert_eq!(ab, ba);
}

#[test]
fn reading_a_buffer_as_the_wrong_element_type_is_an_error() {
    let device = device("cc", None, 1);
    let buffer = device.allocate(16).unwrap();
    let err = device
        .copy_out_elements::<f32>(&buffer, DType::I32)
        .unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::WrongElementType {
                expected: DType::F32,
                found: DType::I32
            }
        ),
        "{err}"
    );
}

#[test]
fn copy_of_the_wrong_size_is_an_error() {
    let device = device("cc", None, 1);
    let buffer = device.allocate(16).unwrap();
    let err = device.copy_in(&buffer, &[0u8; 12]).unwrap_err();
    assert!(matches!(err, RuntimeError::SizeMismatch { .. }), "{err}");
}

#[test]
fn launch_with_zero_threads_is_an_error() {
    let device = device("cc", None, 1);
    let program = device
        .compile_test_kernel(&add_kernel(1), "add_entry")
        .unwrap();
    let [out, a, b] = [0; 3].map(|_| device.allocate(4).unwrap());
    // SAFETY: one float in each of three distinct buffers, as the kernel reads; a launch of
    // zero parts is refused before anything runs.
    let err = unsafe { device.launch_unchecked(&program, &[&out, &a, &b], Launch::Cores(0)) }
        .unwrap_err();
    assert!(err.to_string().contains("0 threads"), "{err}");
    let grid = Launch::Grid(tensor_core::codegen::LaunchDims { grid: 1, block: 1 });
    // SAFETY: as above; a GPU launch of a CPU program is refused before anything runs.
    let err = unsafe { device.launch_unchecked(&program, &[&out, &a, &b], grid) }.unwrap_err();
    assert!(err.to_string().contains("launched on cores"), "{err}");
}

#[test]
fn integer_and_unsigned_elements_round_trip_through_a_buffer() {
    let device = device("cc", None, 1);
    let buffer = device.allocate(3 * 8).unwrap();
    let values = [u64::MAX, 0, 1 << 63];
    device.copy_in_elements(&buffer, &values).unwrap();
    assert_eq!(
        device
            .copy_out_elements::<u64>(&buffer, DType::U64)
            .unwrap(),
        values
    );
}

#[test]
fn compiler_command_may_carry_its_own_arguments() {
    let device = device("cc -DOFFSET=5", None, 1);
    let source = "void offset_entry(void** bufs, int core_id) {\n\
                  (void)core_id;\n\
                  ((int*)bufs[0])[0] = OFFSET;\n\
                  }\n";
    let program = device.compile_test_kernel(source, "offset_entry").unwrap();
    let out = device.allocate(4).unwrap();
    // SAFETY: the kernel writes one int, which `out` holds.
    unsafe { device.launch_unchecked(&program, &[&out], Launch::Cores(1)) }.unwrap();
    assert_eq!(
        device.copy_out_elements::<i32>(&out, DType::I32).unwrap(),
        vec![5]
    );
}
