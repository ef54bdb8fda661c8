//! Buffers as numbered placeholders: the structure of a graph, apart from the data it reads.
//!
//! Two realizes of graphs that differ only in their input buffers (same ops, shapes, dtypes and
//! constants; other memory) schedule into the same kernels. Replacing each `Buffer` by
//! placeholder `k` (numbered in the order a walk of the graph first meets them) gives both
//! the *same* graph, and since nodes are interned that graph is one node: a key a plan cache
//! can look up in O(1) after one walk. A buffer read twice (`f(x, x)`) is one placeholder,
//! two distinct buffers are two, so aliasing is part of the key.

use crate::uop::fast_hash::FastMap;
use crate::uop::{Arg, BufferArg, Device, Op, UOp, rebuild};

/// A graph with its buffers abstracted: `roots` over placeholders, and the buffers they stand
/// for, `inputs[k]` for placeholder `k`.
#[derive(Clone, Debug)]
pub struct Abstracted {
    /// The roots with every `Buffer` replaced by its placeholder.
    pub roots: Vec<UOp>,
    /// The real buffers, by placeholder number.
    pub inputs: Vec<UOp>,
}

/// `roots` with every buffer replaced by a placeholder numbered in first-visit order. Only the
/// nodes that read a buffer are visited, so a large captured body over `Param`s (a traced
/// function) costs nothing here however often it is called.
pub fn abstract_buffers(roots: &[UOp]) -> Abstracted {
    abstract_buffers_labelled(roots, None)
}

/// [`abstract_buffers`] with every placeholder labelled `device`, whatever device its buffer
/// names: the graph of a realize on `device` that also reads host buffers (copied there as it
/// runs), so that every buffer its schedule makes is labelled `device` too.
pub fn abstract_buffers_on(roots: &[UOp], device: &Device) -> Abstracted {
    abstract_buffers_labelled(roots, Some(device))
}

fn abstract_buffers_labelled(roots: &[UOp], device: Option<&Device>) -> Abstracted {
    // One root is walked as it is: a sink made only to be walked would be interned and freed.
    let walked = match roots {
        [root] => root.clone(),
        _ => UOp::sink(roots.to_vec()),
    };
    let mut images: FastMap<UOp, UOp> = FastMap::default();
    let mut inputs = Vec::new();
    for node in walked.toposort_where(UOp::reads_buffers) {
        let image = match node.arg() {
            Arg::Buffer(b) if node.op() == Op::Buffer => {
                let number = inputs.len();
                inputs.push(node.clone());
                placeholder(number, b, device.unwrap_or(&b.device))
            }
            _ => rebuild(&node, &images),
        };
        images.insert(node, image);
    }
    let roots = match (images.get(&walked), roots.len()) {
        (Some(image), 1) => vec![image.clone()],
        (Some(sink), _) => sink.src().to_vec(),
        (None, _) => roots.to_vec(),
    };
    Abstracted { roots, inputs }
}

/// Placeholder `number` for a buffer like `like` (its size and dtype) on `device`.
fn placeholder(number: usize, like: &BufferArg, device: &Device) -> UOp {
    let arg = BufferArg::placeholder(number, like.size, like.dtype, device.clone());
    UOp::new(Op::Buffer, like.dtype, vec![], Arg::Buffer(arg))
}

/// The number of `u` if it is a placeholder made by [`abstract_buffers`].
pub fn placeholder_number(u: &UOp) -> Option<usize> {
    match u.arg() {
        Arg::Buffer(b) if u.op() == Op::Buffer => b.placeholder_number(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    fn data(n: usize) -> Tensor {
        Tensor::from_vec((0..n).map(|i| i as f32).collect(), &[n])
    }

    /// The `Buffer` node a data tensor reads.
    fn buffer(t: &Tensor) -> UOp {
        let nodes = t.uop().toposort();
        nodes.into_iter().find(|u| u.op() == Op::Buffer).unwrap()
    }

    #[test]
    fn graphs_over_different_buffers_have_one_key() {
        let (a, b) = (data(4), data(4));
        let first = abstract_buffers(&[(&a + 1.0).uop()]);
        let second = abstract_buffers(&[(&b + 1.0).uop()]);
        assert_eq!(first.roots, second.roots);
        assert_eq!(first.inputs, vec![buffer(&a)]);
        assert_eq!(second.inputs, vec![buffer(&b)]);
    }

    #[test]
    fn aliasing_sizes_and_constants_are_part_of_the_key() {
        let (a, b) = (data(4), data(4));
        let key = |t: Tensor| abstract_buffers(&[t.uop()]).roots;
        assert_ne!(key(&a + &a), key(&a + &b), "x + x is not x + y");
        assert_eq!(
            key(&a + &b),
            key(&b + &a),
            "numbering follows the structure"
        );
        assert_ne!(key(&a + 1.0), key(&a + 2.0), "constants are structure");
        assert_ne!(key(&a + 1.0), key(data(5) + 1.0), "sizes are structure");
    }

    #[test]
    fn a_graph_without_buffers_is_its_own_key() {
        let arange = Tensor::arange(5);
        let abstracted = abstract_buffers(&[arange.uop()]);
        assert_eq!(abstracted.roots, vec![arange.uop()]);
        assert!(abstracted.inputs.is_empty());
    }

    #[test]
    fn placeholders_are_numbered_in_visit_order() {
        let (a, b) = (data(3), data(3));
        let abstracted = abstract_buffers(&[(&a * &b).uop()]);
        let numbers: Vec<usize> = abstracted.roots[0]
            .toposort()
            .iter()
            .filter_map(placeholder_number)
            .collect();
        assert_eq!(numbers, vec![0, 1]);
        assert_eq!(abstracted.inputs, vec![buffer(&a), buffer(&b)]);
    }

    #[test]
    fn placeholders_on_a_device_are_labelled_with_it_whatever_their_buffers_say() {
        let emu = Device::Single("EMU".into());
        let (a, b) = (data(3), data(3));
        let abstracted = abstract_buffers_on(&[(&a * &b).uop()], &emu);
        let labels: Vec<Device> = abstracted.roots[0]
            .toposort()
            .iter()
            .filter_map(|u| match u.arg() {
                Arg::Buffer(b) if u.op() == Op::Buffer => Some(b.device.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(labels, vec![emu.clone(), emu]);
        assert_eq!(abstracted.inputs, vec![buffer(&a), buffer(&b)]);
        assert_ne!(
            abstracted.roots,
            abstract_buffers(&[(&a * &b).uop()]).roots,
            "the device is part of the key"
        );
    }
}
