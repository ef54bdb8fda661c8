//! Reverse mode: `vjp` pulls cotangents back through the traced graph, one gradient rule per
//! op, and `grad` / `value_and_grad` are built on it.
//!
//! The function is traced on placeholders. The pullback walks the graph from the results
//! toward the inputs (reverse topological order) and gives each operand of a node its share
//! of the node's cotangent; shares reaching one node add up. A cotangent that is zero is
//! the symbolic zero ([`Tangent`]): a result whose given cotangent is a constant zero (as
//! `jacrev` gives the results it does not differentiate) starts no pull, operands that do
//! not depend on the inputs get no share, and zeros are built only for an input that no
//! cotangent reaches.

use crate::rewrite::{Captures, PatternMatcher, UPat};
use crate::tensor::{Tensor, accumulated_reduce, pow_base_partial, pow_exponent_partial};
use crate::transform::crossing::{Crossing, is_reduce_over_ranges};
use crate::transform::custom;
use crate::transform::external::CallInfo;
use crate::transform::external::diff::vjp_shares;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::function::traced_once;
use crate::transform::jvp::{argmax_share, is_differentiable, max_weights, product_share};
use crate::transform::trace::{Traced, placeholder_like, substitute, trace};
use crate::transform::zero::Tangent;
use crate::uop::shape::{operand_exprs, operand_values};
use crate::uop::{Arg, Op, ReduceOp, UOp};
use std::collections::{HashMap, HashSet};
use std::f64::consts::{FRAC_2_SQRT_PI, LN_2};
use std::sync::{Arc, OnceLock};

/// The results of `f` at `primals` and its pullback, as `jax.vjp`: calling the pullback with
/// one cotangent per result gives one cotangent per primal (`cotangentsᵀ · J(primals)`).
#[track_caller]
pub fn vjp<M>(f: impl IntoFunc<M>, primals: &[Tensor]) -> (Vec<Tensor>, Func) {
    let f = f.into_func();
    let inputs: Vec<UOp> = primals.iter().map(placeholder_like).collect();
    let traced = Arc::new(trace(&f, inputs));
    let values: Arc<HashMap<UOp, UOp>> = Arc::new(
        traced
            .inputs
            .iter()
            .cloned()
            .zip(primals.iter().map(|p| p.uop()))
            .collect(),
    );
    let outputs = traced
        .outputs
        .iter()
        .map(|o| Tensor::from_uop(substitute(o, &values)))
        .collect();
    let nresults = traced.outputs.len();
    let pullback = Func::new(Some(nresults), move |cotangents: &[Tensor]| {
        check_cotangents(&traced, cotangents);
        let _library = crate::tensor::LibraryScope::enter();
        let grads = pull_back(&traced, cotangents);
        grads
            .iter()
            .map(|g| Tensor::from_uop(substitute(g, &values)))
            .collect()
    });
    (outputs, pullback)
}

/// The gradient of `f` (whose result must be a scalar) with respect to the arguments
/// `argnums`, as `jax.grad`: a function returning one gradient per argnum.
pub fn grad<M>(f: impl IntoFunc<M>, argnums: impl Into<ArgNums>) -> Func {
    grad_with(f, argnums, false)
}

/// The value of `f` and its gradient with respect to `argnums`, as `jax.value_and_grad`:
/// a function returning the scalar value followed by one gradient per argnum.
pub fn value_and_grad<M>(f: impl IntoFunc<M>, argnums: impl Into<ArgNums>) -> Func {
    value_and_grad_with(f, argnums, false)
}

/// `grad` with JAX's `allow_int`: with `allow_int` false an integer or bool argument in
/// `argnums` is an error naming it; with `allow_int` true its gradient is zero. JAX gives such
/// an argument a `float0` gradient (no data); there is no `float0` dtype here, so the zero
/// has the argument's shape and dtype.
pub fn grad_with<M>(f: impl IntoFunc<M>, argnums: impl Into<ArgNums>, allow_int: bool) -> Func {
    let value_and_grad = value_and_grad_with(f, argnums, allow_int);
    traced_once(
        "grad",
        Func::new(value_and_grad.arity(), move |args: &[Tensor]| {
            value_and_grad.call(args).split_off(1)
        }),
    )
}

