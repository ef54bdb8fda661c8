//! Executing a schedule: every `Buffer` of the graph gets device memory (filled from its host
//! data, if it has any; a tensor's own typed vector is bound read-only in place where the
//! device allows, see `Tensor::from_ndarray`), each kernel is generated, compiled through the
//! caches and launched, producers first; an output's bytes are copied back on request. A
//! buffer computed on one device and read on another is copied through the host.

use crate::device::{CheckedProgram, Device};
use crate::error::{Result, RuntimeError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tensor_core::render::Kernel;
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::uop::BufferArg;
use tensor_core::{Arg, UOp};

/// Launches `program` (the compiled `kernel`) over the device memory of `buffers`, one per
/// argument slot; the launch checks that each buffer holds what the kernel addresses.
pub(crate) fn launch_kernel<D: Device>(
    device: &D,
    kernel: &Kernel,
    program: &CheckedProgram<D::Program>,
    buffers: &[&UOp],
    debug: u32,
) -> Result<()> {
    let memory = buffers
        .iter()
        .enumerate()
        .map(|(slot, b)| {
            let written = kernel.args.get(slot).is_some_and(|a| a.writes);
            memory_for(device, &buffer_arg(b), written)
        })
        .collect::<Result<Vec<_>>>()?;
    let launch_started = (debug >= 2).then(Instant::now);
    let refs: Vec<&D::Buffer> = memory.iter().map(|b| b.as_ref()).collect();
    device.launch(program, &refs)?;
    if let Some(launch_started) = launch_started {
        eprintln!(
            "kernel {:<24} {:<14} run {:>9.3?}",
            kernel.name,
            kernel.launch.to_string(),
            launch_started.elapsed()
        );
    }
    if debug >= 4 {
        eprintln!("{}", kernel.source);
    }
    Ok(())
}

/// The programs of `kernels`, compiled by the device in as few compiler runs and on as many
/// cores as it can (a cold compile takes far longer than most kernels run).
///
/// A kernel that appears more than once (a layer repeated, the groups of a long `cat`) is
/// compiled once, and its program serves every launch of it.
pub(crate) fn compile_all<'k, D: Device>(
    device: &D,
    kernels: impl Iterator<Item = &'k Kernel>,
) -> Result<Vec<CheckedProgram<D::Program>>> {
    let kernels: Vec<&Kernel> = kernels.collect();
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    let mut unique: Vec<&Kernel> = Vec::new();
    let which: Vec<usize> = kernels
        .iter()
        .map(|k| {
            *first
                .entry((k.source.as_str(), k.entry.as_str()))
                .or_insert_with(|| {
                    unique.push(k);
                    unique.len() - 1
                })
        })
        .collect();
    let programs = device.compile_kernels(&unique)?;
    Ok(which.into_iter().map(|u| programs[u].clone()).collect())
}

/// The arg of a `Buffer` node a schedule binds to a kernel slot.
pub(crate) fn buffer_arg(buffer: &UOp) -> BufferArg {
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
    memory_for(device, arg, false)
}

/// [`device_buffer`] for a kernel argument: a new allocation for a buffer the kernel stores
/// into (`written`) comes from [`Device::allocate_output`], unzeroed.
fn memory_for<D: Device>(device: &D, arg: &BufferArg, written: bool) -> Result<Arc<D::Buffer>> {
    if let Some(existing) = arg.storage.device_allocation()
        && let Ok(buffer) = existing.as_any().downcast::<D::Buffer>()
    {
        return Ok(buffer);
    }
    // Host contents, or the memory of another device read back (a value computed there).
    let host = arg.storage.contents(arg.dtype);
    let buffer = match host.clone().and_then(|data| device.bind_host(data)) {
        Some(bound) => Arc::new(bound),
        None => {
            let bytes = byte_size(arg.size, arg.dtype)?;
            let fresh = match written && host.is_none() {
                true => device.allocate_output(bytes)?,
                false => device.allocate(bytes)?,
            };
            let buffer = Arc::new(fresh);
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

/// The bytes of a realized output (a buffer seen through reshapes). The reference interpreter
/// reads the same bytes back from the buffer's device allocation when it needs them.
pub fn read_buffer<D: Device>(device: &D, out: &UOp) -> Result<Vec<u8>> {
    copy_out(device, out)
}

/// The bytes of a realized output, copied out of the device.
fn copy_out<D: Device>(device: &D, out: &UOp) -> Result<Vec<u8>> {
    let memory = device_buffer(device, &buffer_arg(&output_buffer(out)))?;
    let mut bytes = crate::host_alloc::zeroed_bytes(device.buffer_len(&memory))?;
    device.copy_out(&memory, &mut bytes)?;
    Ok(bytes)
}

/// The buffer a realized output reads (through reshapes).
pub(crate) fn output_buffer(out: &UOp) -> UOp {
    as_contiguous_buffer(out)
        .unwrap_or_else(|| panic!("schedule output is a {}, not a buffer", out.op()))
}
