//! `Tensor::from_ndarray`: an owned standard-layout array becomes a tensor's memory without a
//! copy, and CPU kernels read it in place; other layouts are copied once.

mod common;

use common::{TempDir, device};
use ndarray::{ArrayD, IxDyn, s};
use std::sync::Arc;
use tensor_core::interp::{HostArray, evaluate};
use tensor_core::schedule::create_schedule;
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::uop::{BufferArg, HostData};
use tensor_core::{Arg, DType, Tensor};
use tensor_runtime::realize::{codegen_options, device_buffer, read_buffer, run_schedule};
use tensor_runtime::{CpuDevice, Device};

fn buffer_arg(tensor: &Tensor) -> BufferArg {
    let buffer = as_contiguous_buffer(&tensor.uop()).expect("a fresh tensor is a buffer");
    match buffer.arg() {
        Arg::Buffer(arg) => arg.clone(),
        other => panic!("not a buffer: {other:?}"),
    }
}

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32) * 0.5 - 3.0).collect()
}

/// Runs `tensor` on `device` and returns its values as the interpreter's array type.
fn run_on(device: &CpuDevice, tensor: &Tensor) -> HostArray {
    let schedule = create_schedule(&[tensor.uop()]);
    run_schedule(device, &schedule, &codegen_options(device)).unwrap();
    let bytes = read_buffer(device, &schedule.outputs[0]).unwrap();
    let values = tensor_core::uop::dtype::decode_scalars(&bytes, tensor.dtype());
    HostArray::new(tensor.dtype(), &tensor.shape(), values)
}

fn flat(values: &[f32]) -> Vec<tensor_core::Scalar> {
    values.iter().map(|&v| v.into()).collect()
}

#[test]
fn standard_layout_array_is_kept_and_read_in_place_by_the_kernel() {
    let cache = TempDir::new("zero-copy-standard");
    let device = device("cc", Some(cache.path()), 2);
    let array = ArrayD::from_shape_vec(IxDyn(&[3, 4]), values(12)).unwrap();
    let address = array.as_ptr() as usize;
    let wanted: Vec<f32> = array.iter().map(|v| v * 2.0 + 1.0).collect();
    let x = Tensor::from_ndarray(array);
    let arg = buffer_arg(&x);
    let host = arg.storage.host_data().expect("made from host data");
    assert_eq!(
        host.as_ptr() as usize,
        address,
        "the array's vector was copied"
    );

    let y = x.mul(Tensor::constant(2.0f32)).add(1.0f32);
    let expected = evaluate(&y.uop());
    let live_before = device.live_buffers().count();
    let result = run_on(&device, &y);
    // The output was freed with the schedule; nothing else was allocated.
    assert_eq!(
        device.live_buffers().count(),
        live_before,
        "the input was allocated on the device"
    );
    result.assert_close(&expected, 0.0, 0.0);
    assert_eq!(result.data, flat(&wanted));

    let bound = device_buffer(&device, &arg).unwrap();
    assert!(device.is_read_only(&bound));
    assert_eq!(bound.data_address(), address, "the kernel read a copy");
    assert_eq!(device.live_buffers().count(), live_before);
}

#[test]
fn interpreter_reads_the_kept_vector() {
    let array = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1i32, -2, 3, -4, 5, -6]).unwrap();
    let x = Tensor::from_ndarray(array);
    let out = evaluate(&x.uop());
    assert_eq!(out.dtype, DType::I32);
    assert_eq!(out.shape, vec![2, 3]);
    let ints: Vec<i64> = out.data.iter().map(|v| v.as_i64()).collect();
    assert_eq!(ints, vec![1, -2, 3, -4, 5, -6]);
}

#[test]
fn transposed_array_is_copied_in_row_major_order() {
    let cache = TempDir::new("zero-copy-transposed");
    let device = device("cc", Some(cache.path()), 2);
    let array = ArrayD::from_shape_vec(IxDyn(&[3, 4]), values(12)).unwrap();
    let address = array.as_ptr() as usize;
    let transposed = array.reversed_axes();
    let logical: Vec<f32> = transposed.iter().copied().collect();
    let x = Tensor::from_ndarray(transposed);
    assert_eq!(x.shape(), vec![4, 3]);
    let arg = buffer_arg(&x);
    let host = arg.storage.host_data().unwrap();
    assert_ne!(host.as_ptr() as usize, address);

    let y = x.add(Tensor::constant(0.25f32));
    let expected = evaluate(&y.uop());
    let live_before = device.live_buffers().count();
    let result = run_on(&device, &y);
    assert_eq!(
        device.live_buffers().count(),
        live_before + 1,
        "a copied input stays allocated on the device (the output was freed)"
    );
    result.assert_close(&expected, 0.0, 0.0);
    let wanted: Vec<f32> = logical.iter().map(|v| v + 0.25).collect();
    assert_eq!(result.data, flat(&wanted));
    assert!(!device.is_read_only(&device_buffer(&device, &arg).unwrap()));
}

#[test]
fn array_sliced_in_place_keeps_only_its_own_elements() {
    let cache = TempDir::new("zero-copy-sliced");
    let device = device("cc", Some(cache.path()), 1);
    let mut array = ArrayD::from_shape_vec(IxDyn(&[4, 3]), values(12)).unwrap();
    array.slice_collapse(s![1..3, ..]);
    assert!(array.is_standard_layout());
    let logical: Vec<f32> = array.iter().copied().collect();
    let x = Tensor::from_ndarray(array);
    assert_eq!(buffer_arg(&x).storage.host_data().unwrap().len(), 6);
    let y = x.mul(-1.0f32);
    let result = run_on(&device, &y);
    result.assert_close(&evaluate(&y.uop()), 0.0, 0.0);
    let wanted: Vec<f32> = logical.iter().map(|v| -v).collect();
    assert_eq!(result.data, flat(&wanted));
}

#[test]
fn bound_host_data_refuses_copies_in() {
    let device = CpuDevice::with_config(tensor_runtime::CpuConfig {
        compiler: "cc".into(),
        flags: tensor_runtime::cpu::default_flags(),
        cache_dir: None,
        threads: 1,
        ..Default::default()
    });
    let data: Arc<dyn HostData> = Arc::new(vec![1.0f32, 2.0]);
    let bound = device
        .bind_host(data)
        .expect("a typed vector binds in place");
    let err = device.copy_in(&bound, &[0u8; 8]).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    let read: Vec<f32> = device.copy_out_elements(&bound, DType::F32).unwrap();
    assert_eq!(read, vec![1.0, 2.0]);
    assert_eq!(device.live_buffers().count(), 0);
}