/// `value_and_grad` with JAX's `allow_int` (see [`grad_with`]).
pub fn value_and_grad_with<M>(
    f: impl IntoFunc<M>,
    argnums: impl Into<ArgNums>,
    allow_int: bool,
) -> Func {
    let f = f.into_func();
    let argnums = argnums.into();
    traced_once(
        "value_and_grad",
        Func::new(f.arity(), move |args: &[Tensor]| {
            let argnums = argnums.resolve(args.len());
            if !allow_int {
                check_float_arguments(&argnums, args);
            }
            let floats: Vec<usize> = argnums
                .iter()
                .copied()
                .filter(|&i| args[i].dtype().is_float())
                .collect();
            let (value, pullback) = vjp_wrt(&f, args, &floats);
            if value.len() != 1 || value[0].ndim() != 0 {
                let shapes: Vec<_> = value.iter().map(|v| v.shape()).collect();
                transform_error(&format!(
                    "grad: the function must return one scalar (shape []), but it returned shapes {shapes:?}; \
                 use vjp or jacrev for non-scalar results"
                ));
            }
            let seed = Tensor::ones(&[0usize; 0], value[0].dtype());
            let mut float_grads = pullback.call(&[seed]).into_iter();
            let mut out = vec![value[0].clone()];
            out.extend(argnums.iter().map(|&i| {
                if args[i].dtype().is_float() {
                    float_grads.next().expect("one gradient per float argument")
                } else {
                    args[i].zeros_like()
                }
            }));
            out
        }),
    )
}

/// `vjp` of `f` with respect to the arguments `argnums` only (the others are held fixed).
pub(crate) fn vjp_wrt(f: &Func, args: &[Tensor], argnums: &[usize]) -> (Vec<Tensor>, Func) {
    let f = f.clone();
    let fixed: Vec<Tensor> = args.to_vec();
    let argnums_owned = argnums.to_vec();
    let partial = Func::new(Some(argnums.len()), move |chosen: &[Tensor]| {
        let mut all = fixed.clone();
        for (&i, value) in argnums_owned.iter().zip(chosen) {
            all[i] = value.clone();
        }
        f.call(&all)
    });
    let chosen: Vec<Tensor> = argnums.iter().map(|&i| args[i].clone()).collect();
    vjp(partial, &chosen)
}

/// Which arguments a gradient is taken with respect to: one index or several; a negative
/// index counts from the end (`-1` is the last argument), as in JAX.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgNums(pub Vec<isize>);

impl ArgNums {
    /// The indices resolved against `nargs` arguments (negative ones from the end); a
    /// transform error when the list is empty or an index is out of range.
    pub fn resolve(&self, nargs: usize) -> Vec<usize> {
        resolve_argnums(&self.0, nargs)
    }
}

impl From<usize> for ArgNums {
    fn from(i: usize) -> Self {
        ArgNums(vec![isize::try_from(i).unwrap_or(isize::MAX)])
    }
}
impl From<i32> for ArgNums {
    fn from(i: i32) -> Self {
        ArgNums(vec![i as isize])
    }
}
impl From<isize> for ArgNums {
    fn from(i: isize) -> Self {
        ArgNums(vec![i])
    }
}
impl From<Vec<usize>> for ArgNums {
    fn from(v: Vec<usize>) -> Self {
        ArgNums(
            v.into_iter()
                .map(|i| isize::try_from(i).unwrap_or(isize::MAX))
                .collect(),
        )
    }
}
impl From<Vec<i32>> for ArgNums {
    fn from(v: Vec<i32>) -> Self {
        ArgNums(v.into_iter().map(|i| i as isize).collect())
    }
}
impl From<Vec<isize>> for ArgNums {
    fn from(v: Vec<isize>) -> Self {
        ArgNums(v)
    }
}
impl<const N: usize> From<[usize; N]> for ArgNums {
    fn from(v: [usize; N]) -> Self {
        ArgNums::from(v.to_vec())
    }
}
impl<const N: usize> From<[i32; N]> for ArgNums {
    fn from(v: [i32; N]) -> Self {
        ArgNums(v.iter().map(|&i| i as isize).collect())
    }
}

