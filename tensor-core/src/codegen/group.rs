//! Group reductions on the GPU (tinygrad's GROUP): when a kernel has few outputs and long loops
//! (a sum of 65536 elements, softmax over rows of 4096), one thread per output leaves the GPU
//! idle, so the threads of a block share one output, each running part of its loops.
//!
//! Two halves, around the lowering:
//!
//! - [`group_opts`] chooses the GROUP OptOps (`codegen::opt`) from the kernel linearized for
//!   the GPU without them: with at most [`GROUP_MAX_OUTPUTS`] outputs (or more, where the
//!   split walks contiguous memory) and a loop nest of at least [`GROUP_MIN_LOOP`] iterations, every top-level loop nest of a thread (softmax has
//!   three: its maximum, its sum and its stores) splits one of its ranges across the block's
//!   lanes. The block is as wide as possible, at most [`GROUP_SIZE`] and at least a warp.
//! - [`combine_partials`] runs after `codegen::gpu` ran each GROUP loop as one value per lane:
//!   an accumulator that a GROUP loop folds into but that is declared outside it holds only its
//!   lane's part. Where the accumulator is complete (after the loop nest that folds into it),
//!   every lane writes its part to shared memory (DEFINE_LOCAL), waits at a barrier, and the
//!   block folds the parts pairwise in a tree (log2 of the block's size steps, a barrier after
//!   each) into a new accumulator that the rest of the kernel reads. Every lane ends with the
//!   total, so the statements after it (the next loop of a softmax, the final store) see the
//!   whole result; a store outside any loop is made by every lane, with the same value. A part
//!   that only folds into an outer accumulator by the same op (the blocks of a long sum, see
//!   `codegen::blocked_sum`) is not combined: the outer accumulator becomes the lane's part of
//!   the total and is combined once, after its own loops.

use super::fresh::Fresh;
use super::opt::Opt;
use super::program::{GpuKernel, Group, Line, MAX_BLOCK_THREADS, Program, Value};
use crate::uop::affine::Affine;
use crate::uop::{AxisType, Op, ReduceOp, UOp};
use std::collections::{HashMap, HashSet};

/// The most threads of a block that share one output (the launch's usual block size).
pub const GROUP_SIZE: usize = MAX_BLOCK_THREADS;

/// The fewest threads of a block that share one output (a warp).
pub const GROUP_MIN_SIZE: usize = 32;

/// The shortest loop nest worth splitting across a block.
pub const GROUP_MIN_LOOP: usize = 256;

/// The most outputs a kernel may have to be grouped whatever its loads (beyond, one thread
/// per output already fills the GPU). A kernel with more is grouped only where the lanes of
/// a split read neighbouring elements (`walks_contiguously`): a thread per row of a tall
/// matrix reads its row alone, so a warp's loads are 16 KB apart (row sums of 16384 x 4096 on
/// an H100: 31% of the copy's bandwidth a thread per row, 98% grouped).
pub const GROUP_MAX_OUTPUTS: usize = 4096;

/// The GROUP splits of the kernel whose GPU lowering without them is `trial` (its output loops
/// mapped to the grid; no blocked sums): for the widest block of [`GROUP_MIN_SIZE`] to
/// [`GROUP_SIZE`] threads that splits a range of every long loop nest, one split per top-level
/// loop nest that has such a range ([`group_range`]; a short nest without one runs whole in
/// every lane). Empty when the kernel has more than [`GROUP_MAX_OUTPUTS`] outputs and a split
/// whose lanes would not read neighbouring elements, a block already (LOCAL), no nest of [`GROUP_MIN_LOOP`] iterations, or a loop whose result depends
/// on the order of its iterations.
pub fn group_opts(trial: &GpuKernel) -> Vec<Opt> {
    if trial.group.is_some() || trial.local.is_some() {
        return Vec::new();
    }
    let lines = &trial.body.lines;
    let nests = top_level_loops(lines);
    let long: Vec<bool> = nests
        .iter()
        .map(|&(open, end)| loop_work(&lines[open..=end]) >= GROUP_MIN_LOOP)
        .collect();
    let order_free = nests
        .iter()
        .all(|&(open, end)| order_free(&lines[open..=end]));
    if !long.contains(&true) || !order_free {
        return Vec::new();
    }
    let ranges_for = |lanes| -> Vec<Option<UOp>> {
        nests
            .iter()
            .map(|&(open, end)| group_range(lines, open, end, lanes))
            .collect()
    };
    let widest = (GROUP_MIN_SIZE..=GROUP_SIZE).rev().find_map(|lanes| {
        let ranges = ranges_for(lanes);
        let covers_long = ranges.iter().zip(&long).all(|(r, &l)| r.is_some() || !l);
        covers_long.then_some((lanes, ranges))
    });
    let Some((lanes, ranges)) = widest else {
        return Vec::new();
    };
    let many_outputs = trial.threads > GROUP_MAX_OUTPUTS;
    if many_outputs
        && !ranges
            .iter()
            .flatten()
            .all(|r| walks_contiguously(lines, r))
    {
        return Vec::new();
    }
    ranges
        .into_iter()
        .flatten()
        .map(|range| Opt::Split {
            axis: range.range_id(),
            factor: lanes,
            target: AxisType::Group,
            top: false,
        })
        .collect()
}

