//! Running a schedule: every `Buffer` of the graph gets device memory (filled from its host
//! data, if it has any; a tensor's own typed vector is bound read-only in place where the
//! device allows, see `Tensor::from_ndarray`), each kernel is generated, compiled through the caches and launched,
//! producers first, and the outputs are copied back to the host.
//!
//! `DEVICE` may be unset or `CPU` (CUDA is not built yet and is reported as unavailable).
//! `DEBUG=1` prints one line per run (kernels, compiler runs, cache hits, time), `DEBUG=2` a
//! line per kernel, `DEBUG=4` the source of each kernel. `NOOPT=1` turns kernel optimisations
//! off.

use crate::cpu::CpuDevice;
use crate::device::Device;
use crate::error::{Result, RuntimeError};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tensor_core::codegen::{
    CodegenOptions, Kernel, compile_kernel_named, kernel_name, unique_name,
};
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

/// Runs every kernel of `schedule` on `device`, producers first. The outputs stay in device
/// memory; [`read_buffer`] copies one back.
pub fn run_schedule<D: Device>(
    device: &D,
    schedule: &Schedule,
    options: &CodegenOptions,
) -> Result<()> {
    let debug = debug_level();
    let started = Instant::now();
    let mut seen_names = HashMap::new();
    let kernels: Vec<(Vec<BufferArg>, Kernel)> = schedule
        .items
        .iter()
        .map(|item| {
            let args: Vec<BufferArg> = item.buffers.iter().map(buffer_arg).collect();
            let sizes: Vec<usize> = args.iter().map(|a| a.size).collect();
            let name = unique_name(&kernel_name(&item.ast), &mut seen_names);
            let kernel = compile_kernel_named(&item.ast, &sizes, options, &name);
            (args, kernel)
        })
        .collect();
    let programs = compile_all(device, kernels.iter().map(|(_, kernel)| kernel))?;
    let compile_time = started.elapsed();
    for ((args, kernel), program) in kernels.iter().zip(&programs) {
        let buffers = args
            .iter()
            .map(|arg| device_buffer(device, arg))
            .collect::<Result<Vec<_>>>()?;
        check_arguments(device, kernel, &buffers)?;
        let launch_started = Instant::now();
        let refs: Vec<&D::Buffer> = buffers.iter().map(|b| b.as_ref()).collect();
        device.launch(program, &refs, kernel.threads)?;
        if debug >= 2 {
            eprintln!(
                "kernel {:<24} threads {:>2}  run {:>9.3?}",
                kernel.name,
                kernel.threads,
                launch_started.elapsed()
            );
        }
        if debug >= 4 {
            eprintln!("{}", kernel.source);
        }
    }
    if debug >= 1 {
        eprintln!(
            "realize: {} kernels on {} in {:.3?}, {:.3?} of it compiling (process: {} compiler \
             runs, {} disk cache hits)",
            schedule.items.len(),
            device.name(),
            started.elapsed(),
            compile_time,
            crate::stats::compiler_invocations(),
            crate::stats::disk_cache_hits()
        );
    }
    Ok(())
}

