//! Forward mode: `jvp` pushes tangents through the traced graph, one tangent rule per op.
//!
//! The function is traced on placeholders; a walk in topological order gives every node that
//! depends on a differentiated input its tangent, built by a rule table that reads like the
//! derivative it encodes (`d sin(x) = cos(x) dx`). Nodes whose operands carry no tangent have
//! none (a zero tangent that is never built).

use crate::rewrite::{Captures, PatternMatcher, UPat};
use crate::tensor::Tensor;
use crate::transform::crossing::is_reduce_over_ranges;
use crate::transform::func::{IntoFunc, transform_error};
use crate::transform::trace::{placeholder_like, substitute, trace};
use crate::uop::{Arg, Op, ReduceOp, UOp};
use std::collections::HashMap;
use std::f64::consts::LN_2;
use std::sync::OnceLock;

/// The value of `f` at `primals` and its directional derivative along `tangents`, as
/// `jax.jvp`: returns `(f(primals), J(primals) · tangents)`, one entry per result.
#[track_caller]
pub fn jvp<M>(
    f: impl IntoFunc<M>,
    primals: &[Tensor],
    tangents: &[Tensor],
) -> (Vec<Tensor>, Vec<Tensor>) {
    check_tangents(primals, tangents);
    let f = f.into_func();
    let inputs: Vec<UOp> = primals.iter().map(placeholder_like).collect();
    let traced = trace(&f, inputs.clone());
    let seeds = inputs
        .iter()
        .zip(tangents)
        .map(|(p, t)| (p.clone(), t.uop()))
        .collect();
    let mut ctx = TangentCtx { tangents: seeds };
    for node in UOp::sink(traced.outputs.clone()).toposort() {
        if node.op() != Op::Sink && !ctx.tangents.contains_key(&node) {
            ctx.push_forward(&node);
        }
    }
    let values: HashMap<UOp, UOp> = inputs
        .iter()
        .cloned()
        .zip(primals.iter().map(|p| p.uop()))
        .collect();
    let outputs = traced
        .outputs
        .iter()
        .map(|o| Tensor::from_uop(substitute(o, &values)))
        .collect();
    let tangents_out = traced
        .outputs
        .iter()
        .map(|o| {
            let tangent = ctx
                .tangents
                .get(o)
                .cloned()
                .unwrap_or_else(|| zeros_like(o));
            Tensor::from_uop(substitute(&tangent, &values))
        })
        .collect();
    (outputs, tangents_out)
}

#[track_caller]
fn check_tangents(primals: &[Tensor], tangents: &[Tensor]) {
    if primals.len() != tangents.len() {
        transform_error(&format!(
            "jvp: got {} primals but {} tangents; give one tangent per primal",
            primals.len(),
            tangents.len()
        ));
    }
    for (i, (p, t)) in primals.iter().zip(tangents).enumerate() {
        if p.shape() != t.shape() || p.dtype() != t.dtype() {
            transform_error(&format!(
                "jvp: primal {i} is {}{:?} but its tangent is {}{:?}; they must have the same shape and dtype",
                p.dtype(),
                p.shape(),
                t.dtype(),
                t.shape()
            ));
        }
    }
}

/// Zeros of `u`'s shape and dtype.
pub(crate) fn zeros_like(u: &UOp) -> UOp {
    Tensor::zeros(&u.shape_vec(), u.dtype()).uop()
}

/// The state of one forward walk: the tangent of every node that has one.
pub struct TangentCtx {
    tangents: HashMap<UOp, UOp>,
}

impl TangentCtx {
    /// The tangent of `u` as a tensor (zeros where `u` has none).
    fn dot(&self, u: &UOp) -> Tensor {
        Tensor::from_uop(
            self.tangents
                .get(u)
                .cloned()
                .unwrap_or_else(|| zeros_like(u)),
        )
    }

    /// Gives `node` its tangent if any operand has one.
    fn push_forward(&mut self, node: &UOp) {
        if !node.src().iter().any(|s| self.tangents.contains_key(s)) || !is_differentiable(node) {
            return;
        }
        let tangent = tangent_rules().rewrite(node, self).unwrap_or_else(|| {
            transform_error(&format!(
                "jvp: no tangent rule for {} (in {node:?})",
                node.op()
            ))
        });
        self.tangents.insert(node.clone(), tangent);
    }
}