/// The range of the loop nest `lines[open..=end]` that a block of `lanes` threads splits: the
/// innermost loop of its chain of single nested loops whose size `lanes` divides (in a
/// row-major array the innermost loop walks neighbouring elements, so the lanes of a warp read
/// neighbours). Preferably where each lane's part of an inner loop's result only folds into an
/// outer accumulator by the same op, so the block combines once after the nest; otherwise
/// anywhere along the chain, the block then combining once per iteration of the loops around.
fn group_range(lines: &[Line], open: usize, end: usize, lanes: usize) -> Option<UOp> {
    chain_range(lines, open, end, lanes, true)
        .or_else(|| chain_range(lines, open, end, lanes, false))
}

/// [`group_range`] along the chain, with `folds_only`: only through inner loops whose parts
/// only fold outward.
fn chain_range(
    lines: &[Line],
    open: usize,
    end: usize,
    lanes: usize,
    folds_only: bool,
) -> Option<UOp> {
    let Line::Loop(range) = &lines[open] else {
        return None;
    };
    let inner = match top_level_loops(&lines[open + 1..end]).as_slice() {
        [(o, e)] => Some((open + 1 + o, open + 1 + e)),
        _ => None,
    };
    let deeper = inner
        .filter(|&(o, e)| {
            order_free(&lines[o..=e])
                && (!folds_only || partials_only_fold_outward(lines, open, (o, e), end))
        })
        .and_then(|(o, e)| chain_range(lines, o, e, lanes, folds_only));
    let splits = matches!(range.range_axis_type(), AxisType::Reduce | AxisType::Loop)
        && range.range_size().is_some_and(|n| n.is_multiple_of(lanes));
    deeper.or_else(|| splits.then(|| range.clone()))
}

/// True when every load of `lines` that varies with `range` steps one element per step of
/// it (its flat index is affine in the range with coefficient 1), so the lanes of a block
/// splitting it read neighbouring elements.
fn walks_contiguously(lines: &[Line], range: &UOp) -> bool {
    lines.iter().all(|line| match line {
        Line::Assign { node, .. } if node.op() == Op::Load => {
            let flat = &node.s(0).src()[1];
            match Affine::of(flat) {
                Some(form) => matches!(form.terms.get(&range.id()), None | Some(1)),
                None => false,
            }
        }
        _ => true,
    })
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

/// `kernel` with the lanes' parts of every accumulator its GROUP loops fold into combined over
/// the block where the accumulator is complete, and later reads reading the total (see the
/// module doc); unchanged without a [`Group`].
///
/// Panics where a combine would sit inside an `If` (its barriers would be reached by some
/// lanes only): the GROUP splits of such a kernel are a codegen bug.
pub fn combine_partials(kernel: GpuKernel) -> GpuKernel {
    let Some(group) = kernel.group.clone() else {
        return kernel;
    };
    let lines = &kernel.body.lines;
    let nesting = Nesting::of(lines);
    let accs = accumulators(lines);
    let combines = combine_points(lines, &nesting, &accs, &group.lane);
    let mut fresh = Fresh::after(&kernel);
    let mut out = Vec::with_capacity(lines.len());
    let mut renamed: Vec<(usize, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        out.push(rename(line, &renamed));
        for point in combines.iter().filter(|p| p.after == i) {
            let acc = &accs[&point.acc];
            let total = combine(&mut out, point.acc, acc, &group, &mut fresh);
            if point.in_loop {
                // The next iteration's parts must not overwrite the array before every lane
                // read this one's total.
                out.push(Line::Barrier);
            }
            renamed.push((point.acc, total));
        }
    }
    GpuKernel {
        body: Program {
            lines: out,
            threads: kernel.body.threads,
        },
        ..kernel
    }
}

/// Which constructs (loops and `If`s) enclose each line, and where each closes.
struct Nesting {
    /// `around[i]`: the positions of the lines that open the constructs around line `i`,
    /// outermost first (a closing line is still inside what it closes).
    around: Vec<Vec<usize>>,
    /// The closing line of the construct opened at each position.
    end_of: HashMap<usize, usize>,
}

impl Nesting {
    fn of(lines: &[Line]) -> Nesting {
        let (mut around, mut end_of) = (Vec::with_capacity(lines.len()), HashMap::new());
        let mut open: Vec<usize> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            around.push(open.clone());
            match line {
                l if l.opens_loop() || matches!(l, Line::If(_)) => open.push(i),
                Line::EndLoop | Line::EndIf => {
                    let opener = open.pop().expect("a closing line closes an open construct");
                    end_of.insert(opener, i);
                }
                _ => {}
            }
        }
        Nesting { around, end_of }
    }
}

