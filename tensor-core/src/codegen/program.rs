//! The linearized program: what codegen hands to a renderer. A renderer reads these types
//! (and the UOps they hold) and nothing else of codegen.

use crate::uop::{DType, ReduceOp, UOp};

/// A kernel after codegen: its name, its linearized body and its buffer arguments; a renderer
/// prints it as source for a device's compiler.
#[derive(Clone, Debug)]
pub struct LinearKernel {
    /// The function's name (`E_4_4`, `r_3_2`, ...).
    pub name: String,
    /// The linearized body (its `threads` is how many cores to call the kernel on).
    pub program: Program,
    /// The buffer arguments, `bufs[slot]`.
    pub args: Vec<KernelArg>,
}

/// One buffer argument of a kernel, in slot order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelArg {
    /// Element dtype of the buffer.
    pub dtype: DType,
    /// Number of elements the runtime must allocate.
    pub size: usize,
    /// True for outputs (the kernel stores into it).
    pub writes: bool,
}

/// A linearized kernel: the lines of its body and its core count.
#[derive(Clone, Debug)]
pub struct Program {
    /// The statements in execution order.
    pub lines: Vec<Line>,
    /// How many cores split the THREAD range (1 without one).
    pub threads: usize,
}

/// An operand of a statement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// The result of the `Assign` with this temp number.
    Temp(usize),
    /// The accumulator with this number (read after its loops closed).
    Acc(usize),
    /// A loop variable.
    Range(UOp),
    /// A constant, printed in place.
    Const(UOp),
}

/// One statement of a linearized kernel.
#[derive(Clone, Debug)]
pub enum Line {
    /// Opens a loop over a range.
    Loop(UOp),
    /// Closes the innermost open loop.
    EndLoop,
    /// Declares accumulator `acc` of `reduce`, set to the reduce op's identity.
    DefineAcc {
        /// The accumulator's number.
        acc: usize,
        /// The `Reduce` it accumulates.
        reduce: UOp,
    },
    /// Folds `value` into accumulator `acc` with the reduce op.
    Accumulate {
        /// The accumulator's number.
        acc: usize,
        /// The combining op.
        op: ReduceOp,
        /// The `Reduce` it accumulates.
        reduce: UOp,
        /// The value folded in.
        value: Value,
    },
    /// Computes `node` (an ALU op or a Load) from `operands` into temp `temp`. A Load's
    /// operands are its element index and, when gated, its gate.
    Assign {
        /// The temporary written.
        temp: usize,
        /// The ALU op or Load computed.
        node: UOp,
        /// Its operands, in order.
        operands: Vec<Value>,
    },
    /// Opens a loop over `range` split across the threads of a block (GPU only): the thread
    /// in position `lane` runs the values `lane, lane + lanes, ...` below the range's size.
    StridedLoop {
        /// The range whose values the loop runs (its size bounds the loop).
        range: UOp,
        /// The `Group` range that is the thread's position in its block.
        lane: UOp,
        /// The threads of the block.
        lanes: usize,
    },
    /// Declares memory shared by the threads of a block (GPU only; tinyspec's DEFINE_LOCAL).
    DefineLocal {
        /// The shared array's number.
        local: usize,
        /// Its element dtype.
        dtype: DType,
        /// Its elements.
        size: usize,
    },
    /// Writes `value` at `index` of shared array `local`.
    LocalStore {
        /// The shared array.
        local: usize,
        /// The element written.
        index: Value,
        /// The value written.
        value: Value,
    },
    /// Reads element `index` of shared array `local` into temp `temp`.
    LocalLoad {
        /// The temporary written.
        temp: usize,
        /// The shared array.
        local: usize,
        /// The array's element dtype.
        dtype: DType,
        /// The element read.
        index: Value,
    },
    /// Reads the `temps.len()` (4) neighbouring elements from `index` on of shared array
    /// `local` (`f32`) in one access (GPU only, `codegen::stage`; `index` is a multiple of 4
    /// and the array 16-byte aligned): temp `temps[k]` gets element `index + k`.
    LocalVectorLoad {
        /// The temporaries written, one per element.
        temps: Vec<usize>,
        /// The shared array.
        local: usize,
        /// The first element read.
        index: Value,
    },
    /// Opens a block whose lines run only where the bool `Value` holds, closed by the next
    /// unmatched `EndIf` (`codegen::linearize` puts the updates of a reduce that are gated by
    /// an equality in one).
    If(Value),
    /// Closes the innermost open `If` block.
    EndIf,
    /// Waits until every thread of the block reached it, and makes their shared-memory writes
    /// visible (tinyspec's BARRIER, CUDA's `__syncthreads()`).
    Barrier,
    /// Reads the `temps.len()` (4) neighbouring elements from `index` on of the load's buffer
    /// in one access (GPU only, `codegen::vectorize`; `index` is a multiple of 4, so the
    /// access is 16-byte aligned): temp `temps[k]` gets element `index + k`.
    VectorLoad {
        /// The temporaries written, one per element.
        temps: Vec<usize>,
        /// The Load of the first element (its buffer and dtype).
        load: UOp,
        /// The first element read.
        index: Value,
    },
    /// Writes `values[k]` at `index + k` of the store's buffer in one access (GPU only,
    /// `codegen::vectorize`; `index` is a multiple of 4).
    VectorStore {
        /// The Store of the first element (its buffer).
        store: UOp,
        /// The first element written.
        index: Value,
        /// The values written, one per element.
        values: Vec<Value>,
    },
    /// Writes `value` at `index` of the store's buffer, only where `gate` holds.
    Store {
        /// The `Store` node (its buffer is the destination).
        store: UOp,
        /// The element index written.
        index: Value,
        /// The condition under which it is written, if any.
        gate: Option<Value>,
        /// The value written.
        value: Value,
    },
}

