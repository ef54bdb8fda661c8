//! Group reductions on the GPU: when a kernel has few outputs and long loops (a sum of 65536
//! elements, softmax over rows of 4096), one thread per output leaves the GPU idle, so each
//! output gets a block of [`GROUP_SIZE`] threads that split its loops.
//!
//! The kernel's top-level loops (those of one output's thread, after `codegen::gpu` mapped the
//! output loops to the grid) become strided loops: the thread at position `lane` of the block
//! runs the values `lane, lane + GROUP_SIZE, ...`. An accumulator a loop folds into but that
//! is declared before it then holds only the thread's part, so after the loop every thread
//! writes its part to shared memory (DEFINE_LOCAL), waits at a barrier, and the block folds
//! the parts pairwise in a tree (log2 of the block size steps, a barrier after each) into a
//! new accumulator that the rest of the kernel reads. Every thread ends with the same total,
//! so the statements after a loop (the next loop of a softmax, the final store) see the whole
//! result; a store outside any loop is made by every thread of the block, with the same value.
//!
//! A loop that reads an accumulator it is still folding into (a running sum) depends on the
//! order of its iterations, so a kernel with one is left as it was. A top-level loop shorter
//! than the block that holds one long loop (a sum longer than `blocked_sum::BLOCK` terms,
//! nested by that pass into an outer loop over blocks) has that inner loop strided instead,
//! when the block's partial only folds into the total: every lane stays busy.

use super::fresh::Fresh;
use super::program::{GpuKernel, Group, Line, MAX_BLOCK_THREADS, Value};
use crate::uop::{AxisType, Op, ReduceOp, UOp};
use std::collections::HashSet;

/// Threads per block of a grouped kernel (the launch's usual block size, so the runtime's
/// `LaunchDims::for_threads` of all the launch's threads gives one block per output).
pub const GROUP_SIZE: usize = MAX_BLOCK_THREADS;

/// The shortest loop worth splitting across a block.
pub const GROUP_MIN_LOOP: usize = 256;

/// The most outputs a kernel may have to be grouped (beyond, one thread per output already
/// fills the GPU).
pub const GROUP_MAX_OUTPUTS: usize = 4096;

/// `kernel` with its loops split across blocks of [`GROUP_SIZE`] threads when it has at most
/// [`GROUP_MAX_OUTPUTS`] outputs and a top-level loop of at least [`GROUP_MIN_LOOP`] values;
/// otherwise unchanged.
pub fn group_reductions(kernel: GpuKernel) -> GpuKernel {
    if kernel.group.is_some() || kernel.local.is_some() || kernel.threads > GROUP_MAX_OUTPUTS {
        return kernel;
    }
    let lines = &kernel.body.lines;
    let loops = top_level_loops(lines);
    let long = loops
        .iter()
        .any(|&(open, end)| loop_work(&lines[open..=end]) >= GROUP_MIN_LOOP);
    let splittable = loops
        .iter()
        .all(|&(open, end)| order_free(&lines[open..=end]));
    if !long || !splittable {
        return kernel;
    }
    let mut fresh = Fresh::after(&kernel);
    let lane = UOp::range(GROUP_SIZE, fresh.range(), AxisType::Group);
    let body = split_loops(lines, &loops, &lane, &mut fresh);
    GpuKernel {
        body: super::program::Program {
            lines: body,
            threads: kernel.body.threads,
        },
        group: Some(Group {
            lane,
            size: GROUP_SIZE,
        }),
        ..kernel
    }
}

/// The `(open, end)` positions of the loops not inside another loop.
fn top_level_loops(lines: &[Line]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut depth, mut open) = (0usize, 0usize);
    for (i, line) in lines.iter().enumerate() {
        if line.opens_loop() {
            if depth == 0 {
                open = i;
            }
            depth += 1;
        } else if matches!(line, Line::EndLoop) {
            depth -= 1;
            if depth == 0 {
                out.push((open, i));
            }
        }
    }
    out
}

