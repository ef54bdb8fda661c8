//! Batching rules: for each op, the node that computes it for a whole batch at once, with the
//! batch as a real leading axis (seeds/vmap-rewrite-design.md, "Rules by op category").
//!
//! A node is batched when any operand is; the rule receives the original node and reads the
//! batched operands from the context. Unbatched operands are broadcast along the batch.

use crate::uop::{Arg, Op, UOp};
use std::collections::HashMap;

/// The state of one vmap walk: the batch size and the batched image of every batched node.
pub struct BatchCtx {
    size: usize,
    batched: HashMap<UOp, UOp>,
}

impl BatchCtx {
    /// A walk over a batch of `size`, seeded with the batched images of the placeholders.
    pub fn new(size: usize, seeds: HashMap<UOp, UOp>) -> BatchCtx {
        BatchCtx {
            size,
            batched: seeds,
        }
    }

    /// The batch size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// True when `u` varies along the batch.
    pub fn is_batched(&self, u: &UOp) -> bool {
        self.batched.contains_key(u)
    }

    /// The batched image of `u` (leading batch axis), if `u` is batched.
    pub fn image(&self, u: &UOp) -> Option<&UOp> {
        self.batched.get(u)
    }

    /// `u`'s image with its batch axis first and the rest broadcast to `shape` (right-aligned,
    /// like NumPy): unbatched values are repeated along the batch.
    pub fn broadcast_to(&self, u: &UOp, shape: &[usize]) -> UOp {
        let (value, inner) = match self.image(u) {
            Some(b) => (b.clone(), u.shape_vec()),
            None => (u.clone(), u.shape_vec()),
        };
        let mut aligned = vec![if self.is_batched(u) { self.size } else { 1 }];
        aligned.extend(std::iter::repeat_n(1, shape.len() - inner.len()));
        aligned.extend(&inner);
        let target: Vec<usize> = std::iter::once(self.size)
            .chain(shape.iter().copied())
            .collect();
        let value = if value.shape() == Some(aligned.as_slice()) {
            value
        } else {
            value.reshape(&aligned)
        };
        if aligned == target {
            value
        } else {
            value.expand(&target)
        }
    }

    /// Runs the batching rule of `node` (some operand of which is batched) and records it.
    pub fn batch(&mut self, node: &UOp) {
        let image = batch_rule(node, self);
        self.batched.insert(node.clone(), image);
    }
}

fn with_batch(size: usize, shape: &[usize]) -> Vec<usize> {
    std::iter::once(size).chain(shape.iter().copied()).collect()
}

fn shifted(axes: &[usize]) -> Vec<usize> {
    axes.iter().map(|a| a + 1).collect()
}

fn operand(u: &UOp, i: usize) -> Vec<usize> {
    crate::uop::shape::operand_values(u.s(i)).expect("movement operand is a constant shape")
}

/// The batched image of `node`: one row per op category.
fn batch_rule(node: &UOp, ctx: &BatchCtx) -> UOp {
    let b = ctx.size();
    let x = || ctx.broadcast_to(node.s(0), node.s(0).shape().expect("operand has a shape"));
    match (node.op(), node.arg()) {
        (op, _) if op.is_elementwise() => {
            let shape = node.shape_vec();
            node.with_src(
                node.src()
                    .iter()
                    .map(|s| ctx.broadcast_to(s, &shape))
                    .collect(),
            )
        }
        (Op::Reshape, _) => x().reshape(&with_batch(b, &operand(node, 1))),
        (Op::Expand, _) => x().expand(&with_batch(b, &operand(node, 1))),
        (Op::Permute, Arg::Permutation(p)) => x().permute(&[vec![0], shifted(p)].concat()),
        (Op::Flip, Arg::Flags(f)) => x().flip(&[vec![false], f.clone()].concat()),
        (Op::Pad, _) => x().pad(
            &[vec![0], operand(node, 1)].concat(),
            &[vec![0], operand(node, 2)].concat(),
        ),
        (Op::Shrink, _) => x().shrink(
            &[vec![0], operand(node, 1)].concat(),
            &[vec![b], operand(node, 2)].concat(),
        ),
        (Op::Reduce, Arg::Reduce(op, axes)) => x().reduce(*op, &shifted(axes)),
        (Op::Stack, _) => {
            let part_shape = node.s(0).shape_vec();
            let parts = node
                .src()
                .iter()
                .map(|p| ctx.broadcast_to(p, &part_shape))
                .collect();
            let stacked = UOp::stack(parts);
            let mut perm: Vec<usize> = (0..stacked.ndim()).collect();
            perm.swap(0, 1);
            stacked.permute(&perm)
        }
        (Op::Contiguous | Op::ContiguousBackward | Op::Detach, _) => x().unary_marker(node.op()),
        (op, _) => crate::transform::func::transform_error(&format!(
            "vmap: no batching rule for {op} (in {node:?})"
        )),
    }
}
