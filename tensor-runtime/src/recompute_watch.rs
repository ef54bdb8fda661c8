//! `DEBUG=1`'s warning for a loop whose graph keeps growing.
//!
//! A tensor updated in a loop without being realized (`p = &p - &(&g * lr)`) carries every
//! earlier step in its graph; a value read each step (the loss) then recomputes all earlier
//! steps again, so step `n` costs `n` steps. The watch sees exactly that: the *stale* nodes of
//! a realize, the lazy computations (not views) that at least two earlier realizes computed
//! already and did not keep, grow in number from step to step. A realize is *growing* when it
//! has more stale nodes than every earlier realize; after [`GROWING_REALIZES`] growing realizes,
//! each within [`RECORD_WINDOW`] realizes of the one before (a loop may read several values per
//! step), the watch prints one warning per process naming the fix. A loop that realizes its
//! parameters recomputes at most a fixed part of each step (the forward pass read for the loss
//! and inside the gradient, a lazy input made once before the loop): its stale nodes stop
//! growing after the first steps, so it does not warn.
//!
//! The watch runs only with `DEBUG` ≥ 1: it walks every realized graph and remembers its nodes
//! (weakly, at most [`MAX_WATCHED_NODES`]).

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use tensor_core::uop::WeakUOp;
use tensor_core::uop::fast_hash::FastMap;
use tensor_core::{Op, UOp};

/// Growing realizes that recompute earlier work before the warning is printed.
pub const GROWING_REALIZES: u32 = 4;

/// The most realizes between two growing ones for them to count as one loop.
pub const RECORD_WINDOW: u32 = 8;

/// The most nodes the watch remembers; past it, the dead are dropped, then all.
pub const MAX_WATCHED_NODES: usize = 1 << 16;

/// The beginning of the warning's text (tests look for it).
pub const WARNING: &str = "this realize recomputes";

/// What the watch knows: the lazy nodes of earlier realized graphs with how many realizes
/// computed each, the most stale nodes a realize had, the growing realizes counted and the
/// realizes since the last one, and whether it has warned.
#[derive(Default)]
struct Watch {
    seen: FastMap<usize, (WeakUOp, u32)>,
    most_stale: usize,
    records: u32,
    since_record: u32,
    warned: bool,
}

fn watch() -> MutexGuard<'static, Watch> {
    static WATCH: OnceLock<Mutex<Watch>> = OnceLock::new();
    WATCH
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The lazy computations of `graphs`: the nodes computed from buffers, less the buffers and
/// the movement ops (a view of a buffer, read again each step, is no work repeated).
fn lazy_nodes(graphs: &[UOp]) -> Vec<UOp> {
    let mut nodes: FastMap<usize, UOp> = FastMap::default();
    for graph in graphs {
        for node in graph.toposort_where(|n| n.reads_buffers() && n.op() != Op::Buffer) {
            if !crate::view_bases::is_movement(node.op()) {
                nodes.entry(node.id()).or_insert(node);
            }
        }
    }
    nodes.into_values().collect()
}

impl Watch {
    /// How many earlier realizes computed `node`.
    fn times_computed(&self, node: &UOp) -> u32 {
        match self.seen.get(&node.id()) {
            Some((seen, times)) if seen.upgrade().is_some_and(|s| &s == node) => *times,
            _ => 0,
        }
    }

    /// Counts a realize with `stale` stale nodes: growing when no earlier realize had as many;
    /// growing realizes too far apart start over.
    fn count(&mut self, stale: usize) {
        self.since_record += 1;
        if self.since_record > RECORD_WINDOW {
            self.records = 0;
        }
        if stale > self.most_stale {
            self.most_stale = stale;
            self.records += 1;
            self.since_record = 0;
        }
    }

    /// Remembers `nodes`, within [`MAX_WATCHED_NODES`].
    fn remember(&mut self, nodes: &[UOp]) {
        if self.seen.len() + nodes.len() > MAX_WATCHED_NODES {
            self.seen.retain(|_, (node, _)| node.is_alive());
        }
        if self.seen.len() + nodes.len() > MAX_WATCHED_NODES {
            self.seen.clear();
        }
        for node in nodes.iter().take(MAX_WATCHED_NODES) {
            let times = self.times_computed(node) + 1;
            self.seen.insert(node.id(), (node.downgrade(), times));
        }
    }
}

/// Looks at the graphs a realize is about to compute (after kept values were substituted) and
/// warns, once per process, when realizes keep growing and recomputing (see the module docs).
pub(crate) fn observe(graphs: &[UOp]) {
    let nodes = lazy_nodes(graphs);
    let mut watch = watch();
    let times: Vec<u32> = nodes.iter().map(|n| watch.times_computed(n)).collect();
    let recomputed = times.iter().filter(|&&t| t > 0).count();
    let stale = times.iter().filter(|&&t| t >= 2).count();
    watch.count(stale);
    watch.remember(&nodes);
    if watch.records >= GROWING_REALIZES && !watch.warned {
        watch.warned = true;
        crate::warn(&format!(
            "{WARNING} {recomputed} values that earlier realizes computed and did not keep, and \
             more of them each step ({} computed 3 times or more): a tensor \
             updated in a loop without being realized (`p = &p - &(&g * lr)`) carries every \
             earlier step in its graph, so each step recomputes all the steps before it. \
             Realize the updated tensors each step (`p.realize()`, or \
             `realize_tree(&params)` for a struct of parameters), or compile the step with \
             `jit!`.",
            stale
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a watch fed realizes with these numbers of stale nodes, in order, would warn.
    fn warns(stale: impl IntoIterator<Item = usize>) -> bool {
        let mut watch = Watch::default();
        stale.into_iter().any(|stale| {
            watch.count(stale);
            watch.records >= GROWING_REALIZES
        })
    }

    #[test]
    fn growing_recomputation_warns_and_steady_or_sparse_growth_does_not() {
        assert!(warns((0..8).map(|k| 5 * k)), "a growing loop");
        assert!(
            warns((0..8).flat_map(|k| [5 * k, 2, 3 * k])),
            "reading three values a step"
        );
        assert!(!warns((0..40).map(|k| [0, 4, 4, 9][k % 4])), "steady reads");
        let sparse = (0..60).map(|k| if k % 10 == 0 { k } else { 0 });
        assert!(!warns(sparse), "growing realizes too far apart");
    }
}