/// The most iterations of the innermost body of the loop nest `lines` (a long sum that
/// `codegen::blocked_sum` nested counts all its terms).
fn loop_work(lines: &[Line]) -> usize {
    let (mut stack, mut most) = (vec![1usize], 0);
    for line in lines {
        match line {
            Line::Loop(r) => {
                let outer = *stack.last().expect("the outermost product");
                stack.push(outer.saturating_mul(r.range_size().unwrap_or(0)));
                most = most.max(*stack.last().expect("just pushed"));
            }
            Line::EndLoop => {
                stack.pop();
            }
            _ => {}
        }
    }
    most
}

/// True when the loop `lines` (header to `EndLoop`) gives the same result whatever the order
/// of its iterations: it reads no accumulator declared outside it (those it folds into are
/// read only after it closes), and it is a plain loop.
fn order_free(lines: &[Line]) -> bool {
    let inner: HashSet<usize> = lines
        .iter()
        .filter_map(|l| match l {
            Line::DefineAcc { acc, .. } => Some(*acc),
            _ => None,
        })
        .collect();
    let reads_outer = |v: &Value| matches!(v, Value::Acc(a) if !inner.contains(a));
    matches!(lines[0], Line::Loop(_))
        && lines.iter().all(|l| match l {
            Line::Accumulate { value, .. } | Line::If(value) => !reads_outer(value),
            Line::Assign { operands, .. } => !operands.iter().any(reads_outer),
            Line::Store {
                index, gate, value, ..
            } => ![Some(index), gate.as_ref(), Some(value)]
                .into_iter()
                .flatten()
                .any(reads_outer),
            _ => true,
        })
}

/// The lines with each top-level loop strided over the block's lanes and followed by the
/// combine of the accumulators it folds into; later reads of those read the combined ones.
fn split_loops(
    lines: &[Line],
    loops: &[(usize, usize)],
    lane: &UOp,
    fresh: &mut Fresh,
) -> Vec<Line> {
    let mut out = Vec::with_capacity(lines.len());
    let mut renamed: Vec<(usize, usize)> = Vec::new();
    let mut next = 0;
    for &(open, end) in loops {
        out.extend(lines[next..open].iter().map(|l| rename(l, &renamed)));
        let at = loop_to_stride(lines, open, end);
        out.extend(lines[open..at].iter().map(|l| rename(l, &renamed)));
        let Line::Loop(range) = &lines[at] else {
            unreachable!("order_free admits plain loops only")
        };
        out.push(Line::StridedLoop {
            range: range.clone(),
            lane: lane.clone(),
            lanes: GROUP_SIZE,
        });
        out.extend(lines[at + 1..=end].iter().map(|l| rename(l, &renamed)));
        for (acc, op, reduce) in outer_accumulators(&lines[open..=end]) {
            let combined = combine(&mut out, acc, op, &reduce, lane, fresh);
            renamed.push((acc, combined));
        }
        next = end + 1;
    }
    out.extend(lines[next..].iter().map(|l| rename(l, &renamed)));
    out
}

/// The position of the loop of the nest `lines[open..=end]` whose values the block's lanes
/// split: the top-level loop, unless it holds one loop of at least a block's values (a sum
/// that `blocked_sum` nested: an outer loop over blocks of terms) whose partial results only
/// fold into accumulators declared before the nest, by the op that made them; then that inner
/// loop, and so on inwards. Striding the innermost such loop keeps every lane busy (all 128
/// where the 16 blocks of a 65536-term sum kept 16) and makes the lanes of a warp read
/// neighbouring terms (where striding the loop over blocks gave each lane a contiguous run of
/// its own); each lane's partial then holds its part of the block, which folds into its part
/// of the total like any other, and the outer loops run whole in every thread.
fn loop_to_stride(lines: &[Line], open: usize, end: usize) -> usize {
    let inner = top_level_loops(&lines[open + 1..end]);
    let [(inner_open, inner_end)] = inner.as_slice() else {
        return open;
    };
    let (inner_open, inner_end) = (open + 1 + inner_open, open + 1 + inner_end);
    let inner_long = match &lines[inner_open] {
        Line::Loop(r) => r.range_size().is_some_and(|n| n >= GROUP_SIZE),
        _ => false,
    };
    let splittable = inner_long
        && order_free(&lines[inner_open..=inner_end])
        && partials_only_fold_outward(lines, open, (inner_open, inner_end), end);
    match splittable {
        true => loop_to_stride(lines, inner_open, inner_end),
        false => open,
    }
}

