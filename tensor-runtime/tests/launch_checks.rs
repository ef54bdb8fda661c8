//! The safe launch checks every buffer against the kernel it launches: a kernel the renderer
//! made (compiled with `Device::compile_kernel`) knows the extent of every buffer it touches,
//! and `Device::launch` refuses, before anything runs, buffers that are too short, missing,
//! read-only where the kernel stores, or bound to two slots of which one is written. A kernel
//! changed by hand is refused at compile time: what its source touches is unknown, so it can
//! only be launched through the `unsafe` `Device::launch_unchecked`.
//!
//! CI also runs this file under AddressSanitizer (`.ci/run`): no refused launch may touch
//! memory outside a buffer.

mod common;

use common::device;
use tensor_core::codegen::CodegenOptions;
use tensor_core::render::Kernel;
use tensor_core::schedule::create_schedule;
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::{Arg, DType, Element, Scalar, Tensor};
use tensor_runtime::emulated::EmulatedGpu;
use tensor_runtime::realize::device_buffer;
use tensor_runtime::{CpuDevice, Device, Realize, RuntimeError};

/// The kernel `device` generates for `x * 2 + y` over `n` f32 elements: slot 0 the output,
/// slots 1 and 2 the inputs.
fn scale_add_kernel<D: Device>(device: &D, n: usize) -> Kernel {
    let x = Tensor::from_vec(vec![0.0f32; n], &[n]);
    let y = Tensor::from_vec(vec![0.0f32; n], &[n]);
    // The 2 is code (`Tensor::constant`), not a value bound in a buffer of its own.
    let schedule = create_schedule(&[(&x * Tensor::constant(2.0f32) + &y).uop()]);
    assert_eq!(schedule.items.len(), 1, "one fused kernel");
    let item = &schedule.items[0];
    let options = CodegenOptions {
        optimize: true,
        threads: device.default_threads(),
        vector_lanes: device.vector_lanes(),
    };
    device.generate_kernel(&item.ast, &item.buffer_sizes(), &options, "scale_add")
}

/// A zeroed device buffer holding `values` (f32).
fn filled<D: Device>(device: &D, values: &[f32]) -> D::Buffer {
    let buffer = device.allocate(values.len() * 4).unwrap();
    device.copy_in_elements(&buffer, values).unwrap();
    buffer
}

fn invalid_launch(result: tensor_runtime::Result<()>) -> String {
    match result {
        Err(RuntimeError::InvalidLaunch(why)) => why,
        other => panic!("expected a refused launch, got {other:?}"),
    }
}

fn cpu() -> CpuDevice {
    device("cc", None, 2)
}

#[test]
fn a_rendered_kernel_launches_over_buffers_of_its_sizes() {
    let device = cpu();
    let n = 1000;
    let kernel = scale_add_kernel(&device, n);
    let program = device.compile_kernel(&kernel).unwrap();
    assert_eq!(program.args().len(), 3);
    assert_eq!(program.launch(), kernel.launch);
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| 0.5 - i as f32).collect();
    let (out, x_buf, y_buf) = (
        device.allocate(n * 4).unwrap(),
        filled(&device, &x),
        filled(&device, &y),
    );
    device.launch(&program, &[&out, &x_buf, &y_buf]).unwrap();
    let got: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
    // x * 2 + y = i + 0.5, exact in f32 for these i.
    let want: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
    assert_eq!(got, want);
}

#[test]
fn a_sixteen_byte_output_is_refused_naming_the_argument_and_sizes() {
    let device = cpu();
    let n = 1 << 16;
    let kernel = scale_add_kernel(&device, n);
    let program = device.compile_kernel(&kernel).unwrap();
    let inputs = [
        filled(&device, &vec![1.0; n]),
        filled(&device, &vec![2.0; n]),
    ];
    let short = device.allocate(16).unwrap();
    let why = invalid_launch(device.launch(&program, &[&short, &inputs[0], &inputs[1]]));
    assert!(
        why.contains("argument 0") && why.contains("65536 f32") && why.contains("holds 16 bytes"),
        "{why}"
    );
    assert!(why.contains("at least 262144 bytes"), "{why}");
    // Nothing ran: the short buffer is still zero.
    assert_eq!(
        device.copy_out_elements::<f32>(&short, DType::F32).unwrap(),
        vec![0.0; 4]
    );
}

