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
