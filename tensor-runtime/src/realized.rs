//! A realized value stays realized (tinygrad's semantics): once [`crate::realize::realize`]
//! has computed a lazy node, every later realize of a graph that contains that node reads the
//! result buffer instead of computing the node again.
//!
//! `realize` swaps a tensor's graph for its result buffer, so the tensor and its clones read the
//! buffer; but other graphs built from the tensor while it was lazy (a slice of it, a graph
//! built before the realize) still hold the lazy node. This table maps such a node to its
//! buffer. Hash-consing makes the node the identity of the computation: equal structure over
//! the same buffers is the same node, and buffers with other contents make other nodes.
//!
//! Lifetimes: an entry holds its node weakly and its buffer strongly. A result is only
//! remembered when its lazy node is still alive once the realize is over (something else holds
//! it, so it can be read again); the entry and its buffer are dropped at the first realize after
//! the node dies. At most [`MAX_KEPT_VALUES`] are kept, the least recently remembered or used
//! forgotten first (a forgotten value is recomputed when read, never wrong).

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use tensor_core::uop::fast_hash::FastMap;
use tensor_core::uop::{WeakUOp, rebuild};
use tensor_core::{Op, UOp};

/// The most realized values the table keeps at once.
pub const MAX_KEPT_VALUES: usize = 4096;

/// A remembered result: the lazy node (weak), its value (a buffer, possibly through reshapes)
/// and when it was last remembered or read.
struct Kept {
    node: WeakUOp,
    value: UOp,
    used: u64,
}

/// The table, keyed by node address (checked against the weak handle: an address is reused
/// only once its node has died).
#[derive(Default)]
struct Table {
    entries: FastMap<usize, Kept>,
    clock: u64,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

impl Table {
    /// Drops the entries whose node has died (and with them their buffers).
    fn sweep(&mut self) {
        self.entries.retain(|_, kept| kept.node.is_alive());
    }

    /// Forgets the least recently used entries beyond [`MAX_KEPT_VALUES`].
    fn cap(&mut self) {
        let excess = self.entries.len().saturating_sub(MAX_KEPT_VALUES);
        if excess == 0 {
            return;
        }
        let mut by_age: Vec<(u64, usize)> =
            self.entries.iter().map(|(&k, e)| (e.used, k)).collect();
        by_age.sort_unstable();
        for (_, key) in by_age.into_iter().take(excess) {
            self.entries.remove(&key);
        }
    }
}

/// Remembers `results` (each a lazy node, weakly, with the buffer computed for it) whose node
/// is still alive, and drops the entries of nodes that died.
pub(crate) fn remember(results: Vec<(WeakUOp, UOp)>) {
    let mut table = table();
    if results.is_empty() && table.entries.is_empty() {
        return;
    }
    table.sweep();
    for (node, value) in results {
        let Some(live) = node.upgrade() else { continue };
        table.clock += 1;
        let used = table.clock;
        table.entries.insert(live.id(), Kept { node, value, used });
    }
    table.cap();
}

/// How many realized values are kept now (the entries of dead nodes dropped first).
pub fn kept_values() -> usize {
    let mut table = table();
    table.sweep();
    table.entries.len()
}

/// The live entries, as strong handles: node address to (node, value). Empty when none are
/// kept, without a walk of anything.
fn snapshot() -> FastMap<usize, (UOp, UOp)> {
    let mut table = table();
    if table.entries.is_empty() {
        return FastMap::default();
    }
    table.sweep();
    table
        .entries
        .iter()
        .filter_map(|(&id, kept)| Some((id, (kept.node.upgrade()?, kept.value.clone()))))
        .collect()
}

/// Marks the kept values of `nodes` as just used, so the cap forgets others first.
fn touch(nodes: &[usize]) {
    let mut table = table();
    for id in nodes {
        table.clock += 1;
        let now = table.clock;
        if let Some(kept) = table.entries.get_mut(id) {
            kept.used = now;
        }
    }
}

/// `root` with every node whose value is kept replaced by that value (the nodes above rebuilt
/// over it); `None` when no kept value occurs in it.
pub(crate) fn with_kept_values(root: &UOp) -> Option<UOp> {
    if !root.reads_buffers() || root.op() == Op::Buffer {
        return None;
    }
    let known = snapshot();
    if known.is_empty() {
        return None;
    }
    let value_of = |n: &UOp| known.get(&n.id()).map(|(_, value)| value.clone());
    let order = root.toposort_along(
        |n| match known.contains_key(&n.id()) {
            true => &[],
            false => n.src(),
        },
        |n| n.reads_buffers() && n.op() != Op::Buffer,
    );
    let mut images: FastMap<UOp, UOp> = FastMap::default();
    let mut used = Vec::new();
    for node in order {
        let rebuilt = value_of(&node).unwrap_or_else(|| rebuild(&node, &images));
        // A node rebuilt over kept values may itself be a kept result (the graph a realize
        // computed after substituting earlier values).
        let image = value_of(&rebuilt).unwrap_or(rebuilt);
        if image != node {
            if known.contains_key(&node.id()) {
                used.push(node.id());
            }
            images.insert(node, image);
        }
    }
    touch(&used);
    images.remove(root)
}
