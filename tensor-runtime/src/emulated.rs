//! The emulated GPU (`DEVICE=EMU`): the CUDA device's whole path with the GPU replaced by
//! `tensor_core::codegen::emulate`.
//!
//! Each kernel is lowered exactly as for [`crate::cuda::CudaDevice`] (`lower_kernel_gpu`: grid
//! indices, group reductions through shared memory and barriers) and rendered as CUDA C, so
//! plans, memory planning, copies in and out and the `realize` entry points run as they do
//! for a GPU; "compiling" finds the lowered kernel again by its source, and a launch runs it
//! over its launch grid in Rust, block by block, with the emulator's race checks. It is slow
//! (an interpreter) and meant for tests: a machine without a GPU checks numerically that
//! `realize` on a GPU device computes what the CPU computes.

use crate::device::{Device, check_len};
use crate::error::{Result, RuntimeError};
use crate::host_alloc::{vec_with_capacity, zeroed_bytes};
use crate::memory_pool::{MemoryPool, pool_bytes_from_env};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tensor_core::UOp;
use tensor_core::codegen::program::GpuKernel;
use tensor_core::codegen::{CodegenOptions, emulate, lower_kernel_gpu};
use tensor_core::render::{Kernel, Launch};
use tensor_core::uop::dtype::{decode_scalars, encode_scalars};

/// The device name `DEVICE` selects the emulated GPU with.
pub const EMULATED_GPU_NAME: &str = "EMU";

/// A GPU emulated on the host (see the module docs). Its outputs come from a
/// [`MemoryPool`], as a GPU's do.
pub struct EmulatedGpu {
    /// The kernels lowered by [`Device::generate_kernel`], by their CUDA source.
    lowered: Mutex<HashMap<String, Arc<GpuKernel>>>,
    pool: Arc<MemoryPool<Vec<u8>>>,
}

/// Memory of the emulated GPU: host bytes behind a lock (kernels run one at a time), given
/// back to the device's pool when dropped.
pub struct EmulatedBuffer {
    bytes: Mutex<Vec<u8>>,
    pool: Arc<MemoryPool<Vec<u8>>>,
}

/// A kernel "compiled" for the emulated GPU: its lowered form.
#[derive(Clone)]
pub struct EmulatedProgram {
    kernel: Arc<GpuKernel>,
}

impl EmulatedGpu {
    /// An emulated GPU whose pool holds at most `pool_bytes` of freed memory.
    pub fn new(pool_bytes: usize) -> EmulatedGpu {
        EmulatedGpu {
            lowered: Mutex::default(),
            pool: Arc::new(MemoryPool::new(pool_bytes)),
        }
    }

    /// The emulated GPU shared by `realize` in this process (its pool sized by
    /// `TENSOR_DEVICE_POOL_BYTES`).
    pub fn shared() -> Result<Arc<EmulatedGpu>> {
        static SHARED: std::sync::OnceLock<Arc<EmulatedGpu>> = std::sync::OnceLock::new();
        if let Some(gpu) = SHARED.get() {
            return Ok(gpu.clone());
        }
        let gpu = Arc::new(EmulatedGpu::new(pool_bytes_from_env()?));
        Ok(SHARED.get_or_init(|| gpu).clone())
    }

    /// The device's pool of freed memory.
    pub fn pool(&self) -> &MemoryPool<Vec<u8>> {
        &self.pool
    }

    /// `bytes` bytes from the pool, else freshly allocated (zero); an error where the host
    /// cannot hold them.
    fn memory(&self, bytes: usize) -> Result<Vec<u8>> {
        if let Some(memory) = self.pool.take(bytes) {
            return Ok(memory);
        }
        zeroed_bytes(bytes).map_err(|_| RuntimeError::OutOfMemory {
            device: EMULATED_GPU_NAME.to_string(),
            bytes,
        })
    }

    fn buffer(&self, bytes: Vec<u8>) -> EmulatedBuffer {
        EmulatedBuffer {
            bytes: Mutex::new(bytes),
            pool: self.pool.clone(),
        }
    }
}

impl Drop for EmulatedBuffer {
    fn drop(&mut self) {
        let bytes = std::mem::take(self.bytes.get_mut().unwrap_or_else(PoisonError::into_inner));
        // A full pool hands the memory back: it is freed here.
        drop(self.pool.give(bytes.len(), bytes));
    }
}

