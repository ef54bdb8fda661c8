//! The CUDA device: kernels rendered as CUDA C (`tensor_core::render::cuda`), compiled to PTX
//! by NVRTC for the GPU's architecture, loaded and launched through the CUDA driver API
//! (cudarc, which loads `libcuda` and `libnvrtc` at run time, so this builds with no toolkit).
//!
//! cudarc panics when a library it needs is missing, so [`CudaDevice::open`] checks that the
//! driver library loads before it creates a context, and that NVRTC loads before it compiles:
//! on a machine without them the result is [`RuntimeError::DeviceUnavailable`] naming what is
//! missing, and nothing else changes.
//!
//! [`nvrtc`] holds the compile steps that need no GPU (NVRTC and `ptxas`), which the tests and
//! `examples/cuda_check.rs` run on every kernel they render; [`ptx_cache`] keeps NVRTC's PTX
//! on disk so a kernel is compiled once across processes.

pub mod nvrtc;
pub mod ptx_cache;

use ptx_cache::PtxCache;

use crate::device::{Device, check_len};
use crate::error::{Result, RuntimeError};
use crate::memory_pool::{MemoryPool, pool_bytes_from_env};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tensor_core::UOp;
use tensor_core::codegen::{CodegenOptions, lower_kernel_gpu};
use tensor_core::render::{Kernel, Launch};

/// Ok when the CUDA driver library (`libcuda.so.1`) can be loaded.
pub fn driver_available() -> Result<()> {
    // SAFETY: loads (and drops) the shared library by name; no symbol of it is called.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(RuntimeError::DeviceUnavailable(
            "the CUDA driver library libcuda.so.1 could not be loaded: this machine has no \
             NVIDIA driver (or it is not on the library path), so there is no GPU to run on; \
             install the driver, or unset DEVICE (or set DEVICE=CPU) to run on the CPU"
                .to_string(),
        ))
    }
}

/// The GPU ordinal of a `DEVICE` value: `CUDA` is 0, `CUDA:1` is 1; `None` for other names.
pub fn parse_device_name(name: &str) -> Option<Result<usize>> {
    let upper = name.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix("CUDA")?;
    Some(match rest.strip_prefix(':') {
        None if rest.is_empty() => Ok(0),
        Some(n) => n.parse().map_err(|_| RuntimeError::InvalidSetting {
            variable: "DEVICE",
            value: name.to_string(),
            expected: "CUDA, or CUDA:<ordinal> such as CUDA:1",
        }),
        None => Err(RuntimeError::InvalidSetting {
            variable: "DEVICE",
            value: name.to_string(),
            expected: "CUDA, or CUDA:<ordinal> such as CUDA:1",
        }),
    })
}

/// One schedule item's kernel lowered for a GPU and rendered as CUDA C (what
/// [`CudaDevice`] compiles; needs no GPU).
pub fn cuda_kernel(
    ast: &UOp,
    buffer_sizes: &[usize],
    options: &CodegenOptions,
    name: &str,
) -> Kernel {
    tensor_core::render::cuda::render_kernel(&lower_kernel_gpu(ast, buffer_sizes, options, name))
}

/// The kernels of `schedule` as CUDA C, named as on the CPU (no GPU needed).
pub fn cuda_kernels(schedule: &tensor_core::schedule::Schedule) -> Vec<Kernel> {
    let options = CodegenOptions::default();
    crate::plan::generate_kernels_with(schedule, |ast, sizes, name| {
        cuda_kernel(ast, sizes, &options, name)
    })
}

/// One GPU: its context, the stream every copy and launch goes through, its architecture,
/// and the pool its freed memory goes to (`cuMemAlloc` is slow: see [`MemoryPool`]).
pub struct CudaDevice {
    name: String,
    stream: Arc<CudaStream>,
    arch: &'static str,
    ptx: PtxCache,
    pool: Arc<MemoryPool<CudaSlice<u8>>>,
}

/// Device memory of a [`CudaDevice`] (bytes), given back to the device's pool when dropped.
pub struct CudaBuffer {
    /// `None` only while being dropped.
    memory: Mutex<Option<CudaSlice<u8>>>,
    stream: Arc<CudaStream>,
    len: usize,
    pool: Arc<MemoryPool<CudaSlice<u8>>>,
}

