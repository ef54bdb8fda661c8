//! Devices, buffers, compile and launch, caches, and ndarray interop.
//!
//! - [`Device`]: the backend interface (allocate, copy in/out, compile, launch);
//! - [`cpu::CpuDevice`]: C kernels built by the system compiler and run on every core;
//! - [`cuda::CudaDevice`]: CUDA C kernels compiled by NVRTC and launched through cudarc (its
//!   compile checks, [`cuda::nvrtc`], need no GPU);
//! - [`emulated::EmulatedGpu`]: the CUDA device's lowering run by an emulator on the host
//!   (`DEVICE=EMU`), so `realize` on a GPU device is checked numerically without a GPU;
//! - [`realize`]: computing tensors on the selected device (`DEVICE`, [`realize::set_device`]);
//! - [`realized`]: a computed value stays computed for every graph that holds it ([`view_bases`]:
//!   a slice of an expensive lazy value computes it whole once; [`recompute_watch`]: `DEBUG=1`'s
//!   warning for a loop whose graph keeps growing);
//! - [`cache`]: the on-disk cache of compiled kernels, keyed by a [`stable_hash`];
//! - [`stats`]: counters of compiler runs and cache hits;
//! - [`ndarray_interop`]: `ndarray` arrays in and out of buffers;
//! - [`RuntimeError`]: every fault, as a value with an actionable message.
//!
//! Environment variables read by [`CpuDevice::from_env`] (and [`CpuDevice::shared`]):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `CC` | C compiler command (may include arguments) | `cc` |
//! | `TENSOR_CACHE_DIR` | directory of compiled kernels shared by processes | `$XDG_CACHE_HOME/tensor`, else `$HOME/.cache/tensor` |
//! | `TENSOR_CACHE_MAX_BYTES` | size limit of the disk cache (least recently used entries go first) | 512 MiB |
//! | `TENSOR_PROGRAM_CACHE_SIZE` | loaded kernel libraries kept in memory per device | 1024 |
//! | `TENSOR_COMPILE_TIMEOUT` | seconds one compiler run may take before it is killed | 120 |
//! | `THREADS` | cores a kernel is split across (more than available: lowered, with a warning) | all available cores |
//!
//! A malformed value of any of them is an error naming the variable.
//!
//! Tests and embedders that need a specific setup pass a [`CpuConfig`] to
//! [`CpuDevice::with_config`] instead of changing the process environment.

#![warn(missing_docs)]

pub mod cache;
pub mod cpu;
pub mod cuda;
pub mod device;
pub mod emulated;
pub mod error;
pub mod execute;
mod host_alloc;
pub mod host_call;
pub mod jit;
pub mod lru;
pub mod memory_pool;
pub mod ndarray_interop;
pub mod parallel;
pub mod placement;
pub mod plan;
pub mod plan_store;
mod private_files;
pub mod realize;
pub mod realized;
pub mod recompute_watch;
pub mod registry;
pub mod settings;
pub mod stable_hash;
pub mod stats;
pub mod switches;
pub mod tensor_ext;
pub mod view_bases;

pub use cpu::{CpuBuffer, CpuConfig, CpuDevice, CpuProgram};
pub use device::{CheckedProgram, Device};
pub use error::{Result, RuntimeError};
pub use jit::{Jit, jit};
pub use stats::{
    CompileCounts, PipelineCounts, compiler_invocations, disk_cache_hits, pipeline_counts,
    thread_pipeline_counts,
};
pub use tensor_ext::Realize;

/// Prints a warning the user should see but that does not stop the computation.
pub(crate) fn warn(message: &str) {
    eprintln!("tensor-runtime warning: {message}");
}
