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
//!    pay for waking them. In a matmul-shaped kernel (a reduce and exactly two output axes,
//!    the inner one upcast as the contiguous axis) the contiguous axis is spread over the
//!    cores instead when each core gets at least two of its tiles: the THREAD axis is the
//!    outer loop, so a column strip of the right operand (reduce length x 16 floats) stays in
//!    cache while every row tile of the left operand passes by, where rows outside would
//!    stream the whole right operand once per row tile (2x on a 1024² f32 matmul, measured).
//!
//! The C compiler keeps the 16 accumulators of a row as two 8-wide vector registers and fuses
//! the multiply-adds (`-mprefer-vector-width=256 -ffp-contract=fast`, see the runtime's
//! compiler flags); `tests/vectorized.rs` checks that in the object code.

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
        && let Some(axis) = thread_axis(ast, &outputs, &opts, threads)
    {
        opts.push(Opt::Split {
            axis,
            factor: threads,
            target: AxisType::Thread,
            top: true,
        });
    }
    opts
}

/// The id of the output range to spread over `threads` cores: the contiguous axis of a
/// matmul-shaped kernel when each core gets two of its tiles, else the outermost output axis;
/// `None` when no axis can be split (fewer than two iterations, or a store whose address does
/// not depend on it: cores would race).
fn thread_axis(ast: &UOp, outputs: &[UOp], opts: &[Opt], threads: usize) -> Option<usize> {
    let remaining = |r: &UOp| {
        let mut size = r.range_size().unwrap_or(1);
        for opt in opts {
            if let Opt::Split { axis, factor, .. } = opt
                && *axis == r.range_id()
            {
                size /= factor;
            }
        }
        size
    };
    let addressed = |r: &UOp| {
        ast.src()
            .iter()
            .all(|st| st.op() == Op::Store && st.s(0).toposort().contains(r))
    };
    let matmul_columns = match opts.first() {
        Some(Opt::Split { axis, factor, .. })
            if *factor == REDUCE_UPCAST_WIDTH && outputs.len() == 2 =>
        {
            outputs.iter().find(|r| r.range_id() == *axis)
        }
        _ => None,
    };
    let chosen = matmul_columns
        .filter(|r| remaining(r) >= 2 * threads)
        .or(outputs.first())?;
    (remaining(chosen) >= 2 && addressed(chosen)).then(|| chosen.range_id())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    /// The AST of the one kernel of `t`.
    fn kernel_ast(t: &Tensor) -> UOp {
        let schedule = create_schedule(&[t.uop()]);
        assert_eq!(schedule.items.len(), 1, "one kernel");
        schedule.items[0].ast.clone()
    }

    fn matrix(rows: usize, cols: usize) -> Tensor {
        Tensor::from_vec(vec![0.5f32; rows * cols], &[rows, cols])
    }

    /// The opts' (range size before the opts, factor, target) per opt, for readable asserts.
    fn described(ast: &UOp, opts: &[Opt]) -> Vec<(usize, usize, AxisType)> {
        let size = |id: usize| {
            kernel_ranges(ast)
                .iter()
                .find(|r| r.range_id() == id)
                .and_then(UOp::range_size)
                .unwrap_or(0)
        };
        opts.iter()
            .map(
                |Opt::Split {
                     axis,
                     factor,
                     target,
                     ..
                 }| (size(*axis), *factor, *target),
            )
            .collect()
    }

    #[test]
    fn a_matmul_spreads_its_column_tiles_over_the_cores() {
        let (a, b) = (matrix(256, 64), matrix(64, 512));
        let ast = kernel_ast(&a.matmul(&b));
        let opts = hand_coded_optimizations(&ast, 2);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (512, 16, AxisType::Upcast),
                (256, 4, AxisType::Upcast),
                (512, 2, AxisType::Thread),
            ]
        );
    }

    #[test]
    fn a_matmul_with_few_column_tiles_spreads_its_rows() {
        let (a, b) = (matrix(1024, 64), matrix(64, 32));
        let ast = kernel_ast(&a.matmul(&b));
        let opts = hand_coded_optimizations(&ast, 2);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (32, 16, AxisType::Upcast),
                (1024, 4, AxisType::Upcast),
                (1024, 2, AxisType::Thread),
            ]
        );
    }
}