/// `argnums` as indices into `nargs` arguments, negative ones counted from the end.
pub(crate) fn resolve_argnums(argnums: &[isize], nargs: usize) -> Vec<usize> {
    if argnums.is_empty() {
        transform_error("grad: argnums is empty; name at least one argument to differentiate");
    }
    argnums
        .iter()
        .map(|&k| {
            let i = if k < 0 { k + nargs as isize } else { k };
            if !(0..nargs as isize).contains(&i) {
                transform_error(&format!(
                    "grad: argnums {k} is out of range: the function was called with {nargs} \
                     argument{} (argnums counts from 0, or from -{nargs} at the end)",
                    if nargs == 1 { "" } else { "s" }
                ));
            }
            i as usize
        })
        .collect()
}

/// As JAX: gradients are taken with respect to float arguments only.
fn check_float_arguments(argnums: &[usize], args: &[Tensor]) {
    if let Some(&i) = argnums.iter().find(|&&i| !args[i].dtype().is_float()) {
        transform_error(&format!(
            "grad: argument {i} is {}{:?}, but gradients are taken with respect to float \
             arguments only; use vjp for integer or bool inputs, or allow_int for a zero \
             gradient",
            args[i].dtype(),
            args[i].shape()
        ));
    }
}

fn check_cotangents(traced: &Traced, cotangents: &[Tensor]) {
    if cotangents.len() != traced.outputs.len() {
        transform_error(&format!(
            "vjp: the pullback takes one cotangent per result ({}), but got {}",
            traced.outputs.len(),
            cotangents.len()
        ));
    }
    for (i, (out, ct)) in traced.outputs.iter().zip(cotangents).enumerate() {
        if out.shape() != Some(ct.shape().as_slice()) {
            transform_error(&format!(
                "vjp: cotangent {i} has shape {:?} but result {i} has shape {:?}",
                ct.shape(),
                out.shape_vec()
            ));
        }
    }
}

/// The cotangent of every traced input, given one cotangent per traced result.
fn pull_back(traced: &Traced, cotangents: &[Tensor]) -> Vec<UOp> {
    let root = UOp::sink(traced.outputs.clone());
    let order = root.toposort();
    let active = nodes_depending_on(&order, &traced.inputs);
    let mut crossing = Crossing::of_forward(&order);
    let mut ctx = CotangentCtx::default();
    for (out, ct) in traced.outputs.iter().zip(cotangents) {
        if let Some(ct) = Tangent::of(ct).value() {
            ctx.accumulate(out, ct.cast(out.dtype()).uop());
        }
    }
    for node in order.iter().rev() {
        if !active.contains(node) || traced.inputs.contains(node) {
            continue;
        }
        if pull_back_external(node, &mut ctx, &active, &mut crossing) {
            continue;
        }
        if !is_differentiable(node) {
            continue;
        }
        let Some(ct) = ctx.cotangents.get(node).cloned() else {
            continue;
        };
        ctx.current = Some(ct);
        ctx.wanted = node
            .src()
            .iter()
            .map(|s| active.contains(s) && s.dtype().is_float())
            .collect();
        if gradient_rules().rewrite(node, &mut ctx).is_none() {
            transform_error(&format!(
                "vjp: no gradient rule for {} (in {node:?})",
                node.op()
            ));
        }
        for (src, share) in node.src().iter().zip(ctx.take_shares()) {
            // Integer and bool values have no cotangent (zero, JAX's float0), even when a
            // cast makes a float of them.
            if let Some(share) = share.filter(|_| active.contains(src) && src.dtype().is_float()) {
                ctx.accumulate(src, crossing.settle(share, src));
            }
        }
    }
    traced
        .inputs
        .iter()
        .map(|p| match ctx.cotangents.get(p) {
            Some(ct) => ct.clone(),
            None => Tangent::Zero.instantiate(p).uop(),
        })
        .collect()
}