/// False for nodes whose value has no derivative: integer and bool results, comparisons,
/// `Detach`, random bits.
pub(crate) fn is_differentiable(node: &UOp) -> bool {
    node.dtype().is_float()
        && !matches!(
            node.op(),
            Op::Detach | Op::Threefry | Op::Bitcast | Op::Trunc
        )
        && !node.op().is_comparison()
}

fn t(u: &UOp) -> Tensor {
    Tensor::from_uop(u.clone())
}

/// The tangent rules, one row per primitive: each gives `d(node)` from the operands and their
/// tangents `dx`, `dy`.
fn tangent_rules() -> &'static PatternMatcher<TangentCtx> {
    static RULES: OnceLock<PatternMatcher<TangentCtx>> = OnceLock::new();
    RULES.get_or_init(|| {
        // Stack is a movement op too, but linear in every part: it has its own row below.
        // The vmap scope ops slice and re-stack along the batch: the tangent goes through the
        // same scope.
        let linear_in_first: Vec<Op> = [
            Op::MOVEMENT,
            &[Op::Contiguous, Op::ContiguousBackward, Op::Copy],
            Op::VMAP,
        ]
        .concat()
        .into_iter()
        .filter(|&op| op != Op::Stack)
        .collect();
        PatternMatcher::new()
            // d(x + y) = dx + dy,  d(x - y) = dx - dy,  d(-x) = -dx
            .rule(UPat::op(Op::Add), |m, c| {
                rule2(m, c, |_, _, dx, dy| dx + dy)
            })
            .rule(UPat::op(Op::Sub), |m, c| {
                rule2(m, c, |_, _, dx, dy| dx - dy)
            })
            .rule(UPat::op(Op::Neg), |m, c| rule1(m, c, |_, dx| -dx))
            // d(x * y) = dx * y + x * dy,  d(x / y) = (dx - (x / y) * dy) / y
            .rule(UPat::op(Op::Mul), |m, c| {
                rule2(m, c, |x, y, dx, dy| dx * y + x * dy)
            })
            .rule(UPat::op(Op::Div), |m, c| {
                let q = t(m.root());
                rule2(m, c, move |_, y, dx, dy| (dx - &q * dy) / y)
            })
            // d(1/x) = -dx / x²
            .rule(UPat::op(Op::Recip), |m, c| {
                let r = t(m.root());
                rule1(m, c, move |_, dx| -(dx * &r * &r))
            })
            // d(2^x) = 2^x ln2 dx,  d(log2 x) = dx / (x ln2)
            .rule(UPat::op(Op::Exp2), |m, c| {
                let e = t(m.root());
                rule1(m, c, move |_, dx| dx * &e * LN_2)
            })
            .rule(UPat::op(Op::Log2), |m, c| {
                rule1(m, c, |x, dx| dx / (x * LN_2))
            })
            // d(sin x) = cos x dx,  d(sqrt x) = dx / (2 sqrt x)
            .rule(UPat::op(Op::Sin), |m, c| rule1(m, c, |x, dx| dx * x.cos()))
            .rule(UPat::op(Op::Sqrt), |m, c| {
                let s = t(m.root());
                rule1(m, c, move |_, dx| dx / (&s * 2.0))
            })
            // d(x^y) = y x^(y-1) dx + x^y ln(x) dy
            .rule(UPat::op(Op::Pow), |m, c| {
                let p = t(m.root());
                rule2(m, c, move |x, y, dx, dy| {
                    dx * y * x.pow(y - 1.0) + dy * &p * x.log()
                })
            })
            // d max(x, y): the tangent of the larger operand, the mean of both at a tie (as JAX)
            .rule(UPat::op(Op::Max), |m, c| {
                rule2(m, c, |x, y, dx, dy| {
                    let (wx, wy) = max_weights(x, y);
                    dx * wx + dy * wy
                })
            })
            // d(x*y + z) = dx*y + x*dy + dz
            .rule(UPat::op(Op::Mulacc), |m, c| {
                let (x, y, z) = (m.root().s(0), m.root().s(1), m.root().s(2));
                Some((c.dot(x) * t(y) + t(x) * c.dot(y) + c.dot(z)).uop())
            })
            // d where(p, a, b) = where(p, da, db)
            .rule(UPat::op(Op::Where), |m, c| {
                let (p, a, b) = (m.root().s(0), m.root().s(1), m.root().s(2));
                Some(t(p).where_(c.dot(a), c.dot(b)).uop())
            })
            // d cast(x) = cast(dx)
            .rule(UPat::op(Op::Cast), |m, c| {
                rule1(m, c, |_, dx| dx.cast(m.root().dtype()))
            })
            // linear maps of the first operand: the same map of its tangent
            .rule(UPat::ops(&linear_in_first), |m, c| {
                Some(same_op_on_tangent(m.root(), c))
            })
            .rule(UPat::op(Op::Stack), |m, c| {
                Some(
                    m.root()
                        .with_src(m.root().src().iter().map(|s| c.dot(s).uop()).collect()),
                )
            })
            // d sum(x) = sum(dx);  d max(x) = mean of dx over the maximal positions;
            // d prod(x) = prod(x) * sum(dx / x); over axes or over ranges alike
            .rule(UPat::op(Op::Reduce), |m, c| reduce_tangent(m.root(), c))
    })
}

