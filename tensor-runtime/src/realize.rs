//! Running a schedule: every `Buffer` of the graph gets device memory (filled from its host
//! bytes, if it has any), each kernel is generated, compiled through the caches and launched,
//! producers first, and the outputs are copied back to the host.
//!
//! `DEBUG=1` prints one line per run (kernels, compiler runs, cache hits, time), `DEBUG=2` a
//! line per kernel, `DEBUG=4` the source of each kernel. `NOOPT=1` turns kernel optimisations
//! off.

use crate::cpu::CpuDevice;
use crate::device::Device;
use crate::error::{Result, RuntimeError};
use std::any::Any;
use std::sync::Arc;
use std::time::Instant;
use tensor_core::codegen::{CodegenOptions, Kernel, compile_kernel};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::schedule::{Schedule, create_schedule};
use tensor_core::uop::BufferArg;
use tensor_core::{Arg, Element, Tensor, UOp};

/// The verbosity `DEBUG` asks for (0 when unset or not a number).
pub fn debug_level() -> u32 {
    std::env::var("DEBUG")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Codegen options for kernels run on `device`: optimised unless `NOOPT=1`, split across the
/// device's threads.
pub fn codegen_options<D: Device>(device: &D) -> CodegenOptions {
    let noopt = std::env::var("NOOPT").is_ok_and(|v| v.trim() == "1");
    CodegenOptions {
        optimize: !noopt,
        threads: device.default_threads(),
    }
}

/// Runs every kernel of `schedule` on `device` and returns the bytes of each output
/// (row-major, in the output's dtype). Output buffers also keep a host copy of their bytes.
pub fn run_schedule<D: Device>(
    device: &D,
    schedule: &Schedule,
    options: &CodegenOptions,
) -> Result<Vec<Vec<u8>>> {
    let debug = debug_level();
    let started = Instant::now();
    for item in &schedule.items {
        let args: Vec<BufferArg> = item.buffers.iter().map(buffer_arg).collect();
        let sizes: Vec<usize> = args.iter().map(|a| a.size).collect();
        let kernel = compile_kernel(&item.ast, &sizes, options);
        let buffers = args
            .iter()
            .map(|arg| device_buffer(device, arg))
            .collect::<Result<Vec<_>>>()?;
        check_arguments(device, &kernel, &buffers)?;
        let compile_started = Instant::now();
        let program = device.compile(&kernel.source, &kernel.entry)?;
        let launch_started = Instant::now();
        let refs: Vec<&D::Buffer> = buffers.iter().map(|b| b.as_ref()).collect();
        device.launch(&program, &refs, kernel.threads)?;
        if debug >= 2 {
            eprintln!(
                "kernel {:<24} threads {:>2}  compile {:>9.3?}  run {:>9.3?}",
                kernel.name,
                kernel.threads,
                launch_started - compile_started,
                launch_started.elapsed()
            );
        }
        if debug >= 4 {
            eprintln!("{}", kernel.source);
        }
    }
    let outputs = schedule
        .outputs
        .iter()
        .map(|out| read_output(device, out))
        .collect::<Result<Vec<_>>>()?;
    if debug >= 1 {
        eprintln!(
            "realize: {} kernels on {} in {:.3?} (process: {} compiler runs, {} disk cache hits)",
            schedule.items.len(),
            device.name(),
            started.elapsed(),
            crate::stats::compiler_invocations(),
            crate::stats::disk_cache_hits()
        );
    }
    Ok(outputs)
}

/// Computes `tensors` on the shared CPU device; afterwards each tensor is its result buffer
/// (so realizing again runs nothing) and the bytes of each are returned.
pub fn realize(tensors: &[&Tensor]) -> Result<Vec<Vec<u8>>> {
    let device = CpuDevice::shared()?;
    let roots: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
    let schedule = create_schedule(&roots);
    let bytes = run_schedule(&device, &schedule, &codegen_options(&device))?;
    for (tensor, out) in tensors.iter().zip(&schedule.outputs) {
        tensor.replace_uop(out.clone());
    }
    Ok(bytes)
}

/// The elements of `tensor`, computed on the shared CPU device, in row-major order; fails
/// with [`RuntimeError::WrongElementType`] unless `T` is the tensor's dtype.
pub fn to_vec<T: Element>(tensor: &Tensor) -> Result<Vec<T>> {
    if T::DTYPE != tensor.dtype() {
        return Err(RuntimeError::WrongElementType {
            expected: T::DTYPE,
            found: tensor.dtype(),
        });
    }
    let bytes = realize(&[tensor])?.remove(0);
    Ok(tensor_core::uop::dtype::decode_scalars(&bytes, T::DTYPE)
        .into_iter()
        .map(T::from_scalar)
        .collect())
}

fn buffer_arg(buffer: &UOp) -> BufferArg {
    match buffer.arg() {
        Arg::Buffer(arg) => arg.clone(),
        other => panic!(
            "schedule bound a {} ({other:?}) to a kernel slot",
            buffer.op()
        ),
    }
}

/// The device memory of a buffer: the allocation it already has on this kind of device, or a
/// new one filled from its host bytes.
fn device_buffer<D: Device>(device: &D, arg: &BufferArg) -> Result<Arc<D::Buffer>> {
    if let Some(existing) = arg.storage.device_allocation() {
        let existing: Arc<dyn Any + Send + Sync> = existing;
        if let Ok(buffer) = existing.downcast::<D::Buffer>() {
            return Ok(buffer);
        }
    }
    let buffer = Arc::new(device.allocate(arg.size * arg.dtype.size_bytes())?);
    if let Some(host) = arg.storage.host_bytes() {
        device.copy_in(&buffer, &host)?;
    }
    arg.storage.set_device_allocation(buffer.clone());
    Ok(buffer)
}

/// Refuses a launch whose kernel would address more memory than a buffer holds: a mismatch
/// between scheduler and codegen becomes an error instead of a stray write.
fn check_arguments<D: Device>(
    device: &D,
    kernel: &Kernel,
    buffers: &[Arc<D::Buffer>],
) -> Result<()> {
    if kernel.args.len() != buffers.len() {
        return Err(RuntimeError::InvalidLaunch(format!(
            "kernel `{}` takes {} buffers but the schedule binds {}",
            kernel.name,
            kernel.args.len(),
            buffers.len()
        )));
    }
    for (slot, (arg, buffer)) in kernel.args.iter().zip(buffers).enumerate() {
        let needed = arg.size * arg.dtype.size_bytes();
        let held = device.buffer_len(buffer);
        if needed > held {
            return Err(RuntimeError::InvalidLaunch(format!(
                "kernel `{}` addresses {needed} bytes in slot {slot} but its buffer holds {held}",
                kernel.name
            )));
        }
    }
    Ok(())
}

/// The bytes of a realized output (a buffer seen through reshapes), also kept on the host.
fn read_output<D: Device>(device: &D, out: &UOp) -> Result<Vec<u8>> {
    let buffer = as_contiguous_buffer(out)
        .unwrap_or_else(|| panic!("schedule output is a {}, not a buffer", out.op()));
    let arg = buffer_arg(&buffer);
    let memory = device_buffer(device, &arg)?;
    let mut bytes = vec![0u8; device.buffer_len(&memory)];
    device.copy_out(&memory, &mut bytes)?;
    arg.storage.set_host_bytes(bytes.clone().into());
    Ok(bytes)
}
