//! The scheduler (rangeify): split a tensor graph into kernels and describe each kernel as a
//! scalar AST over loop ranges (the contract is `uop::spec`'s kernel rules and the
//! [`ScheduleItem`] docs below).
//!
//! # Pipeline
//!
//! 1. **Callify** ([`callify`]): inline `GetTuple(Function(..))` by substituting each `Param`
//!    with its argument, drop `Detach` and `ContiguousBackward`.
//! 2. **Split reduce** ([`split_reduce`]): a reduction of at least 2^15 elements per output
//!    into few outputs becomes partial results over contiguous runs (stored: a `Contiguous`)
//!    and their reduction, so its first kernel has outputs to spread over cores or blocks.
//! 3. **Realize** ([`realize`]): the outputs (unless already a buffer), `Contiguous`, `Copy`,
//!    `Store` and `Vmapout` get a buffer each (a `Store` is not lowered yet and panics);
//!    `Buffer`s are realized already. A reduce or an elementwise value is realized when the
//!    rule table of [`realize`] says that recomputing it inline (inside loops it does not
//!    depend on, through a window, or at several indices) repeats more work than a buffer
//!    round trip; movement ops are recomputed, never buffered by choice. The rules are applied
//!    where the buffer would be created, so there is no separate pass that removes buffers
//!    afterwards; [`Schedule::decisions`] records which rule decided each node.
//!    A chain of fused values is cut where it would exceed [`kernel_size::CHAIN_BUDGET`]
//!    lowered ops along one path ([`kernel_size`]): the value there gets a buffer, so no
//!    kernel's code takes the C compiler more than about a second.
//! 4. **Range assignment** ([`lower`]): each realized node gets fresh `Loop` ranges for its
//!    shape; walking inward, every op maps the index it is asked for to its operands' indices
//!    (movement ops become index arithmetic, reduces open fresh `Reduce` ranges, pads add
//!    validity gates), and a realized operand or a `Buffer` becomes a `Load` through
//!    `Address(DefineGlobal(slot), flat)`. The index arithmetic is folded as it is built
//!    ([`index`]) and every finished AST goes through the kernel rule table ([`simplify`]:
//!    the `symbolic` rules plus exact merges of power-of-two scalings; float sums are never
//!    reassociated).
//! 5. **Range merging** ([`merge`]): in each final kernel, two nested ranges that every index
//!    walks as one flat range (`B·a + b`) become one range, so a convolution's `24 x 24`
//!    positions are one axis of 576 and its `(c, ky, kx)` reduce one of 288.
//! 6. **Kernels**: one [`ScheduleItem`] per realized node, `Sink(Store(Address(DefineGlobal 0,
//!    flat), value))`, ordered so producers run before consumers. Range ids count from 0 in the
//!    order axes appear (output loops first) and slots are numbered output first, then inputs in
//!    the order the lowering first reads them; both depend only on the graph's structure, so
//!    equal computations give equal ASTs.
//!
//! Realization is decided while kernels are built (a reduce learns how it is consumed only
//! then), so the whole build repeats until a round changes nothing: the last round sees
//! the final set, and no kernel computes inline what another kernel stores. A decision is
//! taken back when a value it was made inside (a reduce lowered inline, or its kernel's
//! root) changes between buffer and inline: a product realized because the fused reduce
//! around it sat under a window is decided again once that reduce has a kernel of its own.
//!
//! # Vmap scopes (`Vmapin` / `Vmapout`, seeds/vmap-vmapin-vmapout.md §4–5)
//!
//! - `Vmapout` is always realized. Lowering `Vmapout(x, vargs)` at `idx` *binds* each `Range`
//!   varg to its axis of `idx` (in the kernel builder's `bindings`) and asks `x` for the other
//!   axes; lowering `Vmapin(x, vargs)` at `idx` asks `x` for `idx` with each `Range` varg
//!   replaced by what it is bound to. The range is *ambient*: inner nodes never carry it in
//!   their index, and it reaches the AST only through the loads under `Vmapin`. Binding (rather
//!   than looping over the user's `Range` UOp itself) keeps kernel range ids canonical.
//! - Intermediate realization inside a scope (§5): the forward `vmap_map` pass
//!   ([`lower::IndexingContext::track_ambient_ranges`], from each `Vmapin` to its transitive
//!   users, a `Vmapout` removing its own ranges) records each node's ambient ranges. A realized
//!   node with ambient ranges gets a buffer with their sizes prepended, its kernel loops over
//!   fresh ranges bound to them (outermost), and a load of it prepends what those ranges are
//!   bound to in the consuming kernel. Nodes that do not depend on a `Vmapin` (index buffers,
//!   constants) are not batched. Nested scopes compose: an inner `Vmapout` is realized with the
//!   outer scope's batch axes.
//! - The redundancy test of the reduce cost model counts a reduce's ambient ranges as used, so
//!   a per-batch reduce stays fused into the `Vmapout` kernel.
//!
//! # Ranges in ordinary ops (vmap by pad+reduce, seed §7)
//!
//! - A `Pad`/`Shrink` whose begins or ends are index expressions of a `Range`
//!   (`shape::operand_exprs`) lowers like any window, with the range read as what it is bound
//!   to; a `Range` met directly reads its binding too.
//! - `Reduce(x, ranges...)` binds each range to a fresh `Reduce` loop while `x` is lowered.
//! - Ambient ranges are the free ranges of `uop::scope`, so a node realized under a sliding
//!   range gets a batched buffer exactly as one inside a `Vmapout` does, and lowerings are
//!   memoized per binding of the ranges a node varies with.
//! - The kernel rules ([`simplify`], [`collapse`]) turn `Σ_r where(r == g, v(r), 0)` into
//!   `v(g)`: summing a sample placed at offset `r` over `r` reads one sample per position.

