//! Renderers: a linearized kernel (`codegen::program`) printed as source text for a device's
//! compiler. A renderer is a leaf: it reads the program types and the UOps they hold, and no
//! codegen pass.

// A UOp hashes and compares by node identity; its lazily filled caches never change that.
#![allow(clippy::mutable_key_type)]

pub mod c;
pub mod c_helpers;
pub mod cuda;

use crate::codegen::program::KernelArg;

/// A rendered kernel, ready to compile: its source and how to call it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The readable function's name (`E_4_4`, `r_3_2`, ...).
    pub name: String,
    /// Self-contained source (C11 for `render::c`, CUDA C++ for `render::cuda`).
    pub source: String,
    /// The function the runtime calls: for C the trampoline
    /// `void <entry>(void** bufs, int core_id)`, for CUDA the `__global__` kernel.
    pub entry: String,
    /// For C, how many cores to call the entry on (`core_id` in `0..threads`); for CUDA, every
    /// thread of the launch, in blocks of `render::cuda::launch_block` of the source.
    pub threads: usize,
    /// The buffer arguments, `bufs[slot]`.
    pub args: Vec<KernelArg>,
}