/// One accumulator of a kernel: where it is declared, what it folds with, and where.
struct Accumulator {
    declared: usize,
    reduce: UOp,
    folds: Vec<usize>,
    reads: Vec<usize>,
}

fn accumulators(lines: &[Line]) -> HashMap<usize, Accumulator> {
    let mut accs: HashMap<usize, Accumulator> = HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::DefineAcc { acc, reduce } => {
                accs.insert(
                    *acc,
                    Accumulator {
                        declared: i,
                        reduce: reduce.clone(),
                        folds: Vec::new(),
                        reads: Vec::new(),
                    },
                );
            }
            Line::Accumulate { acc, .. } => {
                let known = accs.get_mut(acc).expect("an accumulator is declared first");
                known.folds.push(i);
            }
            _ => {}
        }
        for value in line.reads() {
            if let Value::Acc(a) = value {
                let known = accs.get_mut(a).expect("an accumulator is declared first");
                known.reads.push(i);
            }
        }
    }
    accs
}

/// Where a lane's part of an accumulator is combined: after line `after`.
struct CombinePoint {
    acc: usize,
    after: usize,
    /// Whether the combine runs inside a loop (once per iteration).
    in_loop: bool,
}

/// The combines of `lines`, in line order (then accumulator order): one per accumulator that
/// holds a lane's part and does not only fold into another such accumulator.
fn combine_points(
    lines: &[Line],
    nesting: &Nesting,
    accs: &HashMap<usize, Accumulator>,
    lane: &UOp,
) -> Vec<CombinePoint> {
    let (parts, folded_on) = lane_parts(lines, nesting, accs, lane);
    let mut points: Vec<CombinePoint> = parts
        .difference(&folded_on)
        .map(|&acc| combine_point(lines, nesting, acc, &accs[&acc]))
        .collect();
    points.sort_by_key(|p| (p.after, p.acc));
    points
}

/// The accumulators that hold a lane's part, and those of them whose part only folds into
/// another one's.
fn lane_parts(
    lines: &[Line],
    nesting: &Nesting,
    accs: &HashMap<usize, Accumulator>,
    lane: &UOp,
) -> (HashSet<usize>, HashSet<usize>) {
    let in_lane_loop = |at: usize, declared: usize| {
        nesting.around[at].iter().any(|&open| {
            open > declared
                && matches!(&lines[open], Line::StridedLoop { lane: l, .. } if l == lane)
        })
    };
    let mut parts: HashSet<usize> = accs
        .iter()
        .filter(|(_, a)| a.folds.iter().any(|&at| in_lane_loop(at, a.declared)))
        .map(|(&acc, _)| acc)
        .collect();
    let mut folded_on = HashSet::new();
    let mut ids: Vec<usize> = accs.keys().copied().collect();
    ids.sort_unstable();
    loop {
        let before = parts.len();
        for &outer in &ids {
            if parts.contains(&outer) || accs[&outer].folds.is_empty() {
                continue;
            }
            let sources: Option<Vec<usize>> = accs[&outer]
                .folds
                .iter()
                .map(|&at| only_folded_part(lines, accs, &parts, at, outer))
                .collect();
            if let Some(sources) = sources {
                parts.insert(outer);
                folded_on.extend(sources);
            }
        }
        if parts.len() == before {
            return (parts, folded_on);
        }
    }
}