#[test]
fn a_short_input_is_refused_as_well_as_a_short_output() {
    let device = cpu();
    let n = 300;
    let kernel = scale_add_kernel(&device, n);
    let program = device.compile_kernel(&kernel).unwrap();
    let out = device.allocate(n * 4).unwrap();
    let full = filled(&device, &vec![1.0; n]);
    // One element short, in each input slot in turn.
    let short = filled(&device, &vec![1.0; n - 1]);
    let why = invalid_launch(device.launch(&program, &[&out, &short, &full]));
    assert!(
        why.contains("argument 1") && why.contains("holds 1196 bytes"),
        "{why}"
    );
    let why = invalid_launch(device.launch(&program, &[&out, &full, &short]));
    assert!(
        why.contains("argument 2") && why.contains("holds 1196 bytes"),
        "{why}"
    );
    // Longer buffers than the kernel addresses are fine (it reads only its part).
    let long = filled(&device, &vec![3.0; n + 7]);
    device.launch(&program, &[&out, &long, &full]).unwrap();
    let got: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
    assert_eq!(got, vec![7.0; n]);
}

#[test]
fn a_wrong_number_of_buffers_is_refused() {
    let device = cpu();
    let n = 8;
    let program = device
        .compile_kernel(&scale_add_kernel(&device, n))
        .unwrap();
    let [a, b, c, d] = [0; 4].map(|_| device.allocate(n * 4).unwrap());
    let why = invalid_launch(device.launch(&program, &[&a, &b]));
    assert!(why.contains("takes 3 buffers but 2 were bound"), "{why}");
    let why = invalid_launch(device.launch(&program, &[&a, &b, &c, &d]));
    assert!(why.contains("takes 3 buffers but 4 were bound"), "{why}");
    let why = invalid_launch(device.launch(&program, &[]));
    assert!(why.contains("takes 3 buffers but 0 were bound"), "{why}");
}

#[test]
fn an_output_bound_to_an_input_slot_too_is_refused_and_two_equal_inputs_are_not() {
    let device = cpu();
    let n = 64;
    let program = device
        .compile_kernel(&scale_add_kernel(&device, n))
        .unwrap();
    let x = filled(&device, &vec![1.5; n]);
    let out = device.allocate(n * 4).unwrap();
    let why = invalid_launch(device.launch(&program, &[&x, &x, &out]));
    assert!(
        why.contains("stores into argument 0") && why.contains("argument 1"),
        "{why}"
    );
    let why = invalid_launch(device.launch(&program, &[&out, &x, &out]));
    assert!(why.contains("argument 2"), "{why}");
    // One buffer read through both input slots: 1.5 * 2 + 1.5.
    device.launch(&program, &[&out, &x, &x]).unwrap();
    assert_eq!(
        device.copy_out_elements::<f32>(&out, DType::F32).unwrap(),
        vec![4.5; n]
    );
}

#[test]
fn an_output_bound_to_read_only_host_data_is_refused() {
    let device = cpu();
    let n = 12;
    let program = device
        .compile_kernel(&scale_add_kernel(&device, n))
        .unwrap();
    let host = Tensor::from_ndarray(ndarray::Array1::from_vec(vec![5.0f32; n]));
    let Arg::Buffer(arg) = as_contiguous_buffer(&host.uop()).unwrap().arg().clone() else {
        panic!("a fresh tensor is a buffer");
    };
    let bound = device_buffer(&device, &arg).unwrap();
    assert!(device.is_read_only(&bound), "the array is read in place");
    let x = filled(&device, &vec![1.0; n]);
    let why = invalid_launch(device.launch(&program, &[&bound, &x, &x]));
    assert!(
        why.contains("argument 0") && why.contains("read-only"),
        "{why}"
    );
    // Read-only host data is a fine input.
    let out = device.allocate(n * 4).unwrap();
    device.launch(&program, &[&out, &bound, &x]).unwrap();
    assert_eq!(
        device.copy_out_elements::<f32>(&out, DType::F32).unwrap(),
        vec![11.0; n]
    );
}

