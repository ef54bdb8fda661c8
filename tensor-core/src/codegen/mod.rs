//! Codegen: from a kernel AST (`schedule::ScheduleItem::ast`) to a [`LinearKernel`], the
//! linearized program a renderer prints (codegen knows no renderer; see [`program`]).
//!
//! The stages follow tinyspec's lowering pipeline:
//! [`opt`] applies OptOps (splits of ranges into THREAD / UPCAST / UNROLL axes) chosen by
//! [`heuristic`]; [`blocked_sum`] splits long float sums into blocks (accuracy: no accumulator
//! takes more than 4096 terms); [`transcendental`] decomposes `f32` `exp2`, `log2`, `sin`
//! and `cos` into range reduction and polynomials; [`expand`] turns upcast and unrolled axes into copies of the
//! scalar code;
//! [`linearize`] places every computation in a loop nest (hoisting falls out of it);
//! [`program`] holds its output types; `render::c` prints them as C. For a GPU,
//! [`lower_kernel_gpu`] maps the outer output loops to the launch grid ([`gpu`]) and
//! `render::cuda` prints the result as CUDA C; [`emulate`] runs it over its launch grid in
//! Rust.

// A UOp hashes and compares by node identity; its lazily filled caches never change that.
#![allow(clippy::mutable_key_type)]

pub mod blocked_sum;
pub mod emit;
pub mod emulate;
pub mod expand;
pub mod fresh;
pub mod gpu;
pub mod group;
pub mod heuristic;
pub mod linearize;
pub mod name;
pub mod opt;
pub mod program;
pub mod search;
pub mod stage;
pub mod transcendental;
pub mod vectorize;

pub use name::{kernel_name, unique_name};
pub use opt::{Opt, OptimizedKernel};
pub use program::{GpuKernel, KernelArg, LaunchDims, LinearKernel};

use crate::uop::{AxisType, DType, Op, UOp};

/// Switches of the compilation of one kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Apply the hand-coded optimizations (`NOOPT=1` makes this false).
    pub optimize: bool,
    /// How many cores a kernel may be spread across.
    pub threads: usize,
    /// The `f32` lanes of the vector registers the target compiler uses (8 for 256-bit AVX2,
    /// 16 for AVX-512): sizes the register tile of a reduce
    /// ([`heuristic::reduce_upcast_width`]).
    pub vector_lanes: usize,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            optimize: true,
            threads: 1,
            vector_lanes: heuristic::DEFAULT_VECTOR_LANES,
        }
    }
}

/// Lowers one kernel AST to a [`LinearKernel`] (a renderer such as `render::c` prints it).
/// `buffer_sizes[slot]` is the element count of each buffer.
///
/// Panics when the AST breaks the kernel contract (that is a scheduler bug, not a user error).
#[track_caller]
pub fn lower_kernel(ast: &UOp, buffer_sizes: &[usize], opts: &CodegenOptions) -> LinearKernel {
    lower_kernel_named(ast, buffer_sizes, opts, &kernel_name(ast))
}

/// `lower_kernel` with the kernel's function named `name` (a program gives duplicates a
/// suffix with [`unique_name`], as tinygrad does: `E_4_4`, `E_4_4n1`).
#[track_caller]
pub fn lower_kernel_named(
    ast: &UOp,
    buffer_sizes: &[usize],
    opts: &CodegenOptions,
    name: &str,
) -> LinearKernel {
    let opt_list = if opts.optimize {
        heuristic::hand_coded_optimizations(ast, opts.threads, opts.vector_lanes)
    } else {
        Vec::new()
    };
    lower(ast, buffer_sizes, &opt_list, name.to_string())
}

/// Lowers one kernel AST for a GPU: the GPU heuristic's OptOps ([`gpu_optimizations`]), then
/// [`lower_kernel_gpu_with_opts`].
#[track_caller]
pub fn lower_kernel_gpu(
    ast: &UOp,
    buffer_sizes: &[usize],
    opts: &CodegenOptions,
    name: &str,
) -> GpuKernel {
    let opt_list = if opts.optimize {
        gpu_optimizations(ast)
    } else {
        Vec::new()
    };
    lower_kernel_gpu_with_opts(ast, buffer_sizes, &opt_list, name)
}

/// Lowers one kernel AST for a GPU with exactly the given OptOps: the CPU's passes, then the
/// outer output loops mapped to the launch grid and GROUP loops to the threads of a block
/// ([`gpu`]), the lanes' parts of a group reduction combined in shared memory ([`group`]),
/// the loads of a block's tile (LOCAL ranges) staged in shared memory ([`stage`]), and
/// neighbouring `f32` accesses made vector accesses ([`vectorize`]).
#[track_caller]
pub fn lower_kernel_gpu_with_opts(
    ast: &UOp,
    buffer_sizes: &[usize],
    opt_list: &[Opt],
    name: &str,
) -> GpuKernel {
    let linear = lower(ast, buffer_sizes, opt_list, name.to_string());
    let kernel = gpu::map_to_grid(&linear.name, &linear.program, &linear.args);
    let kernel = group::combine_partials(kernel);
    vectorize::vectorize(stage::stage_tiles(kernel))
}

