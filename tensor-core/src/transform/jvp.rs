//! Forward mode: `jvp` pushes tangents through the traced graph, one tangent rule per op.
//!
//! The function is traced on placeholders; a walk in topological order gives every node that
//! depends on a differentiated input its tangent, built by a rule table that reads like the
//! derivative it encodes (`d sin(x) = cos(x) dx`). Tangents are [`Tangent`]s: a node whose
//! operands carry no tangent has the symbolic zero, rules skip zero terms (`d(x * 2) = dx * 2`,
//! not `dx * 2 + x * 0`), and a zero becomes a tensor only where a value is required (a
//! result, a branch of a `where` or a part of a stack whose siblings have tangents). A
//! caller's tangent that is a constant zero (`zeros_like`) is the symbolic zero too.

use crate::rewrite::{Captures, PatternMatcher, UPat};
use crate::tensor::{Tensor, accumulated_reduce, pow_base_partial, pow_exponent_partial};
use crate::transform::crossing::is_reduce_over_ranges;
use crate::transform::custom;
use crate::transform::external::CallInfo;
use crate::transform::external::diff::jvp_call;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::trace::{placeholder_like, substitute, trace};
use crate::transform::zero::Tangent;
use crate::uop::{Arg, Op, ReduceOp, UOp};
use std::collections::HashMap;
use std::f64::consts::{FRAC_2_SQRT_PI, LN_2};
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
    let tangents: Vec<Tangent> = tangents.iter().map(Tangent::of).collect();
    jvp_symbolic(&f.into_func(), primals, &tangents)
}