/// True when the accumulators that the inner loop `inner` folds into and that are declared in
/// the nest `lines[open..=end]` (its partials) are read after it only by a fold into an
/// accumulator declared before the nest, by the same op.
fn partials_only_fold_outward(
    lines: &[Line],
    open: usize,
    inner: (usize, usize),
    end: usize,
) -> bool {
    let declared_in_nest: HashSet<usize> = lines[open..=end]
        .iter()
        .filter_map(|l| match l {
            Line::DefineAcc { acc, .. } => Some(*acc),
            _ => None,
        })
        .collect();
    let partials: Vec<(usize, ReduceOp)> = outer_accumulators(&lines[inner.0..=inner.1])
        .into_iter()
        .filter(|(acc, ..)| declared_in_nest.contains(acc))
        .map(|(acc, op, _)| (acc, op))
        .collect();
    let partial_op = |v: &Value| match v {
        Value::Acc(a) => partials.iter().find(|(p, _)| p == a).map(|&(_, op)| op),
        _ => None,
    };
    lines[inner.1 + 1..end].iter().all(|l| match l {
        Line::Accumulate { acc, op, value, .. } => match partial_op(value) {
            Some(made_by) => made_by == *op && !declared_in_nest.contains(acc),
            None => true,
        },
        Line::If(value) => partial_op(value).is_none(),
        Line::Assign { operands, .. } => !operands.iter().any(|v| partial_op(v).is_some()),
        Line::Store {
            index, gate, value, ..
        } => ![Some(index), gate.as_ref(), Some(value)]
            .into_iter()
            .flatten()
            .any(|v| partial_op(v).is_some()),
        _ => true,
    })
}

/// The accumulators the loop folds into that are declared before it, in first-use order.
fn outer_accumulators(lines: &[Line]) -> Vec<(usize, ReduceOp, UOp)> {
    let mut inner = HashSet::new();
    let mut out: Vec<(usize, ReduceOp, UOp)> = Vec::new();
    for line in lines {
        match line {
            Line::DefineAcc { acc, .. } => {
                inner.insert(*acc);
            }
            Line::Accumulate {
                acc, op, reduce, ..
            } if !inner.contains(acc) && !out.iter().any(|(a, ..)| a == acc) => {
                out.push((*acc, *op, reduce.clone()));
            }
            _ => {}
        }
    }
    out
}

/// Appends the combine of accumulator `acc` over the block; returns the accumulator that holds
/// the total. Each thread stores its part in shared memory; then, in log2([`GROUP_SIZE`])
/// steps between barriers, the lower half of the active threads folds the upper half's parts
/// into its own (a tree: 8 steps of one fold for a block of 256, where every thread folding
/// all 256 parts took 256 shared-memory reads per thread); every thread then reads the total
/// from element 0.
fn combine(
    out: &mut Vec<Line>,
    acc: usize,
    op: ReduceOp,
    reduce: &UOp,
    lane: &UOp,
    fresh: &mut Fresh,
) -> usize {
    let local = fresh.local;
    fresh.local += 1;
    let dtype = reduce.dtype();
    out.extend([
        Line::DefineLocal {
            local,
            dtype,
            size: GROUP_SIZE,
        },
        Line::LocalStore {
            local,
            index: Value::Range(lane.clone()),
            value: Value::Acc(acc),
        },
        Line::Barrier,
    ]);
    let mut half = GROUP_SIZE / 2;
    while half >= 1 {
        fold_upper_half(out, local, half, op, reduce, lane, fresh);
        out.push(Line::Barrier);
        half /= 2;
    }
    let (total, temp) = (fresh.acc, fresh.temp);
    (fresh.acc, fresh.temp) = (total + 1, temp + 1);
    out.extend([
        Line::LocalLoad {
            temp,
            local,
            dtype,
            index: Value::Const(UOp::index(0)),
        },
        Line::DefineAcc {
            acc: total,
            reduce: reduce.clone(),
        },
        Line::Accumulate {
            acc: total,
            op,
            reduce: reduce.clone(),
            value: Value::Temp(temp),
        },
    ]);
    total
}

