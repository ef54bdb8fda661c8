//! Devices, buffers, compile and launch, caches, and ndarray interop.
//!
//! - [`Device`]: the backend interface (allocate, copy in/out, compile, launch);
//! - [`cpu::CpuDevice`]: C kernels built by the system compiler and run on every core;
//! - [`cache`]: the on-disk cache of compiled kernels, keyed by a [`stable_hash`];
//! - [`stats`]: counters of compiler runs and cache hits;
//! - [`RuntimeError`]: every fault, as a value with an actionable message.

pub mod cache;
pub mod cpu;
pub mod device;
pub mod error;
pub mod stable_hash;
pub mod stats;

pub use cpu::{CpuBuffer, CpuConfig, CpuDevice, CpuProgram};
pub use device::Device;
pub use error::{Result, RuntimeError};
pub use stats::{CompileCounts, compiler_invocations, disk_cache_hits};

/// Prints a warning the user should see but that does not stop the computation.
pub(crate) fn warn(message: &str) {
    eprintln!("tensor-runtime warning: {message}");
}