/// The hand-coded OptOps for a GPU: the CPU heuristic's first upcast (never its cache blocks or
/// partial accumulators, which GROUP splits replace on a GPU), at most
/// [`heuristic::UPCAST_WIDTH`] wide, dividing the CPU's (a thread keeps that many outputs in
/// registers, and the grid keeps the rest of the parallelism), no THREAD split (the grid is
/// the parallelism). The upcast takes the top of its axis, so neighbouring threads touch
/// neighbouring elements and every load and store of a warp is one coalesced access, except
/// in an elementwise kernel whose every access along the axis can be one `float4`
/// ([`vectorize::vectorizable_upcast`]): there a thread's 4 elements are neighbours. A
/// contraction also tiles a second output axis whose loads it reuses
/// ([`heuristic::gpu_tile`]): a matmul thread computes 4x4 or 8x4 outputs (rows by columns)
/// from 4 + 4 or 8 + 4 loads per step of its reduce, instead of 1x4 from 1 + 4, and a large
/// one has blocks of threads share its loads ([`heuristic::gpu_local_tile`]). A kernel with few
/// outputs and long loops has them split across a block ([`group::group_opts`]).
pub fn gpu_optimizations(ast: &UOp) -> Vec<Opt> {
    let mut opts = gpu_thread_optimizations(ast);
    if !opts.iter().any(|opt| opt.target() == AxisType::Local) {
        opts.extend(group::group_opts(&grid_trial(ast, &opts)));
    }
    opts
}

/// The per-thread part of [`gpu_optimizations`]: upcasts and the LOCAL tile.
fn gpu_thread_optimizations(ast: &UOp) -> Vec<Opt> {
    let Some(first) = gpu_first_upcast(ast) else {
        return Vec::new();
    };
    let Some(tile) = heuristic::gpu_tile(ast, &first).map(|(axis, width)| Opt::Split {
        axis: axis.range_id(),
        factor: width,
        target: AxisType::Upcast,
        top: true,
    }) else {
        return vec![first];
    };
    let local = heuristic::gpu_local_tile(ast, &first, &tile);
    [first, tile].into_iter().chain(local).collect()
}

/// What one GPU thread of `ast` runs under `opts`, for choosing further opts: the expanded
/// kernel linearized and mapped to the grid, without blocked sums or transcendental
/// decompositions (neither adds a loop a block could split) and without buffers.
fn grid_trial(ast: &UOp, opts: &[Opt]) -> GpuKernel {
    let optimized = OptimizedKernel::new(ast).apply_all(opts);
    let program = linearize::linearize(&expand::expand(&optimized.ast), optimized.threads);
    gpu::map_to_grid("trial", &program, &[])
}

/// The CPU heuristic's first upcast, narrowed for a GPU thread and taken from the top of its
/// axis (see [`gpu_optimizations`]).
fn gpu_first_upcast(ast: &UOp) -> Option<Opt> {
    let upcast = heuristic::hand_coded_optimizations(ast, 1, heuristic::DEFAULT_VECTOR_LANES)
        .into_iter()
        .find_map(|opt| match opt {
            Opt::Split {
                axis,
                factor,
                target: AxisType::Upcast,
                ..
            } => Some((axis, factor)),
            _ => None,
        });
    let (axis, factor) = upcast?;
    // The widest split of at most UPCAST_WIDTH that divides the CPU's (a whole stack axis of
    // 10 becomes 2).
    let width = (2..=factor.min(heuristic::UPCAST_WIDTH))
        .rev()
        .find(|w| factor.is_multiple_of(*w))?;
    let vector = width == vectorize::VECTOR_WIDTH && vectorize::vectorizable_upcast(ast, axis);
    Some(Opt::Split {
        axis,
        factor: width,
        target: AxisType::Upcast,
        top: !vector,
    })
}

/// Lowers one kernel AST with exactly the given OptOps (for tests and search).
#[track_caller]
pub fn lower_kernel_with_opts(ast: &UOp, buffer_sizes: &[usize], opt_list: &[Opt]) -> LinearKernel {
    lower(ast, buffer_sizes, opt_list, kernel_name(ast))
}

/// [`lower_kernel_with_opts`] with the kernel's function named `name`.
#[track_caller]
pub fn lower_kernel_with_opts_named(
    ast: &UOp,
    buffer_sizes: &[usize],
    opt_list: &[Opt],
    name: &str,
) -> LinearKernel {
    lower(ast, buffer_sizes, opt_list, name.to_string())
}

#[track_caller]
fn lower(ast: &UOp, buffer_sizes: &[usize], opt_list: &[Opt], name: String) -> LinearKernel {
    let optimized = OptimizedKernel::new(ast).apply_all(opt_list);
    let blocked = blocked_sum::block_long_sums(&optimized.ast);
    let decomposed = transcendental::decompose_transcendentals(&blocked);
    let expanded = expand::expand(&decomposed);
    let program = linearize::linearize(&expanded, optimized.threads);
    LinearKernel {
        name,
        program,
        args: kernel_args(ast, buffer_sizes),
    }
}

/// The buffer arguments of `ast`: dtype from its `DefineGlobal`s, `writes` for stored slots.
#[track_caller]
fn kernel_args(ast: &UOp, buffer_sizes: &[usize]) -> Vec<KernelArg> {
    let mut args: Vec<KernelArg> = buffer_sizes
        .iter()
        .map(|&size| KernelArg {
            dtype: DType::U8,
            size,
            writes: false,
        })
        .collect();
    let nodes = ast.toposort();
    for u in &nodes {
        if u.op() != Op::DefineGlobal {
            continue;
        }
        let slot = u.global_slot();
        assert!(
            slot < args.len(),
            "lower_kernel: the AST uses buffer slot {slot} but only {} buffer sizes were given",
            args.len()
        );
        args[slot].dtype = u.dtype();
    }
    for u in &nodes {
        if u.op() == Op::Store {
            args[u.s(0).src()[0].global_slot()].writes = true;
        }
    }
    args
}