/// Pulls back through an external call: an element of its results passes its cotangent to
/// the call, the call turns its results' cotangents into one `vjp` call. False for other
/// nodes.
fn pull_back_external(
    node: &UOp,
    ctx: &mut CotangentCtx,
    active: &HashSet<UOp>,
    crossing: &mut Crossing,
) -> bool {
    let opaque = |u: &UOp| CallInfo::of(u).is_some() || custom::rules_of(u).is_some();
    if node.op() == Op::GetTuple && opaque(node.s(0)) {
        if let (Some(ct), Arg::Int(k)) = (ctx.cotangents.get(node).cloned(), node.arg()) {
            let n = node.s(0).s(0).src().len();
            let slots = ctx
                .call_cotangents
                .entry(node.s(0).clone())
                .or_insert_with(|| vec![None; n]);
            slots[*k as usize] = Some(ct);
        }
        return true;
    }
    if !opaque(node) {
        return false;
    }
    let Some(cts) = ctx.call_cotangents.remove(node) else {
        return true;
    };
    let shares = if CallInfo::of(node).is_some() {
        vjp_shares(node, &cts)
    } else {
        let cts: Vec<Tensor> = cts
            .iter()
            .zip(node.s(0).src())
            .map(|(ct, r)| match ct {
                Some(ct) => t(ct),
                None => Tangent::Zero.instantiate(r),
            })
            .collect();
        custom::vjp_node(node, &cts)
            .into_iter()
            .map(|s| Some(s.uop()))
            .collect()
    };
    for (src, share) in node.src()[1..].iter().zip(shares) {
        if let Some(share) = share.filter(|_| active.contains(src) && src.dtype().is_float()) {
            ctx.accumulate(src, crossing.settle(share, src));
        }
    }
    true
}

/// The nodes of `order` (operands first) that depend on any of `inputs`.
fn nodes_depending_on(order: &[UOp], inputs: &[UOp]) -> HashSet<UOp> {
    let mut active: HashSet<UOp> = inputs.iter().cloned().collect();
    for node in order {
        if node.src().iter().any(|s| active.contains(s)) {
            active.insert(node.clone());
        }
    }
    active
}

/// The state of one backward walk: the summed cotangent of every node reached so far, the
/// cotangent of the node being pulled back, which of its operands want a share, and the
/// shares its rule produced.
#[derive(Default)]
pub struct CotangentCtx {
    cotangents: HashMap<UOp, UOp>,
    call_cotangents: HashMap<UOp, Vec<Option<UOp>>>,
    current: Option<UOp>,
    wanted: Vec<bool>,
    shares: Vec<Option<UOp>>,
}

impl CotangentCtx {
    fn accumulate(&mut self, node: &UOp, share: UOp) {
        let sum = match self.cotangents.remove(node) {
            Some(existing) => (t(&existing) + t(&share)).uop(),
            None => share,
        };
        self.cotangents.insert(node.clone(), sum);
    }

    /// The cotangent of the node being pulled back.
    fn ct(&self) -> Tensor {
        t(self.current.as_ref().expect("a node is being pulled back"))
    }

    /// Records the shares for the operands, in operand order (`None`: no share). Rules end
    /// with it: its `Some` tells the matcher the rule applied.
    fn give(&mut self, shares: Vec<Option<Tensor>>) -> Option<UOp> {
        self.shares = shares.into_iter().map(|s| s.map(|s| s.uop())).collect();
        self.current.clone()
    }

    /// Whether operand `i` of the node being pulled back takes a share (it depends on an
    /// input and is a float): rules that must build a value for a share skip the others.
    fn wants(&self, i: usize) -> bool {
        self.wanted.get(i).copied().unwrap_or(false)
    }

    fn take_shares(&mut self) -> Vec<Option<UOp>> {
        std::mem::take(&mut self.shares)
    }
}

fn t(u: &UOp) -> Tensor {
    Tensor::from_uop(u.clone())
}