/// The most threads of one block (a multiple of the warp size, 32).
pub const MAX_BLOCK_THREADS: usize = 128;

/// One output range mapped to the launch grid: `range = g / stride % size`.
#[derive(Clone, Debug)]
pub struct Special {
    /// The `Range` node whose loop this index replaces (its name stays `gidx<id>`).
    pub range: UOp,
    /// The product of the sizes of the mapped ranges inside this one.
    pub stride: usize,
    /// The range's size.
    pub size: usize,
}

/// Grid and block sizes of a launch (one dimension each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchDims {
    /// Blocks in the grid.
    pub grid: usize,
    /// Threads per block.
    pub block: usize,
}

impl LaunchDims {
    /// The launch of `threads` threads: blocks of at most [`MAX_BLOCK_THREADS`], enough of
    /// them to cover every thread (the last block may run past the end; the kernel checks).
    pub fn for_threads(threads: usize) -> LaunchDims {
        LaunchDims::with_block(threads, threads.clamp(1, MAX_BLOCK_THREADS))
    }

    /// The launch of `threads` threads in blocks of `block`: enough blocks to cover every
    /// thread.
    pub fn with_block(threads: usize, block: usize) -> LaunchDims {
        LaunchDims {
            grid: threads.max(1).div_ceil(block.max(1)),
            block: block.max(1),
        }
    }
}

impl Line {
    /// True for the lines that open a loop (closed by an `EndLoop`).
    pub fn opens_loop(&self) -> bool {
        matches!(self, Line::Loop(_) | Line::StridedLoop { .. })
    }

    /// The values the line reads.
    pub fn reads(&self) -> Vec<&Value> {
        match self {
            Line::Assign { operands, .. } => operands.iter().collect(),
            Line::Accumulate { value, .. } | Line::If(value) => vec![value],
            Line::LocalLoad { index, .. }
            | Line::LocalVectorLoad { index, .. }
            | Line::VectorLoad { index, .. } => vec![index],
            Line::LocalStore { index, value, .. } => vec![index, value],
            Line::VectorStore { index, values, .. } => {
                std::iter::once(index).chain(values).collect()
            }
            Line::Store {
                index, gate, value, ..
            } => [Some(index), gate.as_ref(), Some(value)]
                .into_iter()
                .flatten()
                .collect(),
            Line::Loop(_)
            | Line::EndLoop
            | Line::DefineAcc { .. }
            | Line::StridedLoop { .. }
            | Line::DefineLocal { .. }
            | Line::EndIf
            | Line::Barrier => Vec::new(),
        }
    }
}

/// The threads of a block that share one output (GROUP ranges, mapped by `codegen::gpu`): each
/// block computes one value of the grid indices, its threads run one value each of the GROUP
/// loops, and `codegen::group` combines their parts.
#[derive(Clone, Debug)]
pub struct Group {
    /// The `Group` range: the thread's position in the block (`threadIdx.x`).
    pub lane: UOp,
    /// Threads per block.
    pub size: usize,
}

/// The threads of a block that compute a tile of outputs together (`codegen::gpu` maps the
/// LOCAL ranges to the innermost grid indices, so the threads of one block are the values of
/// those ranges): `codegen::stage` has them copy the tile's operands into shared memory.
#[derive(Clone, Debug)]
pub struct LocalTile {
    /// A `Group` range: the thread's position in its block (`threadIdx.x`).
    pub lane: UOp,
    /// Threads per block: the product of the LOCAL ranges' sizes, [`MAX_BLOCK_THREADS`].
    pub size: usize,
}

/// A kernel lowered for a GPU (`codegen::gpu`): what one thread runs and how the grid indexes it.
#[derive(Clone, Debug)]
pub struct GpuKernel {
    /// The function's name.
    pub name: String,
    /// The grid indices, outermost first.
    pub specials: Vec<Special>,
    /// How many threads compute outputs (the product of the special sizes; 1 without any);
    /// with a [`Group`], how many blocks do.
    pub threads: usize,
    /// The threads of a block that split the work of one output, if any.
    pub group: Option<Group>,
    /// The threads of a block that compute a tile of outputs together, if any.
    pub local: Option<LocalTile>,
    /// The statements of one thread: the program with the mapped loops removed.
    pub body: Program,
    /// The buffer arguments, by slot.
    pub args: Vec<KernelArg>,
}

impl GpuKernel {
    /// The grid and block sizes to launch this kernel with.
    pub fn launch_dims(&self) -> LaunchDims {
        match &self.group {
            Some(group) => LaunchDims {
                grid: self.threads,
                block: group.size,
            },
            None => match &self.local {
                Some(tile) => LaunchDims {
                    grid: self.threads / tile.size,
                    block: tile.size,
                },
                None => LaunchDims::for_threads(self.threads),
            },
        }
    }

    /// Every thread of the launch: its blocks times their size.
    pub fn launch_threads(&self) -> usize {
        let dims = self.launch_dims();
        dims.grid * dims.block
    }
}