impl tensor_core::uop::DeviceAllocation for EmulatedBuffer {
    fn read_back(&self) -> Option<Vec<u8>> {
        let bytes = self.lock();
        let mut copy = vec_with_capacity(bytes.len()).ok()?;
        copy.extend_from_slice(&bytes);
        Some(copy)
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl EmulatedBuffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Device for EmulatedGpu {
    type Buffer = EmulatedBuffer;
    type Program = EmulatedProgram;

    fn name(&self) -> &str {
        EMULATED_GPU_NAME
    }

    /// As on a GPU, the launch grid is the parallelism.
    fn default_threads(&self) -> usize {
        1
    }

    fn generate_kernel(
        &self,
        ast: &UOp,
        buffer_sizes: &[usize],
        options: &CodegenOptions,
        name: &str,
    ) -> Kernel {
        let lowered = lower_kernel_gpu(ast, buffer_sizes, options, name);
        let kernel = tensor_core::render::cuda::render_kernel(&lowered);
        self.lowered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(kernel.source.clone(), Arc::new(lowered));
        kernel
    }

    fn allocate(&self, bytes: usize) -> Result<EmulatedBuffer> {
        let mut memory = self.memory(bytes)?;
        memory.fill(0);
        Ok(self.buffer(memory))
    }

    fn allocate_output(&self, bytes: usize) -> Result<EmulatedBuffer> {
        Ok(self.buffer(self.memory(bytes)?))
    }

    fn buffer_len(&self, buffer: &EmulatedBuffer) -> usize {
        buffer.lock().len()
    }

    fn copy_in(&self, dst: &EmulatedBuffer, src: &[u8]) -> Result<()> {
        let mut bytes = dst.lock();
        check_len("copy_in", bytes.len(), src.len())?;
        bytes.copy_from_slice(src);
        Ok(())
    }

    fn copy_out(&self, src: &EmulatedBuffer, dst: &mut [u8]) -> Result<()> {
        let bytes = src.lock();
        check_len("copy_out", bytes.len(), dst.len())?;
        dst.copy_from_slice(&bytes);
        Ok(())
    }

    /// Finds the kernel [`Device::generate_kernel`] lowered to `source`.
    unsafe fn compile(&self, source: &str, entry: &str) -> Result<EmulatedProgram> {
        let lowered = self.lowered.lock().unwrap_or_else(PoisonError::into_inner);
        match lowered.get(source) {
            Some(kernel) if kernel.name == entry => Ok(EmulatedProgram {
                kernel: kernel.clone(),
            }),
            _ => Err(RuntimeError::EntryNotFound {
                entry: entry.to_string(),
                reason: "the emulated GPU runs only kernels it generated itself \
                         (Device::generate_kernel); this source came from elsewhere"
                    .to_string(),
            }),
        }
    }

    /// Decodes every buffer into scalars of its slot's dtype, runs the kernel over its grid,
    /// and writes back the buffers it stores into. A buffer bound to two slots is decoded
    /// once per slot, so a kernel must not read a slot it writes through another (the
    /// scheduler never binds one buffer twice). The emulator checks every index itself, so
    /// this never touches memory outside the buffers: a short buffer stops the kernel with
    /// an error.
    unsafe fn launch_unchecked(
        &self,
        program: &EmulatedProgram,
        buffers: &[&EmulatedBuffer],
        launch: Launch,
    ) -> Result<()> {
        let kernel = &program.kernel;
        if launch != Launch::Grid(kernel.launch_dims()) {
            return Err(RuntimeError::InvalidLaunch(format!(
                "kernel `{}` runs on a grid of {}, not on {launch}",
                kernel.name,
                Launch::Grid(kernel.launch_dims())
            )));
        }
        if kernel.args.len() != buffers.len() {
            return Err(RuntimeError::InvalidLaunch(format!(
                "kernel `{}` takes {} buffers but {} were bound",
                kernel.name,
                kernel.args.len(),
                buffers.len()
            )));
        }
        let mut values: Vec<_> = kernel
            .args
            .iter()
            .zip(buffers)
            .map(|(arg, buffer)| decode_scalars(&buffer.lock(), arg.dtype))
            .collect();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            emulate::run_on_grid(kernel, &mut values)
        }));
        if let Err(panic) = ran {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(RuntimeError::InvalidLaunch(format!(
                "the emulated GPU stopped kernel `{}`: {why}",
                kernel.name
            )));
        }
        for ((arg, buffer), written) in kernel.args.iter().zip(buffers).zip(values) {
            if arg.writes {
                let encoded = encode_scalars(&written, arg.dtype);
                let mut bytes = buffer.lock();
                bytes[..encoded.len()].copy_from_slice(&encoded);
            }
        }
        Ok(())
    }
}