pub mod callify;
pub mod collapse;
pub mod gated_offset;
pub mod index;
pub mod kernel_size;
pub mod lower;
pub mod merge;
pub mod placeholders;
pub mod realize;
pub mod simplify;
pub mod split_reduce;
pub(crate) mod stack;

#[cfg(test)]
mod differential;
#[cfg(test)]
pub(crate) mod exec;
#[cfg(test)]
mod realize_tests;
#[cfg(test)]
mod tests;

use crate::uop::{Arg, UOp};
use lower::{IndexingContext, build_kernel};
use realize::{Rule, as_contiguous_buffer, is_forced};
use std::collections::{HashMap, HashSet};

/// One kernel: its AST and the buffers bound to its `DefineGlobal` slots.
#[derive(Clone, Debug)]
pub struct ScheduleItem {
    /// `Sink(Store(Address(DefineGlobal(0), flat), value))` over `Range`s: loads are
    /// `Load(Address(DefineGlobal(slot), flat[, gate]))`, reductions `Reduce(value, ranges...)`.
    pub ast: UOp,
    /// `buffers[slot]` is the `Buffer` UOp of slot `slot`: the output first, then the inputs.
    pub buffers: Vec<UOp>,
}

impl ScheduleItem {
    /// The element count of each slot's buffer, in slot order: what lowering a kernel takes.
    pub fn buffer_sizes(&self) -> Vec<usize> {
        self.buffers
            .iter()
            .map(|b| match b.arg() {
                Arg::Buffer(arg) => arg.size,
                other => panic!("schedule: kernel slot bound to {other:?}, not a buffer"),
            })
            .collect()
    }
}

/// The kernels that compute a set of outputs, in an order that runs producers first.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The kernels, producers before consumers.
    pub items: Vec<ScheduleItem>,
    /// For each requested output: the `Buffer` holding it, reshaped to the output's shape.
    pub outputs: Vec<UOp>,
    /// Why each realized node got a buffer and why each node the cost model was asked about
    /// stayed fused (the rule of [`realize::RULES`] and its facts); `DEBUG=3` prints them.
    pub decisions: Vec<realize::Decision>,
}

/// Splits the graphs of `outputs` into kernels (see the module docs for the rules).
#[track_caller]
pub fn create_schedule(outputs: &[UOp]) -> Schedule {
    with_deep_stack(|| schedule_graph(outputs, true))
}

/// [`create_schedule`] without [`split_reduce`]: for tests of the kernels a split replaces
/// (a long reduction in one kernel).
#[cfg(test)]
pub(crate) fn create_schedule_unsplit(outputs: &[UOp]) -> Schedule {
    with_deep_stack(|| schedule_graph(outputs, false))
}