/// The gradient rules, one row per primitive: from the cotangent `ct` of `node`, each gives
/// the share of every operand (`None` where the operand gets nothing).
fn gradient_rules() -> &'static PatternMatcher<CotangentCtx> {
    static RULES: OnceLock<PatternMatcher<CotangentCtx>> = OnceLock::new();
    RULES.get_or_init(|| {
        PatternMatcher::new()
            // x + y: ct, ct;  x - y: ct, -ct;  -x: -ct
            .rule(UPat::op(Op::Add), |_, c| both(c, |ct| (ct.clone(), ct)))
            .rule(UPat::op(Op::Sub), |_, c| both(c, |ct| (ct.clone(), -ct)))
            .rule(UPat::op(Op::Neg), |_, c| first(c, |ct| -ct))
            // x * y: ct y, ct x;  x / y: ct / y, -ct x / y²
            .rule(UPat::op(Op::Mul), |m, c| {
                binary(m, c, |ct, x, y| (&ct * y, ct * x))
            })
            .rule(UPat::op(Op::Div), |m, c| {
                binary(m, c, |ct, x, y| (&ct / y, -(ct * x / (y * y))))
            })
            // fmod(x, y): ct, -ct trunc(x / y)
            .rule(UPat::op(Op::Mod), |m, c| {
                binary(m, c, |ct, x, y| (ct.clone(), -(ct * (x / y).trunc())))
            })
            // 1/x: -ct / x²
            .rule(UPat::op(Op::Recip), |m, c| {
                let r = t(m.root());
                first(c, |ct| -(ct * &r * &r))
            })
            // 2^x: ct 2^x ln2;  log2 x: ct / (x ln2)
            .rule(UPat::op(Op::Exp2), |m, c| {
                let e = t(m.root());
                first(c, |ct| ct * &e * LN_2)
            })
            .rule(UPat::op(Op::Log2), |m, c| {
                unary(m, c, |ct, x| ct / (x * LN_2))
            })
            // sin x: ct cos x;  cos x: -ct sin x;  sqrt x: ct / (2 sqrt x)
            .rule(UPat::op(Op::Sin), |m, c| unary(m, c, |ct, x| ct * x.cos()))
            .rule(UPat::op(Op::Cos), |m, c| {
                unary(m, c, |ct, x| -(ct * x.sin()))
            })
            .rule(UPat::op(Op::Sqrt), |m, c| {
                let s = t(m.root());
                first(c, |ct| ct / (&s * 2.0))
            })
            // erf x: ct 2/√π e^(-x²)
            .rule(UPat::op(Op::Erf), |m, c| {
                unary(m, c, |ct, x| ct * (x.square().neg().exp() * FRAC_2_SQRT_PI))
            })
            .rule(UPat::op(Op::Erfc), |m, c| {
                unary(m, c, |ct, x| {
                    ct * (x.square().neg().exp() * -FRAC_2_SQRT_PI)
                })
            })
            // x^y: ct y x^(y-1), ct x^y ln x (0 at y == 0, and at x == 0 for y >= 0)
            .rule(UPat::op(Op::Pow), |m, c| {
                let p = t(m.root());
                binary(m, c, move |ct, x, y| {
                    let to_y = ct.clone() * pow_exponent_partial(x, y, &p);
                    (ct * pow_base_partial(x, y), to_y)
                })
            })
            // max(x, y): ct to the larger operand, halved at a tie
            .rule(UPat::op(Op::Max), |m, c| {
                binary(m, c, |ct, x, y| {
                    let (wx, wy) = max_weights(x, y);
                    (&ct * wx, ct * wy)
                })
            })
            // x*y + z: ct y, ct x, ct
            .rule(UPat::op(Op::Mulacc), |m, c| {
                let (x, y) = (t(m.root().s(0)), t(m.root().s(1)));
                let ct = c.ct();
                c.give(vec![Some(&ct * y), Some(&ct * x), Some(ct)])
            })
            // where(p, a, b): nothing to p, ct where p to a, ct elsewhere to b (a branch
            // that does not depend on the inputs gets nothing, so no masked zero is built)
            .rule(UPat::op(Op::Where), |m, c| {
                let p = t(m.root().s(0));
                let ct = c.ct();
                let to_a = c.wants(1).then(|| p.where_(&ct, 0.0));
                let to_b = c.wants(2).then(|| p.where_(0.0, &ct));
                c.give(vec![None, to_a, to_b])
            })
            // cast(x): ct cast back to x's dtype
            .rule(UPat::op(Op::Cast), |m, c| {
                let dtype = m.root().s(0).dtype();
                first(c, move |ct| ct.cast(dtype))
            })
            .rule(
                UPat::ops(&[Op::Contiguous, Op::ContiguousBackward]),
                |_, c| first(c, |ct| ct),
            )
            .rule(UPat::op(Op::Copy), |m, c| {
                let device = m.root().s(0).device();
                first(c, move |ct| match &device {
                    Some(d) => t(&ct.uop().copy_to(d.clone())),
                    None => ct,
                })
            })
            .rule(UPat::ops(Op::MOVEMENT), movement_rule)
            // Vmapout(y, vargs): the slice of ct at the current sample;
            // Vmapin(x, vargs): the per-sample ct stacked over the samples
            .rule(UPat::op(Op::Vmapout), |m, c| {
                scope_rule(m.root(), c, UOp::vmapin)
            })
            .rule(UPat::op(Op::Vmapin), |m, c| {
                scope_rule(m.root(), c, UOp::vmapout)
            })
            .rule(UPat::op(Op::Reduce), reduce_over_ranges_rule)
            .rule(UPat::op(Op::Reduce), reduce_rule)
    })
}

