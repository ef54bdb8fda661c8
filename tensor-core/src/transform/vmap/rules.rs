//! Batching rules: for each op, the node that computes it for a whole batch at once, with the
//! batch as a real leading axis (seeds/vmap-rewrite-design.md, "Rules by op category").
//!
//! A node is batched when any operand is; the rule receives the original node and reads the
//! batched operands from the context. Unbatched operands are broadcast along the batch.

use crate::rewrite::{Captures, PatternMatcher, UPat};
use crate::tensor::Tensor;
use crate::transform::crossing::is_reduce_over_ranges;
use crate::transform::custom;
use crate::transform::external::CallInfo;
use crate::transform::external::batch::batch_call;
use crate::transform::func::transform_error;
use crate::uop::shape::{operand_exprs, operand_values};
use crate::uop::{Arg, Op, UOp};
use std::collections::HashMap;
use std::sync::OnceLock;

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

fn shifted(axes: &[usize]) -> Vec<usize> {
    axes.iter().map(|a| a + 1).collect()
}

fn operand(u: &UOp, i: usize) -> Vec<usize> {
    crate::uop::shape::operand_values(u.s(i)).expect("movement operand is a constant shape")
}

/// The batching rules, one row per op category (each rule sees the original node as the
/// match root and reads the batched operands from the context).
fn batching_rules() -> &'static PatternMatcher<BatchCtx> {
    static RULES: OnceLock<PatternMatcher<BatchCtx>> = OnceLock::new();
    RULES.get_or_init(|| {
        let elementwise = Op::elementwise();
        PatternMatcher::new()
            .rule(UPat::ops(&elementwise), |m, ctx| {
                Some(elementwise_rule(m.root(), ctx))
            })
            .rule(UPat::op(Op::Reshape), |m, ctx| {
                Some(source(m, ctx).reshape(&batched_operand(m, ctx, 1)))
            })
            .rule(UPat::op(Op::Expand), |m, ctx| {
                Some(source(m, ctx).expand(&batched_operand(m, ctx, 1)))
            })
            .rule(UPat::op(Op::Permute), |m, ctx| match m.root().arg() {
                Arg::Permutation(p) => {
                    Some(source(m, ctx).permute(&[vec![0], shifted(p)].concat()))
                }
                _ => None,
            })
            .rule(UPat::op(Op::Flip), |m, ctx| match m.root().arg() {
                Arg::Flags(f) => Some(source(m, ctx).flip(&[vec![false], f.clone()].concat())),
                _ => None,
            })
            // windows sliding with a range (index expressions, not constants) first
            .rule(UPat::ops(&[Op::Pad, Op::Shrink]), |m, ctx| {
                sliding_window_rule(m, ctx)
            })
            .rule(UPat::op(Op::Pad), |m, ctx| {
                let (begins, ends) = (unbatched_operand(m, 1), unbatched_operand(m, 2));
                Some(source(m, ctx).pad(&begins, &ends))
            })
            .rule(UPat::op(Op::Shrink), |m, ctx| {
                let (begins, ends) = (unbatched_operand(m, 1), batched_operand(m, ctx, 2));
                Some(source(m, ctx).shrink(&begins, &ends))
            })
            .rule(UPat::op(Op::Reduce), |m, ctx| match m.root().arg() {
                _ if is_reduce_over_ranges(m.root()) => Some(same_op_on_source(m, ctx)),
                Arg::Reduce(op, axes) => Some(source(m, ctx).reduce(*op, &shifted(axes))),
                _ => None,
            })
            // vmap scopes: the batch axis is one more kept axis (a Const(0) varg) in front
            .rule(UPat::ops(Op::VMAP), |m, ctx| Some(scope_rule(m, ctx)))
            .rule(UPat::op(Op::Stack), |m, ctx| {
                Some(stack_rule(m.root(), ctx))
            })
            .rule(UPat::ops(Op::MARKER), |m, ctx| {
                Some(source(m, ctx).unary_marker(m.root().op()))
            })
            // a move to a device moves the whole batch
            .rule(UPat::op(Op::Copy), |m, ctx| match m.root().arg() {
                Arg::Device(device) => Some(source(m, ctx).copy_to(device.clone())),
                _ => None,
            })
            // external calls: by the call's batching strategy
            .rule(UPat::op(Op::Call), |m, ctx| {
                CallInfo::of(m.root()).map(|_| batch_call(m.root(), ctx))
            })
            .rule(UPat::op(Op::GetTuple), |m, ctx| {
                get_tuple_rule(m.root(), ctx)
            })
            // functions with custom rules: the user's vmap rule, or the rules vmapped
            .rule(UPat::op(Op::Function), |m, ctx| custom_rule(m.root(), ctx))
    })
}