/// Runs `f` (which may recurse once per op of the graph: the lowering) on a helper thread
/// with a stack segment of its own, which [`stack::grow`] extends as the recursion needs,
/// re-raising its panic (with its message) on the caller's thread.
pub(crate) fn with_deep_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    stack::on_new_segment(f)
}

fn schedule_graph(outputs: &[UOp], split_reduces: bool) -> Schedule {
    let graph = callify::callify(outputs);
    let graph = match split_reduces {
        true => split_reduce::split_reduces(&graph),
        false => graph,
    };
    let mut ctx = IndexingContext::default();
    let toposort = UOp::sink(graph.clone()).toposort();
    ctx.track_ambient_ranges(&toposort);
    for out in &graph {
        if out.shape().is_none() {
            panic!("create_schedule: output {} has no shape", out.op());
        }
        if as_contiguous_buffer(out).is_none() {
            ctx.realize(out, Rule::Output);
        }
    }
    for node in &toposort {
        if is_forced(node) {
            ctx.realize(node, Rule::Forced);
        }
    }
    let has_buffer = |u: &UOp| ctx.realized.contains_key(u);
    for node in kernel_size::chain_cuts(&toposort, &has_buffer, kernel_size::CHAIN_BUDGET) {
        ctx.realize(&node, Rule::LongChain);
    }
    let roots: Vec<UOp> = graph
        .iter()
        .filter(|o| ctx.realized.contains_key(*o))
        .cloned()
        .collect();
    let kernels = loop {
        ctx.start_round();
        let kernels = build_reachable(&mut ctx, &roots);
        if !ctx.changed() {
            break kernels;
        }
    };
    // Ranges are merged once the kernels are final (the rounds rebuild every kernel).
    let items = producers_first(&ctx, &kernels, &roots)
        .into_iter()
        .map(|item| ScheduleItem {
            ast: merge::merge_ranges(&item.ast),
            ..item
        })
        .collect();
    let outputs = graph
        .iter()
        .map(|o| match ctx.realized.get(o) {
            Some(buffer) => buffer.reshape(&o.shape_vec()),
            None => o.clone(),
        })
        .collect();
    Schedule {
        items,
        outputs,
        decisions: ctx.decisions(),
    }
}

/// Builds the kernel of every realized node the roots read, directly or through other kernels.
fn build_reachable(ctx: &mut IndexingContext, roots: &[UOp]) -> HashMap<UOp, ScheduleItem> {
    let mut built: HashMap<UOp, ScheduleItem> = HashMap::new();
    let mut work: Vec<UOp> = roots.iter().rev().cloned().collect();
    while let Some(node) = work.pop() {
        // A node can lose its buffer in the round that queued its kernel (its decision was
        // taken back); the round is then repeated anyway.
        if built.contains_key(&node) || !ctx.realized.contains_key(&node) {
            continue;
        }
        let item = build_kernel(ctx, built.len(), &node);
        for buffer in item.buffers[1..].iter().rev() {
            if let Some(producer) = ctx.producer.get(buffer) {
                work.push(producer.clone());
            }
        }
        built.insert(node, item);
    }
    built
}

/// The kernels in dependency order: a depth-first walk from the roots, emitting each kernel
/// after the kernels that fill the buffers it reads (an explicit stack: a chain of kernels
/// may be as long as the graph).
fn producers_first(
    ctx: &IndexingContext,
    kernels: &HashMap<UOp, ScheduleItem>,
    roots: &[UOp],
) -> Vec<ScheduleItem> {
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    let mut stack: Vec<(UOp, bool)> = roots.iter().rev().map(|r| (r.clone(), false)).collect();
    while let Some((node, producers_done)) = stack.pop() {
        if producers_done {
            order.push(kernels[&node].clone());
            continue;
        }
        if !seen.insert(node.clone()) {
            continue;
        }
        stack.push((node.clone(), true));
        for buffer in kernels[&node].buffers[1..].iter().rev() {
            if let Some(producer) = ctx.producer.get(buffer)
                && !seen.contains(producer)
            {
                stack.push((producer.clone(), false));
            }
        }
    }
    order
}
