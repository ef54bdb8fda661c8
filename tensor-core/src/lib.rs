//! The compiler: the UOp IR, the rewrite engine, the lazy `Tensor` front end, function
//! transforms, the scheduler, codegen, renderers and the reference interpreter.
//!
//! The modules follow the lowering pipeline, and each imports only from those before it:
//! `uop` (the IR) → `rewrite` (the one mechanism every pass uses) → `symbolic` (index
//! arithmetic) → `tensor` (the front end) → `nn` (layers as compositions) → `transform` →
//! `optim` → `dp` (DP-SGD's clipped sums) → `schedule` → `codegen` → `render` → `interp`
//! (the oracle). `tests/module_order.rs` checks it.

#![warn(missing_docs)]

pub mod codegen;
pub mod dp;
pub mod interp;
pub mod nn;
pub mod optim;
pub mod render;
pub mod rewrite;
pub mod schedule;
pub mod symbolic;
pub mod tensor;
pub mod transform;
pub mod uop;

#[cfg(test)]
mod proptests;

pub use tensor::{
    ArangeArgs, At, Axes, Dims, Index, IntoAxes, IntoStarts, MatrixOrd, Operand, PadMode,
    RoundingMode, ScatterReduce, ShapeError, SplitSizes, Tensor,
};
pub use uop::{Arg, AxisType, DType, Device, Element, Op, ReduceOp, Scalar, Shape, UOp};