#[test]
fn a_kernel_changed_after_rendering_is_not_compiled_as_checked() {
    let device = cpu();
    let n = 16;
    let rendered = scale_add_kernel(&device, n);
    assert!(rendered.is_as_rendered());
    // Claiming a larger buffer than the source addresses, or a different source for the
    // same arguments: either way the arguments no longer say what the source touches.
    let mut wider = rendered.clone();
    wider.args[0].size = 4;
    let mut edited = rendered.clone();
    edited.source.push_str("/* edited */\n");
    let mut more_threads = rendered.clone();
    more_threads.launch = tensor_core::render::Launch::Cores(more_threads.launch.parts() + 1);
    for kernel in [wider, edited, more_threads] {
        assert!(!kernel.is_as_rendered());
        let err = device.compile_kernel(&kernel).err().expect("refused");
        let why = err.to_string();
        assert!(
            why.contains("outside tensor_core's renderers") && why.contains("launch_unchecked"),
            "{why}"
        );
        assert!(device.compile_kernels(&[&rendered, &kernel]).is_err());
    }
    // The untouched kernel still compiles.
    device.compile_kernels(&[&rendered]).unwrap();
}

#[test]
fn the_emulated_gpu_checks_its_launches_the_same_way() {
    let gpu = EmulatedGpu::new(0);
    let n = 40;
    let kernel = scale_add_kernel(&gpu, n);
    let program = gpu.compile_kernel(&kernel).unwrap();
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (x_buf, y_buf) = (filled(&gpu, &x), filled(&gpu, &vec![0.25; n]));
    let short = gpu.allocate(16).unwrap();
    let why = invalid_launch(gpu.launch(&program, &[&short, &x_buf, &y_buf]));
    assert!(
        why.contains("argument 0") && why.contains("holds 16 bytes"),
        "{why}"
    );
    let why = invalid_launch(gpu.launch(&program, &[&x_buf, &x_buf, &y_buf]));
    assert!(why.contains("stores into argument 0"), "{why}");
    let out = gpu.allocate(n * 4).unwrap();
    gpu.launch(&program, &[&out, &x_buf, &y_buf]).unwrap();
    let want: Vec<f32> = (0..n).map(|i| 2.0 * i as f32 + 0.25).collect();
    assert_eq!(
        gpu.copy_out_elements::<f32>(&out, DType::F32).unwrap(),
        want
    );
}

/// An element type of this test's own: one byte in memory, claiming the 8-byte `f64` dtype.
#[derive(Clone, Copy, Debug)]
struct OneByte(u8);

impl Element for OneByte {
    const DTYPE: DType = DType::F64;
    fn to_scalar(self) -> Scalar {
        Scalar::Float(f64::from(self.0))
    }
    fn from_scalar(s: Scalar) -> Self {
        OneByte(s.as_f64() as u8)
    }
}

/// No bytes at all in memory, claiming `f32`: every value is 7.
#[derive(Clone, Copy, Debug)]
struct Sevens;

impl Element for Sevens {
    const DTYPE: DType = DType::F32;
    fn to_scalar(self) -> Scalar {
        Scalar::Float(7.0)
    }
    fn from_scalar(_: Scalar) -> Self {
        Sevens
    }
}

#[test]
fn a_vector_of_an_element_type_defined_elsewhere_is_copied_in_not_read_in_place() {
    // Read in place, a kernel would take 8 bytes per one-byte element (and any bytes at all
    // behind a vector of zero-sized values): past the end of the vector's memory.
    let n = 1000;
    let bytes = Tensor::from_vec((0..n).map(|i| OneByte(i as u8)).collect(), &[n]);
    let got: Vec<f64> = (&bytes * 2.0).to_vec().unwrap();
    let want: Vec<f64> = (0..n).map(|i| f64::from(i as u8) * 2.0).collect();
    assert_eq!(got, want);
    let sevens = Tensor::from_vec(vec![Sevens; n], &[n]);
    let got: Vec<f32> = (&sevens + 1.0).to_vec().unwrap();
    assert_eq!(got, vec![8.0; n]);
    // The primitive types still are read in place.
    let device = cpu();
    let floats = Tensor::from_vec(vec![1.0f32; 4], &[4]);
    let Arg::Buffer(arg) = as_contiguous_buffer(&floats.uop()).unwrap().arg().clone() else {
        panic!("a fresh tensor is a buffer");
    };
    assert!(device.is_read_only(&device_buffer(&device, &arg).unwrap()));
}