fn first(c: &mut CotangentCtx, share: impl Fn(Tensor) -> Tensor) -> Option<UOp> {
    let ct = c.ct();
    c.give(vec![Some(share(ct))])
}

fn unary(
    m: &Captures,
    c: &mut CotangentCtx,
    share: impl Fn(Tensor, &Tensor) -> Tensor,
) -> Option<UOp> {
    let x = t(m.root().s(0));
    let ct = c.ct();
    c.give(vec![Some(share(ct, &x))])
}

fn both(c: &mut CotangentCtx, share: impl Fn(Tensor) -> (Tensor, Tensor)) -> Option<UOp> {
    let (a, b) = share(c.ct());
    c.give(vec![Some(a), Some(b)])
}

fn binary(
    m: &Captures,
    c: &mut CotangentCtx,
    share: impl Fn(Tensor, &Tensor, &Tensor) -> (Tensor, Tensor),
) -> Option<UOp> {
    let (x, y) = (t(m.root().s(0)), t(m.root().s(1)));
    let (a, b) = share(c.ct(), &x, &y);
    c.give(vec![Some(a), Some(b)])
}

/// Movement ops move the cotangent back: the inverse view, summing where a view repeated.
fn movement_rule(m: &Captures, c: &mut CotangentCtx) -> Option<UOp> {
    let node = m.root();
    let x = node.s(0);
    let ct = c.ct().uop();
    let in_shape = x.shape_vec();
    let share = match (node.op(), node.arg()) {
        (Op::Reshape, _) => ct.reshape(&in_shape),
        (Op::Expand, _) => {
            let out_shape = node.shape_vec();
            let axes: Vec<usize> = (0..in_shape.len())
                .filter(|&a| in_shape[a] != out_shape[a])
                .collect();
            accumulated_reduce(&ct, ReduceOp::Add, &axes)
        }
        (Op::Permute, Arg::Permutation(p)) => ct.permute(&inverse_permutation(p)),
        (Op::Flip, Arg::Flags(f)) => ct.flip(f),
        (Op::Pad, _) => match operand_values(node.s(1)) {
            Some(begins) => {
                let ends: Vec<usize> = begins.iter().zip(&in_shape).map(|(b, n)| b + n).collect();
                ct.shrink(&begins, &ends)
            }
            None => sliding_pad_share(node, &ct)?,
        },
        (Op::Shrink, _) => match (operand_values(node.s(1)), operand_values(node.s(2))) {
            (Some(begins), Some(ends)) => {
                let after: Vec<usize> = ends.iter().zip(&in_shape).map(|(e, n)| n - e).collect();
                ct.pad(&begins, &after)
            }
            _ => sliding_shrink_share(node, &ct)?,
        },
        (Op::Stack, _) => return stack_rule(node, c),
        (op, _) => transform_error(&format!("vjp: no gradient rule for the movement op {op}")),
    };
    let shares = std::iter::once(Some(t(&share)))
        .chain(node.src()[1..].iter().map(|_| None))
        .collect();
    c.give(shares)
}