impl CudaBuffer {
    /// The ordinal of the GPU that holds this memory.
    pub fn ordinal(&self) -> usize {
        self.stream.context().ordinal()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CudaSlice<u8>>> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        let memory = self
            .memory
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slice) = memory.take() {
            // A full pool hands the slice back: it is freed here, which needs the context
            // current on this thread (a failure is kept by cudarc and reported by the next
            // bind, so nothing is lost by ignoring it here).
            let _ = self.stream.context().bind_to_thread();
            drop(self.pool.give(slice.len(), slice));
        }
    }
}

/// A kernel loaded into the GPU's context.
#[derive(Clone)]
pub struct CudaProgram {
    function: CudaFunction,
}

impl CudaDevice {
    /// Opens GPU `ordinal` (checks the driver library first: see the module docs).
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        driver_available()?;
        nvrtc::nvrtc_available()?;
        let context = CudaContext::new(ordinal).map_err(|e| {
            RuntimeError::DeviceUnavailable(format!(
                "CUDA:{ordinal} could not be opened: {e:?} (is there a GPU with this ordinal?)"
            ))
        })?;
        let (major, minor) = context
            .compute_capability()
            .map_err(|e| driver_error("reading the compute capability", e))?;
        // SAFETY: every copy and launch of this device goes through its one stream, in
        // order, so no slice is ever used by two streams and cudarc's per-slice events (which
        // cost a record and a wait per kernel argument) have nothing to order.
        unsafe { context.disable_event_tracking() };
        Ok(CudaDevice {
            name: format!("CUDA:{ordinal}"),
            stream: context.default_stream(),
            arch: arch_name(major, minor),
            ptx: PtxCache::from_env()?,
            pool: Arc::new(MemoryPool::new(pool_bytes_from_env()?)),
        })
    }

    /// The NVRTC architecture kernels are compiled for (`sm_80`, ...).
    pub fn arch(&self) -> &'static str {
        self.arch
    }

    /// The device's pool of freed memory.
    pub fn pool(&self) -> &MemoryPool<CudaSlice<u8>> {
        &self.pool
    }

    /// `bytes` bytes of device memory: a freed slice of that length from the pool, contents
    /// as left, or a new zeroed one.
    fn memory(&self, bytes: usize) -> Result<(CudaSlice<u8>, bool)> {
        self.bind()?;
        let len = bytes.max(1);
        if let Some(reused) = self.pool.take(len) {
            return Ok((reused, true));
        }
        let fresh = self
            .stream
            .alloc_zeros::<u8>(len)
            .map_err(|_| RuntimeError::OutOfMemory {
                device: self.name.clone(),
                bytes,
            })?;
        Ok((fresh, false))
    }

    fn buffer(&self, memory: CudaSlice<u8>, bytes: usize) -> CudaBuffer {
        CudaBuffer {
            memory: Mutex::new(Some(memory)),
            stream: self.stream.clone(),
            len: bytes,
            pool: self.pool.clone(),
        }
    }

    /// NVRTC runs and PTX cache hits of this device so far.
    pub fn compile_counts(&self) -> crate::CompileCounts {
        self.ptx.counts()
    }

    /// The GPU's name as its driver reports it (`NVIDIA H100 80GB HBM3`).
    pub fn device_name(&self) -> Result<String> {
        self.stream
            .context()
            .name()
            .map_err(|e| driver_error("reading the device name", e))
    }

    /// The GPU's f32 peak in FLOP/s: multiprocessors × f32 lanes per multiprocessor × 2
    /// (a fused multiply-add) × the clock the driver reports as its maximum.
    pub fn f32_peak_flops(&self) -> Result<f64> {
        use cudarc::driver::sys::CUdevice_attribute as Attribute;
        let context = self.stream.context();
        let read = |attribute| {
            context
                .attribute(attribute)
                .map_err(|e| driver_error("reading a device attribute", e))
        };
        let multiprocessors = read(Attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let clock_khz = read(Attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?;
        let lanes = f32_lanes_per_multiprocessor(self.arch);
        Ok(multiprocessors as f64 * lanes as f64 * 2.0 * clock_khz as f64 * 1e3)
    }

    /// The median time of `repeats` device-to-device copies of `bytes` bytes, each
    /// synchronized: the bandwidth reference that benches hold elementwise kernels against.
    pub fn time_device_copy(&self, bytes: usize, repeats: usize) -> Result<Duration> {
        let (source, _) = self.memory(bytes)?;
        let (mut target, _) = self.memory(bytes)?;
        let mut copy = || -> Result<Duration> {
            let started = Instant::now();
            self.stream
                .memcpy_dtod(&source, &mut target)
                .map_err(|e| driver_error("copying on the device", e))?;
            self.synchronize()?;
            Ok(started.elapsed())
        };
        copy()?;
        let mut times = (0..repeats.max(1))
            .map(|_| copy())
            .collect::<Result<Vec<_>>>()?;
        times.sort();
        let median = times[times.len() / 2];
        drop(self.pool.give(source.len(), source));
        drop(self.pool.give(target.len(), target));
        Ok(median)
    }

    /// Makes the device's context current on the calling thread: the driver keeps one
    /// current context per thread, and cudarc binds it for some calls (allocations) but not
    /// for others (memset, launch), which then fail with `CUDA_ERROR_INVALID_CONTEXT` on a
    /// thread that never used the device.
    fn bind(&self) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver_error("making the device's context current", e))
    }

    fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver_error("synchronizing the stream", e))
    }
}

