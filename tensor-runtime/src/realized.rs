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
//! the node dies. At most [`MAX_KEPT_VALUES`] are kept, the least recently remembered or read
//! forgotten first (a forgotten value is recomputed when read, never wrong). While values are
//! kept, each realize walks the lazy part of its graph to look for them; when none is kept (the
//! common case) it walks nothing.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::uop::fast_hash::FastMap;
use tensor_core::uop::{WeakUOp, rebuild};
use tensor_core::{Op, Tensor, UOp};

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

    /// Marks the entry at address `id` as just read.
    fn touch(&mut self, id: usize) {
        self.clock += 1;
        let now = self.clock;
        if let Some(kept) = self.entries.get_mut(&id) {
            kept.used = now;
        }
    }

    /// The kept value of `node`, if any.
    fn value_of(&self, node: &UOp) -> Option<&UOp> {
        let kept = self.entries.get(&node.id())?;
        let live = kept.node.upgrade()?;
        (&live == node).then_some(&kept.value)
    }

    /// `root` with every node whose value is kept replaced by that value (the nodes above
    /// rebuilt over it), and the addresses of the entries read; `None` when none occurs in it.
    fn substitute(&self, root: &UOp) -> Option<(UOp, Vec<usize>)> {
        let order = root.toposort_along(
            |n| match self.value_of(n) {
                Some(_) => &[],
                None => n.src(),
            },
            |n| n.reads_buffers() && n.op() != Op::Buffer,
        );
        let mut images: FastMap<UOp, UOp> = FastMap::default();
        let mut read = Vec::new();
        for node in order {
            let image = match self.value_of(&node) {
                Some(value) => {
                    read.push(node.id());
                    value.clone()
                }
                // A node rebuilt over kept values may itself be a kept result (the graph an
                // earlier realize computed after substituting older values).
                None => {
                    let rebuilt = rebuild(&node, &images);
                    self.value_of(&rebuilt).cloned().unwrap_or(rebuilt)
                }
            };
            if image != node {
                images.insert(node, image);
            }
        }
        images.remove(root).map(|image| (image, read))
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

/// Points each of `tensors` whose graph holds nodes with kept values at the graph that reads
/// those values instead. Takes one lock and, when no value is kept, walks nothing.
pub(crate) fn read_kept_values(tensors: &[Tensor]) {
    let lazy = |t: &&Tensor| {
        let graph = t.uop();
        graph.reads_buffers() && as_contiguous_buffer(&graph).is_none()
    };
    if !tensors.iter().any(|t| lazy(&t)) {
        return;
    }
    let mut table = table();
    if table.entries.is_empty() {
        return;
    }
    for tensor in tensors.iter().filter(lazy) {
        let Some((graph, read)) = table.substitute(&tensor.uop()) else {
            continue;
        };
        tensor.replace_uop(graph);
        for id in read {
            table.touch(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensor_core::DType;
    use tensor_core::uop::Device;

    /// A lazy node reading a fresh buffer, and a buffer standing for its value.
    fn lazy_and_value() -> (UOp, UOp) {
        let input = UOp::new_buffer(4, DType::F32, Device::Single("CPU".to_string()));
        let lazy = UOp::alu(Op::Add, vec![input.clone(), input]);
        (
            lazy,
            UOp::new_buffer(4, DType::F32, Device::Single("CPU".to_string())),
        )
    }

    #[test]
    fn values_are_kept_while_their_node_lives_and_at_most_the_cap() {
        let nodes: Vec<(UOp, UOp)> = (0..MAX_KEPT_VALUES + 8).map(|_| lazy_and_value()).collect();
        remember(
            nodes
                .iter()
                .map(|(n, v)| (n.downgrade(), v.clone()))
                .collect(),
        );
        let kept = |n: &UOp| table().value_of(n).cloned();
        assert_eq!(
            kept(&nodes[0].0),
            None,
            "the oldest are forgotten past the cap"
        );
        let (last, last_value) = nodes.last().unwrap().clone();
        assert_eq!(kept(&last), Some(last_value.clone()));
        assert!(kept_values() <= MAX_KEPT_VALUES);
        drop((nodes, last));
        let (dead, dead_value) = lazy_and_value();
        let weak = dead.downgrade();
        drop(dead);
        remember(vec![(weak, dead_value.clone())]);
        let values: Vec<UOp> = table().entries.values().map(|k| k.value.clone()).collect();
        assert!(!values.contains(&last_value), "dropped when its node died");
        assert!(
            !values.contains(&dead_value),
            "a dead node's value is never kept"
        );
    }
}