/// The lane's part that the fold at line `at` into `outer` adds, if it is one whose every read
/// is a fold into `outer` by its own op.
fn only_folded_part(
    lines: &[Line],
    accs: &HashMap<usize, Accumulator>,
    parts: &HashSet<usize>,
    at: usize,
    outer: usize,
) -> Option<usize> {
    let folds_into_outer = |at: usize, part: usize| {
        matches!(&lines[at], Line::Accumulate { acc, op, value: Value::Acc(v), .. }
            if *acc == outer && *v == part && *op == accs[&part].reduce.reduce_op())
    };
    let Line::Accumulate {
        value: Value::Acc(part),
        ..
    } = &lines[at]
    else {
        return None;
    };
    let only = parts.contains(part) && accs[part].reads.iter().all(|&r| folds_into_outer(r, *part));
    only.then_some(*part)
}

/// After the loop nest that folds into `acc` (the outermost construct opened after its
/// declaration around its folds), or after its last fold where no construct is.
#[track_caller]
fn combine_point(lines: &[Line], nesting: &Nesting, acc: usize, a: &Accumulator) -> CombinePoint {
    let after = a
        .folds
        .iter()
        .map(|&at| {
            let nest = nesting.around[at].iter().find(|&&open| open > a.declared);
            nest.map_or(at, |open| nesting.end_of[open])
        })
        .max()
        .expect("a lane's part has folds");
    let enclosing = &nesting.around[a.declared];
    assert!(
        !enclosing
            .iter()
            .any(|&open| matches!(lines[open], Line::If(_))),
        "codegen: the combine of accumulator {acc} would sit inside an If, where the lanes of \
         a block may diverge at its barriers"
    );
    CombinePoint {
        acc,
        after,
        in_loop: !enclosing.is_empty(),
    }
}

/// Appends the combine of accumulator `acc` over the block; returns the accumulator that holds
/// the total. Each lane stores its part in shared memory; then, in ⌈log2⌉ of the block's size
/// steps between barriers, the lanes of the lower half of the parts still to fold fold the
/// upper half's into their own (a tree: 7 steps of one fold each for a block of 128, where
/// every lane folding all 128 parts took 128 shared-memory reads per lane); every lane then
/// reads the total from element 0.
fn combine(
    out: &mut Vec<Line>,
    acc: usize,
    part: &Accumulator,
    group: &Group,
    fresh: &mut Fresh,
) -> usize {
    let local = fresh.local;
    fresh.local += 1;
    let (reduce, lane) = (&part.reduce, &group.lane);
    let dtype = reduce.dtype();
    out.extend([
        Line::DefineLocal {
            local,
            dtype,
            size: group.size,
        },
        Line::LocalStore {
            local,
            index: Value::Range(lane.clone()),
            value: Value::Acc(acc),
        },
        Line::Barrier,
    ]);
    // The parts still to fold are `local[0..left]`; a step folds `local[half..left]` into
    // `local[0..left - half]`.
    let mut left = group.size;
    while left > 1 {
        let half = left.next_power_of_two() / 2;
        fold_upper_part(out, local, (half, left), part, lane, fresh);
        out.push(Line::Barrier);
        left = half;
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
            op: part.reduce.reduce_op(),
            reduce: reduce.clone(),
            value: Value::Temp(temp),
        },
    ]);
    total
}

/// One step of the tree: `local[lane] = local[lane] op local[lane + half]` for the lanes whose
/// partner `lane + half` is below `left` (the others only wait at the barrier after it).
fn fold_upper_part(
    out: &mut Vec<Line>,
    local: usize,
    (half, left): (usize, usize),
    part: &Accumulator,
    lane: &UOp,
    fresh: &mut Fresh,
) {
    let (reduce, op) = (&part.reduce, part.reduce.reduce_op());
    let dtype = reduce.dtype();
    let (half_const, left_const) = (UOp::index(half as i64), UOp::index(left as i64));
    let [partner, active, mine, theirs] = std::array::from_fn(|i| fresh.temp + i);
    fresh.temp += 4;
    let folded = fresh.acc;
    fresh.acc += 1;
    let partner_node = UOp::alu(Op::Add, vec![lane.clone(), half_const.clone()]);
    out.extend([
        Line::Assign {
            temp: partner,
            node: partner_node.clone(),
            operands: vec![Value::Range(lane.clone()), Value::Const(half_const)],
        },
        Line::Assign {
            temp: active,
            node: UOp::alu(Op::CmpLt, vec![partner_node, left_const.clone()]),
            operands: vec![Value::Temp(partner), Value::Const(left_const)],
        },
        Line::If(Value::Temp(active)),
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
