//! Codegen: from a kernel AST (`schedule::ScheduleItem::ast`) to a [`Kernel`] with C source.
//!
//! The stages follow tinyspec's lowering pipeline:
//! [`opt`] applies OptOps (splits of ranges into THREAD / UPCAST / UNROLL axes) chosen by
//! [`heuristic`]; [`blocked_sum`] splits long float sums into blocks (accuracy: no accumulator
//! takes more than 4096 terms); [`expand`] turns upcast and unrolled axes into copies of the
//! scalar code;
//! [`linearize`] places every computation in a loop nest (hoisting falls out of it);
//! `render::c` prints the result as C.

// A UOp hashes and compares by node identity; its lazily filled caches never change that.
#![allow(clippy::mutable_key_type)]

pub mod blocked_sum;
pub mod expand;
pub mod heuristic;
pub mod linearize;
pub mod name;
pub mod opt;

pub use name::{kernel_name, unique_name};
pub use opt::{Opt, OptimizedKernel};

use crate::render;
use crate::uop::{Arg, DType, Op, UOp};

/// One buffer argument of a compiled kernel, in slot order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelArg {
    /// Element dtype of the buffer.
    pub dtype: DType,
    /// Number of elements the runtime must allocate.
    pub size: usize,
    /// True for outputs (the kernel stores into it).
    pub writes: bool,
}

/// A kernel ready to compile: its C source and how to call it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The readable function's name (`E_4_4`, `r_3_2`, ...).
    pub name: String,
    /// Self-contained C11 source.
    pub source: String,
    /// The trampoline the runtime calls: `void <entry>(void** bufs, int core_id)`.
    pub entry: String,
    /// How many cores to call the entry on (`core_id` in `0..threads`).
    pub threads: usize,
    /// The buffer arguments, `bufs[slot]`.
    pub args: Vec<KernelArg>,
}

/// Switches of the compilation of one kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Apply the hand-coded optimizations (`NOOPT=1` makes this false).
    pub optimize: bool,
    /// How many cores a kernel may be spread across.
    pub threads: usize,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            optimize: true,
            threads: 1,
        }
    }
}

/// Lowers one kernel AST to C. `buffer_sizes[slot]` is the element count of each buffer.
///
/// Panics when the AST breaks the kernel contract (that is a scheduler bug, not a user error).
#[track_caller]
pub fn compile_kernel(ast: &UOp, buffer_sizes: &[usize], opts: &CodegenOptions) -> Kernel {
    compile_kernel_named(ast, buffer_sizes, opts, &kernel_name(ast))
}

/// `compile_kernel` with the kernel's function named `name` (a program gives duplicates a
/// suffix with [`unique_name`], as tinygrad does: `E_4_4`, `E_4_4n1`).
#[track_caller]
pub fn compile_kernel_named(
    ast: &UOp,
    buffer_sizes: &[usize],
    opts: &CodegenOptions,
    name: &str,
) -> Kernel {
    let opt_list = if opts.optimize {
        heuristic::hand_coded_optimizations(ast, opts.threads)
    } else {
        Vec::new()
    };
    lower(ast, buffer_sizes, &opt_list, name.to_string())
}

/// Lowers one kernel AST to C with exactly the given OptOps (for tests and search).
#[track_caller]
pub fn compile_kernel_with_opts(ast: &UOp, buffer_sizes: &[usize], opt_list: &[Opt]) -> Kernel {
    lower(ast, buffer_sizes, opt_list, kernel_name(ast))
}

#[track_caller]
fn lower(ast: &UOp, buffer_sizes: &[usize], opt_list: &[Opt], name: String) -> Kernel {
    let optimized = OptimizedKernel::new(ast).apply_all(opt_list);
    let blocked = blocked_sum::block_long_sums(&optimized.ast);
    let expanded = expand::expand(&blocked);
    let program = linearize::linearize(&expanded, optimized.threads);
    let args = kernel_args(ast, buffer_sizes);
    let source = render::c::render(&name, &program, &args);
    Kernel {
        entry: format!("{name}_entry"),
        name,
        source,
        threads: optimized.threads,
        args,
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
        let slot = global_slot(u);
        assert!(
            slot < args.len(),
            "compile_kernel: the AST uses buffer slot {slot} but only {} buffer sizes were given",
            args.len()
        );
        args[slot].dtype = u.dtype();
    }
    for u in &nodes {
        if u.op() == Op::Store {
            args[global_slot(&u.s(0).src()[0])].writes = true;
        }
    }
    args
}

/// The slot of a `DefineGlobal`.
#[track_caller]
pub fn global_slot(u: &UOp) -> usize {
    match (u.op(), u.arg()) {
        (Op::DefineGlobal, Arg::Int(slot)) => *slot as usize,
        _ => panic!("expected a DefineGlobal with an Int slot, got {u:?}"),
    }
}