const _: () = assert!(GROUP_SIZE.is_power_of_two(), "the combine halves the block");

/// One step of the tree: `local[lane] = local[lane] op local[lane + half]` for the threads
/// below `half` (the others only wait at the barrier after it).
fn fold_upper_half(
    out: &mut Vec<Line>,
    local: usize,
    half: usize,
    op: ReduceOp,
    reduce: &UOp,
    lane: &UOp,
    fresh: &mut Fresh,
) {
    let dtype = reduce.dtype();
    let half_const = UOp::index(half as i64);
    let [active, partner, mine, theirs] = std::array::from_fn(|i| fresh.temp + i);
    fresh.temp += 4;
    let folded = fresh.acc;
    fresh.acc += 1;
    let lane_and_half = vec![Value::Range(lane.clone()), Value::Const(half_const.clone())];
    out.extend([
        Line::Assign {
            temp: active,
            node: UOp::alu(Op::CmpLt, vec![lane.clone(), half_const.clone()]),
            operands: lane_and_half.clone(),
        },
        Line::If(Value::Temp(active)),
        Line::Assign {
            temp: partner,
            node: UOp::alu(Op::Add, vec![lane.clone(), half_const]),
            operands: lane_and_half,
        },
        Line::LocalLoad {
            temp: mine,
            local,
            dtype,
            index: Value::Range(lane.clone()),
        },
        Line::LocalLoad {
            temp: theirs,
            local,
            dtype,
            index: Value::Temp(partner),
        },
        Line::DefineAcc {
            acc: folded,
            reduce: reduce.clone(),
        },
        Line::Accumulate {
            acc: folded,
            op,
            reduce: reduce.clone(),
            value: Value::Temp(mine),
        },
        Line::Accumulate {
            acc: folded,
            op,
            reduce: reduce.clone(),
            value: Value::Temp(theirs),
        },
        Line::LocalStore {
            local,
            index: Value::Range(lane.clone()),
            value: Value::Acc(folded),
        },
        Line::EndIf,
    ]);
}

/// `line` reading the combined accumulators in place of the threads' parts.
fn rename(line: &Line, renamed: &[(usize, usize)]) -> Line {
    let swap = |v: &Value| match v {
        Value::Acc(a) => match renamed.iter().rev().find(|(from, _)| from == a) {
            Some(&(_, to)) => Value::Acc(to),
            None => v.clone(),
        },
        _ => v.clone(),
    };
    match line {
        Line::Assign {
            temp,
            node,
            operands,
        } => Line::Assign {
            temp: *temp,
            node: node.clone(),
            operands: operands.iter().map(swap).collect(),
        },
        Line::Accumulate {
            acc,
            op,
            reduce,
            value,
        } => Line::Accumulate {
            acc: *acc,
            op: *op,
            reduce: reduce.clone(),
            value: swap(value),
        },
        Line::Store {
            store,
            index,
            gate,
            value,
        } => Line::Store {
            store: store.clone(),
            index: swap(index),
            gate: gate.as_ref().map(swap),
            value: swap(value),
        },
        Line::If(cond) => Line::If(swap(cond)),
        other => other.clone(),
    }
}
