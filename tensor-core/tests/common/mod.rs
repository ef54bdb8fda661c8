//! Test helper shared by the codegen tests: a kernel's C compiled and run by the runtime's own
//! CPU device, so the tests build with the compiler, flags and loading that ship (a change of
//! the runtime's flags is tested here too).

#[allow(dead_code)]
#[path = "../../../tests/common/tolerance.rs"]
pub mod tolerance;

use tensor_core::Scalar;
use tensor_core::UOp;
use tensor_core::codegen::{CodegenOptions, Opt, lower_kernel, lower_kernel_with_opts};
use tensor_core::render::{Kernel, c::render_kernel};
use tensor_core::uop::dtype::{decode_scalars, encode_scalars};
use tensor_runtime::cpu::CpuDevice;
use tensor_runtime::device::Device;

/// Compiles the kernel's C with the runtime's CPU device and launches it as `kernel.launch`
/// says (a checked launch); `buffers[slot]` holds the values of each buffer before and after.
pub fn run(kernel: &Kernel, buffers: &mut [Vec<Scalar>]) {
    let device = CpuDevice::shared().expect("the CPU device");
    let program = device.compile_kernel(kernel).unwrap_or_else(|e| {
        panic!(
            "the runtime could not compile the kernel: {e}\n{}",
            kernel.source
        )
    });
    let memory: Vec<_> = kernel
        .args
        .iter()
        .zip(buffers.iter())
        .map(|(a, values)| {
            assert_eq!(
                values.len(),
                a.size,
                "buffer size of a {} argument",
                a.dtype
            );
            let bytes = encode_scalars(values, a.dtype);
            let buffer = device.allocate(bytes.len()).expect("allocate");
            device.copy_in(&buffer, &bytes).expect("copy in");
            buffer
        })
        .collect();
    let args: Vec<_> = memory.iter().collect();
    device.launch(&program, &args).expect("launch");
    for ((values, buffer), a) in buffers.iter_mut().zip(&memory).zip(&kernel.args) {
        let mut bytes = vec![0u8; a.size * a.dtype.size_bytes()];
        device.copy_out(buffer, &mut bytes).expect("copy out");
        *values = decode_scalars(&bytes, a.dtype);
    }
}

/// The kernel AST lowered by codegen and rendered as C (what the runtime does per kernel).
pub fn render_c(ast: &UOp, buffer_sizes: &[usize], options: &CodegenOptions) -> Kernel {
    render_kernel(&lower_kernel(ast, buffer_sizes, options))
}

/// [`render_c`] with exactly the given OptOps.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn render_c_with_opts(ast: &UOp, buffer_sizes: &[usize], opts: &[Opt]) -> Kernel {
    render_kernel(&lower_kernel_with_opts(ast, buffer_sizes, opts))
}