/// The programs of `kernels`, compiled in parallel on as many threads as the machine has
/// (a cold compile takes far longer than most kernels run). The first error, in kernel
/// order, is returned.
fn compile_all<'k, D: Device>(
    device: &D,
    kernels: impl Iterator<Item = &'k Kernel>,
) -> Result<Vec<D::Program>> {
    let kernels: Vec<&Kernel> = kernels.collect();
    let compile = |kernel: &Kernel| device.compile(&kernel.source, &kernel.entry);
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(kernels.len());
    if workers <= 1 {
        return kernels.into_iter().map(compile).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, Result<D::Program>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(kernel) = kernels.get(i) else {
                            return done;
                        };
                        done.push((i, compile(kernel)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a compile thread panicked"))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, program)| program).collect()
}

/// Computes `tensors` on the shared CPU device; afterwards each tensor is its result buffer,
/// so realizing it again, or using it in a later graph, runs nothing more for it.
pub fn realize(tensors: &[&Tensor]) -> Result<()> {
    check_device_setting(std::env::var("DEVICE").ok())?;
    let device = CpuDevice::shared()?;
    let roots: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
    let schedule = create_schedule(&roots);
    run_schedule(&device, &schedule, &codegen_options(&device))?;
    for (tensor, out) in tensors.iter().zip(&schedule.outputs) {
        tensor.replace_uop(out.clone());
    }
    Ok(())
}

/// The bytes of `tensor` (row-major, in its dtype), computing it first if needed. The
/// buffer also keeps the copy on the host, where the reference interpreter can read it.
pub fn read_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    realize(&[tensor])?;
    read_buffer(&CpuDevice::shared()?, &tensor.uop())
}

/// Accepts the `DEVICE` values this build can run: unset or `CPU`.
fn check_device_setting(value: Option<String>) -> Result<()> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(()),
        Some(name) if name.eq_ignore_ascii_case("CPU") => Ok(()),
        Some(name) if name.to_ascii_uppercase().starts_with("CUDA") => {
            Err(RuntimeError::DeviceUnavailable(format!(
                "DEVICE={name} asks for CUDA, which this build does not support yet; unset \
                 DEVICE or set DEVICE=CPU"
            )))
        }
        Some(_) => Err(RuntimeError::InvalidSetting {
            variable: "DEVICE",
            value: value.unwrap_or_default(),
            expected: "CPU (or unset)",
        }),
    }
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
    let bytes = read_bytes(tensor)?;
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

/// The device memory of a buffer: the allocation it already has on this kind of device, its
/// host data bound in place (read-only, when the device can), or a new allocation filled
/// from its host data.
pub fn device_buffer<D: Device>(device: &D, arg: &BufferArg) -> Result<Arc<D::Buffer>> {
    if let Some(existing) = arg.storage.device_allocation() {
        let existing: Arc<dyn Any + Send + Sync> = existing;
        if let Ok(buffer) = existing.downcast::<D::Buffer>() {
            return Ok(buffer);
        }
    }
    let host = arg.storage.host_data();
    let buffer = match host.clone().and_then(|data| device.bind_host(data)) {
        Some(bound) => Arc::new(bound),
        None => {
            let buffer = Arc::new(device.allocate(byte_size(arg.size, arg.dtype)?)?);
            if let Some(host) = host {
                device.copy_in(&buffer, &host.to_bytes())?;
            }
            buffer
        }
    };
    arg.storage.set_device_allocation(buffer.clone());
    Ok(buffer)
}

/// The bytes of `elements` values of `dtype`, computed without wrapping: an element count
/// whose byte size overflows is refused, so a buffer can never be allocated smaller than the
/// kernels that address it assume.
fn byte_size(elements: usize, dtype: tensor_core::DType) -> Result<usize> {
    elements
        .checked_mul(dtype.size_bytes())
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .ok_or_else(|| {
            RuntimeError::InvalidLaunch(format!(
                "a buffer of {elements} {dtype} elements has more bytes than memory can address"
            ))
        })
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
        if arg.writes && device.is_read_only(buffer) {
            return Err(RuntimeError::InvalidLaunch(format!(
                "kernel `{}` stores into slot {slot}, which is a tensor's read-only host data",
                kernel.name
            )));
        }
        let needed = byte_size(arg.size, arg.dtype)?;
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
pub fn read_buffer<D: Device>(device: &D, out: &UOp) -> Result<Vec<u8>> {
    let buffer = as_contiguous_buffer(out)
        .unwrap_or_else(|| panic!("schedule output is a {}, not a buffer", out.op()));
    let arg = buffer_arg(&buffer);
    let memory = device_buffer(device, &arg)?;
    let mut bytes = vec![0u8; device.buffer_len(&memory)];
    device.copy_out(&memory, &mut bytes)?;
    arg.storage.set_host_bytes(bytes.clone().into(), arg.dtype);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensor_core::DType;
    use tensor_core::codegen::KernelArg;
    use tensor_core::uop::HostData;

    #[test]
    fn kernel_storing_into_bound_host_data_is_refused() {
        let device = CpuDevice::with_config(crate::CpuConfig {
            compiler: "cc".into(),
            flags: crate::cpu::default_flags(),
            cache_dir: None,
            threads: 1,
            ..Default::default()
        });
        let data: Arc<dyn HostData> = Arc::new(vec![0.0f32; 4]);
        let bound = Arc::new(device.bind_host(data).expect("a typed vector binds"));
        let kernel = |writes| Kernel {
            name: "E_4".into(),
            source: String::new(),
            entry: "E_4_entry".into(),
            threads: 1,
            args: vec![KernelArg {
                dtype: DType::F32,
                size: 4,
                writes,
            }],
        };
        assert!(check_arguments(&device, &kernel(false), std::slice::from_ref(&bound)).is_ok());
        let err = check_arguments(&device, &kernel(true), &[bound]).unwrap_err();
        assert!(err.to_string().contains("read-only host data"), "{err}");
    }

    #[test]
    fn device_setting_accepts_cpu_and_rejects_cuda_and_unknown_names() {
        assert!(check_device_setting(None).is_ok());
        assert!(check_device_setting(Some("cpu".into())).is_ok());
        let cuda = check_device_setting(Some("CUDA".into())).unwrap_err();
        assert!(matches!(cuda, RuntimeError::DeviceUnavailable(_)), "{cuda}");
        assert!(cuda.to_string().contains("DEVICE=CPU"), "{cuda}");
        let unknown = check_device_setting(Some("TPU".into())).unwrap_err();
        assert!(unknown.to_string().contains("DEVICE=`TPU`"), "{unknown}");
    }
}
