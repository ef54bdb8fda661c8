//! Host allocations sized by user data are fallible: where the memory cannot be had, the call
//! returns `RuntimeError::OutOfMemory` and the process goes on (the Rust allocator's failure
//! path would abort it with "memory allocation of N bytes failed").
//!
//! Each case runs in a child process (this test binary again, selected by an environment
//! variable) whose address space is limited with `prlimit` once the tensor is computed, to
//! less than the allocation the call under test makes: so only that allocation can fail, and
//! a process that aborts shows up as a failed child.

use std::process::Command;
use tensor_core::{DType, Tensor};
use tensor_runtime::ndarray_interop::{array_from_buffer, buffer_from_array};
use tensor_runtime::{CpuDevice, Device, Realize, RuntimeError};

/// The environment variable that makes this binary a child running one case.
const CHILD_CASE: &str = "TENSOR_HOST_ALLOCATION_CASE";

/// Elements of the tensors the cases read back: 64 Mi f32s, 256 MiB.
const ELEMENTS: usize = 1 << 26;

/// The process's virtual memory size in bytes (`VmSize` of `/proc/self/status`).
fn virtual_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("a VmSize line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmSize in kB");
    kib * 1024
}

/// Limits this process's address space to what it uses now plus `headroom` bytes.
fn limit_address_space(headroom: u64) {
    let limit = virtual_size() + headroom;
    let status = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--as={limit}"))
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(status.success(), "prlimit failed");
}

/// `3` in every one of `ELEMENTS` f32 elements, computed on the shared CPU device.
fn computed() -> Tensor {
    let t = Tensor::full(&[1], 1.0, DType::F32).expand(&[ELEMENTS]) * 3.0;
    t.realize()
        .expect("a 256 MiB tensor is computed before the limit");
    t
}

fn assert_out_of_memory<T: std::fmt::Debug>(what: &str, result: tensor_runtime::Result<T>) {
    match result {
        Err(RuntimeError::OutOfMemory { bytes, .. }) => {
            assert!(bytes >= ELEMENTS * 4, "{what}: {bytes} bytes");
            println!("CHILD OK {what}: out of memory for {bytes} bytes");
        }
        other => panic!("{what}: expected OutOfMemory, got {:?}", other.map(|_| ())),
    }
}

/// What a child does for `case`, under a limit that leaves a quarter of the result's size.
fn run_case(case: &str) {
    let headroom = (ELEMENTS as u64 * 4) / 4;
    match case {
        "to_vec" => {
            let t = computed();
            limit_address_space(headroom);
            assert_out_of_memory("to_vec", t.to_vec::<f32>());
        }
        "to_ndarray" => {
            let t = computed();
            limit_address_space(headroom);
            assert_out_of_memory("to_ndarray", t.to_ndarray::<f32>());
        }
        "allocate" => {
            let device = CpuDevice::shared().unwrap();
            limit_address_space(headroom);
            assert_out_of_memory("allocate", device.allocate(ELEMENTS * 4));
            assert_out_of_memory("allocate_output", device.allocate_output(ELEMENTS * 4));
        }
        "ndarray" => {
            let device = CpuDevice::shared().unwrap();
            let buffer = device.allocate(ELEMENTS * 4).unwrap();
            let array = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[ELEMENTS]));
            limit_address_space(headroom);
            assert_out_of_memory(
                "array_from_buffer",
                array_from_buffer::<_, f32>(&device, &buffer, &[ELEMENTS]),
            );
            assert_out_of_memory("buffer_from_array", buffer_from_array(&device, &array));
            assert_out_of_memory(
                "copy_out_elements",
                device.copy_out_elements::<f32>(&buffer, DType::F32),
            );
        }
        "in_place" => {
            // A tensor's own vector is read back in place: the only allocation is the result.
            let t = Tensor::from_vec(vec![1.5f32; ELEMENTS], &[ELEMENTS]);
            limit_address_space(ELEMENTS as u64 * 4 * 5 / 4);
            let values = t.to_vec::<f32>().expect("room for the result");
            assert!(values.len() == ELEMENTS && values.iter().all(|&v| v == 1.5));
            println!("CHILD OK in_place: read back without a second copy");
        }
        other => panic!("no case {other}"),
    }
}

/// Runs `case` in a child and checks that it ended normally, having seen what it expects.
fn in_child(case: &str, test: &str) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_CASE, case)
        .env("THREADS", "1")
        // Host memory is what is limited: a GPU's driver needs more address space to start.
        .env("DEVICE", "CPU")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("CHILD OK"),
        "{case}: child {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(!stderr.contains("memory allocation of"), "{stderr}");
}

/// In the child, the case; in the parent, the child (running the test named `test`).
fn case(name: &str, test: &str) {
    match std::env::var(CHILD_CASE) {
        Ok(child) if child == name => run_case(name),
        Ok(_) => {}
        Err(_) => in_child(name, test),
    }
}

#[test]
fn to_vec_reports_out_of_memory() {
    case("to_vec", "to_vec_reports_out_of_memory");
}

#[test]
fn to_ndarray_reports_out_of_memory() {
    case("to_ndarray", "to_ndarray_reports_out_of_memory");
}

#[test]
fn allocate_reports_out_of_memory() {
    case("allocate", "allocate_reports_out_of_memory");
}

#[test]
fn ndarray_reports_out_of_memory() {
    case("ndarray", "ndarray_reports_out_of_memory");
}

#[test]
fn a_tensors_own_vector_is_read_back_without_a_second_copy() {
    case(
        "in_place",
        "a_tensors_own_vector_is_read_back_without_a_second_copy",
    );
}