fn rule1(m: &Captures, c: &TangentCtx, d: impl Fn(&Tensor, Tensor) -> Tensor) -> Option<UOp> {
    let x = m.root().s(0);
    Some(d(&t(x), c.dot(x)).uop())
}

fn rule2(
    m: &Captures,
    c: &TangentCtx,
    d: impl Fn(&Tensor, &Tensor, Tensor, Tensor) -> Tensor,
) -> Option<UOp> {
    let (x, y) = (m.root().s(0), m.root().s(1));
    Some(d(&t(x), &t(y), c.dot(x), c.dot(y)).uop())
}

/// How much of `max(x, y)`'s change comes from each operand: 1/0, 0/1, or ½/½ at a tie.
pub(crate) fn max_weights(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let dtype = x.dtype();
    let half_at_tie = x.eq(y).cast(dtype) * 0.5;
    let wx = x.gt(y).cast(dtype) + &half_at_tie;
    let wy = y.gt(x).cast(dtype) + half_at_tie;
    (wx, wy)
}

/// `node` with its first operand replaced by that operand's tangent.
fn same_op_on_tangent(node: &UOp, c: &TangentCtx) -> UOp {
    let mut src = node.src().to_vec();
    src[0] = c.dot(&src[0]).uop();
    node.with_src(src)
}

fn reduce_tangent(node: &UOp, c: &TangentCtx) -> Option<UOp> {
    let Arg::Reduce(op, _) = node.arg() else {
        return None;
    };
    let x = node.s(0);
    let dx = c.dot(x).uop();
    let sum = |u: Tensor| same_reduce(node, ReduceOp::Add, &u.uop());
    let tangent = match op {
        ReduceOp::Add => sum(t(&dx)),
        ReduceOp::Max => sum(t(&dx) * argmax_share(&t(x), &t(node))),
        ReduceOp::Mul => (t(node) * t(&sum(t(&dx) / t(x)))).uop(),
    };
    Some(tangent)
}

/// For a max-reduce `m` of `x` (over axes or over ranges): `1/k` at each of the `k`
/// positions (or samples) holding the maximum, else 0.
pub(crate) fn argmax_share(x: &Tensor, m: &Tensor) -> Tensor {
    let shape = x.shape();
    let at_max = x.eq(m.expand(&shape)).cast(x.dtype());
    let count = t(&same_reduce(&m.uop(), ReduceOp::Add, &at_max.uop()));
    at_max / count.expand(&shape)
}

/// The reduce `like` (over the same axes or ranges) with `op`, applied to `x`.
fn same_reduce(like: &UOp, op: ReduceOp, x: &UOp) -> UOp {
    let Arg::Reduce(_, axes) = like.arg() else {
        unreachable!("same_reduce takes a Reduce node")
    };
    if is_reduce_over_ranges(like) {
        x.reduce_over(op, &like.src()[1..])
    } else {
        x.reduce(op, axes)
    }
}
