//! Renderers: a linearized kernel (`codegen::program`) printed as source text for a device's
//! compiler. A renderer is a leaf: it reads the program types and the UOps they hold, and no
//! codegen pass.

// A UOp hashes and compares by node identity; its lazily filled caches never change that.
#![allow(clippy::mutable_key_type)]

pub mod c;
pub mod c_helpers;
pub mod cuda;
mod stored;

use crate::codegen::program::{KernelArg, LaunchDims};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::OnceLock;

/// How a rendered kernel runs: part of the contract between a renderer and a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Launch {
    /// A C kernel: the entry is called once per core, with `core_id` in `0..n`, each call
    /// computing its share of the outputs.
    Cores(usize),
    /// A GPU kernel: `grid` blocks of `block` threads each (the block size is also the
    /// kernel's `__launch_bounds__`, so a launch with bigger blocks would fail).
    Grid(LaunchDims),
}

impl Launch {
    /// The parallel parts of the launch: cores for C, threads of the whole grid for a GPU.
    pub fn parts(&self) -> usize {
        match self {
            Launch::Cores(n) => *n,
            Launch::Grid(dims) => dims.grid * dims.block,
        }
    }
}

impl fmt::Display for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Launch::Cores(n) => write!(f, "cores {n}"),
            Launch::Grid(dims) => write!(f, "grid {}x{}", dims.grid, dims.block),
        }
    }
}

/// A rendered kernel, ready to compile: its source and how to call it.
///
/// The renderer seals what it made: [`Kernel::is_as_rendered`] says whether the fields still
/// hold exactly that, so a runtime can trust `args` as the extent of every buffer the source
/// touches (and launch it over buffers checked against them) without trusting whoever held
/// the kernel in between. A kernel built or edited by hand is not sealed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The readable function's name (`E_4_4`, `r_3_2`, ...).
    pub name: String,
    /// Self-contained source (C11 for `render::c`, CUDA C++ for `render::cuda`).
    pub source: String,
    /// The function the runtime calls: for C the trampoline
    /// `void <entry>(void** bufs, int core_id)`, for CUDA the `__global__` kernel.
    pub entry: String,
    /// How the runtime runs the entry: the renderer decides it, the device obeys it, and
    /// nothing reads it back out of the source.
    pub launch: Launch,
    /// The buffer arguments, `bufs[slot]`.
    pub args: Vec<KernelArg>,
    /// The keyed hash of the fields above as the renderer made them.
    seal: u64,
}

impl Kernel {
    /// A kernel as a renderer made it, sealed.
    pub(crate) fn rendered(
        name: String,
        source: String,
        entry: String,
        launch: Launch,
        args: Vec<KernelArg>,
    ) -> Kernel {
        let mut kernel = Kernel {
            name,
            source,
            entry,
            launch,
            args,
            seal: 0,
        };
        kernel.seal = kernel.fingerprint();
        kernel
    }

    /// True when every field still holds what the renderer made: the source then addresses
    /// no more than `args[slot].size` elements of `args[slot].dtype` in slot `slot`, stores
    /// only into the slots marked `writes`, and runs as `launch` says. False for a kernel
    /// built or changed outside the renderers.
    pub fn is_as_rendered(&self) -> bool {
        self.seal == self.fingerprint()
    }

    /// A hash of every field under a key drawn once per process, which code outside this
    /// module never sees: a seal cannot be computed for fields of one's choosing.
    fn fingerprint(&self) -> u64 {
        static KEY: OnceLock<RandomState> = OnceLock::new();
        let mut hasher = KEY.get_or_init(RandomState::new).build_hasher();
        (&self.name, &self.source, &self.entry, self.launch).hash(&mut hasher);
        self.args.len().hash(&mut hasher);
        for arg in &self.args {
            (arg.dtype, arg.size, arg.writes).hash(&mut hasher);
        }
        hasher.finish()
    }
}