/// `jvp` with tangents that may be the symbolic zero (how `jacfwd` holds the arguments it
/// does not differentiate): the tangents of the results, instantiated.
pub(crate) fn jvp_symbolic(
    f: &Func,
    primals: &[Tensor],
    tangents: &[Tangent],
) -> (Vec<Tensor>, Vec<Tensor>) {
    let _library = crate::tensor::LibraryScope::enter();
    let inputs: Vec<UOp> = primals.iter().map(placeholder_like).collect();
    let traced = trace(f, inputs.clone());
    let seeds = inputs
        .iter()
        .zip(tangents)
        .filter_map(|(p, t)| Some((p.clone(), t.clone().value()?.uop())))
        .collect();
    let mut ctx = TangentCtx {
        tangents: seeds,
        result: Tangent::Zero,
    };
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
            let tangent = ctx.dot(o).instantiate(o).uop();
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

/// The state of one forward walk: the tangent of every node that has a non-zero one, and
/// the tangent the last rule produced.
pub struct TangentCtx {
    tangents: HashMap<UOp, UOp>,
    result: Tangent,
}

impl TangentCtx {
    /// The tangent of `u` (the symbolic zero where `u` has none).
    fn dot(&self, u: &UOp) -> Tangent {
        match self.tangents.get(u) {
            Some(t) => Tangent::Value(Tensor::from_uop(t.clone())),
            None => Tangent::Zero,
        }
    }

    /// Records `d` as the tangent of the node the rule matched. Rules end with it: its `Some`
    /// tells the matcher the rule applied.
    fn give(&mut self, node: &UOp, d: Tangent) -> Option<UOp> {
        self.result = d;
        Some(node.clone())
    }

    /// Gives `node` its tangent if any operand has one.
    fn push_forward(&mut self, node: &UOp) {
        if custom::rules_of(node).is_some() {
            if node.src()[1..]
                .iter()
                .any(|s| self.tangents.contains_key(s))
            {
                let tangents: Vec<Tangent> = node.src()[1..].iter().map(|s| self.dot(s)).collect();
                let tangent = custom::jvp_node(node, &tangents);
                self.tangents.insert(node.clone(), tangent);
            }
            return;
        }
        if CallInfo::of(node).is_some() {
            let tangents = &self.tangents;
            if let Some(call) = jvp_call(node, |u| tangents.get(u).cloned()) {
                self.tangents.insert(node.clone(), call);
            }
            return;
        }
        if !node.src().iter().any(|s| self.tangents.contains_key(s)) || !is_differentiable(node) {
            return;
        }
        if tangent_rules().rewrite(node, self).is_none() {
            transform_error(&format!(
                "jvp: no tangent rule for {} (in {node:?})",
                node.op()
            ));
        }
        if let Some(tangent) = std::mem::replace(&mut self.result, Tangent::Zero).value() {
            self.tangents.insert(node.clone(), tangent.uop());
        }
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
            // d fmod(x, y) = dx - trunc(x / y) dy
            .rule(UPat::op(Op::Mod), |m, c| {
                rule2(m, c, |x, y, dx, dy| {
                    let k = (x / y).trunc();
                    dx - &k * dy
                })
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
            // d(sin x) = cos x dx,  d(cos x) = -sin x dx,  d(sqrt x) = dx / (2 sqrt x)
            .rule(UPat::op(Op::Sin), |m, c| rule1(m, c, |x, dx| dx * x.cos()))
            .rule(UPat::op(Op::Cos), |m, c| {
                rule1(m, c, |x, dx| -(dx * x.sin()))
            })
            .rule(UPat::op(Op::Sqrt), |m, c| {
                let s = t(m.root());
                rule1(m, c, move |_, dx| dx / (&s * 2.0))
            })
            // d(erf x) = 2/√π e^(-x²) dx
            .rule(UPat::op(Op::Erf), |m, c| {
                rule1(m, c, |x, dx| dx * (x.square().neg().exp() * FRAC_2_SQRT_PI))
            })
            .rule(UPat::op(Op::Erfc), |m, c| {
                rule1(m, c, |x, dx| {
                    dx * (x.square().neg().exp() * -FRAC_2_SQRT_PI)
                })
            })
            // d(x^y) = y x^(y-1) dx + x^y ln(x) dy (0 at y == 0, and at x == 0 for y >= 0)
            .rule(UPat::op(Op::Pow), |m, c| {
                let p = t(m.root());
                rule2(m, c, move |x, y, dx, dy| {
                    let dx = dx.map(|dx| dx * pow_base_partial(x, y));
                    let dy = dy.map(|dy| dy * pow_exponent_partial(x, y, &p));
                    dx + dy
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
                let node = m.root();
                let (x, y, z) = (node.s(0), node.s(1), node.s(2));
                let d = c.dot(x) * &t(y) + &t(x) * c.dot(y) + c.dot(z);
                c.give(node, d)
            })
            // d where(p, a, b) = where(p, da, db); zero where both are
            .rule(UPat::op(Op::Where), |m, c| {
                let node = m.root();
                let (p, a, b) = (node.s(0), node.s(1), node.s(2));
                let d = match (c.dot(a), c.dot(b)) {
                    (Tangent::Zero, Tangent::Zero) => Tangent::Zero,
                    (da, db) => t(p).where_(da.instantiate(a), db.instantiate(b)).into(),
                };
                c.give(node, d)
            })
            // d cast(x) = cast(dx)
            .rule(UPat::op(Op::Cast), |m, c| {
                rule1(m, c, |_, dx| dx.map(|dx| dx.cast(m.root().dtype())))
            })
            // linear maps of the first operand: the same map of its tangent
            .rule(UPat::ops(&linear_in_first), |m, c| {
                let d = same_op_on_tangent(m.root(), c);
                c.give(m.root(), d)
            })
            // an element of a call's results: that element of the call's tangent
            .rule(UPat::op(Op::GetTuple), |m, c| {
                let d = c.dot(m.root().s(0)).map(|dx| {
                    let dx = dx.uop();
                    match (dx.op(), m.root().arg()) {
                        (Op::Tuple, Arg::Int(k)) => t(dx.s(*k as usize)),
                        _ => t(&m.root().with_src(vec![dx])),
                    }
                });
                c.give(m.root(), d)
            })
            // a stack of tangents; zero where every part is
            .rule(UPat::op(Op::Stack), |m, c| {
                let node = m.root();
                let parts: Vec<Tangent> = node.src().iter().map(|s| c.dot(s)).collect();
                let d = if parts.iter().all(Tangent::is_zero) {
                    Tangent::Zero
                } else {
                    let src = parts
                        .into_iter()
                        .zip(node.src())
                        .map(|(d, s)| d.instantiate(s).uop())
                        .collect();
                    t(&node.with_src(src)).into()
                };
                c.give(node, d)
            })
            // d sum(x) = sum(dx);  d max(x) = mean of dx over the maximal positions;
            // d prod(x) = prod(x) * sum(dx / x); over axes or over ranges alike
            .rule(UPat::op(Op::Reduce), |m, c| {
                let d = reduce_tangent(m.root(), c)?;
                c.give(m.root(), d)
            })
    })
}

fn rule1(m: &Captures, c: &mut TangentCtx, d: impl Fn(&Tensor, Tangent) -> Tangent) -> Option<UOp> {
    let x = m.root().s(0);
    let tangent = d(&t(x), c.dot(x));
    c.give(m.root(), tangent)
}

fn rule2(
    m: &Captures,
    c: &mut TangentCtx,
    d: impl Fn(&Tensor, &Tensor, Tangent, Tangent) -> Tangent,
) -> Option<UOp> {
    let (x, y) = (m.root().s(0), m.root().s(1));
    let tangent = d(&t(x), &t(y), c.dot(x), c.dot(y));
    c.give(m.root(), tangent)
}

/// How much of `max(x, y)`'s change comes from each operand: 1/0, 0/1, or ½/½ at a tie.
pub(crate) fn max_weights(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let dtype = x.dtype();
    let half_at_tie = x.eq(y).cast(dtype) * 0.5;
    let wx = x.gt(y).cast(dtype) + &half_at_tie;
    let wy = y.gt(x).cast(dtype) + half_at_tie;
    (wx, wy)
}

/// `node` with its first operand replaced by that operand's tangent (zero when it is).
fn same_op_on_tangent(node: &UOp, c: &TangentCtx) -> Tangent {
    c.dot(node.s(0)).map(|dx| {
        let mut src = node.src().to_vec();
        src[0] = dx.uop();
        t(&node.with_src(src))
    })
}

fn reduce_tangent(node: &UOp, c: &TangentCtx) -> Option<Tangent> {
    let Arg::Reduce(op, _) = node.arg() else {
        return None;
    };
    let x = node.s(0);
    let sum = |u: Tensor| t(&same_reduce(node, ReduceOp::Add, &u.uop()));
    let tangent = c.dot(x).map(|dx| match op {
        ReduceOp::Add => sum(dx),
        ReduceOp::Max => sum(dx * argmax_share(&t(x), &t(node))),
        ReduceOp::Mul => sum(dx * product_share(&t(x), node)),
    });
    Some(tangent)
}

/// For a product-reduce `node` of `x`: `d node / d x`, the product of the other elements,
/// without dividing by zero: `prod / x` where no element is zero, the product of the non-zero
/// elements at the only zero, and 0 where two or more are zero (as PyTorch's `prod` gradient).
pub(crate) fn product_share(x: &Tensor, node: &UOp) -> Tensor {
    let shape = x.shape();
    let is_zero = x.eq(0.0);
    let nonzero = is_zero.where_(1.0, x);
    let product = t(&same_reduce(node, ReduceOp::Mul, &nonzero.uop())).expand(&shape);
    let zeros = is_zero.cast(x.dtype());
    let zeros = t(&same_reduce(node, ReduceOp::Add, &zeros.uop())).expand(&shape);
    let only_zero_here = zeros.eq(1.0).logical_and(&is_zero);
    let others = only_zero_here.where_(&product, 0.0);
    zeros.eq(0.0).where_(&product / nonzero, others)
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
        accumulated_reduce(x, op, axes)
    }
}