/// A pad whose offsets are index expressions (they may slide with a range): the window of
/// `ct` at `[begin, begin + n)` on each axis of size `n`.
fn sliding_pad_share(node: &UOp, ct: &UOp) -> Option<UOp> {
    let begins = operand_exprs(node.s(1))?;
    let ends = begins
        .iter()
        .zip(node.s(0).shape_vec())
        .map(|(b, n)| index_add(b, n as i64))
        .collect();
    Some(ct.window(Op::Shrink, begins, ends))
}

/// A shrink whose bounds are index expressions: `ct` padded back to `x`'s shape, `begin` in
/// front and `n - end` behind on each axis of size `n`.
fn sliding_shrink_share(node: &UOp, ct: &UOp) -> Option<UOp> {
    let (begins, ends) = (operand_exprs(node.s(1))?, operand_exprs(node.s(2))?);
    let after = ends
        .iter()
        .zip(node.s(0).shape_vec())
        .map(|(e, n)| {
            index_add(
                &UOp::alu(Op::Mul, vec![e.clone(), UOp::index(-1)]),
                n as i64,
            )
        })
        .collect();
    Some(ct.window(Op::Pad, begins, after))
}

/// The index expression `e + k`.
fn index_add(e: &UOp, k: i64) -> UOp {
    UOp::alu(Op::Add, vec![e.clone(), UOp::index(k)])
}

/// Stack: part `i` gets slice `i` of the cotangent.
fn stack_rule(node: &UOp, c: &mut CotangentCtx) -> Option<UOp> {
    let ct = c.ct().uop();
    let full = ct.shape_vec();
    let part_shape = node.s(0).shape_vec();
    let shares = (0..node.src().len())
        .map(|i| {
            let mut begins = vec![0; full.len()];
            let mut ends = full.clone();
            begins[0] = i;
            ends[0] = i + 1;
            Some(t(&ct.shrink(&begins, &ends).reshape(&part_shape)))
        })
        .collect();
    c.give(shares)
}

/// A scope op's operand gets `ct` through the opposite scope op with the same vargs (they
/// get nothing): leaving a scope slices, entering one stacks.
fn scope_rule(node: &UOp, c: &mut CotangentCtx, opposite: fn(&UOp, &[UOp]) -> UOp) -> Option<UOp> {
    let vargs = &node.src()[1..];
    let share = opposite(&c.ct().uop(), vargs);
    let shares = std::iter::once(Some(t(&share)))
        .chain(vargs.iter().map(|_| None))
        .collect();
    c.give(shares)
}

/// A reduce over ranges (`UOp::reduce_over`): the result does not vary with the ranges and
/// has `x`'s shape, so `ct` reaches every sample as it is (sum), weighted by the maximal
/// samples (max), or by `prod / x` (prod). Reduces over axes are left to `reduce_rule`.
fn reduce_over_ranges_rule(m: &Captures, c: &mut CotangentCtx) -> Option<UOp> {
    let node = m.root();
    let Arg::Reduce(op, _) = node.arg() else {
        return None;
    };
    if !is_reduce_over_ranges(node) {
        return None;
    }
    let (x, ct) = (t(node.s(0)), c.ct());
    let share = match op {
        ReduceOp::Add => ct,
        ReduceOp::Max => ct * argmax_share(&x, &t(node)),
        ReduceOp::Mul => ct * product_share(&x, node),
    };
    let shares = std::iter::once(Some(share))
        .chain(node.src()[1..].iter().map(|_| None))
        .collect();
    c.give(shares)
}

/// Reductions spread the cotangent back over the reduced axes.
fn reduce_rule(m: &Captures, c: &mut CotangentCtx) -> Option<UOp> {
    let node = m.root();
    let Arg::Reduce(op, _) = node.arg() else {
        return None;
    };
    let x = t(node.s(0));
    let shape = x.shape();
    let spread = c.ct().expand(&shape);
    let share = match op {
        ReduceOp::Add => spread,
        ReduceOp::Max => spread * argmax_share(&x, &t(node)),
        ReduceOp::Mul => spread * product_share(&x, node),
    };
    c.give(vec![Some(share)])
}

fn inverse_permutation(p: &[usize]) -> Vec<usize> {
    let mut inverse = vec![0; p.len()];
    for (i, &axis) in p.iter().enumerate() {
        inverse[axis] = i;
    }
    inverse
}
