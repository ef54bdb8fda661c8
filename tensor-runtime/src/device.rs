//! What every backend offers: memory, copies to and from the host, compiling kernel source to
//! a program, and launching a program over buffers.
//!
//! Buffers and programs are associated types, so each backend keeps its own handles (host
//! memory and a loaded shared object on the CPU; device memory and a module function under
//! CUDA) and a buffer of one device cannot be handed to another. Buffers are used through
//! shared references: a device synchronises access to its own memory, so a buffer can sit in
//! an `Arc` (e.g. in a `BufferStorage`) and be an input of one launch while it is read
//! elsewhere.

use crate::error::{Result, RuntimeError};
use std::sync::Arc;
use tensor_core::UOp;
use tensor_core::codegen::{CodegenOptions, lower_kernel_named};
use tensor_core::render::Kernel;
use tensor_core::uop::HostData;
use tensor_core::uop::dtype::{decode_scalars, encode_scalars};
use tensor_core::{DType, Element};

/// A place kernels run: allocate, copy in and out, compile, launch.
pub trait Device: Send + Sync {
    /// An allocation of device memory, freed when dropped.
    type Buffer: tensor_core::uop::DeviceAllocation;
    /// A compiled kernel, ready to launch; cheap to clone.
    type Program: Clone + Send + Sync + 'static;

    /// The device's name as users write it (`"CPU"`, `"CUDA:0"`).
    fn name(&self) -> &str;

    /// How many parallel workers a kernel should be split into on this device.
    fn default_threads(&self) -> usize;

    /// The `f32` lanes of the vector registers this device's kernels are compiled for, which
    /// size the register tile of a reduce (`CodegenOptions::vector_lanes`).
    fn vector_lanes(&self) -> usize {
        tensor_core::codegen::heuristic::DEFAULT_VECTOR_LANES
    }

    /// The kernel of one schedule item (`ast` over buffers of `buffer_sizes` elements, by
    /// slot) lowered and rendered for this device, its function named `name`: the device's
    /// renderer, so the scheduler never asks which device it schedules for. By default the C
    /// renderer (`codegen::lower_kernel_named` then `render::c`).
    fn generate_kernel(
        &self,
        ast: &UOp,
        buffer_sizes: &[usize],
        options: &CodegenOptions,
        name: &str,
    ) -> Kernel {
        tensor_core::render::c::render_kernel(&lower_kernel_named(ast, buffer_sizes, options, name))
    }

    /// A new buffer of `bytes` bytes, zero-filled.
    fn allocate(&self, bytes: usize) -> Result<Self::Buffer>;

    /// A new buffer of `bytes` bytes for a kernel to store into before anything reads it:
    /// every kernel writes each element of its output, so the contents need not be zeroed
    /// (the CPU device hands back recycled memory as it was, saving a pass over memory).
    fn allocate_output(&self, bytes: usize) -> Result<Self::Buffer> {
        self.allocate(bytes)
    }

    /// The size of `buffer` in bytes.
    fn buffer_len(&self, buffer: &Self::Buffer) -> usize;

    /// A buffer that reads `data` where it lies, without allocating or copying, if this
    /// device can address host memory and the data is in native layout; `None` otherwise
    /// (the caller then allocates and copies in). Kernels must never write such a buffer.
    fn bind_host(&self, data: Arc<dyn HostData>) -> Option<Self::Buffer> {
        let _ = data;
        None
    }

    /// True when `buffer` is bound host data ([`Device::bind_host`]), which kernels must
    /// only read.
    fn is_read_only(&self, buffer: &Self::Buffer) -> bool {
        let _ = buffer;
        false
    }

    /// Copies host bytes into `dst`; `src` must be exactly as long as the buffer.
    fn copy_in(&self, dst: &Self::Buffer, src: &[u8]) -> Result<()>;

    /// Copies the contents of `src` to the host; `dst` must be exactly as long as the buffer.
    fn copy_out(&self, src: &Self::Buffer, dst: &mut [u8]) -> Result<()>;

    /// Compiles kernel `source` and returns the program whose entry point is `entry`
    /// (for the CPU, a C function `void entry(void** bufs, int core_id)`).
    ///
    /// The source is trusted: it must follow the kernel ABI, since launching it runs it with
    /// the device's memory.
    /// Compiles several kernels, `(source, entry)` each, into programs in the same order.
    /// By default each is compiled on its own, on every core; a device that can build many
    /// kernels in one compiler run does so.
    fn compile_many(&self, kernels: &[(&str, &str)]) -> Result<Vec<Self::Program>>
    where
        Self: Sized,
    {
        crate::parallel::each_in_parallel(kernels, |(source, entry)| self.compile(source, entry))
            .into_iter()
            .collect()
    }

    /// Compiles `source` and looks up its function `entry`.
    fn compile(&self, source: &str, entry: &str) -> Result<Self::Program>;

    /// Runs `program` once over `buffers` (its arguments in slot order), split into `threads`
    /// parallel parts; returns when every part has finished, or, on a device with an
    /// in-order queue (a GPU's stream), once the launch is queued there, where every later
    /// copy, launch and free of that device waits for it.
    fn launch(
        &self,
        program: &Self::Program,
        buffers: &[&Self::Buffer],
        threads: usize,
    ) -> Result<()>;

    /// Waits until every launch and copy queued on the device has finished (a no-op where
    /// [`Device::launch`] returns only when its kernel has finished); reports a queued
    /// kernel's failure.
    fn wait_idle(&self) -> Result<()> {
        Ok(())
    }

    /// Copies typed host values into `dst` (little-endian, the layout kernels read).
    fn copy_in_elements<T: Element>(&self, dst: &Self::Buffer, values: &[T]) -> Result<()>
    where
        Self: Sized,
    {
        let scalars: Vec<_> = values.iter().map(|v| v.to_scalar()).collect();
        self.copy_in(dst, &encode_scalars(&scalars, T::DTYPE))
    }

    /// The contents of `src`, which holds elements of `dtype`, as host values of type `T`;
    /// fails with [`RuntimeError::WrongElementType`] unless `T` is that element type.
    fn copy_out_elements<T: Element>(&self, src: &Self::Buffer, dtype: DType) -> Result<Vec<T>>
    where
        Self: Sized,
    {
        if T::DTYPE != dtype {
            return Err(RuntimeError::WrongElementType {
                expected: T::DTYPE,
                found: dtype,
            });
        }
        let mut bytes = vec![0u8; self.buffer_len(src)];
        self.copy_out(src, &mut bytes)?;
        if bytes.len() % dtype.size_bytes() != 0 {
            return Err(RuntimeError::SizeMismatch {
                operation: "copy_out_elements (buffer is not a whole number of elements)",
                buffer_bytes: bytes.len(),
                data_bytes: bytes.len() / dtype.size_bytes() * dtype.size_bytes(),
            });
        }
        Ok(decode_scalars(&bytes, dtype)
            .into_iter()
            .map(T::from_scalar)
            .collect())
    }
}

/// Ok when a copy's `data_bytes` match the device buffer's `buffer_bytes` exactly.
pub(crate) fn check_len(
    operation: &'static str,
    buffer_bytes: usize,
    data_bytes: usize,
) -> Result<()> {
    if buffer_bytes == data_bytes {
        Ok(())
    } else {
        Err(RuntimeError::SizeMismatch {
            operation,
            buffer_bytes,
            data_bytes,
        })
    }
}