/// The `sm_XX` name of a compute capability (leaked once per distinct capability).
fn arch_name(major: i32, minor: i32) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let name = format!("sm_{major}{minor}");
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.iter().find(|n| **n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.push(leaked);
    leaked
}

/// f32 lanes (CUDA cores) per multiprocessor of an `sm_XX` architecture: 64 on the
/// data-centre parts of Volta and Ampere (`sm_70`, `sm_80`), 128 on Turing's successors
/// for consumers and on Hopper and Blackwell.
fn f32_lanes_per_multiprocessor(arch: &str) -> u32 {
    match arch {
        "sm_60" | "sm_70" | "sm_72" | "sm_75" | "sm_80" => 64,
        _ => 128,
    }
}

fn driver_error(doing: &str, e: cudarc::driver::DriverError) -> RuntimeError {
    RuntimeError::InvalidLaunch(format!("CUDA driver error while {doing}: {e:?}"))
}

impl tensor_core::uop::DeviceAllocation for CudaBuffer {
    fn read_back(&self) -> Option<Vec<u8>> {
        let memory = self.lock();
        self.stream.context().bind_to_thread().ok()?;
        let mut bytes = self.stream.memcpy_dtov(memory.as_ref()?).ok()?;
        self.stream.synchronize().ok()?;
        bytes.truncate(self.len);
        Some(bytes)
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl Device for CudaDevice {
    type Buffer = CudaBuffer;
    type Program = CudaProgram;

    fn name(&self) -> &str {
        &self.name
    }

    /// The GPU's parallelism is the launch grid, not a split of the kernel by the heuristic.
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
        cuda_kernel(ast, buffer_sizes, options, name)
    }

    fn allocate(&self, bytes: usize) -> Result<CudaBuffer> {
        let (mut memory, reused) = self.memory(bytes)?;
        if reused {
            self.stream
                .memset_zeros(&mut memory)
                .map_err(|e| driver_error("zeroing reused memory", e))?;
        }
        Ok(self.buffer(memory, bytes))
    }

    fn wait_idle(&self) -> Result<()> {
        self.bind()?;
        self.synchronize()
    }

    /// Memory a kernel overwrites entirely: a reused slice is not zeroed first.
    fn allocate_output(&self, bytes: usize) -> Result<CudaBuffer> {
        let (memory, _) = self.memory(bytes)?;
        Ok(self.buffer(memory, bytes))
    }

    fn buffer_len(&self, buffer: &CudaBuffer) -> usize {
        buffer.len
    }

    fn copy_in(&self, dst: &CudaBuffer, src: &[u8]) -> Result<()> {
        check_len("copy_in", dst.len, src.len())?;
        self.bind()?;
        let mut guard = dst.lock();
        let memory = guard.as_mut().expect("a live buffer has its memory");
        self.stream
            .memcpy_htod(src, memory)
            .map_err(|e| driver_error("copying to the device", e))?;
        drop(guard);
        self.synchronize()
    }

    fn copy_out(&self, src: &CudaBuffer, dst: &mut [u8]) -> Result<()> {
        check_len("copy_out", src.len, dst.len())?;
        self.bind()?;
        let guard = src.lock();
        let memory = guard.as_ref().expect("a live buffer has its memory");
        let mut staged = crate::host_alloc::zeroed_bytes(memory.len())?;
        self.stream
            .memcpy_dtoh(memory, &mut staged)
            .map_err(|e| driver_error("copying from the device", e))?;
        drop(guard);
        self.synchronize()?;
        dst.copy_from_slice(&staged[..dst.len()]);
        Ok(())
    }

    unsafe fn compile(&self, source: &str, entry: &str) -> Result<CudaProgram> {
        let ptx = self.ptx.ptx(source, self.arch)?;
        self.bind()?;
        let module = self
            .stream
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| driver_error("loading a compiled kernel", e))?;
        let function = module
            .load_function(entry)
            .map_err(|e| RuntimeError::EntryNotFound {
                entry: entry.to_string(),
                reason: format!("{e:?}"),
            })?;
        Ok(CudaProgram { function })
    }

