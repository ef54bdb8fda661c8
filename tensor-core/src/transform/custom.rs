//! Custom rules for traced functions, as JAX's `custom_jvp`, `custom_vjp` and `custom_vmap`:
//! a function called through [`Custom`] is one `Function` node (arg `Custom(rules)`) whose body
//! is its traced graph. The scheduler inlines the body like any function; the transforms stop
//! at the node and use the user's rule instead of transforming the body:
//!
//! - `jvp`: `rule(primals, tangents)` gives the tangents of the results;
//! - `vjp`: `fwd(primals)` gives residuals, `bwd(residuals, cotangents)` the cotangents of the
//!   arguments (one per argument);
//! - `vmap`: `rule(size, args, batched)` gives the results with the batch in front (`args` are
//!   batched along axis 0 where `batched` says so).
//!
//! Reverse mode without a `vjp` rule but with a `jvp` rule transposes the jvp rule (its
//! tangents are linear in the input tangents), as JAX does; a transform with no rule of the
//! user's for it transforms the body instead. `vmap` without a
//! `vmap` rule keeps the other rules: the batched node is a `Custom` function again, whose
//! body and rules are the vmapped body and rules (every argument broadcast along the batch),
//! so `grad(vmap(f))` still uses `f`'s custom vjp. The result of a user's vmap rule is a
//! custom function too, whose vmap rule merges an outer batch with its own and runs the
//! user's rule again, so nested vmaps all use it.

use crate::tensor::Tensor;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::jvp::jvp_symbolic;
use crate::transform::trace::trace;
use crate::transform::vjp::vjp;
use crate::transform::vmap::vmap;
use crate::transform::zero::Tangent;
use crate::uop::arg::Handle;
use crate::uop::{Arg, DType, Op, UOp, tuple_body};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A rule of two lists of tensors (primals and tangents, or residuals and cotangents).
pub type PairRule = Arc<dyn Fn(&[Tensor], &[Tensor]) -> Vec<Tensor> + Send + Sync>;
/// A rule of one list of tensors (the forward pass of a custom vjp).
pub type ListRule = Arc<dyn Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync>;
/// A batching rule: batch size, arguments, which are batched (along axis 0).
pub type VmapRule = Arc<dyn Fn(usize, &[Tensor], &[bool]) -> Vec<Tensor> + Send + Sync>;

/// A function with custom transform rules (see the module docs).
#[derive(Clone)]
pub struct Custom {
    name: String,
    body: Func,
    jvp: Option<PairRule>,
    vjp: Option<(ListRule, PairRule)>,
    vmap: Option<VmapRule>,
}

impl Custom {
    /// `f`, named `name` (for messages), with no custom rule yet.
    pub fn new<M>(name: &str, f: impl IntoFunc<M>) -> Custom {
        Custom {
            name: name.to_string(),
            body: f.into_func(),
            jvp: None,
            vjp: None,
            vmap: None,
        }
    }