/// The batched image of `node`.
fn batch_rule(node: &UOp, ctx: &mut BatchCtx) -> UOp {
    batching_rules().rewrite(node, ctx).unwrap_or_else(|| {
        transform_error(&format!(
            "vmap: no batching rule for {} (in {node:?})",
            node.op()
        ))
    })
}

/// The batched image of the root's first operand.
fn source(m: &Captures, ctx: &BatchCtx) -> UOp {
    let x = m.root().s(0);
    ctx.broadcast_to(x, x.shape().expect("operand has a shape"))
}

/// Operand `i` of the root (a constant shape), with the batch size in front.
fn batched_operand(m: &Captures, ctx: &BatchCtx, i: usize) -> Vec<usize> {
    [vec![ctx.size()], operand(m.root(), i)].concat()
}

/// Operand `i` of the root (a constant shape), with 0 in front (no padding or offset).
fn unbatched_operand(m: &Captures, i: usize) -> Vec<usize> {
    [vec![0], operand(m.root(), i)].concat()
}

/// A `Pad` or `Shrink` whose window is given by index expressions (it may slide with a
/// range): the same window with the whole batch axis in front (no pad; the full extent).
/// `None` for constant windows, which the constant rules take.
fn sliding_window_rule(m: &Captures, ctx: &BatchCtx) -> Option<UOp> {
    let node = m.root();
    if operand_values(node.s(1)).is_some() && operand_values(node.s(2)).is_some() {
        return None;
    }
    let (begins, ends) = (operand_exprs(node.s(1))?, operand_exprs(node.s(2))?);
    let batch_end = match node.op() {
        Op::Shrink => ctx.size() as i64,
        _ => 0,
    };
    let begins = [vec![UOp::index(0)], begins].concat();
    let ends = [vec![UOp::index(batch_end)], ends].concat();
    Some(source(m, ctx).window(node.op(), begins, ends))
}

/// The root over the batched image of its first operand, its other operands unchanged.
fn same_op_on_source(m: &Captures, ctx: &BatchCtx) -> UOp {
    let mut src = m.root().src().to_vec();
    src[0] = source(m, ctx);
    m.root().with_src(src)
}

/// `Vmapin(x, vargs)` / `Vmapout(y, vargs)` of a batched operand: the same scope op with a
/// `Const(0)` varg for the leading batch axis, which it keeps in front.
fn scope_rule(m: &Captures, ctx: &BatchCtx) -> UOp {
    let node = m.root();
    let vargs = &node.src()[1..];
    let mut src = vec![source(m, ctx), UOp::index(0)];
    src.extend(vargs.iter().cloned());
    node.with_src(src)
}

/// Elementwise: every operand broadcast along the batch, the same op.
fn elementwise_rule(node: &UOp, ctx: &BatchCtx) -> UOp {
    let shape = node.shape_vec();
    node.with_src(
        node.src()
            .iter()
            .map(|s| ctx.broadcast_to(s, &shape))
            .collect(),
    )
}

/// Stack: stack the batched parts (batch second), then swap the batch to the front.
fn stack_rule(node: &UOp, ctx: &BatchCtx) -> UOp {
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

/// Element `k` of a batched call: of the batched call, or of the tuple of stacked results.
fn get_tuple_rule(node: &UOp, ctx: &BatchCtx) -> Option<UOp> {
    let Arg::Int(k) = node.arg() else {
        return None;
    };
    let k = usize::try_from(*k).ok()?;
    let image = ctx.image(node.s(0))?;
    Some(match image.op() {
        Op::Tuple => image.s(k).clone(),
        _ => image.get_tuple(k),
    })
}

/// A function with custom rules: its operands (batched ones with the batch in front) to
/// `custom::vmap_node`.
fn custom_rule(node: &UOp, ctx: &BatchCtx) -> Option<UOp> {
    custom::rules_of(node)?;
    let operands = &node.src()[1..];
    let args = operands
        .iter()
        .map(|u| Tensor::from_uop(ctx.image(u).unwrap_or(u).clone()))
        .collect();
    let batched = operands.iter().map(|u| ctx.is_batched(u)).collect();
    Some(custom::vmap_node(node, ctx.size(), args, batched))
}