    /// `launch` is the grid `render::cuda` chose (`Kernel::launch`), whose block size the
    /// source's `__launch_bounds__` declares.
    /// Returns once the launch is queued (see the trait): copies out and read-backs wait
    /// for it, and its errors surface there at the latest.
    unsafe fn launch_unchecked(
        &self,
        program: &CudaProgram,
        buffers: &[&CudaBuffer],
        launch: Launch,
    ) -> Result<()> {
        let Launch::Grid(dims) = launch else {
            return Err(RuntimeError::InvalidLaunch(format!(
                "a GPU kernel is launched on a grid, not on {launch}"
            )));
        };
        self.bind()?;
        let pointers: Vec<u64> = buffers
            .iter()
            .map(|b| {
                let memory = b.lock();
                let memory = memory.as_ref().expect("a live buffer has its memory");
                let (pointer, _sync) = memory.device_ptr(&self.stream);
                pointer
            })
            .collect();
        // Kernels read and write `float4`s at element indices that are multiples of 4
        // (`codegen::vectorize`), which is 16-byte aligned only from an aligned start; every
        // buffer is a whole allocation (256-byte aligned), so this never fires unless that
        // changes.
        if let Some(pointer) = pointers.iter().find(|p| *p % 16 != 0) {
            return Err(RuntimeError::InvalidLaunch(format!(
                "a buffer at {pointer:#x} is not 16-byte aligned, which vector accesses need"
            )));
        }
        let (grid, block) = match (u32::try_from(dims.grid), u32::try_from(dims.block)) {
            (Ok(grid), Ok(block)) if grid > 0 && block > 0 => (grid, block),
            _ => {
                return Err(RuntimeError::InvalidLaunch(format!(
                    "a {launch} launch is outside 1 to 2^32 blocks and threads per block"
                )));
            }
        };
        let config = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = self.stream.launch_builder(&program.function);
        for pointer in &pointers {
            launch.arg(pointer);
        }
        // SAFETY: the caller guarantees (this function's contract, which `Device::launch`
        // checks against the rendered kernel's arguments) one device pointer per slot, in
        // slot order, each buffer at least as long as the kernel addresses in it, written
        // buffers unaliased, and `launch` as the kernel was rendered for. The launch is
        // queued on the device's one in-order stream:
        // every later copy, launch, memset and free of this device goes through that stream
        // too (a dropped buffer's memory goes to the pool, or cudarc frees it stream-ordered
        // or after a synchronize), so no memory the kernel uses is reused or read before it
        // finishes.
        unsafe { launch.launch(config) }.map_err(|e| driver_error("launching a kernel", e))?;
        if crate::settings::debug_level() >= 2 {
            // DEBUG=2 prints each kernel's run time: wait for it.
            self.synchronize()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_to_ordinals() {
        assert_eq!(parse_device_name("CUDA").map(|r| r.ok()), Some(Some(0)));
        assert_eq!(parse_device_name("cuda:1").map(|r| r.ok()), Some(Some(1)));
        assert!(matches!(parse_device_name("CUDA:x"), Some(Err(_))));
        assert!(matches!(parse_device_name("CUDAx"), Some(Err(_))));
        assert!(parse_device_name("CPU").is_none());
    }

    #[test]
    fn opening_cuda_without_a_driver_says_what_is_missing() {
        if driver_available().is_ok() {
            println!("skipped: a CUDA driver is present, so there is no missing-driver error");
            return;
        }
        let err = CudaDevice::open(0).err().expect("no driver, no device");
        let text = err.to_string();
        assert!(text.contains("libcuda.so.1 could not be loaded"), "{text}");
        assert!(text.contains("DEVICE=CPU"), "{text}");
    }
}
