//! Hand-coded optimizations: the OptOps a kernel gets without search.
//!
//! 1. UPCAST by 4 the innermost output axis that the stores walk contiguously, when 4 divides
//!    it: four neighbouring elements per iteration, which the C compiler turns into one SIMD
//!    operation. In a kernel with a reduce the axis is upcast by 16 when 16 divides it: sixteen
//!    accumulators in a row fill two 8-wide vector registers, and a value loaded once per
//!    reduce step (the row element of a matmul) is used sixteen times.
//! 2. In a kernel with a reduce, also UPCAST by 4 an output axis that some load does not
//!    depend on: each loaded value is then reused by four accumulators (a 4x16 register tile
//!    for a matmul whose output rows are a multiple of 16 long, 4x4 otherwise).
//! 3. THREAD the outermost output axis across the cores when the kernel does enough work to
//!    pay for waking them.

use super::expand::is_kernel_reduce;
use super::opt::{Opt, kernel_ranges};
use crate::uop::{AxisType, Op, Scalar, UOp, alu};
use std::collections::HashMap;

/// Below this many loop iterations (all ranges multiplied) a kernel runs on one core.
pub const MIN_WORK_PER_THREADED_KERNEL: usize = 1 << 16;

/// The width of an upcast.
pub const UPCAST_WIDTH: usize = 4;

/// The width of the contiguous upcast in a kernel with a reduce.
pub const REDUCE_UPCAST_WIDTH: usize = 16;

/// The opts for `ast` on a machine with `threads` cores.
pub fn hand_coded_optimizations(ast: &UOp, threads: usize) -> Vec<Opt> {
    let mut opts = Vec::new();
    let outputs: Vec<UOp> = kernel_ranges(ast)
        .into_iter()
        .filter(|r| r.range_axis_type() == AxisType::Loop)
        .collect();
    if let Some((axis, factor)) = upcastable_axis(ast, &outputs) {
        opts.push(Opt::Split {
            axis: axis.range_id(),
            factor,
            target: AxisType::Upcast,
            top: false,
        });
    }
    let upcast_first = opts.first().cloned();
    if let Some(axis) = reuse_axis(ast, &outputs, upcast_first.as_ref()) {
        opts.push(Opt::Split {
            axis: axis.range_id(),
            factor: UPCAST_WIDTH,
            target: AxisType::Upcast,
            top: false,
        });
    }
    // An upper bound: sibling loops (a kernel may hold dozens of fused reduces) multiply as
    // if nested, so the product saturates instead of overflowing.
    let work: usize = kernel_ranges(ast)
        .iter()
        .map(|r| r.range_size().unwrap_or(1))
        .fold(1, usize::saturating_mul);
    if threads > 1
        && work >= MIN_WORK_PER_THREADED_KERNEL
        && let Some(outer) = outputs.first()
    {
        let mut size = outer.range_size().unwrap_or(1);
        for opt in &opts {
            if let Opt::Split { axis, factor, .. } = opt
                && *axis == outer.range_id()
            {
                size /= factor;
            }
        }
        // Cores write disjoint chunks only if every store's address depends on the range.
        let addressed = ast
            .src()
            .iter()
            .all(|st| st.op() == Op::Store && st.s(0).toposort().contains(outer));
        if size >= 2 && addressed {
            opts.push(Opt::Split {
                axis: outer.range_id(),
                factor: threads,
                target: AxisType::Thread,
                top: true,
            });
        }
    }
    opts
}

/// The innermost output range of constant size divisible by the upcast width along which
/// every store's address advances by exactly one element, with the factor to upcast it by.
fn upcastable_axis(ast: &UOp, outputs: &[UOp]) -> Option<(UOp, usize)> {
    let stores: Vec<&UOp> = ast.src().iter().filter(|s| s.op() == Op::Store).collect();
    if stores.is_empty() {
        return None;
    }
    let widest = if ast.toposort().iter().any(is_kernel_reduce) {
        REDUCE_UPCAST_WIDTH
    } else {
        UPCAST_WIDTH
    };
    outputs.iter().rev().find_map(|r| {
        let size = r.range_size()?;
        let contiguous = stores
            .iter()
            .all(|s| index_stride(&s.s(0).src()[1], r) == Some(1));
        let factor = [widest, UPCAST_WIDTH]
            .into_iter()
            .find(|&w| size >= w && size % w == 0)?;
        contiguous.then(|| (r.clone(), factor))
    })
}

/// An output range (other than the one already upcast) of size divisible by the upcast width
/// that some load of a reduce kernel does not depend on, innermost first.
fn reuse_axis(ast: &UOp, outputs: &[UOp], upcast: Option<&Opt>) -> Option<UOp> {
    let nodes = ast.toposort();
    if !nodes.iter().any(is_kernel_reduce) {
        return None;
    }
    let loads: Vec<&UOp> = nodes.iter().filter(|u| u.op() == Op::Load).collect();
    let already =
        |r: &UOp| matches!(upcast, Some(Opt::Split { axis, .. }) if *axis == r.range_id());
    outputs.iter().rev().find_map(|r| {
        let size = r.range_size()?;
        let fits = size >= UPCAST_WIDTH && size % UPCAST_WIDTH == 0 && !already(r);
        let reused = loads.iter().any(|l| !l.toposort().contains(r));
        (fits && reused).then(|| r.clone())
    })
}

/// How far `idx` moves when `range` goes from 0 to 1 with every other range at 0.
fn index_stride(idx: &UOp, range: &UOp) -> Option<i64> {
    let at = |v: i64| eval_index(idx, &HashMap::from([(range.clone(), v)]));
    Some(at(1)? - at(0)?)
}

/// The value of an index expression with the given ranges (others 0), `None` when it reads
/// memory or reduces.
fn eval_index(idx: &UOp, env: &HashMap<UOp, i64>) -> Option<i64> {
    let mut values: HashMap<UOp, Scalar> = HashMap::new();
    for node in idx.toposort() {
        let value = match node.op() {
            Op::Range => Scalar::Int(env.get(&node).copied().unwrap_or(0)),
            Op::Const => node.const_value()?,
            Op::Load | Op::DefineGlobal | Op::Address => return None,
            _ if is_kernel_reduce(&node) => return None,
            op if op.is_elementwise() => {
                let args: Vec<Scalar> = node.src().iter().map(|s| values[s]).collect();
                alu::exec(op, node.dtype(), &args)
            }
            _ => return None,
        };
        values.insert(node, value);
    }
    Some(values[idx].as_i64())
}