    /// Forward mode by `rule(primals, tangents)` (one tangent per result).
    pub fn jvp(
        mut self,
        rule: impl Fn(&[Tensor], &[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
    ) -> Custom {
        self.jvp = Some(Arc::new(rule));
        self
    }

    /// Reverse mode by `fwd(primals)` (the residuals) and `bwd(residuals, cotangents)` (one
    /// cotangent per argument).
    pub fn vjp(
        mut self,
        fwd: impl Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
        bwd: impl Fn(&[Tensor], &[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
    ) -> Custom {
        self.vjp = Some((Arc::new(fwd), Arc::new(bwd)));
        self
    }

    /// Batching by `rule(size, args, batched)` (each result with the batch in front).
    pub fn vmap(
        mut self,
        rule: impl Fn(usize, &[Tensor], &[bool]) -> Vec<Tensor> + Send + Sync + 'static,
    ) -> Custom {
        self.vmap = Some(Arc::new(rule));
        self
    }

    /// The function, as a `Func` every transform takes. Its rules live as long as the `Func`
    /// or a graph node that calls it.
    pub fn into_func(self) -> Func {
        let rules = handle(self);
        Func::new(None, move |args: &[Tensor]| call(&rules, args))
    }

    /// How many custom functions are alive in the process (held by a `Func` or a graph
    /// node): a count for checking that none outlives its owners.
    pub fn live() -> usize {
        LIVE.load(Ordering::Relaxed)
    }
}

/// `f` with a custom jvp rule (see [`Custom::jvp`]).
pub fn custom_jvp<M>(
    f: impl IntoFunc<M>,
    rule: impl Fn(&[Tensor], &[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
) -> Func {
    Custom::new("custom_jvp", f).jvp(rule).into_func()
}

/// `f` with a custom vjp rule (see [`Custom::vjp`]).
pub fn custom_vjp<M>(
    f: impl IntoFunc<M>,
    fwd: impl Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
    bwd: impl Fn(&[Tensor], &[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
) -> Func {
    Custom::new("custom_vjp", f).vjp(fwd, bwd).into_func()
}

/// `f` with a custom batching rule (see [`Custom::vmap`]).
pub fn custom_vmap<M>(
    f: impl IntoFunc<M>,
    rule: impl Fn(usize, &[Tensor], &[bool]) -> Vec<Tensor> + Send + Sync + 'static,
) -> Func {
    Custom::new("custom_vmap", f).vmap(rule).into_func()
}

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The rules of one custom function, as the handle its nodes hold; counted while alive.
struct Registered(Custom);

impl Drop for Registered {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

fn handle(custom: Custom) -> Handle {
    LIVE.fetch_add(1, Ordering::Relaxed);
    Handle::new(Registered(custom))
}

/// The rules of a `Custom` function node.
pub fn rules_of(node: &UOp) -> Option<Custom> {
    match (node.op(), node.arg()) {
        (Op::Function, Arg::Custom(rules)) => rules.get::<Registered>().map(|r| r.0.clone()),
        _ => None,
    }
}

/// One call: the body traced on `Param(k)`s of the arguments' types, as one node.
fn call(rules: &Handle, args: &[Tensor]) -> Vec<Tensor> {
    let custom = &rules
        .get::<Registered>()
        .expect("a custom function's rules")
        .0;
    let params: Vec<UOp> = args
        .iter()
        .enumerate()
        .map(|(k, a)| UOp::param(k, &a.shape(), a.dtype(), Some(a.device())))
        .collect();
    let outputs = trace(&custom.body, params).outputs;
    let n = outputs.len();
    let mut src = vec![UOp::tuple(outputs)];
    src.extend(args.iter().map(Tensor::uop));
    let node = UOp::new(Op::Function, DType::Void, src, Arg::Custom(rules.clone()));
    (0..n)
        .map(|i| Tensor::from_uop(node.get_tuple(i)))
        .collect()
}

fn operands(node: &UOp) -> Vec<Tensor> {
    node.src()[1..]
        .iter()
        .cloned()
        .map(Tensor::from_uop)
        .collect()
}

/// The tangents of the results of the custom node `node`, given its operands' tangents.
pub fn jvp_node(node: &UOp, tangents: &[Tangent]) -> UOp {
    let custom = rules_of(node).expect("a custom node");
    let primals = operands(node);
    let outs = match &custom.jvp {
        Some(rule) => {
            let tangents: Vec<Tensor> = tangents
                .iter()
                .zip(node.src()[1..].iter())
                .map(|(t, p)| t.clone().instantiate(p))
                .collect();
            rule(&primals, &tangents)
        }
        None => jvp_symbolic(&custom.body, &primals, tangents).1,
    };
    check_results(&custom, "jvp rule", "result", &outs, &result_types(node));
    UOp::tuple(outs.iter().map(Tensor::uop).collect())
}

/// The cotangent shares of the operands of the custom node `node`, given its results'
/// cotangents (instantiated).
pub fn vjp_node(node: &UOp, cotangents: &[Tensor]) -> Vec<Tensor> {
    let custom = rules_of(node).expect("a custom node");
    let primals = operands(node);
    let shares = match (&custom.vjp, &custom.jvp) {
        (Some((fwd, bwd)), _) => bwd(&fwd(&primals), cotangents),
        (None, Some(rule)) => transposed_jvp(&custom, rule.clone(), node, cotangents),
        (None, None) => vjp(custom.body.clone(), &primals).1.call(cotangents),
    };
    let want: Vec<Type> = primals.iter().map(|p| (p.shape(), p.dtype())).collect();
    check_results(&custom, "vjp rule", "argument", &shares, &want);
    shares
}

/// The cotangents of the arguments by transposing a custom jvp rule: its tangents are linear
/// in the input tangents `t`, so they are the pullback of `t ↦ rule(primals, t)` (taken at
/// `t = 0`; any point gives the same linear map) applied to `cotangents`. The rule's tangents
/// are checked against the results of `node` before they are transposed.
fn transposed_jvp(
    custom: &Custom,
    rule: PairRule,
    node: &UOp,
    cotangents: &[Tensor],
) -> Vec<Tensor> {
    let primals = operands(node);
    let at = primals.clone();
    let (checked, want) = (custom.clone(), result_types(node));
    let linear = Func::new(None, move |t: &[Tensor]| {
        let outs = rule(&at, t);
        check_results(&checked, "jvp rule", "result", &outs, &want);
        outs
    });
    let zeros: Vec<Tensor> = primals.iter().map(Tensor::zeros_like).collect();
    vjp(linear, &zeros).1.call(cotangents)
}

/// The batched image of the custom node `node` (a `Tuple` of results, batch in front): the
/// user's vmap rule, or a custom node of the vmapped body and rules.
pub fn vmap_node(node: &UOp, size: usize, args: Vec<Tensor>, batched: Vec<bool>) -> UOp {
    let custom = rules_of(node).expect("a custom node");
    let outs = match &custom.vmap {
        Some(rule) => rebatchable(&custom.name, rule.clone(), size, batched).call(&args),
        None => {
            let broadcast: Vec<Tensor> = args
                .iter()
                .zip(&batched)
                .map(|(a, &b)| {
                    if b {
                        a.clone()
                    } else {
                        a.unsqueeze_front(size)
                    }
                })
                .collect();
            batched_custom(&custom).into_func().call(&broadcast)
        }
    };
    let want: Vec<Type> = result_types(node)
        .into_iter()
        .map(|(shape, dtype)| ([vec![size], shape].concat(), dtype))
        .collect();
    check_results(&custom, "vmap rule", "result", &outs, &want);
    UOp::tuple(outs.iter().map(Tensor::uop).collect())
}

/// The user's vmap `rule` at batch `size` over the arguments `batched` says, as a custom
/// function whose own vmap rule runs `rule` again: an outer vmap merges its batch with this
/// one (outer batch first) and calls `rule` once over both, so nested vmaps all use it.
fn rebatchable(name: &str, rule: VmapRule, size: usize, batched: Vec<bool>) -> Func {
    let (inner, inner_batched) = (rule.clone(), batched.clone());
    let name_of_rule = name.to_string();
    let body = Func::new(None, move |a: &[Tensor]| inner(size, a, &inner_batched));
    let merged = move |outer: usize, args: &[Tensor], outer_batched: &[bool]| {
        let flags: Vec<bool> = batched
            .iter()
            .zip(outer_batched)
            .map(|(a, b)| a | b)
            .collect();
        let flat: Vec<Tensor> = args
            .iter()
            .zip(batched.iter().zip(outer_batched))
            .map(|(a, (&i, &o))| merge_batches(a, outer, size, i, o))
            .collect();
        let outs = rule(outer * size, &flat, &flags);
        check_leading(&name_of_rule, &outs, outer * size);
        outs.iter().map(|r| split_batch(r, outer, size)).collect()
    };
    Custom::new(name, body).vmap(merged).into_func()
}

/// `a` (outer batch in front if `outer`, then the inner batch if `inner`) with both batches
/// as one axis in front, each broadcast where missing; `a` itself when neither is there.
fn merge_batches(a: &Tensor, outer: usize, size: usize, inner: bool, outer_b: bool) -> Tensor {
    if !inner && !outer_b {
        return a.clone();
    }
    let a = if outer_b {
        a.clone()
    } else {
        a.unsqueeze_front(outer)
    };
    let shape = a.shape();
    let rest = &shape[if inner { 2 } else { 1 }..];
    let a = if inner {
        a
    } else {
        let one: Vec<usize> = [outer, 1].iter().chain(rest).copied().collect();
        let full: Vec<usize> = [outer, size].iter().chain(rest).copied().collect();
        a.reshape(&one).expand(&full)
    };
    let flat: Vec<usize> = std::iter::once(outer * size)
        .chain(rest.iter().copied())
        .collect();
    a.reshape(&flat)
}

/// A result with `outer * size` in front, as `outer` then `size`.
fn split_batch(r: &Tensor, outer: usize, size: usize) -> Tensor {
    let shape: Vec<usize> = [outer, size]
        .iter()
        .chain(&r.shape()[1..])
        .copied()
        .collect();
    r.reshape(&shape)
}

/// `custom` over a batch in axis 0 of every argument: its body and rules vmapped.
fn batched_custom(custom: &Custom) -> Custom {
    let body = vmap(custom.body.clone(), 0, 0);
    let mut batched = Custom::new(&custom.name, body);
    if let Some(rule) = custom.jvp.clone() {
        batched.jvp = Some(Arc::new(move |p: &[Tensor], t: &[Tensor]| {
            vmap(split_pair(rule.clone(), p.len()), 0, 0).call(&[p, t].concat())
        }));
    }
    if let Some((fwd, bwd)) = custom.vjp.clone() {
        let fwd_rule: ListRule = Arc::new(move |p: &[Tensor]| {
            let fwd = fwd.clone();
            vmap(Func::new(None, move |a: &[Tensor]| fwd(a)), 0, 0).call(p)
        });
        let bwd_rule: PairRule = Arc::new(move |r: &[Tensor], c: &[Tensor]| {
            vmap(split_pair(bwd.clone(), r.len()), 0, 0).call(&[r, c].concat())
        });
        batched.vjp = Some((fwd_rule, bwd_rule));
    }
    batched
}

/// A pair rule as a `Func` of its two lists concatenated, the first `n` long.
fn split_pair(rule: PairRule, n: usize) -> Func {
    Func::new(None, move |all: &[Tensor]| rule(&all[..n], &all[n..]))
}

/// The shape and dtype of a tensor a rule must give.
type Type = (Vec<usize>, DType);

/// The shape and dtype of each result of the custom node `node`.
fn result_types(node: &UOp) -> Vec<Type> {
    tuple_body(node).map_or_else(Vec::new, |b| {
        b.src().iter().map(|r| (r.shape_vec(), r.dtype())).collect()
    })
}

/// Panics, naming the custom function and its rule `what`, unless the rule gave one tensor
/// of the shape and dtype in `want` per entry (each the `role` of that index: "result",
/// "argument").
fn check_results(custom: &Custom, what: &str, role: &str, got: &[Tensor], want: &[Type]) {
    let name = &custom.name;
    if got.len() != want.len() {
        transform_error(&format!(
            "custom function `{name}`: its {what} gave {} tensors, but {} were expected",
            got.len(),
            want.len()
        ));
    }
    for (i, (t, (shape, dtype))) in got.iter().zip(want).enumerate() {
        if t.shape() != *shape || t.dtype() != *dtype {
            transform_error(&format!(
                "custom function `{name}`: its {what} gave {}{:?} for {role} {i}, but \
                 {dtype}{shape:?} was expected",
                t.dtype(),
                t.shape()
            ));
        }
    }
}

/// Panics, naming the custom function `name`, unless each result of its vmap rule over a
/// merged batch of `size` has that batch in front.
fn check_leading(name: &str, outs: &[Tensor], size: usize) {
    for (i, r) in outs.iter().enumerate() {
        if r.shape().first() != Some(&size) {
            transform_error(&format!(
                "custom function `{name}`: its vmap rule gave {}{:?} for result {i} over a \
                 batch of {size}, which must lead its shape",
                r.dtype(),
                r.shape()
            ));
        }
    }
}

trait UnsqueezeFront {
    fn unsqueeze_front(&self, size: usize) -> Tensor;
}

impl UnsqueezeFront for Tensor {
    /// `self` repeated along a new leading axis of `size`.
    fn unsqueeze_front(&self, size: usize) -> Tensor {
        let shape = self.shape();
        let one: Vec<usize> = std::iter::once(1).chain(shape.iter().copied()).collect();
        let full: Vec<usize> = std::iter::once(size).chain(shape).collect();
        self.reshape(&one).expand(&full)
    }
}
